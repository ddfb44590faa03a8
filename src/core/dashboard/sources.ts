// What the dashboard panel shows beside the plots, found in data the extension already has: the run's metrics log
// and checkpoints (from the Remote Runs listing), the host's baseline drift and its benchmark history (from the
// baseline store). Pure, so it is tested in Node; src/dashboard/ only adapts it.
import { computeDrift, driftCount, renderDriftText } from '../baselines/drift';
import type { EnvSnapshot } from '../baselines/envProbe';
import type { Baseline, BaselineStore, ThroughputResult } from '../baselines/store';
import { KnownGoodError } from '../errors';
import type { RootListing, RunEntry, RunsListing } from '../runs/listRuns';
import { formatLocalTime } from '../util/format';
import { lightningCheckpoints, trainingStep } from '../runs/model';
import { metricsLogsOf } from '../metrics/history';
import { isMetricsLog, metricsLogOf } from '../metrics/metricsLog';
import type { BenchPoint, Checkpoint, RunData, RunDriftInfo } from './protocol';

/** One run to plot: where its log is on which host, and the listing entries it came from (when known). */
export interface RunSource {
  hostId: string;
  /** Absolute path of the metrics jsonl on the host. */
  logPath: string;
  label: string;
  root?: RootListing | undefined;
  /** The run folder's entry (the folder holding the log); absent when the log was named directly. */
  run?: RunEntry | undefined;
  log?: RunEntry | undefined;
  /**
   * Every file of the run's metrics history, oldest launch first (metricsLogsOf), when it has more than one: the
   * dashboard plots them stitched as one run.
   */
  history?: string[] | undefined;
}

/** The run's id in dashboard messages: the host and the log, recoverable by `parseRunId` after a reload. */
export function runId(hostId: string, logPath: string): string {
  return JSON.stringify([hostId, logPath]);
}

export function parseRunId(id: string): { hostId: string; logPath: string } | undefined {
  try {
    const v: unknown = JSON.parse(id);
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') {
      return { hostId: v[0], logPath: v[1] };
    }
  } catch {
    /* not one of ours */
  }
  return undefined;
}

export function joinRemote(root: string, rel: string): string {
  if (rel === '') return root;
  return root.endsWith('/') ? root + rel : `${root}/${rel}`;
}

