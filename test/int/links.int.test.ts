import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DelayRelayProcess } from '../support/delayRelay';
import {
  counted,
  handshakeOnly,
  linkActions,
  linkHost,
  prepareLinkHost,
  writeLinkFixture,
  type LinkAction,
  type LinkFixture,
  type LinkHost,
} from '../support/linkActions';
import { requireTorch } from '../support/require';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 35: the round trips of each user action over a link with an RTT (test/support/delayRelay.ts in front of a real
 * sshd), counted at the relay. Counts, not times: the relay counts the waits the client goes through one after
 * another (a burst of requests is one; an answer the server sent before a question reached it ends none), which
 * is the same at any machine speed. The RTT only has to be long enough that what the client writes before an
 * answer can reach it is not taken for a reply to it.
 */
const RTT_MS = 60;

let sshd: TestSshd;
let relay: DelayRelayProcess;
let fixture: LinkFixture;
let shared: LinkHost;
let handshake = 0;
const actions = new Map<string, LinkAction>();
const hosts: LinkHost[] = [];

before(async () => {
  requireTorch();
  sshd = await startSshd();
  fixture = writeLinkFixture(mkdtempSync(join(tmpdir(), 'kg-links-')));
  relay = await DelayRelayProcess.start({ rttMs: RTT_MS, targetPort: sshd.port, lifetimeMs: 15 * 60_000 });
  shared = linkHost(sshd, relay.port, fixture);
  hosts.push(shared);
  await prepareLinkHost(shared);
  handshake = (await counted(relay, (start) => start().then(() => handshakeOnly(shared)))).count.roundTrips;
  for (const a of linkActions()) actions.set(a.name, a);
});

after(async () => {
  for (const h of hosts) h.dispose();
  await relay?.close();
  await sshd?.stop();
  if (fixture) rmSync(fixture.dir, { recursive: true, force: true });
});

async function roundTrips(name: string): Promise<number> {
  const action = actions.get(name);
  assert.ok(action, `no action ${name}`);
  const h = action.fresh ? linkHost(sshd, relay.port, fixture) : shared;
  if (action.fresh) hosts.push(h);
  await action.before?.(h);
  return (
    await counted(relay, async (start) => {
      await start();
      await action.ours(h);
    })
  ).count.roundTrips;
}

void test('the SSH handshake alone: TCP, version and key exchange, new keys, a key offered and signed', () => {
  // ssh2 over OpenSSH's sshd: TCP's own, the banners with KEXINIT, ECDH, NEWKEYS with the userauth service, the
  // public key asked about (PK_OK), the signature. Not ours to change; what first contact is measured against.
  assert.equal(handshake, 6);
});

void test('first contact: the handshake, the session channel opened, then the helper started and the host listed in one round trip', async () => {
  // +1 the channel open (its requests need the server's channel number), +1 the exec (ssh2 hands the channel over
  // on the server's reply), +1 the helper's modules with the listing request behind them, answered after its ready
  // line (before: +1 more, the listing waited for the ready line)
  assert.equal((await roundTrips('first contact: connect, start the helper, list the host')) - handshake, 3);
});

void test('clicks on a connected host: one round trip each, none for what the listing already holds', async () => {
  assert.equal(await roundTrips('expand a host (listed again)'), 1);
  assert.equal(await roundTrips('expand a run of 50 checkpoints'), 0);
  assert.equal(await roundTrips('expand a folder past the listing depth'), 1);
  assert.equal(await roundTrips('a live poll of the log'), 1);
  assert.equal(await roundTrips('first plot of the dashboard'), 1);
});

void test("a checkpoint's args: one round trip to open (the stat comes with them), one to reopen, one to diff two steps", async () => {
  // before: 2 to open and 2 to diff (a stat, then the read)
  assert.equal(await roundTrips("open a checkpoint's args"), 1);
  assert.equal(await roundTrips("open a checkpoint's args again (cached)"), 1);
  assert.equal(await roundTrips('diff the args of two steps'), 1);
});

void test('capturing the environment in a new login: the channel opened, the exec, the program and its answer', async () => {
  assert.equal(await roundTrips('capture the environment and compare it with a baseline'), 3);
});

void test('What Changed?: the listing, then the log and the args, then the fingerprints, beside the new login', async () => {
  // The helper's three rounds (gather.ts), and the environment's new login (3) beside the first two; the fingerprints
  // wait for both. 5 where the login's channel close, which nothing answers, falls while round 2 still answers.
  const n = await roundTrips('What Changed? on the run');
  assert.ok(n >= 4 && n <= 5, `What Changed? took ${n} round trips`);
});
