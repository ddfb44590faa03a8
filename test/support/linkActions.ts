import { execFile } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ArgsReader } from '../../src/core/args/reader';
import { checkpointOfEntry, type CheckpointRef } from '../../src/core/args/target';
import { captureSnapshot } from '../../src/core/baselines/capture';
import { computeDrift } from '../../src/core/baselines/drift';
import type { EnvSnapshot } from '../../src/core/baselines/envProbe';
import { BaselineStore } from '../../src/core/baselines/store';
import { ProgressiveRuns } from '../../src/core/dashboard/progressive';
import { runsWithLogs } from '../../src/core/dashboard/sources';
import type { HostSpec } from '../../src/core/hosts';
import { IncrementalLogReader } from '../../src/core/metrics/logTail';
import { metricsReduceProbe } from '../../src/core/metrics/metricsProbe';
import { shellJoin } from '../../src/core/quote';
import { HostRegistry, type HostSession } from '../../src/core/registry';
import { Listings } from '../../src/core/runs/listings';
import { SshPool, type SshOptions } from '../../src/core/transport/ssh';
import { entryNodeId } from '../../src/core/runs/model';
import { whatChanged } from '../../src/core/whatChanged/gather';
import type { DelayRelayProcess, LinkCount } from './delayRelay';
import { recordingPrompts } from './hosts';
import { TORCH_PYTHON } from './require';
import { opensshArgs, type TestSshd } from './sshd';
import { writeStory } from './whatChangedStory';

/*
 * The user's actions over a link with a real RTT (test/support/delayRelay.ts), each the way Known Good does it (the
 * same core calls the tree, the args documents, the dashboard and the report make) and the usual way: one
 * `ssh HOST CMD` of the OpenSSH client per fact, through the same relay. Shared by `npm run bench -- --only links`
 * (times and counts) and test/int/links.int.test.ts (counts only).
 */

const run = promisify(execFile);

/** A run of 50 real torch checkpoints (step_20 … step_1000) and its 1,000-line log, under the host's root. */
export interface LinkFixture {
  dir: string;
  /** The host's root (`<dir>/runs`). */
  root: string;
  run: string;
  log: string;
  store: BaselineStore;
  /** known_hosts naming the sshd's key at the relay's port. */
  knownHosts: string;
}

export function writeLinkFixture(dir: string): LinkFixture {
  const story = writeStory(dir, Math.floor(Date.now() / 1000) - 20000, 20);
  // a folder below the run with more in it, for the expansion past the listing's depth
  const deep = join(story.run, 'eval', 'samples', 'by-step');
  mkdirSync(deep, { recursive: true });
  for (let i = 0; i < 5; i++) writeFileSync(join(deep, `step_${i * 200}.jsonl`), '{"step": 1}\n');
  return {
    dir,
    root: join(dir, 'runs'),
    run: story.run,
    log: join(story.run, 'train_log.jsonl'),
    store: new BaselineStore(join(dir, 'store')),
    knownHosts: join(dir, 'known_hosts_relay'),
  };
}

/** A host reached through the relay: the extension's own registry and listings on one pooled connection. */
export interface LinkHost {
  spec: HostSpec;
  /** The registry's SSH options (a bare connection for the handshake alone is made with them). */
  ssh: SshOptions;
  registry: HostRegistry;
  session: HostSession;
  listings: Listings;
  fixture: LinkFixture;
  dispose(): void;
}

export function linkHost(sshd: TestSshd, relayPort: number, fixture: LinkFixture): LinkHost {
  const pub = readFileSync(join(sshd.dir, 'host_ed25519.pub'), 'utf8').split(' ');
  writeFileSync(fixture.knownHosts, `[127.0.0.1]:${relayPort} ${pub[0]} ${pub[1]}\n`);
  const spec: HostSpec = {
    id: 'settings:link',
    name: 'link',
    source: 'settings',
    python: 'python3',
    roots: [fixture.root],
    ssh: {
      alias: '127.0.0.1',
      host: '127.0.0.1',
      port: relayPort,
      user: sshd.user,
      identityFiles: [sshd.identityFile],
    },
  };
  // No keepalive: it is a round trip nobody waits for, and would be counted in whichever action it fell.
  const ssh: SshOptions = {
    knownHostsFiles: [fixture.knownHosts],
    connectTimeoutMs: 60_000,
    keepaliveIntervalMs: 0,
    prompts: recordingPrompts().prompts,
    agent: '',
    defaultIdentityFiles: [],
  };
  const registry = new HostRegistry({ commandTimeoutMs: 120_000, ssh });
  registry.setHosts([spec]);
  const listings = new Listings({
    find: (id) => registry.find(id),
    session: (h) => registry.session(h),
    depth: () => 3,
    maxEntries: () => 5000,
    log: () => undefined,
  });
  return {
    spec,
    ssh,
    registry,
    session: registry.session(spec),
    listings,
    fixture,
    dispose: () => registry.dispose(),
  };
}

