import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DelayRelayProcess } from '../../test/support/delayRelay';
import {
  counted,
  handshakeOnly,
  linkActions,
  linkHost,
  prepareLinkHost,
  usualSsh,
  writeLinkFixture,
  type LinkAction,
  type LinkHost,
} from '../../test/support/linkActions';
import { idlePause, median, type BenchContext, type BenchResult } from '../context';

const RTTS_MS = [2, 25, 80];
const OURS_RUNS = 3;

/**
 * Issue 35: every user action over a link with a real RTT (a delay relay in front of the bench's sshd, 2, 25 and 80
 * ms), Known Good's way beside the usual one (`ssh HOST CMD` per fact with the OpenSSH client, through the same
 * relay). Each case carries the link's RTT and the round trips counted at the relay (test/support/delayRelay.ts: a
 * burst of writes before the client hears back is one); the usual way's count is in `usualRoundTrips`.
 */
export async function benchLinks(ctx: BenchContext): Promise<BenchResult[]> {
  const sshd = await ctx.sshd();
  const dir = await fs.mkdtemp(join(tmpdir(), 'kg-bench-links-'));
  const results: BenchResult[] = [];
  try {
    const fixture = writeLinkFixture(dir);
    for (const rtt of RTTS_MS) {
      const relay = await DelayRelayProcess.start({ rttMs: rtt, targetPort: sshd.port });
      const hosts: LinkHost[] = [];
      const host = () => {
        const h = linkHost(sshd, relay.port, fixture);
        hosts.push(h);
        return h;
      };
      try {
        const shared = host();
        await prepareLinkHost(shared);
        const handshake = (await counted(relay, async (start) => start().then(() => handshakeOnly(shared)))).count
          .roundTrips;
        const ssh = usualSsh(sshd, fixture, relay.port);
        for (const action of linkActions()) {
          const runs: { ms: number; roundTrips: number }[] = [];
          for (let i = 0; i < OURS_RUNS; i++) {
            const h = action.fresh ? host() : shared;
            await action.before?.(h);
            await idlePause(); // a click comes after a pause
            const c = await counted(relay, async (start) => {
              await start();
              await action.ours(h);
            });
            runs.push({ ms: c.ms, roundTrips: c.count.roundTrips });
            if (action.fresh) h.dispose();
          }
          const usual = await counted(relay, async (start) => {
            await start();
            for (const cmd of action.usual(fixture)) await ssh(cmd);
          });
          results.push(
            result(action, action.usual(fixture).length, rtt, handshake, runs, usual.ms, usual.count.roundTrips),
          );
        }
      } finally {
        for (const h of hosts) h.dispose();
        await relay.close();
      }
    }
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
  return results;
}

function result(
  action: LinkAction,
  usualCommands: number,
  rtt: number,
  handshake: number,
  runs: { ms: number; roundTrips: number }[],
  usualMs: number,
  usualRoundTrips: number,
): BenchResult {
  const counts = [...new Set(runs.map((r) => r.roundTrips))];
  const roundTrips = Math.max(...counts);
  const target = action.target.kind === 'first' ? handshake + 1 : action.target.roundTrips;
  return {
    case: `${action.name} at ${rtt} ms RTT vs ${usualCommands}× ssh HOST CMD`,
    ours_ms: median(runs.map((r) => r.ms)),
    usual_ms: usualMs,
    rttMs: rtt,
    roundTrips,
    usualRoundTrips,
    targetRoundTrips: target,
    note:
      `${roundTrips} round trips${counts.length > 1 ? ` (runs counted ${counts.join(', ')})` : ''} ` +
      `(target ≤ ${target}${action.target.kind === 'first' ? `: the SSH handshake's ${handshake} + 1` : ''}: ` +
      `${roundTrips <= target ? 'met' : 'MISSED'}); usual ${usualRoundTrips}; median of ${runs.length}`,
  };
}
