import { prefixes, medianOf, lineAt, bucketize } from './seriesStats';

/*
 * Where a metric's level shifts: binary segmentation on de-stalled, warm-up-free bucket medians.
 *
 * Why binary segmentation: a regression report wants the few big shifts (12.8K → 4.3K tok/s), in order of size, and a
 * log reduced on the host is at most a few thousand buckets; binary segmentation with prefix sums costs O(n) per split
 * and finds the largest shift first. PELT finds the same optimum for a penalised cost but gives no order by size and
 * needs the same penalty tuning; on a few thousand points its speed buys nothing.
 *
 * Why it is robust: a real training loop is not a level plus Gaussian noise. It stops for a checkpoint save every N
 * steps and an eval pass every M (one logging window at a fraction of the speed), it warms up after every launch
 * (compilation, autotuning, page cache), and its noise is heavy-tailed. Each of those fooled a mean-based split on the
 * real runs of issue 22 (six changepoints on a run where nothing changed). So, before any split:
 *   - more than `maxBuckets` points are reduced to bucket *medians* (a stall inside a bucket does not move it);
 *   - the first `warmup` points of the series and of each launch (`launches`: the x where a restart resumed) are left
 *     out: a warm-up is a fact of the launch, not a change of level;
 *   - a running median of 2h+1 points (h = 5) is the local level: it passes a step unchanged (a median filter keeps
 *     edges) but ignores up to h stalled points in its window, which periodic saves and evals never exceed. Points
 *     further than 4σ from it are stalls (or spikes) and are left out; the rest are clipped to ±3σ of it (a Huber
 *     clip, so a heavy tail weighs like a Gaussian one). σ is the MAD of the residuals from the running median
 *     (÷0.6745): neither the shifts nor the stalls move it.
 * Then the split, on what is left: a split at k is kept when
 *   - both sides hold at least `minSegment` points,
 *   - the cost it saves (n₁n₂/n · Δ²) exceeds `penalty` · σ² with penalty = max(20, 3 ln n) (a BIC-like penalty: pure
 *     noise of a million points does not clear it),
 *   - the shift of the segments' medians is at least `minRelative` of the larger level (5%: a steady run's slow
 *     wander of a few percent explains no regression; a 10% drop clears it with room), and
 *   - it is a step, not a slope: straight lines fitted to the points on either side (up to a tenth of the series),
 *     extrapolated to the boundary, must disagree by at least half the shift and by 4 standard errors. A ramp or a
 *     decaying loss curve has no jump at any boundary, so it is reported as no changepoint rather than as a staircase;
 *   - it is not a wander (unless it is at a restart): for at least 5% of the points (as long as a shift must last),
 *     the running median of the side before is not already at the new level, nor that of the side after back at the
 *     old one (within `minRelative`, or past it). Small real loops wander 10–25% for a second or two and come back
 *     (the real steady plain loop of the regressions corpus: 0.93× for steps 330–450, then 1.1×); a partial recovery
 *     to a third level is still a shift.
 * A restart is a candidate of its own: when a segment's best split fails, the split at a restart inside it is tried
 * (the first launch settling can be the largest split of a run whose real drop is at its restart). A shift at a
 * restart needs no wander test: the restart is a fact (a new process, maybe new code, args or data).
 * The levels reported are the medians of the segments' kept points, never one logged value. Non-finite values (a NaN
 * run) are left out, not treated as zeros.
 */

