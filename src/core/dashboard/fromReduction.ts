// From python/metrics_reduce.py's result to the dashboard's messages, for the panel. Pure, so it is tested in Node.
import { historyReduction, stitchReductions, type HistoryPart } from '../metrics/history';
import type { MetricsReduction, ReducedSeries } from '../metrics/metricsProbe';
import type { Restart } from '../metrics/restarts';
import { logShifts } from '../whatChanged/throughput';
import type { RestartMark, RunData, RunInfo, SeriesData, ShiftMark, SkippedCounts } from './protocol';

/** Only what the webview draws: the probe's per-series totals would just add bytes to every message. */
export function seriesFromReduction(s: ReducedSeries): SeriesData {
  const out: SeriesData = { key: s.key, x: s.x, min: s.min, max: s.max, last: s.last };
  if (s.t) out.t = s.t;
  return out;
}

export function skippedFromReduction(r: MetricsReduction): SkippedCounts {
  const s = r.skipped;
  return { malformed: s.malformed, nonNumeric: s.nonNumeric, nonFinite: s.nonFinite, noX: s.noX };
}

/** A restart of the log's history as the plots mark it: at the first step the new launch logged. */
export function restartMark(r: Restart): RestartMark {
  return { step: r.step, time: r.time, label: `restart (${r.signals.join(', ')})`, prevStep: r.prevStep };
}

/**
 * The restarts the plots mark: the history's, and the ones the follow poll saw (a new training process: `live`). A live
 * restart that the log shows too (its step between the log restart's last step before and its first after) is one
 * restart, marked once at the log's step and named by both.
 */
export function mergeRestartMarks(history: readonly RestartMark[], live: readonly RestartMark[]): RestartMark[] {
  const out = history.map((r) => ({ ...r }));
  for (const l of live) {
    const same = out.find((r) => l.step >= (r.prevStep ?? r.step) && l.step <= r.step);
    if (!same) out.push({ ...l });
    else if (!same.label.includes(l.label)) same.label = `${same.label}; ${l.label}`;
  }
  return out.sort((a, b) => a.step - b.step);
}

/**
 * Which series' shifts to find again (`only`); the others keep the ones found before (`previous`). Finding them costs
 * about as much as reading the log, so a followed dashboard keeps current only the series it shows.
 */
export interface ShiftScope {
  only: ReadonlySet<string>;
  previous: readonly ShiftMark[];
}

/**
 * A run's data from the files of its history (one file: one part), stitched (core/metrics/history.ts), with the marks
 * What Changed?'s report would give the same reductions: its restarts and the changepoints of each series, from the
 * one function the report uses (logShifts). The series drawn are the report's too (speed from wall time included). A
 * preview carries no shifts: the report never reads a sample, and a shift between sampled windows is not one.
 * `live`: restarts the follow poll saw; `scope`: the series whose shifts are found (default all).
 */
export function runDataFromParts(
  run: Pick<RunInfo, 'id' | 'label' | 'host'>,
  parts: readonly HistoryPart[],
  live: readonly RestartMark[] = [],
  scope?: ShiftScope,
): RunData {
  const h = stitchReductions(parts);
  const r = historyReduction(parts, h);
  const shifts = logShifts({ reduction: { series: h.series }, restarts: h.restarts }, scope?.only);
  const info: RunInfo = {
    id: run.id,
    label: run.label,
    host: run.host,
    path: r.path,
    lines: r.lines,
    skipped: skippedFromReduction(r),
  };
  if (r.sample) info.sample = { bytes: r.sample.bytes, of: r.sample.of, failed: false };
  const restarts = mergeRestartMarks(shifts.restarts.map(restartMark), live);
  if (restarts.length) info.restarts = restarts;
  if (!r.sample) {
    const kept = scope ? scope.previous.filter((m) => !scope.only.has(m.key)) : [];
    info.shifts = [...kept, ...shiftMarks(shifts.changepoints)];
  }
  return { run: info, series: shifts.series.map(seriesFromReduction) };
}

function shiftMarks(series: ReturnType<typeof logShifts>['changepoints']): ShiftMark[] {
  return series.flatMap((s) =>
    s.changepoints.map((c) => ({
      key: s.key,
      at: c.at,
      firstAfter: c.firstAfter,
      before: c.before,
      after: c.after,
      ratio: c.ratio,
      ...(c.launch !== undefined ? { launch: c.launch } : {}),
    })),
  );
}

