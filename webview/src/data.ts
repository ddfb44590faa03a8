// The dashboard's data handling, kept free of the DOM so it runs (and is tested) in plain Node.
import type {
  Checkpoint,
  HostSide,
  InitMessage,
  RunData,
  RunInfo,
  SeriesData,
  SkippedCounts,
  XAxis,
} from '../../src/core/dashboard/protocol';
import { GPU_SERIES } from '../../src/core/hardware/gpuKeys';
import { MIN_SERIES_POINTS } from '../../src/core/metrics/speedFromTime';
import { throughputRank } from '../../src/core/whatChanged/categories';

/** Keys that are an x axis rather than a metric; plotting them against step is a straight line. */
const X_LIKE = new Set([
  'step',
  '_step',
  'global_step',
  'iter',
  'iteration',
  'time',
  'timestamp',
  '_timestamp',
  'wall_time',
  '_runtime',
]);

/** Familiar metrics first, in the order people look at them: the run's speed, then its loss; the rest alphabetically. */
const PRIORITY = [
  /^(train[/_.])?loss$/i,
  /loss/i,
  /acc/i,
  /^(lr|learning_rate)$/i,
  /lr|learning.?rate/i,
  /tok.*s|throughput/i,
  /grad.?norm/i,
];

/** Counters (epoch, batch index, tokens seen): plotted after everything else. */
const COUNTER = /(^|[/._])(epoch|batch_idx|num_input_tokens_seen|tokens_seen|total_flos)$/i;

const GPU_ORDER: readonly string[] = Object.values(GPU_SERIES);

function rank(key: string, points: number): number {
  // throughput first (tok/s before samples/s before steps/s and step time), as What Changed? ranks them; an
  // end-of-run summary (HF's train_samples_per_second, one point a launch) is no series of the speed: last
  const tp = throughputRank(key);
  // the GPU timeline right under the throughput, clocks first (webview/src/gpu.ts)
  const gpu = GPU_ORDER.indexOf(key);
  if (gpu >= 0) return -0.5 + gpu / 10;
  if (tp > 0) return points < MIN_SERIES_POINTS ? PRIORITY.length + 2 : -tp;
  if (COUNTER.test(key)) return PRIORITY.length + 1;
  const i = PRIORITY.findIndex((re) => re.test(key));
  return i < 0 ? PRIORITY.length : i;
}

/** The numeric series present in any run: keys with at least one point, x-like keys left out, in display order. */
export function detectSeries(runs: readonly RunData[]): string[] {
  const points = new Map<string, number>();
  for (const r of runs) {
    for (const s of r.series) {
      if (s.x.length > 0 && !X_LIKE.has(s.key.toLowerCase()) && s.last.some(Number.isFinite))
        points.set(s.key, Math.max(points.get(s.key) ?? 0, s.x.length));
    }
  }
  return [...points.keys()].sort((a, b) => rank(a, points.get(a)!) - rank(b, points.get(b)!) || a.localeCompare(b));
}

/**
 * Exponential moving average with TensorBoard's debiasing, so the first points are not dragged towards zero.
 * `weight` 0 returns the values unchanged; nulls (gaps) stay null and do not advance the average.
 */
export function ema(values: readonly (number | null)[], weight: number): (number | null)[] {
  if (!(weight > 0)) return values.slice();
  const w = Math.min(weight, 0.999);
  let acc = 0;
  let n = 0;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return null;
    acc = acc * w + (1 - w) * v;
    n += 1;
    return acc / (1 - Math.pow(w, n));
  });
}

/** Earliest wall time of a run (Unix seconds), the origin of the "relative" axis; undefined without times. */
export function runTimeOrigin(run: RunData): number | undefined {
  let origin: number | undefined;
  for (const s of run.series) {
    const t0 = s.t?.[0];
    if (t0 !== undefined && (origin === undefined || t0 < origin)) origin = t0;
  }
  return origin;
}

/** Whether every series of every run carries wall times, i.e. whether the time axes can be offered. */
export function hasWallTime(runs: readonly RunData[]): boolean {
  return runs.length > 0 && runs.every((r) => r.series.every((s) => s.t !== undefined));
}

/** The x values of a series on the chosen axis (relative: hours since the run's start); undefined if not available. */
export function xValues(series: SeriesData, axis: XAxis, origin: number | undefined): number[] | undefined {
  if (axis === 'step') return series.x;
  if (!series.t) return undefined;
  if (axis === 'time') return series.t;
  const o = origin ?? series.t[0] ?? 0;
  return series.t.map((t) => (t - o) / 3600);
}

