import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { metricsLogsOf, stitchReductions } from '../../src/core/metrics/history';
import { metricsReduceProbe } from '../../src/core/metrics/metricsProbe';
import { withDerivedSpeed } from '../../src/core/metrics/speedFromTime';
import type { ProbeRunner } from '../../src/core/probes/runner';
import { listRunsProbe } from '../../src/core/runs/listRuns';
import { seriesChangepoints } from '../../src/core/whatChanged/throughput';
import type { Changepoint } from '../../src/core/whatChanged/changepoints';
import { materializeRealRuns, realRunNames, type RealRunSet } from './realRuns';

/*
 * The changepoints of the throughput series of every real run (test/fixtures/real/runs/ and regressions/), read the
 * way What Changed? reads them (the stitched history, speed from wall time where none is logged), beside what the run
 * measured itself (truth.json). Shared by test/int/realChangepoints.int.test.ts and scripts/changepoint-real.ts.
 */

interface Truth {
  regression?: boolean;
  change: unknown;
  restarts: { step: number }[];
  speed?: Record<string, unknown>;
}

export interface RealSeriesChangepoints {
  set: RealRunSet;
  run: string;
  /** Nothing changed that slowed the run (truth.json): every changepoint on it is false. */
  steady: boolean;
  key: string;
  changepoints: Changepoint[];
  /** The step the run restarted at (truth.json), and its logging interval in steps. */
  restart: number;
  window: number;
  /** after / before as the run measured this series itself (truth.json), when it did. */
  ownRatio: number | null;
}

/**
 * The run's own measure of a series: the same key in truth.json's `speed`, `steps_s` for the speed from wall time,
 * and for Lightning's ThroughputMonitor columns the per-window speed (`window_*`: from `train/time` and the counts),
 * since its columns are means over the last 100 batches, so one save lowers a whole 100-step stretch.
 */
function ownRatioOf(truth: Truth, key: string): number | null {
  const speed = truth.speed ?? {};
  const names = [
    key.replace(/^train\/device\//, 'window_'),
    key,
    key.startsWith('steps/s') ? 'steps_s' : '',
    key.startsWith('tokens/s') ? 'tok_s' : '',
  ];
  for (const n of names) {
    const v = speed[n] as { ratio?: number } | undefined;
    if (n && typeof v?.ratio === 'number') return v.ratio;
  }
  return null;
}

export async function realChangepoints(runner: ProbeRunner, set: RealRunSet): Promise<RealSeriesChangepoints[]> {
  const out: RealSeriesChangepoints[] = [];
  const dir = materializeRealRuns(set);
  try {
    for (const name of realRunNames(set)) {
      const run = join(dir, name);
      const truth = JSON.parse(readFileSync(join(run, 'truth.json'), 'utf8')) as Truth;
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
      const series = withDerivedSpeed(h.series, launches);
      for (const s of seriesChangepoints(series, launches)) {
        if (!s.throughput) continue;
        const xs = series.find((v) => v.key === s.key)!.x;
        const gaps = xs.slice(1).map((x, i) => x - xs[i]!);
        out.push({
          set,
          run: name,
          steady: !(truth.regression ?? truth.change !== null),
          key: s.key,
          changepoints: s.changepoints,
          restart: truth.restarts[0]?.step ?? Infinity,
          window: gaps.sort((a, b) => a - b)[gaps.length >> 1] ?? 0,
          ownRatio: ownRatioOf(truth, s.key),
        });
      }
    }
  } finally {
    rmSync(dirname(dir), { recursive: true, force: true });
  }
  return out;
}

/** The changepoint at the restart: its interval holds the restart and it ends within one logging window after it. */
export function atRestart(s: RealSeriesChangepoints): Changepoint | undefined {
  return s.changepoints.find(
    (c) => c.at <= s.restart && c.firstAfter >= s.restart && c.firstAfter <= s.restart + s.window,
  );
}

/** A level shift by the measure, as the run measured it: 10% or more either way. */
export function isRealShift(s: RealSeriesChangepoints): boolean {
  return s.ownRatio !== null && (s.ownRatio <= 0.9 || s.ownRatio >= 1.1);
}