/** One reduction as a run's data (a log without a history): `runDataFromParts` of its one file. */
export function runDataFromReduction(run: Pick<RunInfo, 'id' | 'label' | 'host'>, r: MetricsReduction): RunData {
  return runDataFromParts(run, [{ path: r.path, reduction: r }]);
}

/**
 * Halves the number of buckets by merging neighbours (min of mins, max of maxes, the later last), until at most
 * `maxBuckets` remain. Extremes survive, which is the point of min/max buckets.
 */
export function coarsen<S extends SeriesData>(s: S, maxBuckets: number): S {
  let cur: SeriesData = s;
  while (cur.x.length > Math.max(1, maxBuckets)) {
    const next: SeriesData = { key: cur.key, x: [], min: [], max: [], last: [], ...(cur.t ? { t: [] } : {}) };
    for (let i = 0; i < cur.x.length; i += 2) {
      const j = Math.min(i + 1, cur.x.length - 1);
      next.x.push(cur.x[j] ?? 0);
      next.min.push(Math.min(cur.min[i] ?? Infinity, cur.min[j] ?? Infinity));
      next.max.push(Math.max(cur.max[i] ?? -Infinity, cur.max[j] ?? -Infinity));
      next.last.push(cur.last[j] ?? 0);
      if (cur.t && next.t) next.t.push(cur.t[j] ?? 0);
    }
    cur = next;
  }
  return cur === s ? s : { ...s, ...cur };
}

/**
 * Follow mode: adds the reduction of the bytes appended since the last read (metrics_reduce with `offset`) to the
 * reduction read before. Buckets at or before the previous last x are dropped (a re-read line must not go backwards);
 * new series are added; the result is coarsened back to `maxBuckets` per series. A reset result (the file was shorter
 * than the offset, so the probe read it from 0) replaces it.
 */
export function appendReduction(
  prev: MetricsReduction,
  appended: MetricsReduction,
  maxBuckets: number,
): MetricsReduction {
  // The log was rewritten (a new run in the same file): what came back is all there is.
  if (appended.reset) return { ...appended, series: appended.series.map((s) => coarsen(s, maxBuckets)) };
  const byKey = new Map(prev.series.map((s) => [s.key, s]));
  for (const add of appended.series) {
    const old = byKey.get(add.key);
    if (!old) {
      byKey.set(add.key, coarsen(add, maxBuckets));
      continue;
    }
    const lastX = old.x.length ? (old.x[old.x.length - 1] ?? -Infinity) : -Infinity;
    const keep = add.x.map((x, i) => (x > lastX ? i : -1)).filter((i) => i >= 0);
    if (!keep.length) continue;
    const pick = (a: number[]): number[] => keep.map((i) => a[i] ?? 0);
    const merged: ReducedSeries = {
      ...old,
      x: [...old.x, ...pick(add.x)],
      min: [...old.min, ...pick(add.min)],
      max: [...old.max, ...pick(add.max)],
      last: [...old.last, ...pick(add.last)],
      count: old.count + (keep.length === add.x.length ? add.count : keep.length),
      lastX: add.lastX,
      lastValue: add.lastValue,
    };
    if (old.t && add.t) merged.t = [...old.t, ...pick(add.t)];
    else delete merged.t;
    byKey.set(add.key, coarsen(merged, maxBuckets));
  }
  const k = prev.skipped;
  const s = appended.skipped;
  return {
    ...prev,
    nextOffset: appended.nextOffset,
    size: appended.size,
    lines: prev.lines + appended.lines,
    skipped: {
      ...k,
      malformed: k.malformed + s.malformed,
      nonNumeric: k.nonNumeric + s.nonNumeric,
      nonFinite: k.nonFinite + s.nonFinite,
      noX: k.noX + s.noX,
    },
    keys: [...new Set([...prev.keys, ...appended.keys])],
    xRange:
      prev.xRange && appended.xRange
        ? [Math.min(prev.xRange[0], appended.xRange[0]), Math.max(prev.xRange[1], appended.xRange[1])]
        : (prev.xRange ?? appended.xRange),
    series: [...byKey.values()],
  };
}