export interface AlignedPart {
  x: readonly number[];
  /** Columns sharing `x` (e.g. last, min, max). */
  cols: readonly (readonly (number | null)[])[];
}

export interface Aligned {
  x: number[];
  /** parts[i][j]: column j of part i on the shared x, null where that part has no point. */
  parts: (number | null)[][][];
}

/**
 * Puts several runs on one x array (uPlot draws all series of a plot against a single x): the sorted union of
 * their x values, each column padded with nulls where its run has no point. A run's duplicate x keeps its last value.
 */
export function alignRuns(parts: readonly AlignedPart[]): Aligned {
  const all = new Set<number>();
  for (const p of parts) for (const v of p.x) if (Number.isFinite(v)) all.add(v);
  const x = [...all].sort((a, b) => a - b);
  const index = new Map<number, number>();
  x.forEach((v, i) => index.set(v, i));
  const out = parts.map((p) => {
    const cols = p.cols.map(() => new Array<number | null>(x.length).fill(null));
    p.x.forEach((xv, i) => {
      const at = index.get(xv);
      if (at === undefined) return;
      p.cols.forEach((col, j) => {
        const v = col[i];
        const target = cols[j];
        if (target && v !== undefined) target[at] = v !== null && Number.isFinite(v) ? v : null;
      });
    });
    return cols;
  });
  return { x, parts: out };
}

/** Coarse buckets outside [from, to] with the finer buckets from a zoom request inside it. */
export function mergeWindow(coarse: SeriesData, fine: SeriesData, from: number, to: number): SeriesData {
  const pick = (s: SeriesData, keep: (x: number) => boolean): number[] =>
    s.x.map((x, i) => (keep(x) ? i : -1)).filter((i) => i >= 0);
  const outside = pick(coarse, (x) => x < from || x > to);
  const inside = pick(fine, (x) => x >= from && x <= to);
  const rows: { x: number; min: number; max: number; last: number; t: number | undefined }[] = [];
  const take = (s: SeriesData, idx: number[]): void => {
    for (const i of idx) {
      rows.push({ x: s.x[i] ?? 0, min: s.min[i] ?? 0, max: s.max[i] ?? 0, last: s.last[i] ?? 0, t: s.t?.[i] });
    }
  };
  take(coarse, outside);
  take(fine, inside);
  rows.sort((a, b) => a.x - b.x);
  const withTime = coarse.t !== undefined && (fine.t !== undefined || inside.length === 0);
  const merged: SeriesData = {
    key: coarse.key,
    x: rows.map((r) => r.x),
    min: rows.map((r) => r.min),
    max: rows.map((r) => r.max),
    last: rows.map((r) => r.last),
  };
  if (withTime) merged.t = rows.map((r) => r.t ?? 0);
  return merged;
}

/**
 * The step window that a window on another axis covers, for zoom requests (the probe buckets by step). Assumes
 * time grows with step, which holds for one run's log; a window outside the data clamps to its ends.
 */
export function stepWindow(
  series: SeriesData,
  axisX: readonly number[],
  from: number,
  to: number,
): { from: number; to: number } | undefined {
  let lo: number | undefined;
  let hi: number | undefined;
  axisX.forEach((v, i) => {
    const step = series.x[i];
    if (step === undefined || v < from || v > to) return;
    if (lo === undefined || step < lo) lo = step;
    if (hi === undefined || step > hi) hi = step;
  });
  if (lo === undefined || hi === undefined) return undefined;
  // Widen to the neighbouring buckets: a bucket's x is its last step, so the window's first bucket starts earlier.
  const i = series.x.indexOf(lo);
  const before = i > 0 ? series.x[i - 1] : undefined;
  return { from: before ?? lo, to: hi };
}

/** Adds a run, or replaces the one with the same id in place (so its colour does not change). */
export function upsertRun(runs: readonly RunData[], data: RunData): RunData[] {
  const i = runs.findIndex((r) => r.run.id === data.run.id);
  if (i < 0) return [...runs, data];
  const copy = runs.slice();
  copy[i] = data;
  return copy;
}

export function totalSkipped(s: SkippedCounts): number {
  return s.malformed + s.nonNumeric + s.nonFinite + s.noX;
}

