import { envChangeId, PYTHON_CHANGE_ID } from '../bisect/env';
import type { ArgValue } from '../args/argsProbe';
import { diffFlat, flattenArgs, inlineJson, sameArg } from '../args/diff';
import { computeDrift, buildChange, type Drift } from '../baselines/drift';
import type { Baseline, ThroughputResult } from '../baselines/store';
import { formatRate } from '../bench/compare';
import type { ReducedSeries } from '../metrics/metricsProbe';
import { restartsFromTimes, type Restart } from '../metrics/restarts';
import { pointTimes, withDerivedSpeed } from '../metrics/speedFromTime';
import {
  argCategory,
  CATEGORY_TEXT,
  CATEGORY_WEIGHT,
  CATEGORY_WHY,
  isBookkeepingArg,
  envCategory,
  packageCategory,
  speedDirection,
  throughputRank,
} from './categories';
import { findChangepoints, medianOf, tooLittleAfterRestart, tooLittleHeadline, type Changepoint } from './changepoints';
import type { DataFingerprint, GitState, LaunchRecord, LaunchRecords } from './factsProbe';
import type { ArgsFact, CheckpointFact, WhatChangedFacts } from './facts';
import type {
  ChangeTime,
  CheckpointLink,
  CosmeticChange,
  EvidenceLink,
  ReferencePoint,
  SeriesChangepoints,
  Suspect,
  SuspectCategory,
  SuspectSource,
  ThroughputSummary,
  UnknownFact,
  WhatChangedReport,
} from './model';
import { restoredEnvProbePath } from '../restore/plan';

/** A throughput this much lower (or less) than the reference is a drop. */
export const DROP_RATIO = 0.9;
/** Points for a change that lands where a metric shifted, and against one known to come after the shift. */
export const COINCIDES_POINTS = 50;
export const AFTER_SHIFT_POINTS = -25;
/** Series shorter than this are not searched for changepoints. */
const MIN_POINTS = 20;

export const CHANGEPOINT_WHY =
  'binary segmentation on de-stalled bucket medians (the warm-up after each launch left out; a point more than 4σ ' +
  'from the running median of its neighbours on both sides is a stall — a save, an eval — and left out; σ from the ' +
  'MAD of the residuals); a shift is kept when it saves more than max(20, 3 ln n)·σ², moves the median level by at ' +
  'least 5%, spans at least 1% of the points on each side, is a jump rather than a slope, and — away from a restart — ' +
  "does not wander back: neither side sits at the other side's level for 5% of the points)";

// ------------------------------------------------------------------------------------------------ changepoints

/**
 * The changepoints of each series long enough. `launches`: the steps where a restart's launch began (the stitched
 * history's restarts); a series with wall times adds the restarts its own clock shows.
 */
export function seriesChangepoints(
  series: readonly ReducedSeries[],
  launches: readonly number[] = [],
): SeriesChangepoints[] {
  const out: SeriesChangepoints[] = [];
  for (const s of series) {
    if (s.x.length < MIN_POINTS) continue;
    const own = restartsFromTimes(s.x, s.t).map((r) => r.step);
    const all = [...new Set([...launches, ...own])].sort((a, b) => a - b);
    const times = pointTimes(s, series);
    const r = findChangepoints(s.x, s.last, { launches: all, ...(times ? { times } : {}) });
    out.push({
      key: s.key,
      throughput: throughputRank(s.key) > 0,
      points: r.points,
      noise: r.noise,
      changepoints: r.changepoints,
    });
  }
  return out.sort(
    (a, b) => throughputRank(b.key) - throughputRank(a.key) || Number(b.throughput) - Number(a.throughput),
  );
}

/** The steps where the run's launches after the first began (the stitched history's restarts). */
export function launchesOf(log: WhatChangedFacts['log']): number[] {
  return (log?.restarts ?? []).map((r) => r.step);
}

/** The log's series, with steps/s (and tokens/s) from its wall times when it logs no speed of its own. */
export function logSeriesOf(log: WhatChangedFacts['log']): ReducedSeries[] {
  return log ? withDerivedSpeed(log.reduction.series, launchesOf(log)) : [];
}

/** How much slower the run got at a changepoint (>1: slower), for a speed series; 0 for a speed-up. */
function slowdownOf(key: string, c: Changepoint): number {
  const dir = speedDirection(key);
  if (!dir || c.ratio === null || c.ratio <= 0) return 0;
  const speedRatio = dir > 0 ? c.ratio : 1 / c.ratio;
  return speedRatio < 1 ? 1 / speedRatio : 0;
}

/**
 * The changepoint that defines "the" shift: the largest slowdown on the first throughput series that has one, else
 * its largest change (a rise, which explains no regression), else the clearest on any series.
 */
export function mainChangepoint(series: readonly SeriesChangepoints[]): { key: string; cp: Changepoint } | undefined {
  const size = (c: Changepoint) => (c.ratio !== null && c.ratio > 0 ? Math.abs(Math.log(c.ratio)) : c.sigmas);
  const tps = series.filter((s) => s.throughput && s.changepoints.length);
  for (const tp of tps) {
    // A slowdown that came with a restart is the one to explain: the restart is a fact (new process, new args,
    // new code), a later dip of a noisy loop is not (plain-host-sync: 0.77× at the restart, 0.74× at step 900
    // after a bump back up). It wins when it is a slowdown of DROP_RATIO or more.
    const atLaunch = tp.changepoints
      .filter((c) => c.launch !== undefined && slowdownOf(tp.key, c) >= 1 / DROP_RATIO)
      .sort((a, b) => slowdownOf(tp.key, b) - slowdownOf(tp.key, a))[0];
    if (atLaunch) return { key: tp.key, cp: atLaunch };
    const slow = [...tp.changepoints].sort((a, b) => slowdownOf(tp.key, b) - slowdownOf(tp.key, a))[0]!;
    if (slowdownOf(tp.key, slow) > 0) return { key: tp.key, cp: slow };
  }
  const tp = tps[0];
  if (tp) {
    const cp = [...tp.changepoints].sort((a, b) => size(b) - size(a))[0]!;
    return { key: tp.key, cp };
  }
  let best: { key: string; cp: Changepoint } | undefined;
  for (const s of series)
    for (const cp of s.changepoints) if (!best || cp.sigmas > best.cp.sigmas) best = { key: s.key, cp };
  return best;
}

// ------------------------------------------------------------------------------------------------ reference

function link(c: CheckpointFact): CheckpointLink {
  return { label: c.label, path: c.argsPath, step: c.step };
}

