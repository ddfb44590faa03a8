// From python/metrics_reduce.py's result to the dashboard's messages, for the panel. Pure, so it is tested in Node.
import type { MetricsReduction, ReducedSeries } from '../metrics/metricsProbe';
import { withDerivedSpeed } from '../metrics/speedFromTime';
import type { RunData, RunInfo, SeriesData, SkippedCounts } from './protocol';

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

/** A sampled reduction (a preview) says so in its run info; an exact one carries no `sample`. */
export function runDataFromReduction(run: Pick<RunInfo, 'id' | 'label' | 'host'>, r: MetricsReduction): RunData {
  const info: RunInfo = {
    id: run.id,
    label: run.label,
    host: run.host,
    path: r.path,
    lines: r.lines,
    skipped: skippedFromReduction(r),
  };
  if (r.sample) info.sample = { bytes: r.sample.bytes, of: r.sample.of, failed: false };
  return { run: info, series: withDerivedSpeed(r.series).map(seriesFromReduction) };
}

/**
 * Halves the number of buckets by merging neighbours (min of mins, max of maxes, the later last), until at most
 * `maxBuckets` remain. Extremes survive, which is the point of min/max buckets.
 */
export function coarsen(s: SeriesData, maxBuckets: number): SeriesData {
  let cur = s;
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
  return cur;
}

/**
 * Follow mode: adds the reduction of the bytes appended since the last read (metrics_reduce with `offset`) to a
 * run's data. Buckets at or before the previous last x are dropped (a re-read line must not go backwards); new
 * series are added; the result is coarsened back to `maxBuckets` per series. A reset result (the file was shorter
 * than the offset, so the probe read it from 0) replaces the data.
 */
export function appendReduction(prev: RunData, appended: MetricsReduction, maxBuckets: number): RunData {
  // The log was rewritten (a new run in the same file): what came back is all there is.
  if (appended.reset) {
    const fresh = runDataFromReduction(prev.run, appended);
    return { ...fresh, series: fresh.series.map((s) => coarsen(s, maxBuckets)) };
  }
  const byKey = new Map(prev.series.map((s) => [s.key, s]));
  for (const raw of withDerivedSpeed(appended.series)) {
    const add = seriesFromReduction(raw);
    const old = byKey.get(add.key);
    if (!old) {
      byKey.set(add.key, coarsen(add, maxBuckets));
      continue;
    }
    const lastX = old.x.length ? (old.x[old.x.length - 1] ?? -Infinity) : -Infinity;
    const keep = add.x.map((x, i) => (x > lastX ? i : -1)).filter((i) => i >= 0);
    const pick = (a: number[]): number[] => keep.map((i) => a[i] ?? 0);
    const merged: SeriesData = {
      key: old.key,
      x: [...old.x, ...pick(add.x)],
      min: [...old.min, ...pick(add.min)],
      max: [...old.max, ...pick(add.max)],
      last: [...old.last, ...pick(add.last)],
    };
    if (old.t && add.t) merged.t = [...old.t, ...pick(add.t)];
    byKey.set(add.key, coarsen(merged, maxBuckets));
  }
  const s = skippedFromReduction(appended);
  const k = prev.run.skipped;
  return {
    run: {
      ...prev.run,
      lines: prev.run.lines + appended.lines,
      skipped: {
        malformed: k.malformed + s.malformed,
        nonNumeric: k.nonNumeric + s.nonNumeric,
        nonFinite: k.nonFinite + s.nonFinite,
        noX: k.noX + s.noX,
      },
    },
    series: [...byKey.values()],
  };
}
