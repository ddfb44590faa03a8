import { z } from 'zod';
import { defineProbe } from '../probes/probe';

/*
 * python/metrics_reduce.py: one pass over a jsonl metrics log on its host, returning per series at most `buckets`
 * min/max/last buckets, so a million-line log crosses the wire as a few hundred kilobytes.
 */

const count = z.number().int().nonnegative();

/** Same shape as the dashboard's series data (key, x, min, max, last, optional t), plus totals. */
/** The metrics log formats the reducer reads (python/metrics_reduce.py FORMATS). */
export const metricsFormats = ['jsonl', 'csv', 'hf-trainer-state', 'tensorboard'] as const;
export type MetricsFormat = (typeof metricsFormats)[number];

export const reducedSeriesSchema = z.looseObject({
  key: z.string(),
  /** x of the last point in each bucket (step, wall time or line number, per `x` of the result). */
  x: z.array(z.number()),
  min: z.array(z.number()),
  max: z.array(z.number()),
  last: z.array(z.number()),
  /** With x = step: the wall time of each bucket's last point, when every line had one. */
  t: z.array(z.number()).optional(),
  count,
  lastX: z.number(),
  lastValue: z.number(),
});
export type ReducedSeries = z.infer<typeof reducedSeriesSchema>;

export const metricsReductionSchema = z.looseObject({
  path: z.string(),
  size: count.nullable(),
  offset: count,
  requestedOffset: count,
  /** The file was shorter than the requested offset (rewritten by a new run): it was read from 0 instead. */
  reset: z.boolean(),
  /** Where the next read starts: after the last complete line (a line being written is left for later). */
  nextOffset: count,
  lines: count,
  blank: count,
  skipped: z.looseObject({ malformed: count, nonNumeric: count, nonFinite: count, noX: count }),
  x: z.enum(['step', 'time', 'line']),
  xKeys: z.array(z.string()),
  xRange: z.tuple([z.number(), z.number()]).nullable(),
  keys: z.array(z.string()),
  buckets: count,
  bucketWidth: z.number().nullable(),
  window: z.object({ from: z.number(), to: z.number() }).nullable(),
  series: z.array(reducedSeriesSchema),
  seriesTruncated: z.boolean(),
  fastLines: count,
  shapes: count,
  /** Processes that read parts of the file (forked workers on Linux for large files). */
  jobs: count.default(1),
  elapsedMs: z.number(),
  /**
   * With `preview`: what a first look at a large file read (evenly spaced windows, whole lines), or null when the
   * whole range was read and the result is exact. A preview's buckets hold only the sampled lines (spikes between
   * windows are missing) and its nextOffset is where it started: follow only after an exact read.
   */
  sample: z.object({ bytes: count, windows: count, of: count }).nullable().default(null),
  /** Where the result came from: `read` the file, or the resident helper's `cache` of an earlier read plus new bytes. */
  source: z.enum(['read', 'cache']).default('read'),
  /** Bytes of the file this request read (0 when the helper's cache answered it whole). */
  bytesRead: count.optional(),
  /** What the file was read as: JSON lines, a CSV with a header (Lightning), trainer_state.json, TensorBoard events. */
  format: z.enum(metricsFormats).default('jsonl'),
  /** TensorBoard event files: records decoded, corrupt ones, CRCs checked and failed. */
  tensorboard: z
    .looseObject({ records: count, corrupt: count, crcChecked: count, crcFailed: count, crcMode: z.string() })
    .optional(),
});
export type MetricsReduction = z.infer<typeof metricsReductionSchema>;

export interface MetricsReduceOptions {
  path: string;
  buckets?: number;
  x?: 'step' | 'time' | 'line';
  /** Zoom: only x in [from, to], in `buckets` equal buckets. */
  window?: { from: number; to: number };
  /** Follow a live run: read only the bytes from here (a previous result's nextOffset). */
  offset?: number;
  /** Only these series (default: every numeric key but the step/time keys). */
  series?: readonly string[];
  /** Worker processes for a large file (default: the host's CPUs, at most 8). */
  jobs?: number;
  /** A quick first look: a large file is sampled (see `sample` in the result); a small one is read whole. */
  preview?: boolean;
  /** The preview's read budget in bytes (default 8 MiB; a file up to twice this is read whole). Implies preview. */
  previewBytes?: number;
  /** Read the file even if the resident helper read it before (a cold measurement); what it learns is kept. */
  fresh?: boolean;
  /** Read it as this format rather than the one its name and first bytes say. */
  format?: MetricsFormat;
  /** TensorBoard: check the CRC of every record (by default the lengths' and the first record's). */
  verify?: boolean;
  /** The reducer's general path only (no shapes, no block split): for measurements. */
  noFast?: boolean;
}

export function metricsReduceArgs(o: MetricsReduceOptions): string[] {
  const args = [o.path];
  if (o.buckets !== undefined) args.push('--buckets', String(o.buckets));
  if (o.x) args.push('--x', o.x);
  if (o.window) args.push('--from', String(o.window.from), '--to', String(o.window.to));
  if (o.offset) args.push('--offset', String(o.offset));
  if (o.series?.length) args.push('--series', o.series.join(','));
  if (o.jobs !== undefined) args.push('--jobs', String(o.jobs));
  if (o.previewBytes !== undefined) args.push('--preview-bytes', String(o.previewBytes));
  else if (o.preview) args.push('--preview');
  if (o.fresh) args.push('--fresh');
  if (o.format) args.push('--format', o.format);
  if (o.verify) args.push('--verify');
  if (o.noFast) args.push('--no-fast');
  return args;
}

export const metricsReduceProbe = defineProbe(
  'metrics_reduce',
  metricsReductionSchema,
  (o: MetricsReduceOptions) => metricsReduceArgs(o),
  { modules: ['metrics_cache', 'metrics_lines', 'metrics_pass', 'metrics_scan', 'metrics_tb'] },
);
