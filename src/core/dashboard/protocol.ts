// Messages between the dashboard panel (extension host) and its webview. Both sides import this file; neither
// trusts the other: every message that crosses is parsed with these schemas, and a message that fails is dropped.
import * as z from 'zod';

/** Bumped when a message changes shape incompatibly; the webview sends it in `ready`. */
export const DASHBOARD_PROTOCOL_VERSION = 1;

const count = z.number().int().nonnegative();
/** Finite numbers only: the reduction probe drops NaN/Infinity before they get here (and counts them). */
const finite = z.number();

/** Lines of the metrics log that produced no point, by reason. Shown next to the run, never fatal. */
export const skippedCountsSchema = z.object({
  malformed: count,
  nonNumeric: count,
  nonFinite: count,
  /** Lines with metrics but no step (or time) to place them at. */
  noX: count.default(0),
});
export type SkippedCounts = z.infer<typeof skippedCountsSchema>;

/** A restart on the plots: at the first step the new launch logged (`prevStep`: the last one before it). */
export const restartMarkSchema = z.object({
  step: finite,
  time: finite.nullable(),
  label: z.string(),
  prevStep: finite.nullable().optional(),
});
export type RestartMark = z.infer<typeof restartMarkSchema>;

/** A level shift of one series (a changepoint): `at` the last step at the old level, `firstAfter` the first at the new. */
export const shiftMarkSchema = z.object({
  key: z.string().min(1),
  at: finite,
  firstAfter: finite,
  before: finite,
  after: finite,
  /** after / before; null when before is 0. */
  ratio: finite.nullable(),
  /** The restart (its first step) the shift came with. */
  launch: finite.optional(),
});
export type ShiftMark = z.infer<typeof shiftMarkSchema>;

export const runInfoSchema = z.object({
  /** Stable id chosen by the host (e.g. `host:path`); every other message names the run by it. */
  id: z.string().min(1),
  label: z.string(),
  host: z.string(),
  /** The metrics log on that host. */
  path: z.string(),
  /** Lines read so far (all of them, skipped included). */
  lines: count,
  skipped: skippedCountsSchema,
  /**
   * Present while the data is a preview: buckets from evenly spaced windows of the log (`bytes` of its `of` bytes),
   * spikes between the windows missing. The exact read replaces it with a runData without `sample`; `failed` says
   * that read did not succeed, so the preview is all there is.
   */
  sample: z.object({ bytes: count, of: count, failed: z.boolean().default(false) }).optional(),
  /**
   * The run's launches after the first, marked on every plot: its stitched history's restarts (What Changed?'s
   * report's), and the new training processes the follow poll saw.
   */
  restarts: z.array(restartMarkSchema).optional(),
  /**
   * Where the run's series shift level: What Changed?'s changepoints of the same data (core/whatChanged/throughput.ts
   * `logShifts`, the function the report uses), computed by the host. Absent while the data is a preview.
   */
  shifts: z.array(shiftMarkSchema).optional(),
});
export type RunInfo = z.infer<typeof runInfoSchema>;

/**
 * One metric of one run, bucketed: bucket i covers steps up to `x[i]` and holds the smallest, largest and last value
 * seen in it. `t` (optional) is the wall-clock time in Unix seconds of the bucket's last point; without it the
 * webview offers only the step axis for this series.
 */
export const seriesDataSchema = z
  .object({
    key: z.string().min(1),
    x: z.array(finite),
    min: z.array(finite),
    max: z.array(finite),
    last: z.array(finite),
    t: z.array(finite).optional(),
  })
  .refine(
    (s) =>
      s.min.length === s.x.length &&
      s.max.length === s.x.length &&
      s.last.length === s.x.length &&
      (s.t === undefined || s.t.length === s.x.length),
    { message: 'x, min, max, last (and t) must have the same length' },
  );
export type SeriesData = z.infer<typeof seriesDataSchema>;

export const runDataSchema = z.object({ run: runInfoSchema, series: z.array(seriesDataSchema) });
export type RunData = z.infer<typeof runDataSchema>;

export const checkpointSchema = z.object({
  path: z.string().min(1),
  label: z.string(),
  /** Which run (RunInfo.id) it belongs to, when known. */
  run: z.string().optional(),
  step: finite.nullable().optional(),
  /** Modification time, Unix seconds. */
  mtime: finite.nullable().optional(),
  /** Whether the checkpoint carries training args that Open Args / Diff can show. */
  hasArgs: z.boolean().default(true),
});
export type Checkpoint = z.infer<typeof checkpointSchema>;

/** The host's latest baseline against the environment now; `text` is preformatted by the host. */
export const driftSummarySchema = z.object({
  baseline: z.string(),
  capturedAt: z.string().optional(),
  /** How many entries differ; 0 means "no drift". */
  changes: count,
  text: z.string(),
});
export type DriftSummary = z.infer<typeof driftSummarySchema>;