/** `#rgb`, `#rrggbb`, `#rrggbbaa`, `rgb()`/`rgba()` with its alpha multiplied by `alpha`; other forms unchanged. */
export function withAlpha(color: string, alpha: number): string {
  const c = color.trim();
  let r: number, g: number, b: number;
  let a = 1;
  const hex = /^#([0-9a-f]{3,8})$/i.exec(c)?.[1];
  const rgb = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)(?:[\s,/]+([\d.]+%?))?\s*\)$/i.exec(c);
  if (hex && (hex.length === 3 || hex.length === 6 || hex.length === 8)) {
    const full = hex.length === 3 ? [...hex].map((ch) => ch + ch).join('') : hex;
    r = parseInt(full.slice(0, 2), 16);
    g = parseInt(full.slice(2, 4), 16);
    b = parseInt(full.slice(4, 6), 16);
    if (full.length === 8) a = parseInt(full.slice(6, 8), 16) / 255;
  } else if (rgb) {
    r = Number(rgb[1]);
    g = Number(rgb[2]);
    b = Number(rgb[3]);
    const al = rgb[4];
    if (al !== undefined) a = al.endsWith('%') ? Number(al.slice(0, -1)) / 100 : Number(al);
  } else {
    return c;
  }
  const out = Math.round(Math.max(0, Math.min(1, a * alpha)) * 1000) / 1000;
  return `rgba(${r}, ${g}, ${b}, ${out})`;
}

/** Short numbers for legends and tables: 3 significant digits, exponent for the very large or small. */
export function formatValue(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  if (Number.isInteger(v)) return String(v);
  return String(Number(v.toPrecision(4)));
}

/** For each checkpoint, the one before it of the same run in step (else mtime) order: "Diff with previous". */
export function previousCheckpoints<
  C extends {
    path: string;
    run?: string | undefined;
    step?: number | null | undefined;
    mtime?: number | null | undefined;
  },
>(checkpoints: readonly C[]): Map<string, C> {
  const order = (c: C): number => c.step ?? c.mtime ?? 0;
  const byRun = new Map<string, C[]>();
  for (const c of checkpoints) {
    const k = c.run ?? '';
    byRun.set(k, [...(byRun.get(k) ?? []), c]);
  }
  const prev = new Map<string, C>();
  for (const list of byRun.values()) {
    const sorted = list.slice().sort((a, b) => order(a) - order(b));
    sorted.forEach((c, i) => {
      const p = i > 0 ? sorted[i - 1] : undefined;
      if (p) prev.set(c.path, p);
    });
  }
  return prev;
}

export interface PlotRun {
  runId: string;
  label: string;
  /** Index of the run in the dashboard's run list: picks its colour, stable across redraws. */
  colorIndex: number;
  /** Smoothed last values (the line). */
  line: (number | null)[];
  min: (number | null)[];
  max: (number | null)[];
}

export interface PlotModel {
  key: string;
  x: number[];
  runs: PlotRun[];
}

/**
 * Everything one plot draws: the runs that have series `key`, on one shared x (see alignRuns), the line smoothed.
 * `override` supplies a run's series when a zoom replaced part of it with finer buckets.
 */
export function buildPlotModel(
  runs: readonly RunData[],
  key: string,
  axis: XAxis,
  smoothing: number,
  override: (runId: string, key: string) => SeriesData | undefined = () => undefined,
): PlotModel {
  const used: { run: RunData; index: number; series: SeriesData; x: number[] }[] = [];
  runs.forEach((run, index) => {
    const series = override(run.run.id, key) ?? run.series.find((s) => s.key === key);
    if (!series || series.x.length === 0) return;
    const x = xValues(series, axis, runTimeOrigin(run));
    if (x) used.push({ run, index, series, x });
  });
  const aligned = alignRuns(used.map((u) => ({ x: u.x, cols: [u.series.last, u.series.min, u.series.max] })));
  return {
    key,
    x: aligned.x,
    runs: used.map((u, i) => {
      const [last = [], min = [], max = []] = aligned.parts[i] ?? [];
      return { runId: u.run.run.id, label: u.run.run.label, colorIndex: u.index, line: ema(last, smoothing), min, max };
    }),
  };
}