function argsReader(h: LinkHost): ArgsReader {
  return new ArgsReader({
    host: () => ({ label: h.spec.name, probes: h.session.probes }),
    allowTorchLoad: () => false,
    confirmUnsafeLoad: () => Promise.resolve(false),
  });
}

/** The checkpoints of the run as the tree shows them (from the host's listing: no remote call). */
function checkpoints(h: LinkHost): CheckpointRef[] {
  const t = h.listings.resolve({ kind: 'run', hostId: h.spec.id, path: h.fixture.run });
  if (!t) throw new Error(`${h.fixture.run} is not in the host's listing`);
  const refs = (t.entry.children ?? [])
    .filter((e) => e.role === 'checkpoint')
    .map((e) => checkpointOfEntry(h.spec.id, t.root, e));
  if (refs.length !== 50) throw new Error(`expected 50 checkpoints in the run, found ${refs.length}`);
  return refs.sort((a, b) => a.path.localeCompare(b.path, 'en', { numeric: true }));
}

/** What a round trip target is measured against: one, two, or the handshake's and more. */
export type LinkTarget = { kind: 'click'; roundTrips: 1 } | { kind: 'report'; roundTrips: 2 } | { kind: 'first' };

export interface LinkAction {
  name: string;
  /** What the action finds done when the person clicks (not timed, not counted): a follow started, a read before. */
  before?(h: LinkHost): Promise<void>;
  /** Known Good's way, on a host already connected with its helper up (but for first contact). */
  ours(h: LinkHost): Promise<void>;
  /** Whether `ours` connects by itself (a fresh host): first contact. */
  fresh?: boolean;
  /** The usual way: the command lines of one `ssh HOST CMD` per fact. */
  usual(f: LinkFixture): string[];
  target: LinkTarget;
}

const torchArgs = (ck: string) =>
  shellJoin([
    TORCH_PYTHON,
    '-c',
    'import sys, torch; print(vars(torch.load(sys.argv[1], weights_only=False)["args"]))',
    ck,
  ]);
const ckPath = (f: LinkFixture, step: number) => join(f.run, `step_${step}`, 'checkpoint.pt');

/** The actions, each with its own state (a reader kept between clicks): one list per host. */
export function linkActions(): LinkAction[] {
  let steps = 0;
  let again: { reader: ArgsReader; ref: CheckpointRef } | undefined;
  let live: IncrementalLogReader | undefined;
  return [
    {
      name: 'first contact: connect, start the helper, list the host',
      fresh: true,
      ours: async (h) => {
        const listing = await h.listings.ensure(h.spec.id);
        if (listing?.roots[0]?.status !== 'ok') throw new Error(`the first listing failed: ${JSON.stringify(listing)}`);
      },
      usual: (f) => [shellJoin(['find', f.root, '-maxdepth', '3'])],
      target: { kind: 'first' },
    },
    {
      name: 'expand a host (listed again)',
      ours: async (h) => {
        h.listings.reload(h.spec.id);
        await h.listings.ensure(h.spec.id);
      },
      usual: (f) => [shellJoin(['find', f.root, '-maxdepth', '3'])],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: 'expand a run of 50 checkpoints',
      ours: (h) => {
        checkpoints(h);
        return Promise.resolve();
      },
      usual: (f) => [shellJoin(['ls', '-la', f.run])],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: 'expand a folder past the listing depth',
      ours: async (h) => {
        const t = h.listings.resolve({ kind: 'run', hostId: h.spec.id, path: join(h.fixture.run, 'eval', 'samples') });
        if (!t) throw new Error('eval/samples is not in the listing');
        const grafted = await h.listings.listFolder(
          h.spec.id,
          `${entryNodeId(h.spec.id, t.root, t.entry)}#${++steps}`,
          t.entry,
          t.path,
        );
        const below = grafted?.children?.find((c) => c.name === 'by-step')?.children?.length;
        if (below !== 5) throw new Error(`the folder past the depth listed ${below} files`);
      },
      usual: (f) => [shellJoin(['ls', '-la', join(f.run, 'eval', 'samples', 'by-step')])],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: "open a checkpoint's args",
      ours: async (h) => {
        const doc = await argsReader(h).document(checkpoints(h).at(-1)!);
        if (!doc.includes('openwebtext-dedup-v2')) throw new Error('the args document lacks the dataset');
      },
      usual: (f) => [torchArgs(ckPath(f, 1000))],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: "open a checkpoint's args again (cached)",
      before: async (h) => {
        again = { reader: argsReader(h), ref: checkpoints(h).at(-2)! };
        await again.reader.read(again.ref);
      },
      ours: async () => {
        const r = await again!.reader.read(again!.ref);
        if (!r.fromCache) throw new Error('the args were read again, not taken from the cache');
      },
      usual: (f) => [torchArgs(ckPath(f, 980))],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: 'diff the args of two steps',
      ours: async (h) => {
        const reader = argsReader(h);
        const cks = checkpoints(h);
        const [a, b] = [cks[29]!, cks[30]!]; // step_600 and step_620: the dataset changed between them
        const sides = await Promise.all([reader.diffSide(a, b, 'a'), reader.diffSide(a, b, 'b')]);
        if (!sides[1].includes('openwebtext-dedup-v2')) throw new Error('the diff lacks the changed dataset');
      },
      usual: (f) => [torchArgs(ckPath(f, 600)), torchArgs(ckPath(f, 620))],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: 'a live poll of the log',
      before: async (h) => {
        // the follow started earlier: its offset is at the end
        live = new IncrementalLogReader(h.session.probes, h.fixture.log, { fromEnd: true });
        await live.poll();
      },
      ours: async (h) => {
        const step = 1000 + ++steps;
        appendFileSync(h.fixture.log, JSON.stringify({ step, loss: 2, lr: 3e-4, tok_s: 4300 }) + '\n');
        const p = await live!.poll();
        if (p.latest?.step !== step) throw new Error(`the poll saw step ${p.latest?.step}, not ${step}`);
      },
      usual: (f) => [shellJoin(['tail', '-n', '1', f.log])],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: 'first plot of the dashboard',
      ours: async (h) => {
        const listing = await h.listings.ensure(h.spec.id);
        const sources = runsWithLogs(h.spec.id, listing!).filter((s) => s.logPath === h.fixture.log);
        const loader = new ProgressiveRuns(sources, {
          reduce: async (src, o) => (await h.session.probes.run(metricsReduceProbe({ path: src.logPath, ...o }))).value,
          hostLabel: () => h.spec.name,
          maxBuckets: 2000,
        });
        await loader.loadPreviews();
        if (loader.runs.length !== 1)
          throw new Error(`the dashboard read ${loader.runs.length} runs: ${loader.errors.join('; ')}`);
      },
      usual: (f) => [shellJoin(['cat', f.log])],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: 'capture the environment and compare it with a baseline',
      ours: async (h) => {
        const now = await captureSnapshot(
          { spec: h.spec, transport: h.session.transport, probes: h.session.probes },
          { scriptGlobs: [], extraVariables: [], cacheDirs: [] },
        );
        const base = (await h.fixture.store.list(h.session.transport.id)).baselines[0];
        if (!base) throw new Error('no baseline to compare with');
        computeDrift(base.baseline.snapshot, now);
      },
      usual: () => [shellJoin([TORCH_PYTHON, '-m', 'torch.utils.collect_env'])],
      target: { kind: 'click', roundTrips: 1 },
    },
    {
      name: 'What Changed? on the run',
      ours: async (h) => {
        const report = await whatChanged(
          { id: h.session.transport.id, label: h.spec.name, probes: h.session.probes },
          h.fixture.run,
          { store: h.fixture.store, keepData: false },
        );
        if (!report.suspects[0]?.title.includes('openwebtext-dedup-v2'))
          throw new Error(`the report did not find the dataset change: ${report.headline}`);
      },
      usual: (f) => [
        torchArgs(ckPath(f, 600)),
        torchArgs(ckPath(f, 1000)),
        shellJoin([TORCH_PYTHON, '-m', 'torch.utils.collect_env']),
        shellJoin(['cat', f.log]),
      ],
      target: { kind: 'report', roundTrips: 2 },
    },
  ];
}

