import type { ThroughputResult } from '../baselines/store';
import type { ReducedSeries } from '../metrics/metricsProbe';
import { restartsFromTimes, type Restart } from '../metrics/restarts';
import { pointTimes, withDerivedSpeed } from '../metrics/speedFromTime';
import { speedDirection, throughputRank } from './categories';
import { findChangepoints, type Changepoint } from './changepoints';
import { medianOf } from './seriesStats';
import { tooLittleAfterRestart } from './youngRestart';
import { epochOf } from './causes/draft';
import type { CheckpointFact, WhatChangedFacts } from './facts';
import type { SeriesChangepoints, ThroughputSummary, WhatChangedReport } from './model';

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
 * history's restarts); a series with wall times adds the restarts its own clock shows. `only`: of these keys only (a
 * series' changepoints do not depend on which others are searched).
 */
export function seriesChangepoints(
  series: readonly ReducedSeries[],
  launches: readonly number[] = [],
  only?: ReadonlySet<string>,
): SeriesChangepoints[] {
  const out: SeriesChangepoints[] = [];
  for (const s of series) {
    if (s.x.length < MIN_POINTS || (only && !only.has(s.key))) continue;
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

/**
 * A run's log as What Changed? reads it: its series (steps/s and tokens/s from its wall times when it logs no speed of
 * its own), their changepoints, its restarts.
 */
export interface LogShifts {
  series: ReducedSeries[];
  changepoints: SeriesChangepoints[];
  restarts: Restart[];
}

/**
 * The shifts and restarts of a run's log (its stitched history: core/metrics/history.ts), the one place both What
 * Changed?'s report and the dashboard's marks come from, so the plot never marks what the report does not say.
 * `only`: the changepoints of these series only (a followed dashboard keeps those it shows current).
 */
export function logShifts(
  log: { reduction: { series: readonly ReducedSeries[] }; restarts?: readonly Restart[] | undefined } | null,
  only?: ReadonlySet<string>,
): LogShifts {
  const restarts = [...(log?.restarts ?? [])];
  const launches = restarts.map((r) => r.step);
  const series = log ? withDerivedSpeed(log.reduction.series, launches) : [];
  return { series, changepoints: seriesChangepoints(series, launches, only), restarts };
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

/**
 * The log's throughput at the reference and now: the levels either side of its changepoints, or, for a restarted run,
 * its latest launch against the one before.
 */
export function logThroughput(
  facts: WhatChangedFacts,
  logSeries: readonly ReducedSeries[],
  series: readonly SeriesChangepoints[],
  main: { key: string; cp: Changepoint } | undefined,
  refCk: CheckpointFact | undefined,
): ThroughputSummary['log'] {
  const tp = series.find((s) => s.throughput);
  if (!tp || !facts.log) return null;
  const raw = logSeries.find((s) => s.key === tp.key)!;
  const rawTimes = pointTimes(raw, logSeries);
  const levelAt = (step: number): number => {
    const cps = tp.changepoints;
    const idx = cps.findIndex((c) => step <= c.at);
    if (idx >= 0) return cps[idx]!.before;
    if (cps.length) return cps[cps.length - 1]!.after;
    return (
      findChangepoints(raw.x, raw.last, {
        launches: restartsFromTimes(raw.x, raw.t).map((r) => r.step),
        ...(rawTimes ? { times: rawTimes } : {}),
      }).lastLevel ?? NaN
    );
  };
  const refStep = refCk?.step ?? (main ? main.cp.at : raw.x[0]!);
  const reference = levelAt(refStep);
  const nowLevel = levelAt(Infinity);
  const log = byLaunch(facts.log, raw, tp) ?? {
    key: tp.key,
    reference,
    now: nowLevel,
    ratio: reference ? nowLevel / reference : null,
  };
  // a restart too young to judge: without a drop the verdict is `unknown`, never "steady" (issue 32 item 8)
  const young = tooLittleAfterRestart(raw.x, launchStarts(facts.log, raw));
  return young ? { ...log, young } : log;
}

/** The steps the run's launches after the first began at: the log's files and its restarts by time. */
function launchStarts(log: NonNullable<WhatChangedFacts['log']>, raw: ReducedSeries): number[] {
  return [...new Set([...launchesOf(log), ...restartsFromTimes(raw.x, raw.t).map((r) => r.step)])]
    .filter((l) => l > raw.x[0]!)
    .sort((a, b) => a - b);
}

/**
 * A restarted run: is it slower in its latest launch than in the one before (their medians, warm-up left out), or did
 * it slow down inside its latest launch? A shift inside an earlier launch that the latest kept is the level the run
 * settled at, not a change to explain (the real steady loop ran 18% faster for its first 200 steps). Null when the
 * launches do not decide it.
 */
function byLaunch(
  log: NonNullable<WhatChangedFacts['log']>,
  raw: ReducedSeries,
  tp: SeriesChangepoints,
): ThroughputSummary['log'] {
  const launches = launchStarts(log, raw);
  const latest = launches[launches.length - 1];
  if (latest === undefined) return null;
  const prevStart = launches.length > 1 ? launches[launches.length - 2]! : -Infinity;
  const launchLevel = (lo: number, hi: number) =>
    medianOf(raw.last.filter((v, i) => raw.x[i]! >= lo && raw.x[i]! < hi && Number.isFinite(v)).slice(2));
  const inLatest = tp.changepoints.filter((c) => c.at >= latest && slowdownOf(tp.key, c) > 1 / DROP_RATIO);
  const prev = launchLevel(prevStart, latest);
  const last = launchLevel(latest, Infinity);
  if (!inLatest.length && Number.isFinite(prev) && Number.isFinite(last))
    return { key: tp.key, reference: prev, now: last, ratio: prev ? last / prev : null, byLaunch: true };
  return null;
}

/**
 * A regression is a slowdown: throughput down, or step time up, by DROP_RATIO at least; a rise or a shift of the loss
 * is no regression to explain.
 */
export function verdictOf(
  log: ThroughputSummary['log'],
  bench: ThroughputSummary['bench'],
  series: readonly SeriesChangepoints[],
): { dropped: boolean; verdict: WhatChangedReport['verdict'] } {
  const dropped =
    (log !== null && speedRatioOf(log) < DROP_RATIO) || (bench?.ratio != null && bench.ratio < DROP_RATIO);
  const verdict: WhatChangedReport['verdict'] = dropped
    ? 'regression'
    : log?.young || (log === null && bench?.ratio == null && !series.length)
      ? 'unknown'
      : 'steady';
  return { dropped, verdict };
}