export interface ChangepointOptions {
  /** Fewest points on either side of a shift (default max(5, 1% of the points)). */
  minSegment?: number;
  /** Smallest shift reported, as a fraction of the larger level (default 0.05). */
  minRelative?: number;
  /** Multiplier of σ² the saved cost must exceed (default max(20, 3 ln n)). */
  penalty?: number;
  /** Most changepoints reported (default 8). */
  maxChangepoints?: number;
  /** A longer series is reduced to this many equal-count bucket medians first (default 2000). */
  maxBuckets?: number;
  /** The x of the first point of each launch after the first (a restart resumed there): its warm-up is left out. */
  launches?: readonly number[];
  /** Points left out after the start and after each launch (default max(2, 1% of the points)). */
  warmup?: number;
  /**
   * Wall times of the points (seconds, aligned with xs): a level that holds only while the run settles after it
   * started (under half of its first launch, never past its first SETTLE_SECONDS) and lies within SETTLE_RATIO of the
   * level after it is warm-up, not a changepoint. A log without
   * wall times may have a launch clock (Lightning's `train/time`: `pointTimes`, core/metrics/speedFromTime.ts). Without
   * either, no settling is known.
   */
  times?: ArrayLike<number>;
}

export interface Changepoint {
  /** The last x at the old level (e.g. the step the change happened after). */
  at: number;
  /** The first x at the new level. */
  firstAfter: number;
  /** The levels: medians of the segments either side (stalls and warm-ups left out). */
  before: number;
  after: number;
  /** after / before (null when before is 0). */
  ratio: number | null;
  /** |after − before| in units of the noise of one point. */
  sigmas: number;
  /** The x range of the segments either side (a plot zoomed on the change shows these). */
  segmentBefore: [number, number];
  segmentAfter: [number, number];
  /** The launch (a restart's first x, of `launches`) between `at` and `firstAfter`: the change came with it. */
  launch?: number;
}

export interface ChangepointResult {
  method: 'binary-segmentation';
  changepoints: Changepoint[];
  /** Points used (finite values), buckets they were reduced to, and non-finite values left out. */
  points: number;
  buckets: number;
  nonFinite: number;
  /** Buckets left out as stalls (far from the running median) and as warm-up after a launch. */
  stalls: number;
  warmup: number;
  noise: number;
  minSegment: number;
  penalty: number;
  /** Level (median) of the whole series when there is no changepoint; else of the last segment. */
  lastLevel: number | null;
}

/** Half-width of the running median: more stalled points than this in 2h+1 would be a level, not a stall. */
const HALF_WIDTH = 5;
/** Farther than this many σ from the running median is a stall or a spike. */
const STALL_SIGMAS = 4;
/** Kept points are clipped to this many σ from the running median. */
const CLIP_SIGMAS = 3;
/**
 * The longest a run may take to settle (clocks and heat, caches, allocator, autotuning): a run of hours settles in its
 * first minute. Only a bound: whether a level inside it is the run settling is judged from the points (SETTLE_RATIO,
 * and under half of the first launch), so a run shorter than a minute is judged as well as a long one.
 */
export const SETTLE_SECONDS = 60;
/**
 * How far a run moves while it settles: tens of percent (the real runs of the corpus settled at 0.82×–1.22× of their
 * first level), never a factor. A first level this far (or farther) from the one after it is a change of what a step
 * costs (a CPU run relaunched with 4× the work per step 7 s after it started, the restart not in its log), not settling.
 */
export const SETTLE_RATIO = 1.5;
/** Points left out after the start and after each launch, at least: the first windows (compile, first batches). */
export const WARMUP_POINTS = 2;
/** The fewest points a level is judged on: each side of a shift holds at least this many (or 1% of the points). */
export const LEVEL_POINTS = 5;
/**
 * Logged points after a restart below which its launch has no level to judge: its warm-up and one level. A restart
 * younger than this says so rather than "steady" (issue 32): a user looks right after relaunching.
 */
export const RESTART_POINTS_TO_JUDGE = WARMUP_POINTS + LEVEL_POINTS;

/** What is left to split: warm-ups and stalls out, the rest clipped to the running median ± CLIP_SIGMAS·σ. */
interface Cleaned {
  x: Float64Array;
  /** the kept values as logged (their medians are the levels) */
  y: Float64Array;
  /** the kept values clipped (their sums are the split cost) */
  c: Float64Array;
  sigma: number;
  stalls: number;
  warmup: number;
}