/** The y range a plot needs to show the lines and the min/max bands between x indexes i0..i1 (inclusive). */
export function yExtent(model: PlotModel, i0: number, i1: number): [number, number] | undefined {
  let lo = Infinity;
  let hi = -Infinity;
  for (const r of model.runs) {
    for (const col of [r.min, r.max, r.line]) {
      for (let i = Math.max(0, i0); i <= Math.min(i1, col.length - 1); i++) {
        const v = col[i];
        if (v === null || v === undefined) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
  }
  return lo <= hi ? [lo, hi] : undefined;
}

/** The side data per host: `hosts` when the host sent it, else the one host of `drift`/`bench` (older messages). */
export function sideHosts(init: Pick<InitMessage, 'hosts' | 'drift' | 'bench'>): HostSide[] {
  if (init.hosts) return init.hosts;
  return [{ host: '', label: '', drift: init.drift, bench: init.bench, runs: [] }];
}

/** How much of the log a preview read, for people: "7%", "less than 1%", never "0%" or "100%" for a sample. */
export function sampledShare(bytes: number, of: number): string {
  if (of <= 0) return '0%';
  const pct = (bytes / of) * 100;
  if (pct < 1) return 'less than 1%';
  return `${Math.min(99, Math.round(pct))}%`;
}

/**
 * The note a run's preview shows: what share of which file it sampled, and whether the whole log is being read or
 * could not be. Undefined when the run's data is exact. `named`: say which run (when several are shown).
 */
export function previewNote(run: RunInfo, named: boolean): string | undefined {
  const s = run.sample;
  if (!s) return undefined;
  const file = run.path.slice(run.path.lastIndexOf('/') + 1) || run.path;
  const who = named ? ` of ${run.label}` : '';
  const tail = s.failed
    ? 'the whole log could not be read, so spikes between the samples may be missing.'
    : 'reading the whole log…';
  return `Preview${who}: sampled ${sampledShare(s.bytes, s.of)} of ${file} — ${tail}`;
}

/** Seconds in a day: the padding around a benchmark history of one point (or of points at one time). */
const DAY_S = 86_400;

/**
 * The x range of the benchmark chart (Unix seconds), from the first and last point. uPlot's own range for a single
 * time value spans years (it adds 86400/ms, meant as a day, which is 2.7 years with seconds); one point, or several
 * at one time, get a day either side, and a real span gets 5% either side so the end points are not on the frame.
 */
export function benchTimeRange(min: number | null | undefined, max: number | null | undefined): [number, number] {
  if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max)) {
    const now = Date.now() / 1000;
    return [now - DAY_S, now + DAY_S];
  }
  if (max - min < 1) return [min - DAY_S, max + DAY_S];
  const pad = (max - min) * 0.05;
  return [min - pad, max + pad];
}

/** The y range of the benchmark chart: a lone value (or equal ones) gets ±10% around it instead of uPlot's guess. */
export function benchValueRange(min: number | null | undefined, max: number | null | undefined): [number, number] {
  if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  const pad = max - min > 0 ? (max - min) * 0.1 : Math.abs(max) * 0.1 || 1;
  return [Math.max(0, min - pad), max + pad];
}

/** A checkpoint's place on a plot's x axis. */
export interface CheckpointMark {
  x: number;
  label: string;
  run?: string;
  /** What it marks: a checkpoint (the default), a restart, or a level shift of the plotted series. */
  kind?: 'checkpoint' | 'restart' | 'shift';
}

/**
 * Where the checkpoints of the shown runs fall on the chosen axis: at their step, or at their modification time
 * (hours since the run's start on the relative axis). A checkpoint without that value is not marked.
 */
export function checkpointMarks(
  checkpoints: readonly Checkpoint[],
  runs: readonly RunData[],
  axis: XAxis,
): CheckpointMark[] {
  const byId = new Map(runs.map((r) => [r.run.id, r]));
  const out: CheckpointMark[] = [];
  for (const c of checkpoints) {
    const run = c.run !== undefined ? byId.get(c.run) : undefined;
    if (c.run !== undefined && !run) continue;
    let x: number | null | undefined;
    if (axis === 'step') x = c.step;
    else if (c.mtime != null) {
      if (axis === 'time') x = c.mtime;
      else {
        const origin = run ? runTimeOrigin(run) : undefined;
        x = origin !== undefined ? (c.mtime - origin) / 3600 : undefined;
      }
    }
    if (x == null || !Number.isFinite(x)) continue;
    out.push({ x, label: c.label, ...(c.run !== undefined ? { run: c.run } : {}) });
  }
  return out.sort((a, b) => a.x - b.x);
}