export const benchPointSchema = z.object({
  /** The stored result's id: what `markReference` names. Absent for a point that cannot be marked. */
  id: z.string().optional(),
  /** Unix seconds. */
  time: finite,
  tokPerS: finite,
  label: z.string().optional(),
  /** The host's known-good reference (marked from the dashboard, else recorded with its baseline); the chart marks it. */
  baseline: z.boolean().default(false),
});
export type BenchPoint = z.infer<typeof benchPointSchema>;

/**
 * One run's part of the drift panel: what changed on its host between the environment snapshots captured during the
 * run (core/dashboard/sources.ts runDrift).
 */
export const runDriftSchema = z.object({
  /** The run (RunInfo.id). */
  run: z.string(),
  label: z.string(),
  /** The run's time (Unix seconds, its first log point to its last); null when its log has no wall times. */
  span: z.object({ from: finite, to: finite }).nullable(),
  /** The first snapshot captured in that time against the last; null when fewer than two were. */
  drift: driftSummarySchema.nullable(),
  /** What the drift compares, or why there is none. */
  note: z.string(),
});
export type RunDriftInfo = z.infer<typeof runDriftSchema>;

/** Beside the plots, per host of the runs: the drift during each of its runs and its benchmark history. */
export const hostSideSchema = z.object({
  /** The host's id (as in the run ids). */
  host: z.string(),
  /** Its name as the user knows it; shown above its sections when the runs come from several hosts. */
  label: z.string(),
  /** The host's drift whatever the runs' time: sent by older hosts only (null now; `runs` has each run's). */
  drift: driftSummarySchema.nullable(),
  bench: z.array(benchPointSchema),
  /** The drift during each run of the host, in run order. */
  runs: z.array(runDriftSchema).default([]),
});
export type HostSide = z.infer<typeof hostSideSchema>;

export const xAxisSchema = z.enum(['step', 'time', 'relative']);
export type XAxis = z.infer<typeof xAxisSchema>;

// ---- host → webview ----

export const initMessageSchema = z.object({
  type: z.literal('init'),
  runs: z.array(runDataSchema),
  checkpoints: z.array(checkpointSchema),
  /** One host's side data, as before `hosts`: read when `hosts` is absent. */
  drift: driftSummarySchema.nullable().default(null),
  bench: z.array(benchPointSchema).default([]),
  /** Side data per host of the runs, in run order. Absent: `drift`/`bench` are the only host's. */
  hosts: z.array(hostSideSchema).optional(),
  /** The side data is still being read; a `side` message brings it (the plots do not wait for it). */
  sidePending: z.boolean().default(false),
  follow: z.boolean().default(false),
  /** Series to show first; absent: the webview picks (or restores its saved choice). */
  selected: z.array(z.string()).optional(),
});

/** Adds or replaces one run's data (follow mode sends this after reading the appended bytes). */
export const runDataMessageSchema = z.object({ type: z.literal('runData'), data: runDataSchema });

/** Answer to `requestRange`: finer buckets for [from, to] (steps) of one series; `from`/`to` are echoed. */
export const rangeDataMessageSchema = z.object({
  type: z.literal('rangeData'),
  run: z.string().min(1),
  series: z.string().min(1),
  from: finite,
  to: finite,
  data: seriesDataSchema,
});

/** The side data per host, when it was not ready for init. */
export const sideMessageSchema = z.object({ type: z.literal('side'), hosts: z.array(hostSideSchema) });

export const followStateMessageSchema = z.object({ type: z.literal('follow'), on: z.boolean() });
export const errorMessageSchema = z.object({ type: z.literal('error'), message: z.string() });
/** Zoom every plot to steps [from, to] (What Changed?'s plot evidence: the window around a changepoint). */
/** `series`: the plot to show and bring into view (What Changed?'s plot evidence names the series that shifted). */
export const zoomMessageSchema = z.object({
  type: z.literal('zoom'),
  from: finite,
  to: finite,
  series: z.string().min(1).optional(),
});

// ---- a run's GPU timeline (issue 34; built by core/hardware/gpuPlot.ts) ----

export const gpuMarkSchema = z.object({
  kind: z.enum(['throttle', 'clocks', 'neighbour', 'link', 'memory-errors', 'straggler']),
  label: z.string(),
  /** The first sample that showed it (host seconds). */
  from: finite,
  /** The last sample that showed it; null while it lasts to the timeline's end. */
  to: finite.nullable(),
});
export type GpuMark = z.infer<typeof gpuMarkSchema>;

export const gpuPlotSchema = z
  .object({
    /** The GPUs drawn: the run's (seen with its processes), else every GPU the samples have. */
    gpus: z.array(z.number().int()),
    /** The line's GPU; null without a reading. */
    slowest: z.number().int().nullable(),
    t: z.array(finite),
    series: z.array(
      z.object({
        key: z.string().min(1),
        min: z.array(finite.nullable()),
        max: z.array(finite.nullable()),
        last: z.array(finite.nullable()),
      }),
    ),
    marks: z.array(gpuMarkSchema),
    /** Samples left out (more than MAX_POINTS): the plot is thinned evenly. */
    thinned: z.number().int().nonnegative(),
  })
  .refine((p) => p.series.every((s) => s.min.length === p.t.length && s.max.length === p.t.length), {
    message: 'every GPU series has one value a sample',
  });
