/*
 * Where a metric's level shifts: binary segmentation on bucket means.
 *
 * Why binary segmentation: a regression report wants the few big shifts (12.8K → 4.3K tok/s), in order of size, and a
 * log reduced on the host is at most a few thousand buckets; binary segmentation with prefix sums costs O(n) per split
 * and finds the largest shift first. PELT finds the same optimum for a penalised cost but gives no order by size and
 * needs the same penalty tuning; on a few thousand points its speed buys nothing.
 *
 * The model: piecewise constant levels with noise. The noise σ is estimated robustly from the first differences
 * (MAD / 0.6745 / √2): a handful of shifts barely moves the median of the differences, so the steps themselves do not
 * inflate σ. A split at k is kept when
 *   - both sides hold at least `minSegment` points,
 *   - the cost it saves (n₁n₂/n · Δ²) exceeds `penalty` · σ² with penalty = max(20, 3 ln n) (a BIC-like penalty: pure
 *     noise of a million points does not clear it),
 *   - the shift is at least `minRelative` of the level (a 1% wobble in tok/s explains no regression), and
 *   - it is a step, not a slope: straight lines fitted to the points on either side (up to a tenth of the series), extrapolated to the
 *     boundary, must disagree by at least half the shift and by 4 standard errors. A ramp or a decaying loss curve has
 *     no jump at any boundary, so it is reported as no changepoint rather than as a staircase.
 * Non-finite values (a NaN run) are left out, not treated as zeros; a long series is first averaged into
 * `maxBuckets` buckets of equal count.
 */

export interface ChangepointOptions {
  /** Fewest points on either side of a shift (default max(5, 1% of the points)). */
  minSegment?: number;
  /** Smallest shift reported, as a fraction of the larger level (default 0.03). */
  minRelative?: number;
  /** Multiplier of σ² the saved cost must exceed (default max(20, 3 ln n)). */
  penalty?: number;
  /** Most changepoints reported (default 8). */
  maxChangepoints?: number;
  /** A longer series is averaged into this many equal-count buckets first (default 2000). */
  maxBuckets?: number;
}

export interface Changepoint {
  /** The last x at the old level (e.g. the step the change happened after). */
  at: number;
  /** The first x at the new level. */
  firstAfter: number;
  before: number;
  after: number;
  /** after / before (null when before is 0). */
  ratio: number | null;
  /** |after − before| in units of the noise of one bucket mean. */
  sigmas: number;
  /** The x range of the segments either side (a plot zoomed on the change shows these). */
  segmentBefore: [number, number];
  segmentAfter: [number, number];
}

export interface ChangepointResult {
  method: 'binary-segmentation';
  changepoints: Changepoint[];
  /** Points used (finite values), buckets they were averaged into, and non-finite values left out. */
  points: number;
  buckets: number;
  nonFinite: number;
  noise: number;
  minSegment: number;
  penalty: number;
  /** Level of the whole series when there is no changepoint; else of the last segment. */
  lastLevel: number | null;
}

interface Prefix {
  s: Float64Array;
  ss: Float64Array;
}

function prefixes(y: Float64Array): Prefix {
  const s = new Float64Array(y.length + 1);
  const ss = new Float64Array(y.length + 1);
  for (let i = 0; i < y.length; i++) {
    s[i + 1] = s[i]! + y[i]!;
    ss[i + 1] = ss[i]! + y[i]! * y[i]!;
  }
  return { s, ss };
}

function mean(p: Prefix, a: number, b: number): number {
  return (p.s[b]! - p.s[a]!) / (b - a);
}

function median(xs: Float64Array | number[]): number {
  const a = Float64Array.from(xs).sort();
  if (!a.length) return NaN;
  const m = a.length >> 1;
  return a.length % 2 ? a[m]! : (a[m - 1]! + a[m]!) / 2;
}

/** Robust σ of one point from the first differences. */
export function noiseOf(y: Float64Array): number {
  if (y.length < 3) return 0;
  const d = new Float64Array(y.length - 1);
  for (let i = 1; i < y.length; i++) d[i - 1] = y[i]! - y[i - 1]!;
  const med = median(d);
  for (let i = 0; i < d.length; i++) d[i] = Math.abs(d[i]! - med);
  return median(d) / 0.6745 / Math.SQRT2;
}

/** The value at boundary position `at` (between index at−1 and at) of a line fitted to y[a, b). */
function lineAt(y: Float64Array, a: number, b: number, at: number): number {
  const n = b - a;
  let sx = 0;
  let sy = 0;
  for (let i = a; i < b; i++) {
    sx += i;
    sy += y[i]!;
  }
  const mx = sx / n;
  const my = sy / n;
  let sxx = 0;
  let sxy = 0;
  for (let i = a; i < b; i++) {
    sxx += (i - mx) * (i - mx);
    sxy += (i - mx) * (y[i]! - my);
  }
  const slope = sxx > 0 ? sxy / sxx : 0;
  return my + slope * (at - mx);
}