/**
 * What an action needs before it is timed and counted, done on the host: the listing, a baseline to compare with,
 * the args read once for the "again" case.
 */
export async function prepareLinkHost(h: LinkHost): Promise<void> {
  await h.listings.ensure(h.spec.id);
  if (!(await h.fixture.store.list(h.session.transport.id)).baselines.length) {
    const snap: EnvSnapshot = await captureSnapshot(
      { spec: h.spec, transport: h.session.transport, probes: h.session.probes },
      { scriptGlobs: [], extraVariables: [], cacheDirs: [] },
    );
    await h.fixture.store.save({
      label: 'before',
      host: h.session.transport.id,
      snapshot: snap,
      capturedAt: new Date(Date.now() - 30_000_000).toISOString(),
    });
  }
}

/** One `ssh HOST CMD` of the OpenSSH client through the relay (a new connection and login each time). */
export function usualSsh(sshd: TestSshd, f: LinkFixture, relayPort: number) {
  return async (command: string): Promise<string> => {
    const argv = opensshArgs(sshd, command, { port: relayPort, knownHosts: f.knownHosts });
    const { stdout } = await run('ssh', argv, { maxBuffer: 1 << 26, timeout: 600_000 });
    return stdout;
  };
}

/** Counts an action at the relay: reset when the link is quiet, read once the action has its answer. */
export async function counted(
  relay: DelayRelayProcess,
  fn: (start: () => Promise<void>) => Promise<void>,
): Promise<{ ms: number; count: LinkCount }> {
  let t0 = 0;
  await fn(async () => {
    await relay.reset();
    t0 = performance.now();
  });
  const ms = performance.now() - t0;
  return { ms, count: await relay.counted() };
}

/** The SSH handshake alone, as the registry's pool makes it: a connection up, nothing run on it. */
export async function handshakeOnly(h: LinkHost): Promise<void> {
  const pool = new SshPool(h.ssh);
  try {
    await pool.connection(h.spec.ssh!).ready();
  } finally {
    pool.dispose();
  }
}
