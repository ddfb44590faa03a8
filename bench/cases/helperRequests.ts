import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { hostInfoProbe } from '../../src/core/probes/hostProbes';
import { median, timeIt, type BenchContext, type BenchResult } from '../context';

const run = promisify(execFile);
const N = 20;

/**
 * Issue 2's target: 20 small requests through the resident helper on the pooled connection, once connected,
 * versus 20 separate `ssh HOST CMD` runs of the OpenSSH client (a handshake and a login shell that sources
 * ~/.bashrc each time). Targets: ≥ 100× (issue 2), ≤ 15 ms (issue 21).
 */
export async function benchHelperRequests(ctx: BenchContext): Promise<BenchResult> {
  const runner = await ctx.probes();
  await runner.run(hostInfoProbe()); // connect and start the helper: "once connected"
  const batches: number[] = [];
  for (let b = 0; b < 3; b++) {
    batches.push(
      await timeIt(async () => {
        for (let i = 0; i < N; i++) await runner.run(hostInfoProbe());
      }),
    );
  }
  const argv = await ctx.sshArgv(
    `python3 -c 'import socket,os,json; print(json.dumps([socket.gethostname(), os.getcwd()]))'`,
  );
  const usual = await timeIt(async () => {
    for (let i = 0; i < N; i++) await run(argv[0]!, argv.slice(1));
  });
  return {
    case: `${N} small requests: resident helper on pooled ssh2 vs ${N}× ssh HOST CMD`,
    ours_ms: median(batches),
    usual_ms: usual,
    target_ms: 15, // issue 21: the physical limit with each request in its own process
  };
}
