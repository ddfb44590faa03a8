import type { GpuProcess, GpuReading, GpuSample, GpuTimeline } from './gpuProbe';

/*
 * What a GPU timeline (or one reading now) says of the machine under a run, as findings with the time each began:
 * throttling (which reason), clocks below their maximum, another process on the run's GPUs (its user and name), a
 * PCIe link below its maximum, memory errors appearing (ECC, retired pages, remapped rows), one GPU slower than the
 * others. Pure: What Changed? (causes/hardware.ts) dates them against the shift; the dashboard and Fleet may read the
 * same. Every condition but the processes and the memory errors is judged on busy samples only: an idle GPU lowers
 * its clocks and its link on purpose.
 */

export type FindingKind = 'throttle' | 'clocks' | 'neighbour' | 'link' | 'memory-errors' | 'straggler';

/** When a finding began: between the last sample without it and the first with it. */
export interface Onset {
  /** Null: it was there in the first sample that could show it. */
  from: number | null;
  to: number;
}

export interface HardwareFinding {
  kind: FindingKind;
  gpus: number[];
  /** What it is, without when ("GPU 5 throttling: hw_thermal_slowdown (…)"). */
  title: string;
  detail: string;
  /** Null when only a reading now shows it. */
  onset: Onset | null;
  /** The last sample that showed it, when it ended before the timeline's last sample. */
  until?: number;
  /** The samples around the onset, as text: the evidence window. */
  window?: { before: string; after: string };
}

export interface HardwareAnalysis {
  findings: HardwareFinding[];
  /** What could not be told, and why. */
  notes: { fact: string; why: string }[];
  /** The GPUs the run's processes were seen on; null when none was (then busy means utilisation ≥ 50 %). */
  runGpus: number[] | null;
  first: number | null;
  last: number | null;
}

/** The clock-event reasons that slow a busy GPU, in words (nvidia-smi --help-query-gpu, nvml.h). */
export const REASON_TEXT: Readonly<Record<string, string>> = {
  hw_slowdown: 'hardware slowdown: clocks cut by half or more (temperature, power brake or the power supply)',
  hw_thermal_slowdown: 'hardware thermal slowdown: the GPU is too hot',
  hw_power_brake_slowdown: 'power brake: the power supply cut the clocks',
  sw_thermal_slowdown: 'software thermal slowdown: the driver holds clocks down for temperature',
  sw_power_cap: 'power cap: the driver holds clocks down to stay under the power limit',
  applications_clocks_setting: 'clocks held by the applications clocks setting (nvidia-smi -ac)',
};

/** Sustained: at least this share of the busy time from the onset on, and at most `BEFORE` of it before. */
const AFTER = 0.6;
const BEFORE = 0.3;
/** Below this share of its maximum (or of the other GPUs' median) a clock is low. */
const LOW_CLOCK = 0.9;
const BUSY_UTIL = 50;
const WINDOW_SAMPLES = 3;

interface Point {
  s: GpuSample;
  /** The launch (header) it belongs to; -1 before any header. */
  seg: number;
  /** That launch's PID. */
  root: number | null;
  /** The time it stands for (to the next sample of its launch, at most 3 intervals). */
  w: number;
  gpu: Map<number, GpuReading>;
}

function pointsOf(tl: Pick<GpuTimeline, 'headers' | 'samples'>): Point[] {
  const headers = [...tl.headers].sort((a, b) => a.t - b.t);
  const samples = tl.samples.filter((s) => !s.error && s.gpus.length).sort((a, b) => a.t - b.t);
  const pts: Point[] = samples.map((s) => {
    let seg = -1;
    for (let i = 0; i < headers.length && headers[i]!.t <= s.t; i++) seg = i;
    return { s, seg, root: headers[seg]?.pid ?? null, w: 0, gpu: new Map(s.gpus.map((g) => [g.index, g])) };
  });
  pts.forEach((p, i) => {
    const interval = headers[p.seg]?.intervalS ?? 5;
    const next = pts[i + 1];
    p.w = next && next.seg === p.seg ? Math.min(next.s.t - p.s.t, 3 * interval) : interval;
  });
  return pts;
}

