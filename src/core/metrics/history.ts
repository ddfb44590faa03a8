import type { RunEntry } from '../runs/listRuns';
import type { MetricsReduction, ReducedSeries } from './metricsProbe';
import { metricsLogOf } from './metricsLog';
import { EVAL_KEY } from '../whatChanged/categories';
import { restartsFromTimes, type Restart } from './restarts';

/*
 * One run, one history (issue 22). A restarted run writes its metrics to more than one file: Lightning a new
 * `version_N/metrics.csv`, the HF Trainer (and any SummaryWriter) a new TensorBoard event file per launch, a jsonl
 * logger rotated files. The run's history is the union of them, stitched by step; where steps overlap (a run resumed
 * from an earlier checkpoint logs those steps again) the later write wins, as TensorBoard shows it. Every launch after
 * the first is a restart, recorded with its step and time. The dashboard, What Changed?, `known-good why` and live
 * throughput read the history through these two functions: `metricsLogsOf` (which files, in which order) and
 * `stitchReductions` (the one history from their reductions).
 */

const isFile = (e: RunEntry) => e.kind === 'file' || (e.kind === 'symlink' && e.targetKind === 'file');

/** The launch number a name carries: version_N, an event file's creation time, a rotated log's suffix. */
function versionOf(name: string): number | undefined {
  const m = /^version_(\d+)$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/** events.out.tfevents.<unix time>.<host>…: the time the writer was created. */
function eventTime(name: string): number | undefined {
  const m = /^events\.out\.tfevents\.(\d+(?:\.\d+)?)/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/** train_log.3.jsonl or train_log.jsonl.3 → 3; train_log.jsonl → 0 (the live file is the newest). */
function rotation(name: string, stem: string): number | undefined {
  if (name === `${stem}.jsonl`) return 0;
  const m = new RegExp(`^${stem.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:\\.(\\d+)\\.jsonl|\\.jsonl\\.(\\d+))$`).exec(
    name,
  );
  return m ? Number(m[1] ?? m[2]) : undefined;
}

function parentOf(root: RunEntry, path: string): RunEntry | undefined {
  const stack: RunEntry[] = [root];
  while (stack.length) {
    const e = stack.pop()!;
    for (const c of e.children ?? []) {
      if (c.path === path) return e;
      if (c.kind === 'dir' && path.startsWith(`${c.path}/`)) stack.push(c);
    }
  }
  return undefined;
}

/**
 * The files of a run's metrics history, oldest launch first: the log `metricsLogOf` picks and the other launches' files
 * of the same kind — every `version_N/metrics.csv` of Lightning (N ascending), every TensorBoard event file of its
 * folder and of its launch folders (`runs/<date>_<host>/`, `version_N/`; by the time in the file name), every rotated
 * jsonl of its name (the highest suffix oldest, the live file last). A trainer_state.json (its log_history is the
 * whole run up to that checkpoint) and any other log are the one file.
 */
export function metricsLogsOf(run: RunEntry, maxDepth = 3): RunEntry[] {
  const best = metricsLogOf(run, maxDepth);
  if (!best) return [];
  const parent = parentOf(run, best.path);
  if (!parent) return [best];
  const grand = parent === run ? undefined : parentOf(run, parent.path);
  const name = best.name;
  if (name.toLowerCase().endsWith('.jsonl')) {
    const stem = name.replace(/(\.\d+)?\.jsonl(\.\d+)?$/, '');
    const files = (parent.children ?? [])
      .filter((e) => isFile(e) && rotation(e.name, stem) !== undefined)
      .sort((a, b) => rotation(b.name, stem)! - rotation(a.name, stem)!);
    return files.length ? files : [best];
  }
  const launchDirs = (dir: RunEntry | undefined): RunEntry[] => {
    if (!dir || !grand) return [parent];
    const sibs = (grand.children ?? []).filter((e) => e.kind === 'dir' && e.role !== 'checkpoint');
    // Lightning's version_N, or HF's runs/<date>_<host>/: each folder one launch
    if (versionOf(dir.name) !== undefined) return sibs.filter((e) => versionOf(e.name) !== undefined);
    if (grand.name === 'runs') return sibs;
    return [dir];
  };
  if (best.format === 'csv') {
    const dirs = launchDirs(parent).sort((a, b) => (versionOf(a.name) ?? 0) - (versionOf(b.name) ?? 0));
    const files = dirs.flatMap((d) => (d.children ?? []).filter((e) => isFile(e) && e.name === name));
    return files.length ? files : [best];
  }
  if (best.format === 'tensorboard') {
    const files = launchDirs(parent).flatMap((d) =>
      (d.children ?? []).filter((e) => isFile(e) && e.format === 'tensorboard' && eventTime(e.name) !== undefined),
    );
    files.sort(
      (a, b) =>
        (eventTime(a.name) ?? 0) - (eventTime(b.name) ?? 0) || a.path.localeCompare(b.path, 'en', { numeric: true }),
    );
    return files.length ? files : [best];
  }
  return [best];
}

/** A launch's part of the history: the file it wrote and that file's reduction. */
export interface HistoryPart {
  path: string;
  reduction: MetricsReduction;
}

export interface HistorySource {
  path: string;
  /** Steps this file holds that the history keeps (a later launch overwrote the rest), or null when none. */
  steps: [number, number] | null;
  points: number;
}

export interface RunHistory {
  /** The stitched series: every file's points by step, a later file's where steps overlap. */
  series: ReducedSeries[];
  /** Each launch after the first, and the restarts a file's own clock shows. */
  restarts: Restart[];
  sources: HistorySource[];
}

/**
 * The first step a file logged and (about) when: `xRange` is exact, a bucket's x is its last point's (a file of more
 * points than buckets starts before its first bucket's x); the time is the first bucket's.
 */
function firstOf(r: MetricsReduction): { x: number; t: number | null } | undefined {
  let best: { x: number; t: number | null } | undefined;
  for (const s of trainingSeries(r))
    if (s.x.length && (!best || s.x[0]! < best.x)) best = { x: s.x[0]!, t: s.t?.[0] ?? null };
  // xRange spans every series: exact only when no eval series counts steps of its own
  const lo = r.xRange?.[0];
  const exact = !r.series.some((s) => EVAL_KEY.test(s.key));
  if (best && exact && lo !== undefined && Number.isFinite(lo) && lo < best.x) best = { x: lo, t: best.t };
  return best;
}

/** The series logged at training steps (an eval series may count its own: Lightning's validate/* batches). */
function trainingSeries(r: MetricsReduction): ReducedSeries[] {
  const train = r.series.filter((s) => !EVAL_KEY.test(s.key));
  return train.length ? train : r.series;
}

function lastOf(r: MetricsReduction, below: number): { x: number; t: number | null } | undefined {
  let best: { x: number; t: number | null } | undefined;
  for (const s of trainingSeries(r))
    for (let i = s.x.length - 1; i >= 0; i--)
      if (s.x[i]! < below) {
        if (!best || s.x[i]! > best.x) best = { x: s.x[i]!, t: s.t?.[i] ?? null };
        break;
      }
  return best;
}

/**
 * The one history of a run from the reductions of its files, oldest launch first (metricsLogsOf's order). A file's
 * points at or after the first step of any later file are dropped: the later launch wrote those steps again. Each
 * later file is a restart (`new-source`; `step-back` when it began at or before a step already logged; `time-gap`
 * with its gap), at its first step.
 */
export function stitchReductions(parts: readonly HistoryPart[]): RunHistory {
  const n = parts.length;
  // cut[i]: the first step of any later launch; file i's points from there on are overwritten
  const firsts = parts.map((p) => firstOf(p.reduction));
  const cut: number[] = new Array<number>(n).fill(Infinity);
  for (let i = n - 2; i >= 0; i--) cut[i] = Math.min(cut[i + 1]!, firsts[i + 1]?.x ?? Infinity);
  const keys: string[] = [];
  const seen = new Set<string>();
  for (const p of parts)
    for (const s of p.reduction.series)
      if (!seen.has(s.key)) {
        seen.add(s.key);
        keys.push(s.key);
      }
  const sources: HistorySource[] = parts.map((p) => ({ path: p.path, steps: null, points: 0 }));
  const series: ReducedSeries[] = [];
  for (const key of keys) {
    const x: number[] = [];
    const min: number[] = [];
    const max: number[] = [];
    const last: number[] = [];
    const t: number[] = [];
    let timed = true;
    let count = 0;
    parts.forEach((p, i) => {
      const s = p.reduction.series.find((r) => r.key === key);
      if (!s) return;
      let kept = 0;
      for (let j = 0; j < s.x.length; j++) {
        if (s.x[j]! >= cut[i]!) break;
        x.push(s.x[j]!);
        min.push(s.min[j]!);
        max.push(s.max[j]!);
        last.push(s.last[j]!);
        if (s.t) t.push(s.t[j]!);
        else timed = false;
        kept++;
        const src = sources[i]!;
        src.points++;
        src.steps = src.steps ? [Math.min(src.steps[0], s.x[j]!), Math.max(src.steps[1], s.x[j]!)] : [s.x[j]!, s.x[j]!];
      }
      count += kept === s.x.length ? s.count : kept;
    });
    if (!x.length) continue;
    series.push({
      key,
      x,
      min,
      max,
      last,
      ...(timed ? { t } : {}),
      count,
      lastX: x[x.length - 1]!,
      lastValue: last[last.length - 1]!,
    });
  }
  const restarts: Restart[] = [];
  for (let i = 1; i < n; i++) {
    const f = firsts[i];
    if (!f) continue;
    let prevLast: { x: number; t: number | null } | undefined;
    for (let j = i - 1; j >= 0 && !prevLast; j--) prevLast = lastOf(parts[j]!.reduction, Infinity);
    const before = lastOf(parts[i - 1]!.reduction, Math.min(f.x, cut[i - 1]!));
    const gap = f.t !== null && before?.t != null ? f.t - before.t : null;
    const signals: Restart['signals'] = ['new-source'];
    if (prevLast && f.x <= prevLast.x) signals.push('step-back');
    if (gap !== null && gap > 5) signals.push('time-gap');
    restarts.push({
      step: f.x,
      time: f.t,
      prevStep: before?.x ?? null,
      gapSeconds: gap,
      signals,
      source: parts[i]!.path,
    });
  }
  // restarts inside one file (a jsonl a resumed run appended to) show on its clock
  const clock = [...series].filter((s) => s.t).sort((a, b) => b.x.length - a.x.length)[0];
  if (clock)
    for (const r of restartsFromTimes(clock.x, clock.t)) {
      // the same restart when a launch already found lies between the points either side of the gap
      const known = restarts.some((q) => q.step === r.step || (q.step > (r.prevStep ?? r.step) && q.step <= r.step));
      if (!known) restarts.push(r);
    }
  restarts.sort((a, b) => a.step - b.step);
  return { series, restarts, sources };
}

/**
 * The stitched history as one reduction, for what reads one: the newest file's offsets (the one that grows), the lines
 * of all, the series of the history; a preview (`sample`) when any part is one, its bytes those of all the files.
 */
export function historyReduction(parts: readonly HistoryPart[], h: RunHistory): MetricsReduction {
  const newest = parts[parts.length - 1]!.reduction;
  const sampled = parts.some((p) => p.reduction.sample !== null);
  const sizeOf = (r: MetricsReduction) => r.size ?? 0;
  return {
    ...newest,
    lines: parts.reduce((a, p) => a + p.reduction.lines, 0),
    series: h.series,
    keys: [...new Set(parts.flatMap((p) => p.reduction.keys))],
    sample: sampled
      ? {
          bytes: parts.reduce((a, p) => a + (p.reduction.sample?.bytes ?? sizeOf(p.reduction)), 0),
          windows: parts.reduce((a, p) => a + (p.reduction.sample?.windows ?? 1), 0),
          of: parts.reduce((a, p) => a + (p.reduction.sample?.of ?? sizeOf(p.reduction)), 0),
        }
      : null,
  };
}