function clean(
  x: Float64Array,
  y: Float64Array,
  launches: readonly number[],
  warmupOpt: number | undefined,
  settled: readonly [number, number][] = [],
): Cleaned {
  const n = y.length;
  const warm = Math.min(n, Math.max(0, warmupOpt ?? Math.max(WARMUP_POINTS, Math.ceil(n * 0.01))));
  const drop = new Uint8Array(n);
  const starts = [0];
  for (const l of launches) {
    let i = 0;
    while (i < n && x[i]! < l) i++;
    if (i < n) starts.push(i);
  }
  let warmup = 0;
  for (const s of starts)
    for (let i = s; i < Math.min(n, s + warm); i++)
      if (!drop[i]) {
        drop[i] = 1;
        warmup++;
      }
  // a launch's settling found by an earlier pass (findChangepoints): warm-up too
  for (const [from, to] of settled)
    for (let i = 0; i < n; i++)
      if (x[i]! >= from && x[i]! <= to && !drop[i]) {
        drop[i] = 1;
        warmup++;
      }
  // keep something to look at when the warm-up would swallow a short series
  if (warmup >= n - 2) {
    drop.fill(0);
    warmup = 0;
  }
  const wx: number[] = [];
  const wy: number[] = [];
  for (let i = 0; i < n; i++)
    if (!drop[i]) {
      wx.push(x[i]!);
      wy.push(y[i]!);
    }
  const yy = Float64Array.from(wy);
  // Windows never reach across a launch: the level of one launch says nothing of the next one's.
  const segEnd = new Int32Array(yy.length).fill(yy.length);
  const segStart = new Int32Array(yy.length);
  const cuts = launches.map((l) => wx.findIndex((v) => v >= l)).filter((i) => i > 0);
  for (const cut of cuts) {
    for (let i = 0; i < cut; i++) segEnd[i] = Math.min(segEnd[i]!, cut);
    for (let i = cut; i < yy.length; i++) segStart[i] = Math.max(segStart[i]!, cut);
  }
  const h = HALF_WIDTH;
  const r = new Float64Array(yy.length);
  const levels: number[][] = [];
  for (let i = 0; i < yy.length; i++) {
    const lo = Math.max(segStart[i]!, i - h);
    const hi = Math.min(segEnd[i]!, i + h + 1);
    const centre = medianOf(yy, lo, hi);
    r[i] = Math.abs(yy[i]! - centre);
    // A point beside a step is near the level of one side while the centred median sits between: the one-sided
    // medians keep it. A stall is far from both sides.
    levels.push([centre, medianOf(yy, lo, i), medianOf(yy, i + 1, hi)].filter((v) => !Number.isNaN(v)));
  }
  const scale = Math.abs(medianOf(yy));
  // A noiseless series (a constant, synthetic data): σ from the float resolution so the tests below stay finite.
  const sigma = Math.max(medianOf(r) / 0.6745, scale * 1e-9, 1e-12);
  const kx: number[] = [];
  const ky: number[] = [];
  const kc: number[] = [];
  let stalls = 0;
  for (let i = 0; i < yy.length; i++) {
    const v = yy[i]!;
    const ref = levels[i]!.reduce((best, l) => (Math.abs(v - l) < Math.abs(v - best) ? l : best));
    const d = v - ref;
    if (Math.abs(d) > STALL_SIGMAS * sigma) {
      stalls++;
      continue;
    }
    kx.push(wx[i]!);
    ky.push(v);
    kc.push(ref + Math.max(-CLIP_SIGMAS * sigma, Math.min(CLIP_SIGMAS * sigma, d)));
  }
  return {
    x: Float64Array.from(kx),
    y: Float64Array.from(ky),
    c: Float64Array.from(kc),
    sigma,
    stalls,
    warmup,
  };
}

