import type { ThroughputResult } from '../baselines/store';
import type { ReducedSeries } from '../metrics/metricsProbe';
import { restartsFromTimes } from '../metrics/restarts';
import { pointTimes, withDerivedSpeed } from '../metrics/speedFromTime';
import { speedDirection, throughputRank } from './categories';
import { findChangepoints, type Changepoint } from './changepoints';
import { epochOf } from './causes/draft';
import type { WhatChangedFacts } from './facts';
import type { SeriesChangepoints, ThroughputSummary } from './model';

/*
 * The run's speed: the changepoints of its log's series, the shift that defines "the" slowdown, and the benchmark
 * results kept for the host.
 */

/** A throughput this much lower (or less) than the reference is a drop. */
export const DROP_RATIO = 0.9;

/** Series shorter than this are not searched for changepoints. */
const MIN_POINTS = 20;

export const CHANGEPOINT_WHY =
  'binary segmentation on de-stalled bucket medians (the warm-up after each launch left out; a point more than 4σ ' +
  'from the running median of its neighbours on both sides is a stall — a save, an eval — and left out; σ from the ' +
  'MAD of the residuals); a shift is kept when it saves more than max(20, 3 ln n)·σ², moves the median level by at ' +
  'least 5%, spans at least 1% of the points on each side, is a jump rather than a slope, and — away from a restart — ' +
  "does not wander back: neither side sits at the other side's level for 5% of the points)";

/**
 * The changepoints of each series long enough. `launches`: the steps where a restart's launch began (the stitched
 * history's restarts); a series with wall times adds the restarts its own clock shows.
 */
export function seriesChangepoints(
  series: readonly ReducedSeries[],
  launches: readonly number[] = [],
): SeriesChangepoints[] {
  const out: SeriesChangepoints[] = [];
  for (const s of series) {
    if (s.x.length < MIN_POINTS) continue;
    const own = restartsFromTimes(s.x, s.t).map((r) => r.step);
    const all = [...new Set([...launches, ...own])].sort((a, b) => a - b);
    const times = pointTimes(s, series);
    const r = findChangepoints(s.x, s.last, { launches: all, ...(times ? { times } : {}) });
    out.push({
      key: s.key,
      throughput: throughputRank(s.key) > 0,
      points: r.points,
      noise: r.noise,
      changepoints: r.changepoints,
    });
  }
  return out.sort(
    (a, b) => throughputRank(b.key) - throughputRank(a.key) || Number(b.throughput) - Number(a.throughput),
  );
}

/** The steps where the run's launches after the first began (the stitched history's restarts). */
export function launchesOf(log: WhatChangedFacts['log']): number[] {
  return (log?.restarts ?? []).map((r) => r.step);
}

/** The log's series, with steps/s (and tokens/s) from its wall times when it logs no speed of its own. */
export function logSeriesOf(log: WhatChangedFacts['log']): ReducedSeries[] {
  return log ? withDerivedSpeed(log.reduction.series, launchesOf(log)) : [];
}

/** How much slower the run got at a changepoint (>1: slower), for a speed series; 0 for a speed-up. */
export function slowdownOf(key: string, c: Changepoint): number {
  const dir = speedDirection(key);
  if (!dir || c.ratio === null || c.ratio <= 0) return 0;
  const speedRatio = dir > 0 ? c.ratio : 1 / c.ratio;
  return speedRatio < 1 ? 1 / speedRatio : 0;
}

/**
 * The changepoint that defines "the" shift: the largest slowdown on the first throughput series that has one, else
 * its largest change (a rise, which explains no regression), else the clearest on any series.
 */
export function mainChangepoint(series: readonly SeriesChangepoints[]): { key: string; cp: Changepoint } | undefined {
  const size = (c: Changepoint) => (c.ratio !== null && c.ratio > 0 ? Math.abs(Math.log(c.ratio)) : c.sigmas);
  const tps = series.filter((s) => s.throughput && s.changepoints.length);
  for (const tp of tps) {
    // A slowdown that came with a restart is the one to explain: the restart is a fact (new process, new args,
    // new code), a later dip of a noisy loop is not (plain-host-sync: 0.77× at the restart, 0.74× at step 900
    // after a bump back up). It wins when it is a slowdown of DROP_RATIO or more.
    const atLaunch = tp.changepoints
      .filter((c) => c.launch !== undefined && slowdownOf(tp.key, c) >= 1 / DROP_RATIO)
      .sort((a, b) => slowdownOf(tp.key, b) - slowdownOf(tp.key, a))[0];
    if (atLaunch) return { key: tp.key, cp: atLaunch };
    const slow = [...tp.changepoints].sort((a, b) => slowdownOf(tp.key, b) - slowdownOf(tp.key, a))[0]!;
    if (slowdownOf(tp.key, slow) > 0) return { key: tp.key, cp: slow };
  }
  const tp = tps[0];
  if (tp) {
    const cp = [...tp.changepoints].sort((a, b) => size(b) - size(a))[0]!;
    return { key: tp.key, cp };
  }
  let best: { key: string; cp: Changepoint } | undefined;
  for (const s of series)
    for (const cp of s.changepoints) if (!best || cp.sigmas > best.cp.sigmas) best = { key: s.key, cp };
  return best;
}

/** now/reference as speed (>1 faster), whichever way the series counts it; 1 when unknown. */
export function speedRatioOf(log: NonNullable<ThroughputSummary['log']>): number {
  if (log.ratio === null || !(log.ratio > 0)) return 1;
  return speedDirection(log.key) < 0 ? 1 / log.ratio : log.ratio;
}

/** The benchmark results kept for the host: the reference (marked, else the last by the reference time) and the latest. */
export function benchOf(facts: WhatChangedFacts, refTime: number | null): ThroughputSummary['bench'] {
  const valid = facts.bench
    .filter((r) => typeof r['tokensPerSec'] === 'number' && r['tokensPerSec'] > 0)
    .sort((a, b) => a.at.localeCompare(b.at));
  if (!valid.length) return null;
  const pick = (r: ThroughputResult | undefined) =>
    r ? { id: r.id, at: r.at, tokensPerSec: r['tokensPerSec'] as number } : null;
  const marked = facts.marks.benchId ? valid.find((r) => r.id === facts.marks.benchId) : undefined;
  const byRef = refTime !== null ? [...valid].reverse().find((r) => (epochOf(r.at) ?? Infinity) <= refTime) : undefined;
  // no reference time (a host without runs): the earliest result kept is the reference
  const reference = pick(marked ?? (refTime === null ? valid[0] : byRef));
  const latest = valid[valid.length - 1]!;
  const now = reference && latest.id === reference.id ? null : pick(latest);
  return { reference, now, ratio: reference && now ? now.tokensPerSec / reference.tokensPerSec : null };
}