function isOwn(p: GpuProcess, root: number | null): boolean {
  return root !== null && (p.pid === root || p.ancestors.includes(root));
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function isoOf(t: number): string {
  return new Date(t * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The onset of a condition (null where it cannot be told): the start of the run of samples it held through. */
function onsetIndex(
  pts: readonly Point[],
  v: readonly (boolean | null)[],
): { k: number; after: number; before: number } | null {
  const defined = v.flatMap((x, i) => (x === null ? [] : [i]));
  if (!defined.length) return null;
  let best: { k: number; after: number; before: number } | null = null;
  for (let j = 0; j < defined.length; j++) {
    const k = defined[j]!;
    if (!v[k] || (j > 0 && v[defined[j - 1]!])) continue;
    const share = (idx: readonly number[]) => {
      const w = idx.reduce((n, i) => n + pts[i]!.w, 0);
      return w > 0 ? idx.filter((i) => v[i]).reduce((n, i) => n + pts[i]!.w, 0) / w : 0;
    };
    const after = share(defined.slice(j));
    const before = j > 0 ? share(defined.slice(0, j)) : 0;
    if (defined.length - j < Math.min(2, defined.length) || after < AFTER || before > BEFORE) continue;
    if (!best || after - before > best.after - best.before) best = { k, after, before };
  }
  return best;
}

function pct(x: number): string {
  return `${Math.round(x * 100)} %`;
}

function num(x: number | null | undefined, unit = ''): string {
  return x === null || x === undefined ? '?' : `${Number.isInteger(x) ? x : x.toFixed(1)}${unit}`;
}

function readingText(g: GpuReading): string {
  const link = `gen${num(g.pcieGen)} x${num(g.pcieWidth)} of gen${num(g.pcieGenMax)} x${num(g.pcieWidthMax)}`;
  return [
    `util ${num(g.util, ' %')}`,
    `SM ${num(g.smClock)}/${num(g.smClockMax)} MHz`,
    `${num(g.power)}/${num(g.powerLimit)} W`,
    `${num(g.temp)} C`,
    `reasons ${g.reasons === null ? '?' : g.reasons.join(',') || 'none'}`,
    `PCIe ${link}`,
    `ECC ${num(g.eccUncorrected)}`,
  ].join(', ');
}

function processText(p: GpuProcess, root: number | null): string {
  const who = `${p.user ?? 'user ?'} ${p.comm ?? p.name ?? '?'}`;
  return `PID ${p.pid} on GPU ${p.gpu ?? '?'} (${who}, ${num(p.memMiB, ' MiB')}${isOwn(p, root) ? ', the run' : ''})`;
}

/** The samples around index k, for the GPUs `gpus`, as text. */
function windowOf(pts: readonly Point[], k: number, gpus: readonly number[]): { before: string; after: string } {
  const text = (from: number, to: number) =>
    pts
      .slice(Math.max(0, from), Math.max(0, to))
      .map((p) => {
        const lines = gpus.map((g) => {
          const r = p.gpu.get(g);
          return `  GPU ${g}: ${r ? readingText(r) : 'not read'}`;
        });
        const procs = p.s.processes.filter((q) => q.gpu === null || gpus.includes(q.gpu));
        const who = procs.length ? procs.map((q) => processText(q, p.root)).join('; ') : 'none';
        return [`${isoOf(p.s.t)} (launch PID ${p.root ?? '?'})`, ...lines, `  processes: ${who}`].join('\n');
      })
      .join('\n') || '(no sample before: the timeline began here)';
  return { before: text(k - WINDOW_SAMPLES, k) + '\n', after: text(k, k + WINDOW_SAMPLES) + '\n' };
}

function onsetAt(pts: readonly Point[], k: number): Onset {
  return { from: k > 0 ? pts[k - 1]!.s.t : null, to: pts[k]!.s.t };
}

function clocksOf(pts: readonly Point[], idx: readonly number[], g: number): number | null {
  const xs = idx.map((i) => pts[i]!.gpu.get(g)?.smClock).filter((x): x is number => typeof x === 'number');
  return xs.length ? median(xs) : null;
}

interface Ctx {
  pts: Point[];
  runGpus: Set<number>;
  busy(p: Point, g: number): boolean;
  gpus: number[];
}

function contextOf(pts: Point[]): Ctx {
  const runGpus = new Set<number>();
  for (const p of pts) for (const q of p.s.processes) if (q.gpu !== null && isOwn(q, p.root)) runGpus.add(q.gpu);
  const gpus = [...new Set(pts.flatMap((p) => [...p.gpu.keys()]))].sort((a, b) => a - b);
  const busy = (p: Point, g: number) =>
    runGpus.size
      ? runGpus.has(g) && p.s.processes.some((q) => q.gpu === g && isOwn(q, p.root))
      : (p.gpu.get(g)?.util ?? 0) >= BUSY_UTIL;
  return { pts, runGpus, busy, gpus: runGpus.size ? gpus.filter((g) => runGpus.has(g)) : gpus };
}

/** A condition of one GPU on its busy samples, judged for an onset; one finding per group of GPUs starting together. */
function sustained(
  c: Ctx,
  test: (r: GpuReading, p: Point) => boolean | null,
): { g: number; k: number; after: number; before: number }[] {
  const out: { g: number; k: number; after: number; before: number }[] = [];
  for (const g of c.gpus) {
    const v = c.pts.map((p) => {
      const r = p.gpu.get(g);
      return r && c.busy(p, g) ? test(r, p) : null;
    });
    const o = onsetIndex(c.pts, v);
    if (o) out.push({ g, ...o });
  }
  return out;
}

function grouped<T extends { g: number; k: number }>(xs: readonly T[]): T[][] {
  const by = new Map<number, T[]>();
  for (const x of xs) by.set(x.k, [...(by.get(x.k) ?? []), x]);
  return [...by.values()];
}

function gpuList(gs: readonly number[]): string {
  return gs.length === 1 ? `GPU ${gs[0]}` : `GPUs ${gs.join(', ')}`;
}

function throttleFindings(c: Ctx, out: HardwareFinding[], stragglers: Map<number, Straggler>): Set<number> {
  const slowed = new Set<number>();
  for (const reason of Object.keys(REASON_TEXT)) {
    const hits = sustained(c, (r) => (r.reasons === null ? null : r.reasons.includes(reason)));
    for (const group of grouped(hits)) {
      const gs = group.map((h) => h.g);
      const k = group[0]!.k;
      const before = c.pts.slice(0, k).map((_, i) => i);
      const after = c.pts.slice(k).map((_, i) => i + k);
      const clocks = gs
        .map((g) => {
          const a = clocksOf(c.pts, before, g);
          const b = clocksOf(c.pts, after, g);
          const max = c.pts[k]!.gpu.get(g)?.smClockMax;
          return `GPU ${g} SM ${a === null ? '' : `${num(a)} → `}${num(b)} MHz (max ${num(max)})`;
        })
        .join('; ');
      gs.forEach((g) => slowed.add(g));
      out.push({
        kind: 'throttle',
        gpus: gs,
        title: `${gpuList(gs)} throttling: ${reason} (${REASON_TEXT[reason]})`,
        detail: `active in ${pct(group[0]!.after)} of the busy time from then on, ${pct(group[0]!.before)} before; median ${clocks}${stragglerNote(gs, stragglers)}`,
        onset: onsetAt(c.pts, k),
        window: windowOf(c.pts, k, gs),
      });
    }
  }
  return slowed;
}

function clockFindings(c: Ctx, out: HardwareFinding[], slowed: Set<number>, stragglers: Map<number, Straggler>): void {
  const hits = sustained(c, (r) =>
    r.smClock === null || r.smClockMax === null || !r.smClockMax ? null : r.smClock < LOW_CLOCK * r.smClockMax,
  ).filter((h) => !slowed.has(h.g));
  for (const group of grouped(hits)) {
    const gs = group.map((h) => h.g);
    const k = group[0]!.k;
    gs.forEach((g) => slowed.add(g));
    const at = gs.map(
      (g) => `GPU ${g} ${num(c.pts[k]!.gpu.get(g)?.smClock)} of ${num(c.pts[k]!.gpu.get(g)?.smClockMax)} MHz`,
    );
    out.push({
      kind: 'clocks',
      gpus: gs,
      title: `${gpuList(gs)} SM clock below its maximum, no throttle reason given`,
      detail: `below ${pct(LOW_CLOCK)} of the maximum in ${pct(group[0]!.after)} of the busy time from then on; ${at.join('; ')}${stragglerNote(gs, stragglers)}`,
      onset: onsetAt(c.pts, k),
      window: windowOf(c.pts, k, gs),
    });
  }
}

function linkFindings(c: Ctx, out: HardwareFinding[]): void {
  const hits = sustained(c, (r) => {
    if (r.pcieGen === null || r.pcieGenMax === null || r.pcieWidth === null || r.pcieWidthMax === null) return null;
    return r.pcieGen < r.pcieGenMax || r.pcieWidth < r.pcieWidthMax;
  });
  for (const group of grouped(hits)) {
    const gs = group.map((h) => h.g);
    const k = group[0]!.k;
    const r = c.pts[k]!.gpu.get(gs[0]!)!;
    out.push({
      kind: 'link',
      gpus: gs,
      title: `${gpuList(gs)} PCIe link at gen ${num(r.pcieGen)} x${num(r.pcieWidth)} under load (of gen ${num(r.pcieGenMax)} x${num(r.pcieWidthMax)})`,
      detail: `below its maximum in ${pct(group[0]!.after)} of the busy time from then on: host↔GPU copies (data, checkpoints) and P2P without NVLink run slower`,
      onset: onsetAt(c.pts, k),
      window: windowOf(c.pts, k, gs),
    });
  }
}

function memoryErrorText(r: GpuReading): string[] {
  const bits: string[] = [];
  if (r.eccUncorrected) bits.push(`${r.eccUncorrected} uncorrected ECC error${r.eccUncorrected === 1 ? '' : 's'}`);
  const retired = (r.retiredSbe ?? 0) + (r.retiredDbe ?? 0);
  if (retired) bits.push(`${retired} retired page${retired === 1 ? '' : 's'}`);
  if (r.retiredPending) bits.push('a page retirement pending');
  if (r.remappedUncorrectable) bits.push(`${r.remappedUncorrectable} rows remapped for uncorrectable errors`);
  if (r.remappedPending) bits.push('a row remap pending (takes effect at the next GPU reset)');
  if (r.remappedFailure) bits.push('a row remap failed');
  return bits;
}

function memoryFindings(c: Ctx, out: HardwareFinding[]): void {
  const score = (r: GpuReading) =>
    (r.eccUncorrected ?? 0) * 1e6 +
    ((r.retiredSbe ?? 0) + (r.retiredDbe ?? 0)) * 1e3 +
    (r.remappedUncorrectable ?? 0) * 10 +
    Number(!!r.retiredPending) +
    Number(!!r.remappedPending) +
    Number(!!r.remappedFailure);
  for (const g of c.gpus) {
    let prev: number | null = null;
    let k = -1;
    for (let i = 0; i < c.pts.length && k < 0; i++) {
      const r = c.pts[i]!.gpu.get(g);
      if (!r) continue;
      const s = score(r);
      // the volatile ECC count starts again at a driver reload: a fall is no error
      if ((prev === null && s > 0) || (prev !== null && s > prev)) k = i;
      prev = s;
    }
    if (k < 0) continue;
    const last = [...c.pts]
      .reverse()
      .find((p) => p.gpu.has(g))!
      .gpu.get(g)!;
    const bits = memoryErrorText(last);
    out.push({
      kind: 'memory-errors',
      gpus: [g],
      title: `GPU ${g} memory errors: ${bits.join(', ') || 'cleared since'}`,
      detail:
        'uncorrected errors end kernels and jobs; retired pages and remapped rows take memory away, and a pending remap waits for a GPU reset',
      onset: onsetAt(c.pts, k),
      window: windowOf(c.pts, k, [g]),
    });
  }
}

interface Straggler {
  k: number;
  after: number;
  text: string;
  told: boolean;
}

/** GPUs slower than the run's others (SM clock below 90 % of their median on busy samples), by GPU. */
function stragglersOf(c: Ctx): Map<number, Straggler> {
  const out = new Map<number, Straggler>();
  if (c.gpus.length < 2) return out;
  const hits = sustained(c, (r, p) => {
    const others = c.gpus
      .filter((g) => g !== r.index && c.busy(p, g))
      .map((g) => p.gpu.get(g)?.smClock)
      .filter((x): x is number => typeof x === 'number');
    if (r.smClock === null || !others.length) return null;
    return r.smClock < LOW_CLOCK * median(others);
  });
  for (const h of hits) {
    const p = c.pts[h.k]!;
    const others = c.gpus.filter((g) => g !== h.g).map((g) => p.gpu.get(g)?.smClock ?? 0);
    const text = `GPU ${h.g} slower than the run's other GPUs (SM ${num(p.gpu.get(h.g)?.smClock)} MHz against their median ${num(median(others))})`;
    out.set(h.g, { k: h.k, after: h.after, text, told: false });
  }
  return out;
}

/** What a finding on GPUs `gs` adds of those that are stragglers too (told there, not again on their own). */
function stragglerNote(gs: readonly number[], stragglers: Map<number, Straggler>): string {
  const told = gs.flatMap((g) => {
    const s = stragglers.get(g);
    if (!s) return [];
    s.told = true;
    return [s.text];
  });
  return told.length ? `; ${told.join('; ')}: in a data-parallel job every rank waits for the slowest` : '';
}

function stragglerFindings(c: Ctx, out: HardwareFinding[], stragglers: Map<number, Straggler>): void {
  for (const [g, s] of stragglers) {
    if (s.told) continue;
    out.push({
      kind: 'straggler',
      gpus: [g],
      title: s.text,
      detail: `slower in ${pct(s.after)} of the busy time from then on, with no throttle reason given: in a data-parallel job every rank waits for the slowest`,
      onset: onsetAt(c.pts, s.k),
      window: windowOf(c.pts, s.k, c.gpus),
    });
  }
}

function neighbourFindings(c: Ctx, out: HardwareFinding[], notes: HardwareAnalysis['notes'], rootPids: number[]): void {
  const groups = new Map<
    string,
    {
      k: number;
      lastT: number;
      gpus: Set<number>;
      pids: Set<number>;
      mem: number;
      p: GpuProcess;
      leftover: number | null;
    }
  >();
  const unseen = new Set<number>();
  for (let i = 0; i < c.pts.length; i++) {
    const p = c.pts[i]!;
    if (p.root === null) continue;
    for (const q of p.s.processes) {
      if (isOwn(q, p.root) || (q.gpu !== null && c.runGpus.size > 0 && !c.runGpus.has(q.gpu))) continue;
      if (!q.seen) {
        unseen.add(q.pid);
        continue;
      }
      // with none of the run's processes on a GPU, another process cannot be told from a GPU the run does not use
      if (!c.runGpus.size) continue;
      const earlier = rootPids.find((r) => r !== p.root && (q.pid === r || q.ancestors.includes(r)));
      const key = `${q.user ?? '?'}\0${q.comm ?? q.name ?? '?'}\0${earlier ?? ''}`;
      const g = groups.get(key) ?? {
        k: i,
        lastT: p.s.t,
        gpus: new Set<number>(),
        pids: new Set<number>(),
        mem: 0,
        p: q,
        leftover: earlier ?? null,
      };
      g.lastT = p.s.t;
      if (q.gpu !== null) g.gpus.add(q.gpu);
      g.pids.add(q.pid);
      g.mem = Math.max(g.mem, q.memMiB ?? 0);
      groups.set(key, g);
    }
  }
  const lastT = c.pts[c.pts.length - 1]?.s.t ?? 0;
  for (const g of groups.values()) {
    const gs = [...g.gpus].sort((a, b) => a - b);
    const pids = [...g.pids];
    const who = `${g.p.user ?? 'an unknown user'}'s ${g.p.comm ?? g.p.name ?? 'process'}`;
    const what = g.leftover !== null ? `, left from the run's earlier launch (PID ${g.leftover})` : ', not this run';
    out.push({
      kind: 'neighbour',
      gpus: gs,
      title: `another process on ${gs.length ? gpuList(gs) : 'the GPUs'}: ${who} (PID ${pids.slice(0, 4).join(', ')}${pids.length > 4 ? ', …' : ''}${what})`,
      detail: `${g.p.name ?? g.p.comm ?? '?'} holding up to ${num(g.mem, ' MiB')} of GPU memory: it shares the GPU's time and memory bandwidth with the run`,
      onset: onsetAt(c.pts, g.k),
      ...(g.lastT < lastT ? { until: g.lastT } : {}),
      window: windowOf(c.pts, g.k, gs.length ? gs : c.gpus),
    });
  }
  if (unseen.size)
    notes.push({
      fact: `whose ${unseen.size} process${unseen.size === 1 ? '' : 'es'} on the run's GPUs ${unseen.size === 1 ? 'is' : 'are'}`,
      why: "nvidia-smi names PIDs this host's /proc does not have (another PID namespace: a container?)",
    });
}

function analyzePoints(pts: Point[], rootPids: number[], canTellNeighbours: boolean): HardwareAnalysis {
  const c = contextOf(pts);
  const findings: HardwareFinding[] = [];
  const notes: HardwareAnalysis['notes'] = [];
  const stragglers = stragglersOf(c);
  const slowed = throttleFindings(c, findings, stragglers);
  clockFindings(c, findings, slowed, stragglers);
  stragglerFindings(c, findings, stragglers);
  linkFindings(c, findings);
  memoryFindings(c, findings);
  if (canTellNeighbours) neighbourFindings(c, findings, notes, rootPids);
  if (!c.runGpus.size && pts.length)
    notes.push({
      fact: 'which GPUs the run uses',
      why: 'no process of the run was on a GPU in the samples: every GPU at ≥ 50 % utilisation was judged',
    });
  return {
    findings,
    notes,
    runGpus: c.runGpus.size ? [...c.runGpus].sort((a, b) => a - b) : null,
    first: pts[0]?.s.t ?? null,
    last: pts[pts.length - 1]?.s.t ?? null,
  };
}

/** A run's recorded timeline (python/kg_gpu_sampler.py), oldest first. */
export function analyzeGpuTimeline(tl: Pick<GpuTimeline, 'headers' | 'samples'>): HardwareAnalysis {
  return analyzePoints(
    pointsOf(tl),
    tl.headers.map((h) => h.pid),
    true,
  );
}

/**
 * One reading now: what it shows, with no time (`onset` null). `livePid`: the run's training process, when one runs
 * (its processes are the run's; without it another process cannot be told from the run's own).
 */
export function analyzeGpuNow(now: GpuSample, livePid: number | null): HardwareAnalysis {
  const pts: Point[] = [{ s: now, seg: 0, root: livePid, w: 1, gpu: new Map(now.gpus.map((g) => [g.index, g])) }];
  const a = analyzePoints(pts, livePid !== null ? [livePid] : [], livePid !== null);
  for (const f of a.findings) {
    f.onset = null;
    delete f.window;
  }
  return a;
}