/** Averages (x, y) into at most `buckets` equal-count buckets; x of a bucket is its last point's. */
function bucketize(x: Float64Array, y: Float64Array, buckets: number): { x: Float64Array; y: Float64Array } {
  if (y.length <= buckets) return { x, y };
  const bx = new Float64Array(buckets);
  const by = new Float64Array(buckets);
  for (let b = 0; b < buckets; b++) {
    const lo = Math.floor((b * y.length) / buckets);
    const hi = Math.floor(((b + 1) * y.length) / buckets);
    let s = 0;
    for (let i = lo; i < hi; i++) s += y[i]!;
    by[b] = s / (hi - lo);
    bx[b] = x[hi - 1]!;
  }
  return { x: bx, y: by };
}

/**
 * The level shifts of one series. `xs` ascending (steps); `ys` may hold NaN/Infinity (left out). Pure and
 * synchronous: 1,000,000 points take tens of milliseconds (one pass to average, then a few thousand buckets).
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
  for (let i = 0, j = 0; i < n0; i++) {
    if (Number.isFinite(ys[i]!) && Number.isFinite(xs[i]!)) {
      fx[j] = xs[i]!;
      fy[j++] = ys[i]!;
    }
  }
  const { x, y } = bucketize(fx, fy, options.maxBuckets ?? 2000);
  const n = y.length;
  const minSegment = Math.max(2, options.minSegment ?? Math.max(5, Math.ceil(n * 0.01)));
  const penalty = options.penalty ?? Math.max(20, 3 * Math.log(Math.max(n, 2)));
  const minRelative = options.minRelative ?? 0.03;
  const maxCp = options.maxChangepoints ?? 8;
  const sigmaRaw = noiseOf(y);
  const p = prefixes(y);
  const scale = n ? Math.abs(mean(p, 0, n)) : 0;
  // A noiseless series (a constant, synthetic data): σ from the float resolution so the tests below stay finite.
  const sigma = Math.max(sigmaRaw, scale * 1e-9, 1e-12);
  const base: Omit<ChangepointResult, 'changepoints' | 'lastLevel'> = {
    method: 'binary-segmentation',
    points: finite,
    buckets: n,
    nonFinite: n0 - finite,
    noise: sigmaRaw,
    minSegment,
    penalty,
  };
  if (n < 2 * minSegment) return { ...base, changepoints: [], lastLevel: n ? mean(p, 0, n) : null };

  const splits: number[] = [];
  const queue: [number, number][] = [[0, n]];
  while (queue.length && splits.length < maxCp) {
    // the segment whose best split saves the most goes first: shifts come out largest first
    let best: { seg: number; k: number; gain: number } | undefined;
    for (let qi = 0; qi < queue.length; qi++) {
      const [a, b] = queue[qi]!;
      if (b - a < 2 * minSegment) continue;
      const total = p.s[b]! - p.s[a]!;
      for (let k = a + minSegment; k <= b - minSegment; k++) {
        const n1 = k - a;
        const n2 = b - k;
        const s1 = p.s[k]! - p.s[a]!;
        const d = s1 / n1 - (total - s1) / n2;
        const gain = ((n1 * n2) / (n1 + n2)) * d * d;
        if (!best || gain > best.gain) best = { seg: qi, k, gain };
      }
    }
    if (!best) break;
    const [a, b] = queue.splice(best.seg, 1)[0]!;
    const k = best.k;
    const m1 = mean(p, a, k);
    const m2 = mean(p, k, b);
    const shift = m2 - m1;
    const significant = best.gain > penalty * sigma * sigma;
    const large = Math.abs(shift) >= minRelative * Math.max(Math.abs(m1), Math.abs(m2));
    // Lines over up to a tenth of the series: long enough that a small shift clears the standard error.
    const w = Math.min(k - a, b - k, Math.max(minSegment, Math.floor(n / 10)));
    const jump = lineAt(y, k, Math.min(b, k + w), k - 0.5) - lineAt(y, Math.max(a, k - w), k, k - 0.5);
    const jumpSe = sigma * Math.sqrt(8 / w);
    const step =
      Math.abs(jump) >= 0.5 * Math.abs(shift) && Math.abs(jump) >= 4 * jumpSe && Math.sign(jump) === Math.sign(shift);
    // A rejected best split ends this segment: a smaller split inside it would be noise or part of the same slope.
    if (!(significant && large && step)) continue;
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
    const before = mean(p, a, k);
    const after = mean(p, k, b);
    changepoints.push({
      at: x[k - 1]!,
      firstAfter: x[k]!,
      before,
      after,
      ratio: before !== 0 ? after / before : null,
      sigmas: Math.abs(after - before) / sigma,
      segmentBefore: [x[a]!, x[k - 1]!],
      segmentAfter: [x[k]!, x[b - 1]!],
    });
  }
  const lastStart = bounds[bounds.length - 2]!;
  return { ...base, changepoints, lastLevel: mean(p, lastStart, n) };
}