function parentRel(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

const isFile = (e: RunEntry) => e.kind === 'file' || (e.kind === 'symlink' && e.targetKind === 'file');

/** The metrics log of a run folder: the one rule (core/metrics/metricsLog.ts) live throughput uses too. */
export const findMetricsLog = metricsLogOf;
export { isMetricsLog };

/** The entry at `rel` below a root entry ('' is the root entry itself). */
export function entryAt(root: RunEntry, rel: string): RunEntry | undefined {
  if (rel === '' || rel === root.path) return root;
  let cur: RunEntry | undefined = root;
  while (cur) {
    const next: RunEntry | undefined = (cur.children ?? []).find((c) => c.path === rel || rel.startsWith(`${c.path}/`));
    if (!next || next.path === rel) return next;
    cur = next;
  }
  return undefined;
}

/** A run folder of a listing as a RunSource, when it holds a metrics log. */
export function sourceOfRun(hostId: string, root: RootListing, run: RunEntry): RunSource | undefined {
  const log = findMetricsLog(run);
  if (!log) return undefined;
  const files = metricsLogsOf(run);
  return {
    hostId,
    root,
    run,
    log,
    logPath: joinRemote(root.path, log.path),
    label: run.path === '' ? root.root : run.name,
    ...(files.length > 1 ? { history: files.map((f) => joinRemote(root.path, f.path)) } : {}),
  };
}

/**
 * The history a log file belongs to: the nearest folder above it (up to three levels: version_N/, lightning_logs/,
 * the run) whose metrics history holds it and more files besides.
 */
function historyOfLog(root: RootListing, log: RunEntry): { run: RunEntry; files: string[] } | undefined {
  if (!root.entry) return undefined;
  let rel = parentRel(log.path);
  for (let up = 0; up < 3; up++) {
    const dir = entryAt(root.entry, rel);
    if (dir && dir.kind === 'dir') {
      const files = metricsLogsOf(dir);
      if (files.length > 1 && files.some((f) => f.path === log.path))
        return { run: dir, files: files.map((f) => joinRemote(root.path, f.path)) };
    }
    if (rel === '') break;
    rel = parentRel(rel);
  }
  return undefined;
}

/** A metrics file of a listing as a RunSource; its folder is the run. */
export function sourceOfLog(hostId: string, root: RootListing, log: RunEntry): RunSource {
  const hist = historyOfLog(root, log);
  const run = hist?.run ?? (root.entry ? entryAt(root.entry, parentRel(log.path)) : undefined);
  const label = run && run.path !== '' ? run.name : log.name;
  return {
    hostId,
    root,
    log,
    logPath: joinRemote(root.path, log.path),
    label,
    ...(run ? { run } : {}),
    ...(hist ? { history: hist.files } : {}),
  };
}

/** Every run folder of a listing that holds a metrics log, the most recently written log first. */
export function runsWithLogs(hostId: string, listing: RunsListing, maxDepth = 3): RunSource[] {
  const out: RunSource[] = [];
  for (const root of listing.roots) {
    if (!root.entry || root.entry.role === 'checkpoint') continue;
    const stack: { e: RunEntry; depth: number }[] = [{ e: root.entry, depth: 0 }];
    while (stack.length) {
      const { e, depth } = stack.pop()!;
      if (e.kind !== 'dir' || e.role === 'checkpoint') continue;
      const src = sourceOfRun(hostId, root, e);
      if (src) out.push(src);
      if (depth < maxDepth) for (const c of e.children ?? []) stack.push({ e: c, depth: depth + 1 });
    }
  }
  // A log is found from every folder above it (root/run-a/train_log.jsonl from the root and from run-a): it belongs
  // to the shallowest folder below the root (run-b for run-b/logs/eval.jsonl), to the root only when it sits there.
  const rank = (s: RunSource) => (s.run?.path ? s.run.path.split('/').length : Number.MAX_SAFE_INTEGER);
  const best = new Map<string, RunSource>();
  for (const s of out) {
    const cur = best.get(s.logPath);
    if (!cur || rank(s) < rank(cur)) best.set(s.logPath, s);
  }
  return [...best.values()].sort(
    (a, b) => (b.log?.mtime ?? 0) - (a.log?.mtime ?? 0) || a.logPath.localeCompare(b.logPath),
  );
}

/**
 * Finds a log path in a host's listing again (after a reload), so its checkpoints can be shown. Without `label`, the
 * run folder's name (or the file's, when the listing does not have it).
 */
export function sourceOfPath(
  hostId: string,
  listing: RunsListing | undefined,
  logPath: string,
  label?: string,
): RunSource {
  for (const root of listing?.roots ?? []) {
    if (!root.entry) continue;
    const prefix = root.path.endsWith('/') ? root.path : `${root.path}/`;
    if (!logPath.startsWith(prefix)) continue;
    const log = entryAt(root.entry, logPath.slice(prefix.length));
    if (log && isFile(log)) {
      const src = sourceOfLog(hostId, root, log);
      return label ? { ...src, label } : src;
    }
  }
  return { hostId, logPath, label: label ?? (logPath.slice(logPath.lastIndexOf('/') + 1) || logPath) };
}

/** A checkpoint of a run, with the listing entry Open Args / Compare Args are given. */
export interface CheckpointSource {
  checkpoint: Checkpoint;
  hostId: string;
  root: RootListing;
  entry: RunEntry;
}

/** The run's checkpoints, oldest step first (folders below the run included, checkpoint contents not). */
export function runCheckpoints(src: RunSource, id: string): CheckpointSource[] {
  if (!src.run || !src.root) return [];
  const root = src.root;
  const checkpointOf = (e: RunEntry, label: string): CheckpointSource => ({
    hostId: src.hostId,
    root,
    entry: e,
    checkpoint: {
      path: joinRemote(root.path, e.path),
      label,
      run: id,
      // accelerate's checkpoint_N counts saves: not a step to place on the x axis
      step: trainingStep(e) ?? null,
      mtime: e.mtime,
      hasArgs: true,
    },
  });
  // A Lightning run: every version's checkpoints in the run's one order, a name two versions share with its version
  const lightning = lightningCheckpoints(src.run);
  if (lightning) return lightning.filter((c) => !c.entry.escaped).map((c) => checkpointOf(c.entry, c.label));
  const out: CheckpointSource[] = [];
  const stack = [...(src.run.children ?? [])];
  while (stack.length) {
    const e = stack.pop()!;
    if (e.role === 'checkpoint') {
      if (e.escaped) continue;
      out.push(checkpointOf(e, e.name));
    } else if (e.kind === 'dir') {
      stack.push(...(e.children ?? []));
    }
  }
  const order = (c: CheckpointSource) => c.entry.step ?? Number.MAX_SAFE_INTEGER;
  return out.sort((a, b) => order(a) - order(b) || (a.entry.mtime ?? 0) - (b.entry.mtime ?? 0));
}

/** tokens/s of a stored benchmark result, whichever writer stored it (a number, or the probe's stats). */
export function tokensPerSecond(r: Record<string, unknown>): number | undefined {
  for (const key of ['tokensPerSec', 'tokensPerS', 'tokPerS', 'tokens_per_s', 'tok_per_s']) {
    const v = r[key];
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    if (typeof v === 'object' && v !== null) {
      const m = (v as Record<string, unknown>)['median'];
      if (typeof m === 'number' && Number.isFinite(m)) return m;
    }
  }
  const nested = r['result'];
  if (typeof nested === 'object' && nested !== null && nested !== r)
    return tokensPerSecond(nested as Record<string, unknown>);
  return undefined;
}

function resultLabel(r: ThroughputResult): string | undefined {
  const label = (r as Record<string, unknown>)['label'];
  return typeof label === 'string' && label ? label : undefined;
}

/**
 * The host's benchmark history, oldest first. The result marked as the known-good reference (`referenceId`, set from
 * the dashboard) is the baseline; without one, the results recorded with the newest baseline (`baseline.throughput`)
 * are, and they are added when the results folder does not hold them. Every point carries its result's id, so the
 * dashboard can mark another.
 */
export function benchHistory(
  results: readonly ThroughputResult[],
  baseline: Baseline | undefined,
  referenceId: string | null = null,
): BenchPoint[] {
  const ids = new Set(results.map((r) => r.id));
  const useReference = referenceId !== null && ids.has(referenceId);
  const marked = new Set(useReference ? [referenceId] : (baseline?.throughput ?? []).map((t) => t.id));
  const all = new Map<string, ThroughputResult>();
  for (const r of results) all.set(r.id, r);
  for (const r of baseline?.throughput ?? []) if (!all.has(r.id)) all.set(r.id, r);
  const out: BenchPoint[] = [];
  for (const r of all.values()) {
    const tok = tokensPerSecond(r);
    const ms = Date.parse(r.at);
    if (tok === undefined || Number.isNaN(ms)) continue;
    const isBase = marked.has(r.id);
    const label = isBase && !useReference ? `baseline "${baseline?.label ?? ''}"` : resultLabel(r);
    out.push({ id: r.id, time: ms / 1000, tokPerS: tok, baseline: isBase, ...(label ? { label } : {}) });
  }
  return out.sort((a, b) => a.time - b.time);
}

/** A run's time on its host's clock (Unix seconds): from its first log point to its last. */
export interface RunSpan {
  from: number;
  to: number;
}

/**
 * The span of a run's data: the earliest and latest wall time of its points (and of its restarts); undefined when its
 * log has no wall times (then no snapshot can be placed in the run's time).
 */
export function runSpanOf(data: RunData): RunSpan | undefined {
  let from = Infinity;
  let to = -Infinity;
  for (const s of data.series) {
    const first = s.t?.[0];
    const last = s.t?.[s.t.length - 1];
    if (first !== undefined && first < from) from = first;
    if (last !== undefined && last > to) to = last;
  }
  for (const r of data.run.restarts ?? []) {
    if (r.time !== null && r.time < from) from = r.time;
    if (r.time !== null && r.time > to) to = r.time;
  }
  return from <= to ? { from, to } : undefined;
}

/**
 * Whether a snapshot of now, taken at `nowS` and reused for `cacheS` seconds, can fall inside any of these runs' time:
 * only a run still logging can grow past it, so one whose last point is older than the cache's life gets none taken
 * for it (the capture is a new login on the host).
 */
export function nowMayFallInside(spans: readonly (RunSpan | undefined)[], nowS: number, cacheS: number): boolean {
  return spans.some((s) => s !== undefined && s.to >= nowS - cacheS);
}

/** A snapshot the drift can compare: a kept baseline's, or the panel's capture of now. */
interface Snap {
  at: number;
  title: string;
  /** The title with its capture time, for a note (now's title has it already). */
  dated: string;
  snapshot: EnvSnapshot;
}

/** Without the deep part (torch, GPUs) when only one side has it: the panel's capture of now does not import torch. */
function comparable(a: EnvSnapshot, b: EnvSnapshot): [EnvSnapshot, EnvSnapshot] {
  const shallow = (x: EnvSnapshot): EnvSnapshot => {
    const out = { ...x, deep: false };
    delete (out as { deepInfo?: unknown }).deepInfo;
    return out;
  };
  return a.deep && !b.deep ? [shallow(a), b] : b.deep && !a.deep ? [a, shallow(b)] : [a, b];
}

const when = (seconds: number) => formatLocalTime(seconds * 1000);

/**
 * The drift panel of one run: what changed on its host between the environment snapshots captured during the run
 * (`span`, its first log point to its last), the earliest against the latest: kept baselines, and the panel's snapshot
 * of now (`now`, cached a few minutes) only when it was captured inside that time too — a run that ended before it
 * was captured, or began after, is not compared with it. Fewer than two snapshots in that time: no drift, and the note
 * says so (never the host's drift from another time).
 */
export function runDrift(
  run: { id: string; label: string; span: RunSpan | undefined },
  baselines: readonly Baseline[],
  now: EnvSnapshot | undefined,
  note?: string,
): RunDriftInfo {
  const span = run.span ?? null;
  const base = { run: run.id, label: run.label, span };
  const tail = note ? ` ${note}` : '';
  if (!span)
    return {
      ...base,
      drift: null,
      note: `This run's log has no wall times, so no baseline can be placed in its time.${tail}`,
    };
  const inside = (at: number) => Number.isFinite(at) && at >= span.from && at <= span.to;
  const snaps: Snap[] = baselines
    .map((b) => {
      const at = Date.parse(b.capturedAt) / 1000;
      const title = `baseline "${b.label}"`;
      return { at, title, dated: `${title} (${when(at)})`, snapshot: b.snapshot };
    })
    .filter((x) => inside(x.at));
  const nowAt = now ? Date.parse(now.capturedAt) / 1000 : NaN;
  // a baseline just captured is the panel's now too (the same capture): counted once, as the baseline. The time alone
  // cannot tell (whole seconds: a compare can follow a capture within one), so a snapshot that differs is another.
  const sameCapture = (x: Snap) =>
    x.at === nowAt && now !== undefined && computeDrift(...comparable(x.snapshot, now)).unchanged;
  if (now && inside(nowAt) && !snaps.some(sameCapture)) {
    const title = `now (${when(nowAt)})`;
    snaps.push({ at: nowAt, title, dated: title, snapshot: now });
  }
  snaps.sort((a, b) => a.at - b.at);
  const first = snaps[0];
  const last = snaps[snaps.length - 1];
  if (!first || !last || first === last) {
    const newest = [...baselines].sort((a, b) => b.capturedAt.localeCompare(a.capturedAt))[0];
    const what = first
      ? `Only ${first.dated} was captured during this run: nothing to compare it with.`
      : 'No baseline captured during this run.';
    const host =
      !first && newest
        ? ` The host's newest, "${newest.label}", is from ${formatLocalTime(Date.parse(newest.capturedAt))}.`
        : '';
    return { ...base, drift: null, note: `${what}${host}${tail}` };
  }
  const [a, b] = comparable(first.snapshot, last.snapshot);
  const d = computeDrift(a, b);
  let text = renderDriftText(d, { baseline: first.title, now: last.title });
  if (note) text += `${note}\n`;
  return {
    ...base,
    drift: {
      baseline: `${first.title} → ${last.title}`,
      capturedAt: new Date(first.at * 1000).toISOString(),
      changes: driftCount(d),
      text,
    },
    note: `${snaps.length} snapshots captured during this run: the first against the last.`,
  };
}

/** The known-good reference of a host whose results are stored under any of `storeIds` (the first one marked). */
export async function benchReferenceOf(store: BaselineStore, storeIds: readonly string[]): Promise<string | null> {
  for (const id of storeIds) {
    const r = await store.reference(id);
    if (r) return r.resultId;
  }
  return null;
}

/**
 * Marks result `resultId` as the host's known-good reference, under the store id that holds it (results are kept by
 * transport id, older ones by settings id); null unmarks under every id.
 */
export async function markBenchReference(
  store: BaselineStore,
  storeIds: readonly string[],
  resultId: string | null,
): Promise<void> {
  if (resultId === null) {
    for (const id of storeIds) await store.setReference(id, null);
    return;
  }
  for (const id of storeIds) {
    const { results } = await store.listResults(id);
    if (!results.some((r) => r.result.id === resultId)) continue;
    for (const other of storeIds) if (other !== id) await store.setReference(other, null);
    await store.setReference(id, resultId);
    return;
  }
  throw new KnownGoodError('not-found', `no benchmark result ${resultId} is kept for this host`);
}
