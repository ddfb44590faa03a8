/*
 * The statistics the changepoints are made of (core/whatChanged/changepoints.ts): medians, a robust noise, a fitted
 * line, equal-count buckets, prefix sums. Pure functions of arrays.
 */

export interface Prefix {
  s: Float64Array;
}

export function prefixes(y: Float64Array): Prefix {
  const s = new Float64Array(y.length + 1);
  for (let i = 0; i < y.length; i++) s[i + 1] = s[i]! + y[i]!;
  return { s };
}

/** The median of y[a, b) (NaN when empty). */
export function medianOf(y: ArrayLike<number>, a = 0, b = y.length): number {
  if (b <= a) return NaN;
  const s = Float64Array.from({ length: b - a }, (_, i) => y[a + i]!).sort();
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Robust σ of one point from the first differences (MAD / 0.6745 / √2). */
export function noiseOf(y: Float64Array): number {
  if (y.length < 3) return 0;
  const d = new Float64Array(y.length - 1);
  for (let i = 1; i < y.length; i++) d[i - 1] = y[i]! - y[i - 1]!;
  const med = medianOf(d);
  for (let i = 0; i < d.length; i++) d[i] = Math.abs(d[i]! - med);
  return medianOf(d) / 0.6745 / Math.SQRT2;
}

/** The value at boundary position `at` (between index at−1 and at) of a line fitted to y[a, b). */
export function lineAt(y: Float64Array, a: number, b: number, at: number): number {
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

/** (x, y) as at most `buckets` equal-count bucket medians; x of a bucket is its last point's. */
export function bucketize(
  x: Float64Array,
  y: Float64Array,
  t: Float64Array | undefined,
  buckets: number,
): { x: Float64Array; y: Float64Array; t: Float64Array | undefined } {
  if (y.length <= buckets) return { x, y, t };
  const bx = new Float64Array(buckets);
  const by = new Float64Array(buckets);
  const bt = t ? new Float64Array(buckets) : undefined;
  for (let b = 0; b < buckets; b++) {
    const lo = Math.floor((b * y.length) / buckets);
    const hi = Math.floor(((b + 1) * y.length) / buckets);
    const s = y.slice(lo, hi).sort();
    const m = s.length >> 1;
    by[b] = s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
    bx[b] = x[hi - 1]!;
    if (bt) bt[b] = t![hi - 1]!;
  }
  return { x: bx, y: by, t: bt };
}
