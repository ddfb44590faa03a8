/*
 * `node --import tsx scripts/changepoint-real.ts`: the changepoints of the real runs written on the GPU box
 * (test/fixtures/real/runs/ and regressions/, truth.json each): false changepoints on the throughput series of every
 * run (a steady run: any changepoint; a run changed at its restart: any changepoint but the one at the restart) and
 * the detection delay of the shift at the restart (steps from the restart to the changepoint's firstAfter). Read the
 * way What Changed? reads them: the stitched history, speed from wall time where none is logged. The figures in
 * docs/what-changed.md come from here.
 */
import { rmSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { metricsLogsOf, stitchReductions } from '../src/core/metrics/history';
import { metricsReduceProbe } from '../src/core/metrics/metricsProbe';
import { withDerivedSpeed } from '../src/core/metrics/speedFromTime';
import { ProbeRunner } from '../src/core/probes/runner';
import { listRunsProbe } from '../src/core/runs/listRuns';
import { LocalTransport } from '../src/core/transport/local';
import { seriesChangepoints } from '../src/core/whatChanged/analyze';
import { materializeRealRuns, realRunNames, type RealRunSet } from '../test/support/realRuns';

interface Truth {
  regression?: boolean;
  change: unknown;
  restarts: { step: number }[];
}

async function main(): Promise<void> {
  const runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120000 });
  let falseCps = 0;
  let steadyCps = 0;
  let steadySeries = 0;
  let series = 0;
  const delays: number[] = [];
  let missed = 0;
  try {
    for (const set of ['runs', 'regressions'] as RealRunSet[]) {
      const dir = materializeRealRuns(set);
      try {
        for (const name of realRunNames(set)) {
          const run = join(dir, name);
          const truth = JSON.parse(readFileSync(join(run, 'truth.json'), 'utf8')) as Truth;
          const shifted = truth.regression ?? truth.change !== null;
          const { value: listing } = await runner.run(listRunsProbe([run]));
          const parts = [];
          for (const e of metricsLogsOf(listing.roots[0]!.entry!)) {
            const path = join(run, e.path);
            parts.push({
              path,
              reduction: (await runner.run(metricsReduceProbe({ path, x: 'step', buckets: 2000 }))).value,
            });
          }
          const h = stitchReductions(parts);
          const launches = h.restarts.map((r) => r.step);
          const restart = truth.restarts[0]?.step ?? Infinity;
          const cps = seriesChangepoints(withDerivedSpeed(h.series, launches), launches).filter((s) => s.throughput);
          const notes: string[] = [];
          for (const s of cps) {
            series++;
            // the shift at the restart: the changepoint whose interval holds it (or ends within 3 windows after it)
            const hit = shifted
              ? s.changepoints.find((c) => c.at <= restart + 30 && c.firstAfter >= restart - 10)
              : undefined;
            const others = s.changepoints.filter((c) => c !== hit);
            falseCps += others.length;
            if (!shifted) {
              steadySeries++;
              steadyCps += others.length;
            }
            if (shifted && hit) delays.push(Math.max(0, hit.firstAfter - restart));
            if (shifted && !hit) missed++;
            notes.push(
              `${s.key}: ${s.changepoints.map((c) => `${c.at}→${c.firstAfter} ${c.ratio?.toFixed(2)}${c === hit ? ' (restart)' : ''}`).join(', ') || '—'}`,
            );
          }
          console.log(`${set}/${name} (${shifted ? 'changed' : 'steady'}): ${notes.join(' | ')}`);
        }
      } finally {
        rmSync(dirname(dir), { recursive: true, force: true });
      }
    }
  } finally {
    runner.dispose();
  }
  delays.sort((a, b) => a - b);
  console.log(
    `throughput series: ${series}; on the ${steadySeries} of steady runs: ${steadyCps} changepoints; ` +
      `changepoints not at the change, all runs: ${falseCps}; shifts at a restart found: ${delays.length} ` +
      `(missed ${missed}), delay after the restart: median ${delays[delays.length >> 1] ?? '—'} steps, max ${delays[delays.length - 1] ?? '—'}`,
  );
}

void main();