/**
 * The level shifts of one series. `xs` ascending (steps); `ys` may hold NaN/Infinity (left out). Pure and
 * synchronous: one pass to reduce a long series to bucket medians, then a few thousand buckets.
 */
export function findChangepoints(
  xs: ArrayLike<number>,
  ys: ArrayLike<number>,
  options: ChangepointOptions = {},
): ChangepointResult {
  const n0 = Math.min(xs.length, ys.length);
  let finite = 0;
  for (let i = 0; i < n0; i++) if (Number.isFinite(ys[i]!) && Number.isFinite(xs[i]!)) finite++;
  const fx = new Float64Array(finite);
  const fy = new Float64Array(finite);
  const ts = options.times && options.times.length >= n0 ? options.times : undefined;
  const ft = ts ? new Float64Array(finite) : undefined;
  for (let i = 0, j = 0; i < n0; i++) {
    if (Number.isFinite(ys[i]!) && Number.isFinite(xs[i]!)) {
      fx[j] = xs[i]!;
      if (ft) ft[j] = ts![i]!;
      fy[j++] = ys[i]!;
    }
  }
  const bucketed = bucketize(fx, fy, ft, options.maxBuckets ?? 2000);
  // A first split inside the run's settling time is the run settling: left out as warm-up, then split again.
  const settle = settleEnds(bucketed.x, bucketed.t, options.launches ?? []);
  const settled: [number, number][] = [];
  for (let pass = 0; ; pass++) {
    const r = segmentOnce(bucketed, options, finite, n0, settled);
    const more =
      pass < 4 ? r.changepoints.map((c) => settlingOf(c, settle, bucketed.x)).filter((v) => v !== undefined) : [];
    if (!more.length) return r;
    settled.push(...more);
  }
}

/**
 * The run's first x and the last x its settling may reach (under half of its first launch, never past
 * SETTLE_SECONDS). Only the
 * first launch's: after a restart, the level the new launch starts at is the evidence of what the restart changed
 * (plain-host-sync ran 0.77× for its first 140 steps after the restart), so only its first windows are warm-up.
 */
function settleEnds(x: Float64Array, t: Float64Array | undefined, launches: readonly number[]): [number, number][] {
  if (!t || !x.length) return [];
  const next = launches.map((l) => x.findIndex((v) => v >= l)).filter((i) => i > 0);
  const end = next.length ? Math.min(...next) : x.length;
  let i = 0;
  while (i + 1 < end && i + 1 < end / 2 && t[i + 1]! - t[0]! <= SETTLE_SECONDS) i++;
  return [[x[0]!, x[i]!]];
}

/**
 * The launch-settling range a changepoint shows: its old level began at the launch, ended inside the settling time,
 * lies within SETTLE_RATIO of the level after it, and that level holds at least as long (points of `xs`): the run
 * settled to it. Judged from the points, not the clock alone: a CPU run relaunched with 4× the work per step 7 s after
 * it started (the restart not in its log) fell to a third at step 300 of 600, inside its first minute and at half its
 * points; that is a change, never settling. Nor is a dip of a few windows just before such a drop the end of a
 * settling: left out with all before it, it would leave the drop a stub too short to be told from a slope.
 */
function settlingOf(
  c: Changepoint,
  settle: readonly [number, number][],
  xs: Float64Array,
): [number, number] | undefined {
  if (c.launch !== undefined) return undefined;
  if (c.ratio === null || !(c.ratio > 1 / SETTLE_RATIO && c.ratio < SETTLE_RATIO)) return undefined;
  const points = ([from, to]: [number, number]) => xs.filter((v) => v >= from && v <= to).length;
  if (points(c.segmentAfter) < points(c.segmentBefore)) return undefined;
  const s = settle.find(([from, to]) => c.segmentBefore[0] >= from && c.segmentBefore[0] <= to && c.at <= to);
  // the old level must reach back to the launch's start (its warm-up aside), not begin after an earlier split
  return s && c.segmentBefore[0] <= s[0] + (s[1] - s[0]) * 0.25 ? [s[0], c.at] : undefined;
}