function isoOf(epoch: number | null): string {
  return epoch === null ? 'unknown time' : new Date(epoch * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function epochOf(iso: string): number | null {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t / 1000;
}

/** The checkpoint of a time: the last saved by then, else (a reference older than every checkpoint) the earliest. */
function lastCheckpointAtOrBefore(cks: readonly CheckpointFact[], time: number): CheckpointFact | undefined {
  let best: CheckpointFact | undefined;
  for (const c of cks) if (c.mtime !== null && c.mtime <= time) best = c;
  return best ?? cks[0];
}

/** The known-good reference, in the issue's order of preference; the reason is part of the answer. */
export function pickReference(
  facts: Pick<WhatChangedFacts, 'checkpoints' | 'env' | 'bench' | 'marks' | 'chosenBaselineId'>,
  main: { key: string; cp: Changepoint } | undefined,
): Omit<ReferencePoint, 'baseline'> {
  const cks = facts.checkpoints;
  const markedBench = facts.marks.benchId ? facts.bench.find((b) => b.id === facts.marks.benchId) : undefined;
  if (markedBench) {
    const time = epochOf(markedBench.at);
    const c = time !== null ? lastCheckpointAtOrBefore(cks, time) : undefined;
    return {
      kind: 'marked-bench',
      label: `benchmark ${markedBench.id}`,
      why: `the benchmark result marked known-good (${markedBench.at})`,
      checkpoint: c ? link(c) : null,
      time,
    };
  }
  const markedId = facts.chosenBaselineId ?? facts.marks.baselineId;
  const marked = markedId ? facts.env.baselines.find((b) => b.id === markedId) : undefined;
  if (marked) {
    const time = epochOf(marked.capturedAt);
    const c = time !== null ? lastCheckpointAtOrBefore(cks, time) : undefined;
    return {
      kind: 'marked-baseline',
      label: `baseline ${JSON.stringify(marked.label)}`,
      why: `${facts.chosenBaselineId ? 'the baseline asked for' : 'the baseline marked known-good'} (captured ${marked.capturedAt})`,
      checkpoint: c ? link(c) : null,
      time,
    };
  }
  if (main) {
    const before = [...cks].reverse().find((c) => c.step <= main.cp.at);
    if (before) {
      return {
        kind: 'changepoint',
        label: before.label,
        why: `the last checkpoint before ${main.key} shifted at step ${main.cp.at}`,
        checkpoint: link(before),
        time: before.mtime,
      };
    }
  }
  const first = cks[0];
  if (first) {
    return {
      kind: 'earliest',
      label: first.label,
      why: main
        ? `no checkpoint before the shift at step ${main.cp.at}: the earliest checkpoint`
        : 'no benchmark or baseline marked known-good and no changepoint: the earliest checkpoint',
      checkpoint: link(first),
      time: first.mtime,
    };
  }
  return {
    kind: 'none',
    label: 'none',
    why: 'no checkpoint, no marked baseline or benchmark',
    checkpoint: null,
    time: null,
  };
}

/** The environment baseline to compare now with: the marked one, else the newest captured by the reference time. */
export function pickBaseline(
  facts: Pick<WhatChangedFacts, 'env' | 'marks' | 'chosenBaselineId'>,
  refTime: number | null,
): { baseline: Baseline; why: string } | undefined {
  const all = facts.env.baselines; // newest first
  const wanted = facts.chosenBaselineId ?? facts.marks.baselineId;
  const marked = wanted ? all.find((b) => b.id === wanted) : undefined;
  if (marked) return { baseline: marked, why: facts.chosenBaselineId ? 'asked for' : 'marked known-good' };
  if (!all.length) return undefined;
  if (refTime !== null) {
    const before = all.find((b) => (epochOf(b.capturedAt) ?? Infinity) <= refTime);
    if (before) return { baseline: before, why: 'the newest captured by the reference time' };
  }
  return {
    baseline: all[all.length - 1]!,
    why: 'the oldest there is (captured after the reference: changes before it are not seen)',
  };
}

// ------------------------------------------------------------------------------------------------ args

export function showValue(v: ArgValue | undefined): string {
  if (v === undefined) return '(absent)';
  if (typeof v === 'string') return v.length > 80 ? `${v.slice(0, 77)}…` : v;
  // as Compare Args writes it: NaN as NaN (JSON.stringify would say null)
  const s = inlineJson(v);
  return s.length > 80 ? `${s.slice(0, 77)}…` : s;
}

/** `a/b/openwebtext-10k` → `openwebtext-10k` when both sides are paths that differ in their last part. */
function showPair(a: ArgValue | undefined, b: ArgValue | undefined): [string, string] {
  if (typeof a === 'string' && typeof b === 'string' && a.includes('/') && b.includes('/')) {
    const ba = a.split('/').filter(Boolean).pop() ?? a;
    const bb = b.split('/').filter(Boolean).pop() ?? b;
    if (ba !== bb) return [ba, bb];
  }
  return [showValue(a), showValue(b)];
}

const PATHISH_KEY = /data|dataset|corpus|tokeni[sz]er|vocab|shard|train_file|val_file|eval_file|path|dir|root/i;
const DIR_KEY = /^(data_?(dir|root|path)|dataset_?(dir|root)|root)$/i;

/** Remote paths the args name (absolute, or a name inside data_dir), for fingerprints. */
export function dataPathsOf(args: ArgValue | null): Map<string, string> {
  const flat = args === null ? new Map<string, ArgValue>() : flattenArgs(args);
  const base = [...flat].find(([k, v]) => DIR_KEY.test(k.split('.').pop() ?? k) && typeof v === 'string');
  const out = new Map<string, string>();
  for (const [k, v] of flat) {
    if (typeof v !== 'string' || !PATHISH_KEY.test(k.split('.').pop() ?? k)) continue;
    if (argCategory(k, null, null) === 'cosmetic') continue; // by its key: data in /tmp is still data
    if (v.startsWith('/')) out.set(k, v);
    else if (base && /^[\w.-]+(\/[\w.-]+)*$/.test(v) && !v.includes('..') && typeof base[1] === 'string') {
      out.set(k, `${base[1].replace(/\/+$/, '')}/${v}`);
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------ analysis

interface Window {
  steps: { from: number; to: number };
  time: { from: number; to: number } | null;
}

/** Where (in steps) and when (in remote time) a changepoint happened, as the checkpoints and the log tell. */
function windowOf(cp: Changepoint, cks: readonly CheckpointFact[], series: ReducedSeries | undefined): Window {
  const a = [...cks].reverse().find((c) => c.step <= cp.at);
  const b = cks.find((c) => c.step >= cp.firstAfter);
  let from = a?.mtime ?? null;
  let to = b?.mtime ?? null;
  if (series?.t) {
    const i = series.x.indexOf(cp.at);
    const j = series.x.indexOf(cp.firstAfter);
    const ta = i >= 0 ? series.t[i] : undefined;
    const tb = j >= 0 ? series.t[j] : undefined;
    if (ta !== undefined) from = from === null ? ta : Math.min(from, ta);
    if (tb !== undefined) to = to === null ? tb : Math.max(to, tb);
  }
  return {
    steps: { from: a?.step ?? cp.at, to: b?.step ?? cp.firstAfter },
    time: from !== null && to !== null ? { from, to } : null,
  };
}

/**
 * A change somewhere in steps (from, to] lands on the shift: the shift lies in (at, firstAfter], or in the bucket
 * before when that bucket mixed both levels, so the two intervals overlap.
 */
function atShift(from: number, to: number, cp: Changepoint): boolean {
  return from < cp.firstAfter && to > cp.at - (cp.firstAfter - cp.at);
}

interface Draft {
  source: SuspectSource;
  category: SuspectCategory | 'cosmetic';
  title: string;
  detail: string;
  when: ChangeTime;
  evidence: EvidenceLink[];
  cosmeticWhy?: string;
}

function scoreOf(
  d: Draft,
  main: { key: string; cp: Changepoint } | undefined,
  win: Window | undefined,
): Pick<Suspect, 'score' | 'reasons' | 'coincides' | 'ruledOut'> {
  const cat = d.category as SuspectCategory;
  const reasons = [
    {
      points: CATEGORY_WEIGHT[cat],
      why: `${CATEGORY_TEXT[cat]} (known to move throughput: weight ${CATEGORY_WEIGHT[cat]}): ${CATEGORY_WHY[cat]}`,
    },
  ];
  if (cat === 'other') reasons[0]!.why = `${CATEGORY_TEXT[cat]} (weight ${CATEGORY_WEIGHT[cat]}): ${CATEGORY_WHY[cat]}`;
  let coincides = false;
  let ruledOut = false;
  const timingRulesOut = (why: string) => {
    ruledOut = true;
    reasons.push({ points: AFTER_SHIFT_POINTS, why });
  };
  if (main && win) {
    const at = `${main.key} shifted at step ${main.cp.at} (${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)})`;
    const s = d.when.steps;
    const t = d.when.time;
    if (s) {
      const lo = main.cp.at - (main.cp.firstAfter - main.cp.at);
      if (atShift(s.from, s.to, main.cp)) {
        coincides = true;
        reasons.push({ points: COINCIDES_POINTS, why: `changed between steps ${s.from} and ${s.to}, where ${at}` });
      } else if (s.from >= main.cp.firstAfter) {
        timingRulesOut(`changed after the shift (from step ${s.from} on; ${at})`);
      } else if (s.to <= lo) {
        timingRulesOut(`changed before the shift and the level held (${at})`);
      }
    } else if (t && win.time) {
      // a window of a second is a point: a commit's time is whole seconds
      const point = t.to - t.from <= 1;
      if (point && t.to > win.time.from && t.from <= win.time.to) {
        coincides = true;
        reasons.push({
          points: COINCIDES_POINTS,
          why: `changed at ${isoOf(t.from)}, between ${isoOf(win.time.from)} and ${isoOf(win.time.to)}, where ${at}`,
        });
      } else if (t.from > win.time.to) {
        timingRulesOut(`changed after the shift (${isoOf(t.from)}; ${at})`);
      } else if (point && t.to <= win.time.from) {
        reasons.push({
          points: AFTER_SHIFT_POINTS,
          why: `changed before the shift and the level held (${isoOf(t.to)})`,
        });
      } else {
        reasons.push({ points: 0, why: `when it changed is not known closer than ${d.when.text}` });
      }
    } else {
      reasons.push({ points: 0, why: 'when it changed is not known' });
    }
  }
  return { score: reasons.reduce((n, r) => n + r.points, 0), reasons, coincides, ruledOut };
}

function formatLevel(n: number): string {
  return Math.abs(n) >= 1000 ? formatRate(n) : Number(n.toPrecision(3)).toString();
}

export function formatRatio(r: number): string {
  return r >= 10 ? r.toFixed(1) : r.toFixed(2);
}

function argsDrafts(
  facts: WhatChangedFacts,
  ref: CheckpointFact | undefined,
  now: CheckpointFact | undefined,
  main: { key: string; cp: Changepoint } | undefined,
  fingerprints: Map<string, DataFingerprint>,
  unknown: UnknownFact[],
): Draft[] {
  if (!ref || !now || ref === now) return [];
  const byLabel = new Map(facts.args.map((a) => [a.label, a]));
  const ra = byLabel.get(ref.label);
  const na = byLabel.get(now.label);
  if (!ra?.args || !na?.args) {
    const missing = [ra, na].find((a) => !a?.args);
    unknown.push({
      fact: `args of ${missing?.label ?? (ra ? now.label : ref.label)}`,
      why: missing?.error ?? 'not read',
    });
    return [];
  }
  const fa = flattenArgs(ra.args);
  const fb = flattenArgs(na.args);
  const readable = facts.args.filter((a): a is ArgsFact & { args: ArgValue } => a.args !== null);
  const flats = readable.map((a) => ({ fact: a, flat: flattenArgs(a.args) }));
  const out: Draft[] = [];
  const ckByLabel = new Map(facts.checkpoints.map((c) => [c.label, c]));
  const nowPaths = dataPathsOf(na.args);
  const refPaths = dataPathsOf(ra.args);
  // the diff Compare Args shows (the evidence link opens it), on the values as read: data paths are looked up by them
  const d = diffFlat(fa, fb);
  const keys = [...d.changed, ...d.added, ...d.removed].map((c) => c.key).sort();
  for (const key of keys) {
    const va = fa.get(key);
    const vb = fb.get(key);
    // every step where the value changed between two checkpoints read; the one at the shift, else the last
    const transitions: { from: ArgsFact; to: ArgsFact }[] = [];
    for (let i = 1; i < flats.length; i++) {
      if (!sameArg(flats[i - 1]!.flat.get(key), flats[i]!.flat.get(key)))
        transitions.push({ from: flats[i - 1]!.fact, to: flats[i]!.fact });
    }
    const at =
      (main && transitions.find((t) => atShift(t.from.step, t.to.step, main.cp))) ??
      transitions[transitions.length - 1];
    const [sa, sb] = showPair(va, vb);
    const title = `${key} ${sa} → ${sb}`;
    const ca = at ? ckByLabel.get(at.from.label) : ref;
    const cb = at ? ckByLabel.get(at.to.label) : now;
    const when: ChangeTime = at
      ? {
          text: `${at.from.label} → ${at.to.label}`,
          steps: { from: at.from.step, to: at.to.step },
          ...(ca?.mtime != null && cb?.mtime != null ? { time: { from: ca.mtime, to: cb.mtime } } : {}),
        }
      : { text: `${ref.label} → ${now.label}`, steps: { from: ref.step, to: now.step } };
    const evidence: EvidenceLink[] = [
      {
        kind: 'args-diff',
        title: `args ${ca?.label ?? ref.label} → ${cb?.label ?? now.label}`,
        hostId: facts.host.id,
        a: link(ca ?? ref),
        b: link(cb ?? now),
      },
    ];
    const detailBits = [`${key} was ${showValue(va)} at ${ref.label} and is ${showValue(vb)} at ${now.label}`];
    if (transitions.length > 1) detailBits.push(`it changed ${transitions.length} times between the checkpoints read`);
    for (const p of [nowPaths.get(key)]) {
      const path = p !== undefined ? fingerprints.get(p) : undefined;
      if (path) {
        evidence.push({ kind: 'file', title: path.path, hostId: facts.host.id, path: path.path });
        detailBits.push(describeFingerprint(path));
      }
    }
    // what the data holds on both sides: rows and the length of a sample (padding shows as a shorter real length)
    const before = refPaths.get(key);
    const fpBefore = before !== undefined ? fingerprints.get(before) : undefined;
    const fpNow = nowPaths.get(key) !== undefined ? fingerprints.get(nowPaths.get(key)!) : undefined;
    const shapes = [fpBefore, fpNow].map((f) => (f ? describeSamples(f) : null));
    if (shapes[0] || shapes[1]) detailBits.push(`samples: ${shapes[0] ?? 'not read'} → ${shapes[1] ?? 'not read'}`);
    const category = argCategory(key, va, vb);
    out.push({
      source: 'args',
      category,
      title,
      detail: detailBits.join('; '),
      when,
      evidence,
      ...(category === 'cosmetic'
        ? {
            cosmeticWhy: isBookkeepingArg(key)
              ? 'resume bookkeeping: where a launch starts, ends, resumes from and writes'
              : 'names, places or times of the run itself',
          }
        : {}),
    });
  }
  return out;
}

/** A data path's files as rows × length of a sample (the first file that says): `128 rows of 129, real 53.4 (padded)`. */
export function describeSamples(f: DataFingerprint): string | null {
  for (const s of f.samples ?? []) {
    if (typeof s.rows === 'number' && typeof s.rowLength === 'number') {
      const real =
        typeof s.meanLength === 'number' && s.meanLength < s.rowLength ? `, real ${s.meanLength} (padded)` : '';
      return `${s.file}: ${s.rows} rows of ${s.rowLength}${real}`;
    }
    // a token file's sequences (Megatron .idx): how long a sample is, which is what moves tokens a step
    if (typeof s.rows === 'number' && typeof s.meanLength === 'number')
      return `${s.file}: ${s.rows} sequences, ${s.meanLength} tokens on average${typeof s.medianLength === 'number' ? ` (median ${s.medianLength})` : ''}`;
    if (typeof s.rows === 'number')
      return `${s.file}: ${s.rows} rows${typeof s.meanLineBytes === 'number' ? ` of ${s.meanLineBytes} bytes` : ''}${columnsOf(s)}`;
    if (typeof s.tokensIfUint16 === 'number') return `${s.file}: ${s.tokensIfUint16} tokens (as uint16)`;
  }
  return null;
}

/** A parquet or Arrow file's columns, the first few with their types: ` (input_ids list<int32>, text string, …)`. */
function columnsOf(s: { columns?: string[] | undefined; types?: string[] | undefined }): string {
  if (!s.columns?.length) return '';
  const shown = s.columns.slice(0, 4).map((c, i) => (s.types?.[i] ? `${c} ${s.types[i]}` : c));
  return ` (${shown.join(', ')}${s.columns.length > 4 ? `, … ${s.columns.length} columns` : ''})`;
}

function describeFingerprint(f: DataFingerprint): string {
  if (!f.exists) return `${f.path}: ${f.error ?? 'not found'}`;
  const bits = [f.kind === 'dir' ? `${f.files ?? '?'} files` : `${f.size ?? '?'} bytes`];
  const m = f.kind === 'dir' ? (f.newestMtime ?? f.mtime) : f.mtime;
  if (m !== null) bits.push(`modified ${isoOf(m)}`);
  return `${f.path} now: ${bits.join(', ')}`;
}

/** A package suspect's bisect change id: `package:<name>` (the package bisect, against the restored env). */
const PACKAGE_CHANGE = 'package:';

function envDrafts(
  facts: WhatChangedFacts,
  base: { baseline: Baseline; why: string },
  drift: Drift,
  unknown: UnknownFact[],
): Draft[] {
  const now = facts.env.now!;
  const b = base.baseline;
  const bTime = epochOf(b.capturedAt);
  const nTime = epochOf(now.capturedAt);
  const title = `baseline ${JSON.stringify(b.label)}`;
  const sinceBaseline: ChangeTime = {
    text: `between ${title} (${b.capturedAt}) and now`,
    ...(bTime !== null && nTime !== null ? { time: { from: bTime, to: nTime } } : {}),
  };
  const envLink: EvidenceLink = {
    kind: 'env-diff',
    title: `environment now vs ${title}`,
    hostId: facts.host.id,
    baselineId: b.id,
  };
  const restored = facts.probe?.stats.some((s) => s.exists && s.path === restoredEnvProbePath(b.label)) ?? false;
  const out: Draft[] = [];
  const add = (
    category: Draft['category'],
    t: string,
    detail: string,
    when: ChangeTime = sinceBaseline,
    cosmeticWhy?: string,
    bisectChange?: string,
  ) =>
    out.push({
      source: 'env',
      category,
      title: t,
      detail,
      when,
      // an env variable or the interpreter can be put back one at a time: the bisect measures whether it matters
      evidence: bisectChange
        ? [
            envLink,
            {
              kind: 'bisect',
              title: 'Confirm by bisect',
              hostId: facts.host.id,
              baselineId: b.id,
              change: bisectChange,
              ...(bisectChange.startsWith(PACKAGE_CHANGE) ? { packages: true } : {}),
            },
          ]
        : [envLink],
      ...(cosmeticWhy ? { cosmeticWhy } : {}),
    });
  const tv = drift.torch.version;
  if (tv || drift.torch.cuda || drift.torch.gitVersion) {
    const build = tv ? buildChange(tv.from, tv.to) : undefined;
    const text = tv
      ? `torch ${tv.from ?? 'none'} → ${tv.to ?? 'none'}${build ? ` (build ${build})` : ''}`
      : 'torch build';
    const bits = Object.entries(drift.torch).map(([k, c]) => `${k} ${c.from ?? 'none'} → ${c.to ?? 'none'}`);
    const stat = facts.probe?.stats.find((s) => now.torch.location && s.path === `${now.torch.location}/version.py`);
    const when: ChangeTime =
      stat?.mtime != null && (bTime === null || stat.mtime > bTime)
        ? { text: `torch installed ${isoOf(stat.mtime)}`, time: { from: stat.mtime, to: stat.mtime } }
        : sinceBaseline;
    add('torch-build', text, bits.join('; '), when);
  }
  for (const list of [drift.packages.changed, drift.packages.added, drift.packages.removed]) {
    const others: string[] = [];
    for (const p of list) {
      if (p.name === 'torch') continue;
      const cat = packageCategory(p.name);
      const t = `${p.name} ${p.from ?? '(absent)'} → ${p.to ?? '(absent)'}`;
      if (cat === 'other') others.push(t);
      // a package can be bisected once the baseline's env was restored (Restore Known Good… → Run)
      else add(cat, t, `package ${t}`, sinceBaseline, undefined, restored ? `${PACKAGE_CHANGE}${p.name}` : undefined);
    }
    if (others.length)
      add(
        'other',
        `${others.length} other package${others.length === 1 ? '' : 's'} changed`,
        others.slice(0, 12).join(', '),
      );
  }
  if (drift.cuda.driver)
    add(
      'driver',
      `driver ${drift.cuda.driver.from ?? 'none'} → ${drift.cuda.driver.to ?? 'none'}`,
      'GPU driver version',
    );
  if (drift.cuda.nvcc)
    add('torch-build', `nvcc ${drift.cuda.nvcc.from ?? 'none'} → ${drift.cuda.nvcc.to ?? 'none'}`, 'CUDA toolkit');
  if (drift.gpus.count || drift.gpus.changed.length) {
    const bits = drift.gpus.changed
      .filter((g) => g.field !== 'driver_version')
      .map((g) => `GPU ${g.index} ${g.field} ${g.from ?? 'none'} → ${g.to ?? 'none'}`);
    if (drift.gpus.count) bits.unshift(`${drift.gpus.count.from} → ${drift.gpus.count.to} GPUs`);
    if (bits.length) add('hardware', bits[0]!, bits.join('; '));
  }
  for (const e of drift.env) {
    const cat = envCategory(e.name);
    const t = e.redacted
      ? `${e.name} ${e.kind} (secret)`
      : e.kind === 'added'
        ? `${e.name}=${e.to ?? ''} added`
        : e.kind === 'removed'
          ? `${e.name} removed (was ${e.from ?? ''})`
          : `${e.name} ${e.from ?? ''} → ${e.to ?? ''}`;
    add(
      cat,
      t,
      `environment variable ${t}`,
      sinceBaseline,
      cat === 'cosmetic' ? 'a variable that does not change speed' : undefined,
      cat === 'cosmetic' ? undefined : envChangeId(e.name),
    );
  }
  const scripts = new Map(now.scripts.files.map((f) => [f.path, f]));
  for (const [kind, list] of [
    ['edited', drift.scripts.changed],
    ['new', drift.scripts.added],
    ['gone', drift.scripts.removed],
  ] as const) {
    for (const p of list) {
      const m = scripts.get(p)?.mtime ?? null;
      const when: ChangeTime =
        m !== null && kind !== 'gone' ? { text: `file modified ${isoOf(m)}`, time: { from: m, to: m } } : sinceBaseline;
      out.push({
        source: 'code',
        category: 'code',
        title: `${p} ${kind}`,
        detail: `training script ${p} ${kind === 'edited' ? 'has another hash than at the baseline' : kind}`,
        when,
        evidence: [envLink, { kind: 'file', title: p, hostId: facts.host.id, path: p }],
      });
    }
  }
  const measured = new Set(now.caches.map((c) => c.name));
  for (const c of drift.caches) {
    // a cache the baseline had and this snapshot did not look at is not known to be lost
    if (!measured.has(c.name)) {
      unknown.push({
        fact: `compile cache ${c.name} (${c.path})`,
        why: 'not measured now (not among the cache folders given)',
      });
      continue;
    }
    const lost = c.change === 'emptied' || c.change === 'disappeared' || c.change === 'moved';
    out.push({
      source: 'caches',
      category: lost ? 'compile-cache' : 'cosmetic',
      title: `${c.name} compile cache ${c.change} (${c.files.from ?? 'none'} → ${c.files.to ?? 'none'} files)`,
      detail: `${c.path}: ${c.change}`,
      when: sinceBaseline,
      evidence: [envLink],
      ...(lost ? {} : { cosmeticWhy: 'a cache that grew is in use' }),
    });
  }
  if (drift.python.version || drift.python.executable)
    add(
      'python',
      `python ${drift.python.version?.from ?? ''} → ${drift.python.version?.to ?? ''}`.trim(),
      Object.entries(drift.python)
        .map(([k, c]) => `${k} ${c.from ?? ''} → ${c.to ?? ''}`)
        .join('; '),
      sinceBaseline,
      undefined,
      drift.python.executable ? PYTHON_CHANGE_ID : undefined,
    );
  const hostBits = Object.entries(drift.host).map(([k, c]) => `${k} ${c.from ?? 'none'} → ${c.to ?? 'none'}`);
  if (hostBits.length) add('host', hostBits[0]!, hostBits.join('; '));
  return out;
}

function gitDrafts(facts: WhatChangedFacts, refTime: number | null, unknown: UnknownFact[]): Draft[] {
  const out: Draft[] = [];
  const seen = new Set<string>();
  for (const g of facts.probe?.git ?? []) {
    if (g.error || !g.repo) {
      unknown.push({ fact: `git state of ${g.path}`, why: g.error ?? 'no repository' });
      continue;
    }
    if (seen.has(g.repo)) continue;
    seen.add(g.repo);
    const gitLink: Extract<EvidenceLink, { kind: 'git' }> = {
      kind: 'git',
      title: `git ${g.repo}`,
      hostId: facts.host.id,
      repo: g.repo,
      since: refTime,
    };
    if (g.commitsSince && g.codeChanges.length) {
      out.push(codeDraft(facts, g, gitLink));
    } else if (g.commitsSince) {
      const when: ChangeTime =
        g.headTime !== null
          ? { text: `HEAD committed ${isoOf(g.headTime)}`, time: { from: g.headTime, to: g.headTime + 1 } }
          : { text: 'since the reference' };
      out.push({
        source: 'code',
        category: 'code',
        title: `${g.commitsSince} commit${g.commitsSince === 1 ? '' : 's'} in ${g.repo} since the reference`,
        detail: `HEAD ${g.head?.slice(0, 10) ?? '?'}${g.branch ? ` on ${g.branch}` : ''}; files: ${g.changedSince.slice(0, 10).join(', ') || 'none'}`,
        when,
        evidence: [gitLink],
      });
    }
    if (g.dirty) {
      out.push({
        source: 'code',
        category: 'code',
        title: `uncommitted changes in ${g.repo}`,
        detail: `HEAD ${g.head?.slice(0, 10) ?? '?'}${g.branch ? ` on ${g.branch}` : ''}, modified: ${g.dirtyFiles.slice(0, 10).join(', ')}`,
        when: { text: 'not known (uncommitted)' },
        evidence: [gitLink],
      });
    }
  }
  return out;
}

/** `--key value`, `--key=value` and bare `--flag` of a command line; the program and positionals left out. */
export function flagsOf(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!/^--?[A-Za-z]/.test(a)) continue;
    const eq = a.indexOf('=');
    if (eq > 0) out.set(a.slice(0, eq), a.slice(eq + 1));
    else if (i + 1 < argv.length && !/^--?[A-Za-z]/.test(argv[i + 1]!)) out.set(a, argv[++i]!);
    else out.set(a, 'true');
  }
  return out;
}

/** A launch record as lines to compare side by side: one fact a line, sorted, so a diff shows what differs. */
export function launchText(r: LaunchRecord): string {
  const lines = [
    `# ${r.source} launch${r.time !== null ? ` at ${isoOf(r.time)}` : ''}${r.where ? ` (${r.where})` : ''}`,
  ];
  if (r.argv.length) lines.push('', '## command line', ...r.argv.map((a) => `  ${a}`));
  if (r.cwd) lines.push('', `cwd: ${r.cwd}`);
  const facts: [string, string | null][] = [
    ['interpreter', r.interpreter],
    ['python', r.python],
    ['torch', r.torch],
    ['driver', r.driver],
    ['git HEAD', r.gitHead],
    ['uncommitted diff sha256', r.gitDiff],
  ];
  for (const [k, v] of facts) if (v !== null) lines.push(`${k}: ${v}`);
  const section = (name: string, m: Record<string, string>) => {
    const keys = Object.keys(m).sort();
    if (keys.length) lines.push('', `## ${name}`, ...keys.map((k) => `${k}=${m[k]}`));
  };
  section('config', r.config);
  section('environment', r.env);
  section('packages', r.packages);
  section('loaded libraries', r.libs);
  return lines.join('\n') + '\n';
}

/** Hydra's overrides (`trainer.precision=32`, `+x=1`, `~y`) as flags. */
function overridesOf(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const o of argv) {
    const eq = o.indexOf('=');
    if (eq > 0) out.set(o.slice(0, eq).replace(/^[+~]+/, ''), o.slice(eq + 1));
    else out.set(o.replace(/^[+~]+/, ''), o.startsWith('~') ? '(deleted)' : 'true');
  }
  return out;
}

/** The restart a later launch record begins: by order when they pair one to one, else the first restart after it. */
function restartOf(records: readonly LaunchRecord[], i: number, restarts: readonly Restart[]): Restart | undefined {
  if (restarts.length === records.length - 1) return restarts[i - 1];
  const t = records[i]!.time;
  if (t === null) return undefined;
  const next = records[i + 1]?.time ?? Infinity;
  return restarts.find((r) => r.time !== null && r.time >= t && r.time < next);
}

/**
 * The launch records (python/kg_record.py) around each restart compared: command-line flags, the process
 * environment, interpreter, torch, driver, packages and uncommitted code. Resume bookkeeping is listed, never ranked;
 * a flag the checkpoint's args already show is left to them.
 */
function launchDrafts(facts: WhatChangedFacts, launches: LaunchRecords | undefined, argsDr: readonly Draft[]): Draft[] {
  const out: Draft[] = [];
  if (!launches) return out;
  const shown = new Set(argsDr.map((d) => d.title.split(' ')[0]!.replace(/^.*\./, '')));
  if (launches.exists) out.push(...comparedLaunches(facts, launches.records, launches.path, 'kg_record', shown));
  // what other tools recorded, each source on its own; a key kg_record's flags or the args already show is theirs
  for (const d of out)
    shown.add(
      d.title
        .replace(/^launch: -*/, '')
        .split(' ')[0]!
        .replace(/-/g, '_'),
    );
  const sources = [...new Set(launches.others.map((r) => r.source))];
  for (const src of sources) {
    const recs = launches.others.filter((r) => r.source === src);
    out.push(...comparedLaunches(facts, recs, recs[recs.length - 1]?.where ?? launches.path, src, shown));
  }
  // the run's training process as earlier reports saw it running and as it runs now: a new PID is a restart
  const live = liveSequence(facts.liveHistory ?? [], launches.live?.records ?? []);
  out.push(...comparedLaunches(facts, live, live[live.length - 1]?.where ?? '/proc', 'live', shown));
  return out;
}

/** A live process as the report lists it: `PID 1234: python3 train.py --lr 3e-4 (libcudnn.so.9.1.0 9.1.0, …)`. */
function runningOf(r: LaunchRecord): { pid: number | null; command: string; libs: string[]; started: number | null } {
  return {
    pid: r.pid ?? null,
    command: r.argv.join(' ').slice(0, 400),
    libs: Object.entries(r.libs).map(([k, v]) => `${k} ${v}`),
    started: r.time,
  };
}

/** A process's mapped libraries by library (`libcudnn`), each with its versions (a path when its name says none). */
export function loadedLibraries(libs: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [file, v] of Object.entries(libs).sort(([x], [y]) => x.localeCompare(y))) {
    const lib = file.replace(/\.so(\.\d+)*$/, '');
    out[lib] = out[lib] !== undefined ? `${out[lib]}, ${v}` : v;
  }
  return out;
}

/**
 * The launches the live processes tell, once each (PID and start time), oldest first: the kept ones and the oldest
 * process running now (python/live_process.py lists them oldest first). A process started beside it (a `tail -f` of
 * the log, a shell in the run folder) is no launch, as for the polls' LiveWatch.
 */
export function liveSequence(kept: readonly LaunchRecord[], now: readonly LaunchRecord[]): LaunchRecord[] {
  const out: LaunchRecord[] = [];
  for (const r of [...kept, ...now.slice(0, 1)])
    if (!out.some((o) => o.pid === r.pid && o.time === r.time)) out.push(r);
  return out.sort((a, b) => (a.time ?? 0) - (b.time ?? 0));
}

/** Consecutive launch records of one source compared (see launchDrafts). */
function comparedLaunches(
  facts: WhatChangedFacts,
  recs: readonly LaunchRecord[],
  path: string,
  source: string,
  shown: ReadonlySet<string>,
): Draft[] {
  const out: Draft[] = [];
  if (recs.length < 2) return out;
  const restarts = facts.log?.restarts ?? [];
  const own = source === 'kg_record';
  // a live process has no file to open: /proc/PID is gone once it ends
  const fileLink: EvidenceLink[] =
    source === 'live'
      ? []
      : [
          {
            kind: 'file',
            title: own ? `launch records ${path}` : `${source} records ${path}`,
            hostId: facts.host.id,
            path,
          },
        ];
  for (let i = 1; i < recs.length; i++) {
    const a = recs[i - 1]!;
    const b = recs[i]!;
    const r = restartOf(recs, i, restarts);
    const evidence: EvidenceLink[] = [
      {
        kind: 'text-diff',
        title: `${source} launch ${i} ↔ ${i + 1}`,
        hostId: facts.host.id,
        a: { name: `${source} launch ${i}.txt`, text: launchText(a) },
        b: { name: `${source} launch ${i + 1}.txt`, text: launchText(b) },
      },
      ...fileLink,
    ];
    const at = r ? ` (restart at step ${r.step})` : b.time !== null ? ` (launch of ${isoOf(b.time)})` : '';
    const when: ChangeTime = r
      ? {
          text: `at the restart at step ${r.step} (launch records ${i} → ${i + 1})`,
          steps: { from: r.prevStep ?? r.step - 1, to: r.step },
        }
      : b.time !== null
        ? { text: `launch of ${isoOf(b.time)}`, time: { from: b.time, to: b.time } }
        : { text: `between launch records ${i} and ${i + 1}` };
    const push = (category: SuspectCategory | 'cosmetic', title: string, detail: string, cosmeticWhy?: string) =>
      out.push({
        source: 'launch',
        category,
        title: `${title}${at}`,
        detail,
        when,
        evidence,
        ...(cosmeticWhy ? { cosmeticWhy } : {}),
      });
    // Hydra's overrides are `key=value` without dashes
    const fa = source === 'hydra' ? overridesOf(a.argv) : flagsOf(a.argv);
    const fb = source === 'hydra' ? overridesOf(b.argv) : flagsOf(b.argv);
    for (const [k, v] of Object.entries(a.config)) if (!fa.has(k)) fa.set(`${source}:${k}`, v);
    for (const [k, v] of Object.entries(b.config)) if (!fb.has(k)) fb.set(`${source}:${k}`, v);
    for (const k of [...new Set([...fa.keys(), ...fb.keys()])].sort()) {
      const va = fa.get(k);
      const vb = fb.get(k);
      if (va === vb) continue;
      const name = k.replace(/^\w+:/, '');
      const key = name.replace(/^-+/, '').replace(/-/g, '_').replace(/^.*\./, '');
      if (shown.has(key)) continue;
      const title = `${own ? 'launch' : `${source} ${k.startsWith(source + ':') ? 'config' : 'launch'}`}: ${name} ${va ?? '(absent)'} → ${vb ?? '(absent)'}`;
      const what = k.startsWith(`${source}:`) ? 'the launch config' : 'the command line';
      const detail = `${what} of launch ${i} said ${va === undefined ? 'no ' + name : `${name} ${va}`}, launch ${i + 1} ${vb === undefined ? 'no ' + name : `${name} ${vb}`}`;
      if (isBookkeepingArg(key))
        push('cosmetic', title, detail, 'resume bookkeeping: where a launch starts, ends, resumes from and writes');
      else {
        const cat = argCategory(key, va, vb);
        push(
          cat === 'other' ? 'launch' : cat,
          title,
          detail,
          cat === 'cosmetic' ? 'names, places or times of the run itself' : undefined,
        );
      }
    }
    for (const k of [...new Set([...Object.keys(a.env), ...Object.keys(b.env)])].sort()) {
      const va = a.env[k];
      const vb = b.env[k];
      if (va === vb) continue;
      const title =
        va === undefined
          ? `process env: ${k}=${vb} added`
          : vb === undefined
            ? `process env: ${k}=${va} removed`
            : `process env: ${k} ${va} → ${vb}`;
      const cat = envCategory(k);
      push(
        cat,
        title,
        `the environment launch ${i + 1} started with, against launch ${i}'s`,
        cat === 'cosmetic' ? 'a variable that does not change speed' : undefined,
      );
    }
    const pairs: [string, string | null, string | null, SuspectCategory][] = [
      ['interpreter', a.interpreter, b.interpreter, 'python'],
      ['python', a.python?.split(' ')[0] ?? null, b.python?.split(' ')[0] ?? null, 'python'],
      ['torch', a.torch, b.torch, 'torch-build'],
      ['driver', a.driver, b.driver, 'driver'],
    ];
    for (const [name, va, vb, cat] of pairs)
      if (va !== vb && va !== null && vb !== null)
        push(cat, `launch: ${name} ${va} → ${vb}`, `launch ${i} ran ${name} ${va}, launch ${i + 1} ${vb}`);
    let pk = 0;
    for (const k of [...new Set([...Object.keys(a.packages), ...Object.keys(b.packages)])].sort()) {
      if (a.packages[k] === b.packages[k] || pk++ >= 10) continue;
      push(
        packageCategory(k),
        `launch: package ${k} ${a.packages[k] ?? '(absent)'} → ${b.packages[k] ?? '(absent)'}`,
        `installed when launch ${i + 1} started`,
      );
    }
    // what ran, not what is installed: the CUDA libraries the live process mapped (python/live_process.py), by
    // library (libcudnn.so.9.1.0 and libcudnn.so.9.8.0 are one library at two versions)
    const la = loadedLibraries(a.libs);
    const lb = loadedLibraries(b.libs);
    for (const k of [...new Set([...Object.keys(la), ...Object.keys(lb)])].sort())
      if (la[k] !== lb[k] && Object.keys(la).length && Object.keys(lb).length)
        push(
          'torch-build',
          `loaded ${k} ${la[k] ?? '(not loaded)'} → ${lb[k] ?? '(not loaded)'}`,
          `the shared libraries process ${a.pid ?? '?'} and process ${b.pid ?? '?'} mapped (/proc/PID/maps)`,
        );
    if (a.gitHead === b.gitHead && a.gitDiff !== b.gitDiff)
      push(
        'code',
        'launch: uncommitted changes differ',
        `the uncommitted diff of the script's checkout (sha256 ${a.gitDiff ?? 'none'} → ${b.gitDiff ?? 'none'})`,
      );
  }
  return out;
}

/** The commits since the reference and their changed hunks, as a document to read (a diff, read-only). */
export function commitDocument(g: GitState): string {
  const lines = [
    `git ${g.repo ?? '?'}: ${g.commits.length} commit${g.commits.length === 1 ? '' : 's'} since ${g.base ?? 'the reference'}`,
    '',
  ];
  for (const c of g.commits) lines.push(`commit ${c.hash}  ${isoOf(c.time)}`, `    ${c.subject}`, '');
  for (const c of g.codeChanges) {
    lines.push(
      `--- a/${c.file}\t(${g.base?.slice(0, 10) ?? 'absent'})`,
      `+++ b/${c.file}\t(HEAD ${g.head?.slice(0, 10) ?? '?'})`,
    );
    if (c.cosmetic) lines.push('# comments, docstrings or whitespace only: the same Python tokens');
    if (c.error) lines.push(`# ${c.error}`);
    for (const h of c.hunks) {
      lines.push(`@@ -${h.lines[0] ?? '?'} +${h.lines[1] ?? '?'} @@${h.function ? ` ${h.function}()` : ''}`);
      for (const l of h.old) lines.push(`-${l}`);
      for (const l of h.new) lines.push(`+${l}`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

/** A call that makes the host wait for the GPU, added to the loop. */
const HOST_SYNC = /\.item\(\)|\.cpu\(\)|\.tolist\(\)|\.numpy\(\)|cuda\.synchronize\(|\.nonzero\(|print\(.*loss\b/;

/**
 * The commits since the reference as what they changed: comment/docstring/whitespace-only (compared token by token on
 * the host) is cosmetic; otherwise the files, the functions their hunks sit in and the commit subjects, a host sync
 * added to the loop its own category.
 */
function codeDraft(facts: WhatChangedFacts, g: GitState, gitLink: Extract<EvidenceLink, { kind: 'git' }>): Draft {
  const real = g.codeChanges.filter((c) => !c.cosmetic);
  const newest = g.commits[0];
  const oldest = g.commits[g.commits.length - 1];
  const subjects = g.commits.slice(0, 3).map((c) => `"${c.subject}"`);
  const commits = `${g.commitsSince} commit${g.commitsSince === 1 ? '' : 's'}${subjects.length ? ` (${subjects.join(', ')})` : ''}`;
  // commit times are whole seconds: the second it was made, not an instant before it
  const when: ChangeTime =
    oldest && newest
      ? {
          text: `committed ${isoOf(newest.time)}`,
          time: { from: oldest.time, to: newest.time + 1 },
        }
      : g.headTime !== null
        ? { text: `HEAD committed ${isoOf(g.headTime)}`, time: { from: g.headTime, to: g.headTime + 1 } }
        : { text: 'since the reference' };
  if (!real.length) {
    return {
      source: 'code',
      category: 'cosmetic',
      title: `${g.codeChanges.map((c) => c.file).join(', ')}: comments, docstrings or whitespace only (${commits})`,
      detail: `compared token by token with the commit of the reference (${g.base?.slice(0, 10) ?? '?'})`,
      when,
      evidence: [gitLink],
      cosmeticWhy: 'comments, docstrings or whitespace only: the same Python tokens run',
    };
  }
  const hunks = real.flatMap((c) => c.hunks.map((h) => ({ file: c.file, ...h })));
  const sync = hunks.find((h) => h.new.some((l) => HOST_SYNC.test(l.replace(/#.*$/, ''))));
  const where = real
    .map((c) =>
      c.functions.length
        ? `${c.file} (${c.functions
            .slice(0, 3)
            .map((f) => `${f}()`)
            .join(', ')})`
        : c.file,
    )
    .join(', ');
  const shown = hunks.slice(0, 3).map((h) => {
    const lines = [...h.old.map((l) => `- ${l.trim()}`), ...h.new.map((l) => `+ ${l.trim()}`)].slice(0, 4);
    return `${h.file}:${h.lines[1] ?? '?'}${h.function ? ` in ${h.function}()` : ''}: ${lines.join(' ')}`;
  });
  return {
    source: 'code',
    category: sync ? 'host-sync' : 'code',
    evidence: [{ ...gitLink, title: `commits and diff in ${g.repo ?? '?'}`, document: commitDocument(g) }],
    title: sync
      ? `${where}: a host sync added (${
          sync.new
            .find((l) => HOST_SYNC.test(l))
            ?.trim()
            .slice(0, 60) ?? ''
        })`
      : `${where} changed: ${commits}`,
    detail: `${commits} in ${g.repo ?? '?'} since ${g.base?.slice(0, 10) ?? 'the reference'}; ${shown.join('; ')}`,
    when,
  };
}

function dataDrafts(
  facts: WhatChangedFacts,
  refTime: number | null,
  changedValues: Set<string>,
  unknown: UnknownFact[],
): Draft[] {
  const out: Draft[] = [];
  const before = refTime === null ? [] : facts.dataHistory.filter((r) => r.at <= refTime).sort((a, b) => b.at - a.at);
  for (const f of facts.probe?.paths ?? []) {
    if (!f.exists || (f.truncated && f.error)) {
      // Walked in part only (a folder nested past the probe's depth bound): not comparable, and why is the fact
      unknown.push({ fact: `data ${f.path}`, why: f.error ?? 'not found' });
      continue;
    }
    if (changedValues.has(f.path)) continue; // the args change names it, with this fingerprint as evidence
    const m = f.kind === 'dir' ? (f.newestMtime ?? f.mtime) : f.mtime;
    const old = before.map((r) => r.paths.find((p) => p.path === f.path)).find((p) => p !== undefined);
    const fileLink: EvidenceLink = { kind: 'file', title: f.path, hostId: facts.host.id, path: f.path };
    const when: ChangeTime =
      m !== null ? { text: `modified ${isoOf(m)}`, time: { from: m, to: m } } : { text: 'not known' };
    if (old?.exists) {
      if (old.hash !== f.hash || old.size !== f.size || old.files !== f.files) {
        out.push({
          source: 'data',
          category: 'dataset',
          title: `data ${f.path} changed`,
          detail: `at the reference: ${old.files ?? '?'} files, ${old.size ?? '?'} bytes, hash ${old.hash ?? '?'}; now: ${f.files ?? '?'} files, ${f.size ?? '?'} bytes, hash ${f.hash ?? '?'}`,
          when,
          evidence: [fileLink],
        });
      }
    } else if (m !== null && refTime !== null && m > refTime) {
      out.push({
        source: 'data',
        category: 'dataset',
        title: `data ${f.path} modified after the reference`,
        detail: `${describeFingerprint(f)} (no fingerprint kept from the reference: its modification time is the evidence)`,
        when,
        evidence: [fileLink],
      });
    }
  }
  return out;
}

function benchOf(facts: WhatChangedFacts, refTime: number | null): ThroughputSummary['bench'] {
  const valid = facts.bench
    .filter((r) => typeof r['tokensPerSec'] === 'number' && r['tokensPerSec'] > 0)
    .sort((a, b) => a.at.localeCompare(b.at));
  if (!valid.length) return null;
  const pick = (r: ThroughputResult | undefined) =>
    r ? { id: r.id, at: r.at, tokensPerSec: r['tokensPerSec'] as number } : null;
  const marked = facts.marks.benchId ? valid.find((r) => r.id === facts.marks.benchId) : undefined;
  const byRef = refTime !== null ? [...valid].reverse().find((r) => (epochOf(r.at) ?? Infinity) <= refTime) : undefined;
  // no reference time (a host without runs): the earliest result kept is the reference
  const reference = pick(marked ?? (refTime === null ? valid[0] : byRef));
  const latest = valid[valid.length - 1]!;
  const now = reference && latest.id === reference.id ? null : pick(latest);
  return { reference, now, ratio: reference && now ? now.tokensPerSec / reference.tokensPerSec : null };
}

/** The report, from the facts: pure, no I/O. */
export function analyze(facts: WhatChangedFacts, generatedAt = new Date()): WhatChangedReport {
  const unknown: UnknownFact[] = [...facts.unknown];
  const logSeries = logSeriesOf(facts.log);
  const series = seriesChangepoints(logSeries, launchesOf(facts.log));
  const main = mainChangepoint(series);
  const ref0 = pickReference(facts, main);
  const base = pickBaseline(facts, ref0.time);
  const reference: ReferencePoint = {
    ...ref0,
    baseline: base
      ? { id: base.baseline.id, label: base.baseline.label, capturedAt: base.baseline.capturedAt, why: base.why }
      : null,
  };
  const cks = facts.checkpoints;
  const refCk = ref0.checkpoint ? cks.find((c) => c.label === ref0.checkpoint!.label) : undefined;
  const nowCk = cks[cks.length - 1];
  const tpSeries = logSeries.find((s) => s.key === main?.key);
  const win = main ? windowOf(main.cp, cks, tpSeries) : undefined;

  // throughput
  const tp = series.find((s) => s.throughput);
  let logTp: ThroughputSummary['log'] = null;
  if (tp && facts.log) {
    const raw = logSeries.find((s) => s.key === tp.key)!;
    const rawTimes = pointTimes(raw, logSeries);
    const levelAt = (step: number): number => {
      const cps = tp.changepoints;
      const idx = cps.findIndex((c) => step <= c.at);
      if (idx >= 0) return cps[idx]!.before;
      if (cps.length) return cps[cps.length - 1]!.after;
      return (
        findChangepoints(raw.x, raw.last, {
          launches: restartsFromTimes(raw.x, raw.t).map((r) => r.step),
          ...(rawTimes ? { times: rawTimes } : {}),
        }).lastLevel ?? NaN
      );
    };
    const refStep = refCk?.step ?? (main ? main.cp.at : raw.x[0]!);
    const reference = levelAt(refStep);
    const nowLevel = levelAt(Infinity);
    logTp = { key: tp.key, reference, now: nowLevel, ratio: reference ? nowLevel / reference : null };
    // A restarted run: is it slower in its latest launch than in the one before (their medians, warm-up left out),
    // or did it slow down inside its latest launch? A shift inside an earlier launch that the latest kept is the level
    // the run settled at, not a change to explain (the real steady loop ran 18% faster for its first 200 steps).
    const launches = [...new Set([...launchesOf(facts.log), ...restartsFromTimes(raw.x, raw.t).map((r) => r.step)])]
      .filter((l) => l > raw.x[0]!)
      .sort((a, b) => a - b);
    const latest = launches[launches.length - 1];
    if (latest !== undefined) {
      const prevStart = launches.length > 1 ? launches[launches.length - 2]! : -Infinity;
      const launchLevel = (lo: number, hi: number) =>
        medianOf(raw.last.filter((v, i) => raw.x[i]! >= lo && raw.x[i]! < hi && Number.isFinite(v)).slice(2));
      const inLatest = tp.changepoints.filter((c) => c.at >= latest && slowdownOf(tp.key, c) > 1 / DROP_RATIO);
      const prev = launchLevel(prevStart, latest);
      const last = launchLevel(latest, Infinity);
      if (!inLatest.length && Number.isFinite(prev) && Number.isFinite(last))
        logTp = { key: tp.key, reference: prev, now: last, ratio: prev ? last / prev : null, byLaunch: true };
    }
    const young = tooLittleAfterRestart(raw.x, launches);
    if (young) logTp = { ...logTp, young };
  }
  if (!facts.log && facts.run !== null && !unknown.some((u) => u.fact.startsWith('metrics log')))
    unknown.push({ fact: 'metrics log', why: `no train log found in ${facts.run}` });
  const bench = benchOf(facts, ref0.time);
  // A regression is a slowdown: throughput down, or step time up, by DROP_RATIO at least; a rise or a shift of the
  // loss is no regression to explain.
  const dropped =
    (logTp !== null && speedRatioOf(logTp) < DROP_RATIO) || (bench?.ratio != null && bench.ratio < DROP_RATIO);
  const verdict: WhatChangedReport['verdict'] = dropped
    ? 'regression'
    : logTp?.young || (logTp === null && bench?.ratio == null && !series.length)
      ? 'unknown'
      : 'steady';

  // facts that differ
  const fingerprints = new Map((facts.probe?.paths ?? []).map((p) => [p.path, p]));
  const drafts: Draft[] = [];
  const argsDr = argsDrafts(facts, refCk, nowCk, main, fingerprints, unknown);
  drafts.push(...argsDr);
  if (facts.env.now && base) {
    const drift = computeDrift(base.baseline.snapshot, facts.env.now);
    drafts.push(...envDrafts(facts, base, drift, unknown));
    for (const e of drift.errors)
      unknown.push({ fact: `environment: ${e.part} (${e.side})`, why: e.message ?? 'failed' });
  } else if (!base) {
    unknown.push({
      fact: 'environment at the reference',
      why: 'no baseline saved for this host: capture one (Known Good: Capture Environment Baseline, or known-good env HOST --save LABEL)',
    });
  }
  drafts.push(...gitDrafts(facts, ref0.time, unknown));
  const launches = facts.probe?.launches?.[0];
  drafts.push(...launchDrafts(facts, launches, argsDr));
  if (launches && !launches.exists && (facts.log?.restarts?.length ?? 0) > 0)
    unknown.push({
      fact: 'command line and process environment of each launch',
      why: `not recorded for this run: launch it through kg_record.py (python3 kg_record.py --run ${facts.run ?? 'RUN'} -- CMD …) to see them next time`,
    });
  const changedValues = new Set<string>();
  if (refCk && nowCk) {
    const ra = facts.args.find((a) => a.label === refCk.label)?.args ?? null;
    const na = facts.args.find((a) => a.label === nowCk.label)?.args ?? null;
    const pa = dataPathsOf(ra);
    const pb = dataPathsOf(na);
    for (const [k, p] of pb) if (pa.get(k) !== p) changedValues.add(p);
    for (const [k, p] of pa) if (pb.get(k) !== p) changedValues.add(p);
  }
  drafts.push(...dataDrafts(facts, ref0.time, changedValues, unknown));

  const evidencePlot: EvidenceLink[] =
    main && facts.log
      ? [
          {
            kind: 'plot',
            title: `${main.key} zoomed at step ${main.cp.at}`,
            hostId: facts.host.id,
            log: facts.log.path,
            series: main.key,
            window: zoom(main.cp, tpSeries),
            marks: [main.cp.at],
          },
        ]
      : [];
  const benchLink: EvidenceLink[] =
    bench?.reference && bench.now
      ? [
          {
            kind: 'bench-compare',
            title: 'benchmark now vs reference',
            hostId: facts.host.id,
            referenceId: bench.reference.id,
            nowId: bench.now.id,
          },
        ]
      : [];

  const suspects: Suspect[] = [];
  const unranked: (CosmeticChange | Suspect)[] = [];
  let n = 0;
  for (const d of drafts) {
    if (d.category === 'cosmetic') {
      unranked.push({ source: d.source, title: d.title, why: d.cosmeticWhy ?? 'cosmetic' });
      continue;
    }
    const s = scoreOf(d, main, win);
    const evidence = [...d.evidence];
    if (s.coincides) evidence.push(...evidencePlot);
    if (d.category === 'torch-build' || d.category === 'driver' || d.category === 'hardware')
      evidence.push(...benchLink);
    const suspect: Suspect = {
      id: `s${++n}`,
      source: d.source,
      category: d.category,
      title: d.title,
      detail: d.detail,
      when: d.when,
      evidence,
      ...s,
    };
    if (verdict === 'regression') suspects.push(suspect);
    else unranked.push(suspect);
  }
  suspects.sort(
    (a, b) =>
      Number(a.ruledOut) - Number(b.ruledOut) ||
      b.score - a.score ||
      CATEGORY_WEIGHT[b.category] - CATEGORY_WEIGHT[a.category] ||
      a.id.localeCompare(b.id),
  );

  const throughput: ThroughputSummary = { log: logTp, bench, dropped };
  // what is known to have changed at each restart: the args whose change lies between the checkpoints around it
  const restarts = (facts.log?.restarts ?? []).map((r) => {
    const changed = [...suspects, ...unranked]
      .filter((u): u is Suspect => 'when' in u && u.when.steps !== undefined)
      .filter((u) => u.when.steps!.from < r.step && u.when.steps!.to >= (r.prevStep ?? r.step))
      .map((u) => u.title);
    return {
      step: r.step,
      time: r.time,
      gapSeconds: r.gapSeconds,
      signals: r.signals,
      ...(r.source !== undefined ? { source: r.source } : {}),
      changed,
    };
  });
  const report: WhatChangedReport = {
    schema: 1,
    headline: '',
    verdict,
    host: facts.host,
    run: facts.run,
    generatedAt: generatedAt.toISOString(),
    reference,
    now: {
      checkpoint: nowCk ? link(nowCk) : null,
      time: facts.remoteNow,
      envCapturedAt: facts.env.now?.capturedAt ?? null,
      log: facts.log?.path ?? null,
    },
    throughput,
    changepoints: { method: 'binary-segmentation', why: CHANGEPOINT_WHY, series },
    ...(restarts.length ? { restarts } : {}),
    ...(facts.log?.sources && facts.log.sources.length > 1 ? { logSources: facts.log.sources } : {}),
    ...(launches
      ? {
          launches: {
            recorded: launches.exists,
            path: launches.path,
            records: launches.records.length,
            ...(launches.live?.records.length ? { running: launches.live.records.map(runningOf) } : {}),
          },
        }
      : {}),
    suspects,
    unranked,
    unknown,
    gathered: {
      ...facts.gathered,
      checkpointsRead: facts.args.filter((a) => a.args !== null).length,
      checkpoints: cks.length,
    },
  };
  report.headline = headline(report, main);
  return report;
}

/** now/reference as speed (>1 faster), whichever way the series counts it; 1 when unknown. */
export function speedRatioOf(log: NonNullable<ThroughputSummary['log']>): number {
  if (log.ratio === null || !(log.ratio > 0)) return 1;
  return speedDirection(log.key) < 0 ? 1 / log.ratio : log.ratio;
}

function zoom(cp: Changepoint, s: ReducedSeries | undefined): { from: number; to: number } {
  const lo = s?.x[0] ?? cp.segmentBefore[0];
  const hi = s?.x[s.x.length - 1] ?? cp.segmentAfter[1];
  const span = Math.max((hi - lo) * 0.1, cp.firstAfter - cp.at);
  return { from: Math.max(lo, Math.floor(cp.at - span)), to: Math.min(hi, Math.ceil(cp.firstAfter + span)) };
}

/** The restart the slowdown came with: the changepoint's launch, or the latest one when launches were compared. */
function restartOfDrop(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined) {
  const rs = report.restarts ?? [];
  if (main?.cp.launch !== undefined) return rs.find((r) => r.step === main.cp.launch) ?? rs[rs.length - 1];
  return report.throughput.log?.byLaunch ? rs[rs.length - 1] : undefined;
}

/**
 * A slowdown at a restart where nothing recorded differs: said so, with what was not recorded, rather than a suspect
 * of another time promoted to first.
 */
function honestTail(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string | null {
  const r = restartOfDrop(report, main);
  if (!r) return null;
  const atRestart = report.suspects.some(
    (s) => !s.ruledOut && (s.coincides || (s.when.steps && s.when.steps.from < r.step && s.when.steps.to >= r.step)),
  );
  if (atRestart) return null;
  const l = report.launches;
  const missing =
    l && !l.recorded
      ? '; not recorded for this run: command line, process environment (record launches to see it next time)'
      : l && l.recorded
        ? '; its launch records show no difference either'
        : '';
  return `; nothing recorded at the restart at step ${r.step} differs${missing}`;
}

function suspectTail(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const honest = honestTail(report, main);
  if (honest !== null) return honest;
  const top = report.suspects[0];
  if (!top) return '; no recorded change explains it (see what could not be gathered)';
  if (top.ruledOut) {
    const n = report.suspects.length;
    return `; no recorded change at the shift explains it (${n} changed at other times, listed)`;
  }
  const src = top.source;
  if (top.coincides && main) return `; changed at step ${main.cp.at}: ${top.title} (${src}, ${top.when.text})`;
  return `; first suspect: ${top.title} (${src}, ${top.when.text})`;
}

export function headline(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const t = report.throughput;
  const ref = report.reference.label;
  if (report.verdict === 'unknown') {
    const n = report.unranked.length;
    if (t.log?.young) return tooLittleHeadline(t.log.young, n, ref);
    const why = report.unknown.find((u) => /metrics log|listing/.test(u.fact));
    return `Cannot tell whether throughput dropped: no metrics log${why ? ` (${why.why})` : ''} and no benchmark pair${n ? `; ${n} difference${n === 1 ? '' : 's'} since ${ref} listed, not ranked` : ''}`;
  }
  if (report.verdict === 'steady') {
    const n = report.unranked.length;
    const file = report.now.log?.split('/').pop();
    const shifts = report.changepoints.series.some((s) => s.changepoints.length);
    const what = !file ? 'no metrics log' : shifts ? `no slowdown in ${file}` : `no changepoint in ${file}`;
    const shift =
      main && t.log && main.key === t.log.key && main.cp.ratio !== null
        ? `${main.key} ${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)} at step ${main.cp.at}`
        : undefined;
    const rise = !shift
      ? ''
      : slowdownOf(main!.key, main!.cp) > 0 && t.log?.byLaunch
        ? ` (${shift}, inside an earlier launch; the latest launch runs at ${formatLevel(t.log.now)}, ${formatRatio(t.log.ratio ?? 1)}× the one before)`
        : ` (${shift}, not slower)`;
    const listed = n ? `; ${n} difference${n === 1 ? '' : 's'} since ${ref} listed, not ranked` : '';
    // say what the "no drop" rests on: a log without tok/s and no benchmark pair cannot show one
    const drop =
      t.log || t.bench?.ratio != null
        ? 'No throughput drop'
        : 'No throughput measured (no tok/s series, no benchmark pair)';
    return `${drop}${rise} and ${what}: nothing to explain${listed}`;
  }
  if (t.log && t.log.ratio !== null && speedRatioOf(t.log) < DROP_RATIO) {
    const tok = throughputRank(t.log.key) === 3;
    const unit = tok ? ' tok/s' : ` ${t.log.key}`;
    const f = tok ? formatRate : formatLevel;
    return `${f(t.log.now)}${unit} now vs ${f(t.log.reference)} at ${ref} (${formatRatio(t.log.ratio)}×)${suspectTail(report, main)}`;
  }
  if (t.bench?.reference && t.bench.now && t.bench.ratio !== null) {
    return `benchmark ${formatRate(t.bench.now.tokensPerSec)} tok/s now vs ${formatRate(t.bench.reference.tokensPerSec)} at ${t.bench.reference.at} (${formatRatio(t.bench.ratio)}×)${suspectTail(report, main)}`;
  }
  if (main) {
    const r = main.cp.ratio !== null ? ` (${formatRatio(main.cp.ratio)}×)` : '';
    return `${main.key} ${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)} at step ${main.cp.at}${r}${suspectTail(report, main)}`;
  }
  return `A change to explain${suspectTail(report, main)}`;
}
