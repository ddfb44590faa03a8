/*
 * `node --import tsx scripts/changepoint-real.ts`: the changepoints of the real runs written on the GPU box
 * (test/fixtures/real/runs/ and regressions/, truth.json each), read the way What Changed? reads them: false
 * changepoints on the throughput series of every run (a steady run: any changepoint; a run changed at its restart: any
 * changepoint but the one at the restart), the shifts at the restart found (those of 10% or more by the run's own
 * measure, and the others), and the detection delay (steps from the restart to the changepoint's firstAfter). The
 * figures in docs/what-changed.md come from here; test/int/realChangepoints.int.test.ts asserts them.
 */
import { ProbeRunner } from '../src/core/probes/runner';
import { LocalTransport } from '../src/core/transport/local';
import { atRestart, isRealShift, realChangepoints } from '../test/support/realChangepoints';

async function main(): Promise<void> {
  const runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120000 });
  try {
    const all = [...(await realChangepoints(runner, 'runs')), ...(await realChangepoints(runner, 'regressions'))];
    const delays: number[] = [];
    let falseCps = 0;
    let steadyCps = 0;
    let shifts = 0;
    let found = 0;
    let foundSmall = 0;
    let small = 0;
    for (const s of all) {
      const hit = s.steady ? undefined : atRestart(s);
      const others = s.changepoints.filter((c) => c !== hit).length;
      falseCps += others;
      if (s.steady) steadyCps += others;
      else if (isRealShift(s)) {
        shifts++;
        if (hit) found++;
      } else {
        small++;
        if (hit) foundSmall++;
      }
      if (hit) delays.push(hit.firstAfter - s.restart);
      const own = s.ownRatio === null ? '' : ` (own ${s.ownRatio.toFixed(2)})`;
      const cps = s.changepoints.map(
        (c) => `${c.at}→${c.firstAfter} ${c.ratio?.toFixed(2)}${c === hit ? ' (restart)' : ''}`,
      );
      console.log(`${s.set}/${s.run} (${s.steady ? 'steady' : 'changed'}) ${s.key}${own}: ${cps.join(', ') || '—'}`);
    }
    delays.sort((a, b) => a - b);
    console.log(
      `throughput series: ${all.length}; changepoints on the ${all.filter((s) => s.steady).length} of the ` +
        `${new Set(all.filter((s) => s.steady).map((s) => s.run)).size} steady runs: ${steadyCps}; ` +
        `changepoints not at the change, all runs: ${falseCps}; shifts of ≥ 10% at a restart found within one ` +
        `logging window: ${found} of ${shifts} (smaller ones: ${foundSmall} of ${small}); delay after the restart: ` +
        `median ${delays[delays.length >> 1] ?? '—'} steps, max ${delays[delays.length - 1] ?? '—'}`,
    );
  } finally {
    runner.dispose();
  }
}

void main();