/** Short numbers for the shift labels: 12.8K, 4.3M. */
function short(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(1)}K`;
  return formatValue(v);
}

/** A step of a run's series on the chosen axis: the step, or the wall time of its bucket (hours since the start). */
function stepOnAxis(run: RunData, key: string, step: number, axis: XAxis): number | undefined {
  if (axis === 'step') return step;
  const s = run.series.find((x) => x.key === key && x.t);
  if (!s?.t) return undefined;
  // the bucket that holds the step: the first whose last step is at or past it
  let i = s.x.findIndex((x) => x >= step);
  if (i < 0) i = s.x.length - 1;
  const t = s.t[i];
  if (t === undefined) return undefined;
  if (axis === 'time') return t;
  const origin = runTimeOrigin(run);
  return origin !== undefined ? (t - origin) / 3600 : undefined;
}

/**
 * Where each shown run's series `key` shifts level, as marks labelled with the shift (`shift 12.8K → 4.3K (0.34×)`):
 * What Changed?'s changepoints of the run, which the host computed with the report's own function (`run.shifts`,
 * core/whatChanged/throughput.ts logShifts), never found again here, so the plot marks what the report says.
 */
export function changepointMarks(
  runs: readonly RunData[],
  key: string,
  inPlot: ReadonlySet<string>,
  axis: XAxis,
): CheckpointMark[] {
  const out: CheckpointMark[] = [];
  for (const r of runs) {
    if (!inPlot.has(r.run.id)) continue;
    for (const c of r.run.shifts ?? []) {
      if (c.key !== key) continue;
      const x = stepOnAxis(r, key, c.at, axis);
      if (x === undefined || !Number.isFinite(x)) continue;
      const ratio = c.ratio !== null ? ` (${c.ratio.toFixed(2)}×)` : '';
      out.push({ x, label: `shift ${short(c.before)} → ${short(c.after)}${ratio}`, run: r.run.id, kind: 'shift' });
    }
  }
  return out.sort((a, b) => a.x - b.x);
}

/**
 * Where each shown run restarted (a new launch took over its log: its stitched history's restarts), on the chosen axis:
 * at the first step the launch logged, or at its time. Marked on every plot, so a shift at a restart reads as one.
 */
export function restartMarks(runs: readonly RunData[], inPlot: ReadonlySet<string>, axis: XAxis): CheckpointMark[] {
  const out: CheckpointMark[] = [];
  for (const r of runs) {
    if (!inPlot.has(r.run.id)) continue;
    const origin = axis === 'relative' ? runTimeOrigin(r) : undefined;
    for (const x of r.run.restarts ?? []) {
      const at =
        axis === 'step'
          ? x.step
          : x.time === null
            ? undefined
            : axis === 'time'
              ? x.time
              : origin !== undefined
                ? (x.time - origin) / 3600
                : undefined;
      if (at !== undefined && Number.isFinite(at)) out.push({ x: at, label: x.label, run: r.run.id, kind: 'restart' });
    }
  }
  return out.sort((a, b) => a.x - b.x);
}

/**
 * The restart and shift marks of a plot in words, for the line under it (the canvas cannot be read by a screen reader
 * or a test): `restart (time-gap) at step 610`, with the run's label when the plot shows several runs.
 */
export function marksInWords(
  marks: readonly CheckpointMark[],
  axis: XAxis,
  labelOf: (run: string) => string | undefined,
): string[] {
  const runs = new Set(marks.map((m) => m.run));
  const where = (x: number) =>
    axis === 'step' ? `step ${formatValue(x)}` : axis === 'time' ? readableTime(x) : `${formatValue(x)} h`;
  return marks
    .filter((m) => m.kind === 'restart' || m.kind === 'shift')
    .map((m) => {
      const who = runs.size > 1 && m.run !== undefined ? `${labelOf(m.run) ?? m.run}: ` : '';
      return `${who}${m.label} at ${where(m.x)}`;
    });
}

/**
 * A time as people read it, in the viewer's time zone: `2026-01-02 14:02` for a Unix-seconds number or an ISO string
 * (anything else is returned as it came).
 */
export function readableTime(value: string | number): string {
  const ms = typeof value === 'number' ? value * 1000 : Date.parse(value);
  if (!Number.isFinite(ms)) return String(value);
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`;
}