export type GpuPlot = z.infer<typeof gpuPlotSchema>;

/** A run's GPU timeline, drawn under its throughput; sent when the run has one. */
export const gpuMessageSchema = z.object({ type: z.literal('gpu'), run: z.string().min(1), plot: gpuPlotSchema });
export type GpuMessage = z.infer<typeof gpuMessageSchema>;

export const hostMessageSchema = z.discriminatedUnion('type', [
  initMessageSchema,
  runDataMessageSchema,
  rangeDataMessageSchema,
  followStateMessageSchema,
  errorMessageSchema,
  sideMessageSchema,
  zoomMessageSchema,
  gpuMessageSchema,
]);
export type HostMessage = z.infer<typeof hostMessageSchema>;
export type InitMessage = z.infer<typeof initMessageSchema>;
export type RangeDataMessage = z.infer<typeof rangeDataMessageSchema>;

// ---- webview → host ----

/** Sent once the script has loaded and listens; the host posts nothing before it. */
export const readyMessageSchema = z.object({ type: z.literal('ready'), version: z.number().int() });
/** Zoom: finer buckets wanted for [from, to], in steps whatever the x axis shows. */
export const requestRangeMessageSchema = z
  .object({
    type: z.literal('requestRange'),
    run: z.string().min(1),
    series: z.string().min(1),
    from: finite,
    to: finite,
  })
  .refine((m) => m.from <= m.to, { message: 'from must not exceed to' });
export const openArgsMessageSchema = z.object({ type: z.literal('openArgs'), path: z.string().min(1) });
/** Diff the args of checkpoint `a` (older) against `b`. */
export const diffArgsMessageSchema = z.object({
  type: z.literal('diffArgs'),
  a: z.string().min(1),
  b: z.string().min(1),
});
/** The state the user wants: the host starts or stops reading appended bytes and answers with `follow`. */
export const toggleFollowMessageSchema = z.object({ type: z.literal('toggleFollow'), on: z.boolean() });
/** The series now shown; the host may remember it and reduce only these when following. */
export const selectSeriesMessageSchema = z.object({ type: z.literal('selectSeries'), keys: z.array(z.string()) });

/** Marks benchmark result `result` of host `host` (HostSide.host) as its known-good reference; null unmarks. */
export const markReferenceMessageSchema = z.object({
  type: z.literal('markReference'),
  host: z.string().min(1),
  result: z.string().min(1).nullable(),
});

export const webviewMessageSchema = z.discriminatedUnion('type', [
  readyMessageSchema,
  requestRangeMessageSchema,
  openArgsMessageSchema,
  diffArgsMessageSchema,
  toggleFollowMessageSchema,
  selectSeriesMessageSchema,
  markReferenceMessageSchema,
]);
export type WebviewMessage = z.infer<typeof webviewMessageSchema>;

/**
 * What the webview saves with setState, handed back to the panel serializer after a reload: enough to reopen the
 * same runs (the host re-reads the data) and to restore the user's choices. Kept small on purpose.
 */
export const dashboardStateSchema = z.object({
  runs: z.array(z.object({ id: z.string(), host: z.string(), path: z.string(), label: z.string() })).default([]),
  selected: z.array(z.string()).optional(),
  smoothing: z.number().min(0).max(0.999).default(0),
  xAxis: xAxisSchema.default('step'),
  follow: z.boolean().default(false),
});
export type DashboardState = z.infer<typeof dashboardStateSchema>;

export type ParseResult<T> = { ok: true; message: T } | { ok: false; error: string };

function parseWith<S extends z.ZodType>(schema: S, raw: unknown): ParseResult<z.infer<S>> {
  const r = schema.safeParse(raw);
  if (r.success) return { ok: true, message: r.data };
  const where = r.error.issues
    .slice(0, 3)
    .map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`)
    .join('; ');
  const type = typeof raw === 'object' && raw !== null && 'type' in raw ? String(raw.type) : typeof raw;
  return { ok: false, error: `invalid ${type} message: ${where}` };
}

/** Host side: validates what the webview posted. */
export function parseWebviewMessage(raw: unknown): ParseResult<WebviewMessage> {
  return parseWith(webviewMessageSchema, raw);
}

/** Webview side: validates what the host posted. */
export function parseHostMessage(raw: unknown): ParseResult<HostMessage> {
  return parseWith(hostMessageSchema, raw);
}

/** Host side: validates the state handed to the serializer (it comes from the webview, so it is untrusted too). */
export function parseDashboardState(raw: unknown): DashboardState | undefined {
  const r = dashboardStateSchema.safeParse(raw);
  return r.success ? r.data : undefined;
}

/** What a sender builds (defaults may be left out); receivers get the parsed types above. */
export type HostMessageInput = z.input<typeof hostMessageSchema>;
export type WebviewMessageInput = z.input<typeof webviewMessageSchema>;