/**
 * Whether a split at k of [a, b) is a wander: the run was already at the new level before it, or went back to the old
 * level after it, for `hold` points. "At a level" is the running median (2h+1 points, inside its side) within `tol`
 * (a fraction, the smallest shift reported) of it or past it: a partial recovery to a third level is no wander.
 */
function wanders(
  y: Float64Array,
  [a, k, b]: [number, number, number],
  [l1, l2]: [number, number],
  tol: number,
  hold: number,
): boolean {
  const dir = Math.sign(l2 - l1);
  const count = (from: number, to: number, at: (m: number) => boolean) => {
    let c = 0;
    for (let i = from; i < to; i++)
      if (at(medianOf(y, Math.max(from, i - HALF_WIDTH), Math.min(to, i + HALF_WIDTH + 1)))) c++;
    return c;
  };
  // before: at the new level or beyond it; after: back at the old level or beyond it
  const before = count(a, k, (m) => (l2 - m) * dir <= tol * Math.abs(l2));
  const after = count(k, b, (m) => (m - l1) * dir <= tol * Math.abs(l1));
  return before >= hold || after >= hold;
}

function segmentOnce(
  bucketed: { x: Float64Array; y: Float64Array },
  options: ChangepointOptions,
  finite: number,
  n0: number,
  settled: readonly [number, number][],
): ChangepointResult {
  const { x, y, c, sigma, stalls, warmup } = clean(
    bucketed.x,
    bucketed.y,
    options.launches ?? [],
    options.warmup,
    settled,
  );
  const n = y.length;
  const minSegment = Math.max(2, options.minSegment ?? Math.max(LEVEL_POINTS, Math.ceil(n * 0.01)));
  const penalty = options.penalty ?? Math.max(20, 3 * Math.log(Math.max(n, 2)));
  const minRelative = options.minRelative ?? 0.05;
  const maxCp = options.maxChangepoints ?? 8;
  const p = prefixes(c);
  const launchAt = (options.launches ?? []).map((l) => x.findIndex((v) => v >= l)).filter((i) => i > 0);
  const base: Omit<ChangepointResult, 'changepoints' | 'lastLevel'> = {
    method: 'binary-segmentation',
    points: finite,
    buckets: bucketed.y.length,
    nonFinite: n0 - finite,
    stalls,
    warmup,
    noise: n >= 3 ? sigma : 0,
    minSegment,
    penalty,
  };
  if (n < 2 * minSegment) return { ...base, changepoints: [], lastLevel: n ? medianOf(y) : null };

  const splits: number[] = [];
  const queue: [number, number][] = [[0, n]];
  const gainAt = (a: number, b: number, k: number): number => {
    const n1 = k - a;
    const n2 = b - k;
    const d = (p.s[k]! - p.s[a]!) / n1 - (p.s[b]! - p.s[k]!) / n2;
    return ((n1 * n2) / (n1 + n2)) * d * d;
  };
  // A level must hold for as long as a shift must last (5% of the run) before it counts as left.
  const hold = Math.max(minSegment, Math.ceil(n * 0.05));
  /** Whether a split at k of [a, b) is a level shift (see the header). */
  const shiftAt = (a: number, b: number, k: number, gain: number): boolean => {
    const m1 = (p.s[k]! - p.s[a]!) / (k - a);
    const m2 = (p.s[b]! - p.s[k]!) / (b - k);
    const shift = m2 - m1;
    const l1 = medianOf(y, a, k);
    const l2 = medianOf(y, k, b);
    const significant = gain > penalty * sigma * sigma;
    const large = Math.abs(l2 - l1) >= minRelative * Math.max(Math.abs(l1), Math.abs(l2));
    if (!significant || !large) return false;
    // Lines over up to a tenth of the series: long enough that a small shift clears the standard error.
    // Each side as long as it is (up to that): a short last segment does not shorten the long one before it.
    const cap = Math.max(minSegment, Math.floor(n / 10));
    const w1 = Math.min(k - a, cap);
    const w2 = Math.min(b - k, cap);
    const jump = lineAt(c, k, k + w2, k - 0.5) - lineAt(c, k - w1, k, k - 0.5);
    const jumpSe = sigma * Math.sqrt(4 / w1 + 4 / w2);
    const step =
      Math.abs(jump) >= 0.5 * Math.abs(shift) && Math.abs(jump) >= 3 * jumpSe && Math.sign(jump) === Math.sign(shift);
    if (!step) return false;
    // A restart is a fact (a new process, maybe new code, args or data): a shift there needs no more evidence.
    // Elsewhere a level that wanders back is no shift: the run was already at the new level before, or went back
    // to the old one after, for as long as a shift must last.
    return launchAt.includes(k) || !wanders(y, [a, k, b], [l1, l2], minRelative, hold);
  };
  while (queue.length && splits.length < maxCp) {
    // the segment whose best split saves the most goes first: shifts come out largest first
    let best: { seg: number; k: number; gain: number } | undefined;
    for (let qi = 0; qi < queue.length; qi++) {
      const [a, b] = queue[qi]!;
      if (b - a < 2 * minSegment) continue;
      for (let k = a + minSegment; k <= b - minSegment; k++) {
        const gain = gainAt(a, b, k);
        if (!best || gain > best.gain) best = { seg: qi, k, gain };
      }
    }
    if (!best) break;
    const [a, b] = queue.splice(best.seg, 1)[0]!;
    const inside = launchAt.filter((l) => l >= a + minSegment && l <= b - minSegment);
    // A restart is the likeliest place for a change: a split a point or two from one (a save stalled just before it
    // reads like the new level) is moved onto it.
    const near = inside.find((l) => Math.abs(l - best.k) <= 2);
    let k: number | undefined = near ?? best.k;
    if (!shiftAt(a, b, k, gainAt(a, b, k))) {
      // The best split is a slope or a wander, but a restart inside the segment is a candidate of its own: the
      // settling of the first launch must not hide a drop at the second (plain-launch-blocking: 0.75× at its restart,
      // while the largest split of its whole run was the first launch settling).
      k = inside
        .map((l) => ({ l, gain: gainAt(a, b, l) }))
        .sort((u, v) => v.gain - u.gain)
        .find((u) => shiftAt(a, b, u.l, u.gain))?.l;
    }
    // A rejected segment ends here: a smaller split inside it would be noise or part of the same slope.
    if (k === undefined) continue;
    splits.push(k);
    queue.push([a, k], [k, b]);
  }
  splits.sort((u, v) => u - v);
  const bounds = [0, ...splits, n];
  const changepoints: Changepoint[] = [];
  for (let i = 1; i < bounds.length - 1; i++) {
    const a = bounds[i - 1]!;
    const k = bounds[i]!;
    const b = bounds[i + 1]!;
    const before = medianOf(y, a, k);
    const after = medianOf(y, k, b);
    const launch = (options.launches ?? []).find((l) => l > x[k - 1]! && l <= x[k]!);
    // With a launch between them, every point before it (a save stall left out included) ran at the old launch.
    let at = x[k - 1]!;
    if (launch !== undefined) for (const v of bucketed.x) if (v < launch && v > at) at = v;
    changepoints.push({
      ...(launch !== undefined ? { launch } : {}),
      at,
      firstAfter: launch ?? x[k]!,
      before,
      after,
      ratio: before !== 0 ? after / before : null,
      sigmas: Math.abs(after - before) / sigma,
      segmentBefore: [x[a]!, at],
      segmentAfter: [x[k]!, x[b - 1]!],
    });
  }
  const lastStart = bounds[bounds.length - 2]!;
  return { ...base, changepoints, lastLevel: medianOf(y, lastStart, n) };
}
