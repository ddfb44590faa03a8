import type { CacheInfo, EnvSnapshot, GpuInfo, LiveRun } from './envProbe';
import { formatBytes, naturalCompare } from '../util/format';
import { lineMap } from './render';

/**
 * What changed between a baseline and now, in the order a person asks: torch and triton first, then the rest of the
 * packages, CUDA and the driver, GPUs, environment variables, scripts and compile caches. Secrets show as "changed"
 * without any value.
 */

export interface Change<T = string | null> {
  from: T;
  to: T;
}

export interface PackageChange {
  name: string;
  from: string | null;
  to: string | null;
}

export interface EnvChange {
  name: string;
  kind: 'changed' | 'added' | 'removed';
  /** Both values are left out for secrets (`redacted`). */
  from?: string;
  to?: string;
  redacted: boolean;
}

export interface GpuChange {
  index: number;
  field: string;
  from: string | number | null;
  to: string | number | null;
}

/** The variables of a run's training process (a live one, read with the "now" side) against the baseline's. */
export interface ProcessEnvDrift {
  /** `the training process 12345 (python3 train.py --steps 100)` */
  label: string;
  pid: number;
  run: string;
  changes: EnvChange[];
  /** How many of its recorded variables equal the baseline's. */
  same: number;
}

export interface CacheDrift {
  name: string;
  path: string;
  change: 'emptied' | 'grown' | 'shrunk' | 'appeared' | 'disappeared' | 'moved';
  files: Change<number | null>;
  bytes: Change<number | null>;
}

export interface Drift {
  /** No line of the canonical text differs. */
  unchanged: boolean;
  /** How many lines of the canonical text differ (added, removed or changed). */
  differingLines: number;
  packages: { changed: PackageChange[]; added: PackageChange[]; removed: PackageChange[] };
  torch: Partial<Record<'version' | 'gitVersion' | 'cuda' | 'hip' | 'debug' | 'location' | 'cudnn' | 'nccl', Change>>;
  cuda: Partial<Record<'nvcc' | 'driver', Change>>;
  python: Partial<Record<'version' | 'executable' | 'prefix', Change>>;
  host: Partial<Record<'hostname' | 'os' | 'kernel' | 'container' | 'cpu' | 'cpuCount' | 'memory' | 'libc', Change>>;
  gpus: { count?: Change<number>; changed: GpuChange[] };
  /** The "now" side's variables (`envSources.now`) against the baseline's. */
  env: EnvChange[];
  /** Where each side's variables came from, in words; null where the snapshot did not record it (older ones). */
  envSources: { baseline: string | null; now: string | null };
  /** The "now" side's run, when one was asked about: its training process's variables against the baseline's. */
  liveRun: { run: string; process: ProcessEnvDrift | null; error: string | null } | null;
  scripts: { changed: string[]; added: string[]; removed: string[] };
  caches: CacheDrift[];
  /** Parts that failed on either side: their absence is not a change. */
  errors: { side: 'baseline' | 'now'; part: string; message: string | null }[];
}

/** Packages a reader looks at first, in this order; the rest follow by name. */
export const FIRST_PACKAGES = ['torch', 'triton', 'pytorch-triton', 'numpy', 'transformers', 'flash-attn', 'deepspeed'];

function packageOrder(a: string, b: string): number {
  const ia = FIRST_PACKAGES.indexOf(a);
  const ib = FIRST_PACKAGES.indexOf(b);
  if (ia >= 0 || ib >= 0) return (ia < 0 ? 1e9 : ia) - (ib < 0 ? 1e9 : ib);
  return naturalCompare(a, b);
}

const REDACTED = /^<redacted sha256:[0-9a-f]*>$/;

function change<T>(from: T, to: T): Change<T> | undefined {
  return from === to ? undefined : { from, to };
}

function put<K extends string>(target: Partial<Record<K, Change>>, key: K, c: Change | undefined): void {
  if (c) target[key] = c;
}

function diffPackages(a: EnvSnapshot, b: EnvSnapshot): Drift['packages'] {
  const out: Drift['packages'] = { changed: [], added: [], removed: [] };
  // A side whose package list failed says nothing about packages: no drift claimed.
  if (a.packages.error || b.packages.error) return out;
  const pa = a.packages.packages;
  const pb = b.packages.packages;
  for (const name of Object.keys({ ...pa, ...pb }).sort(packageOrder)) {
    const inA = Object.prototype.hasOwnProperty.call(pa, name);
    const inB = Object.prototype.hasOwnProperty.call(pb, name);
    const va = pa[name] ?? null;
    const vb = pb[name] ?? null;
    if (inA && inB) {
      const ea = a.packages.editable[name];
      const eb = b.packages.editable[name];
      if (va !== vb || ea !== eb) {
        out.changed.push({
          name,
          from: ea !== undefined ? `${va ?? '?'} (editable)` : va,
          to: eb !== undefined ? `${vb ?? '?'} (editable)` : vb,
        });
      }
    } else if (inB) out.added.push({ name, from: null, to: vb });
    else out.removed.push({ name, from: va, to: null });
  }
  return out;
}

function diffEnv(a: EnvSnapshot, b: EnvSnapshot): EnvChange[] {
  if (a.env.error || b.env.error) return [];
  return diffVars(a.env.vars, b.env.vars);
}

function diffVars(va: Record<string, string>, vb: Record<string, string>): EnvChange[] {
  const out: EnvChange[] = [];
  for (const name of Object.keys({ ...va, ...vb }).sort(naturalCompare)) {
    const x = va[name];
    const y = vb[name];
    if (x === y) continue;
    const redacted = (x !== undefined && REDACTED.test(x)) || (y !== undefined && REDACTED.test(y));
    const kind = x === undefined ? 'added' : y === undefined ? 'removed' : 'changed';
    const c: EnvChange = { name, kind, redacted };
    if (!redacted) {
      if (x !== undefined) c.from = x;
      if (y !== undefined) c.to = y;
    }
    out.push(c);
  }
  return out;
}

/**
 * `the training process 12345 (python3 train.py --steps 100)`: its id and the start of its command line, paths by
 * their last part (the run's folder is said beside it).
 */
export function processLabel(p: { pid: number; argv: readonly string[] }): string {
  const short = (w: string) => (w.startsWith('/') && w.length > 1 ? (w.replace(/\/+$/, '').split('/').pop() ?? w) : w);
  let cmd = p.argv.map(short).join(' ').trim();
  if (cmd.length > 48) cmd = `${cmd.slice(0, 47)}…`;
  return `the training process ${p.pid}${cmd ? ` (${cmd})` : ''}`;
}

function diffLiveRun(baseline: EnvSnapshot, live: LiveRun | null): Drift['liveRun'] {
  if (!live) return null;
  const p = live.process;
  const error = live.error ?? (baseline.env.error ? `the baseline's variables: ${baseline.env.error}` : null);
  if (!p || baseline.env.error) return { run: live.path, process: null, error };
  const changes = diffVars(baseline.env.vars, p.vars);
  const same = Object.keys(p.vars).filter((k) => baseline.env.vars[k] === p.vars[k]).length;
  return { run: live.path, process: { label: processLabel(p), pid: p.pid, run: live.path, changes, same }, error };
}

const GPU_FIELDS_COMPARED = [
  'name',
  'driver_version',
  'memory.total',
  'clocks.max.sm',
  'clocks.max.mem',
  'power.limit',
  'persistence_mode',
  'compute_mode',
  'pcie.link.width.current',
  'pcie.link.gen.max',
  'pcie.link.width.max',
  'uuid',
] as const;

function diffGpus(a: EnvSnapshot, b: EnvSnapshot): Drift['gpus'] {
  const out: Drift['gpus'] = { changed: [] };
  if (a.gpus.error || b.gpus.error) return out;
  const c = change(a.gpus.gpus.length, b.gpus.gpus.length);
  if (c) out.count = c;
  const byIndex = new Map<number, GpuInfo>(a.gpus.gpus.map((g) => [g.index, g]));
  for (const g of b.gpus.gpus) {
    const old = byIndex.get(g.index);
    if (!old) continue;
    for (const f of GPU_FIELDS_COMPARED) {
      const x = old[f] ?? null;
      const y = g[f] ?? null;
      if (x !== y) out.changed.push({ index: g.index, field: f, from: x, to: y });
    }
  }
  return out;
}

function driverOf(s: EnvSnapshot): string | null {
  const versions = [...new Set(s.gpus.gpus.map((g) => g.driver_version).filter((v): v is string => !!v))];
  return versions.length ? versions.join(', ') : null;
}

function diffScripts(a: EnvSnapshot, b: EnvSnapshot): Drift['scripts'] {
  const out: Drift['scripts'] = { changed: [], added: [], removed: [] };
  if (a.scripts.error || b.scripts.error) return out;
  const ha = new Map(a.scripts.files.map((f) => [f.path, f.sha256]));
  const hb = new Map(b.scripts.files.map((f) => [f.path, f.sha256]));
  for (const [path, h] of hb) {
    if (!ha.has(path)) out.added.push(path);
    else if (ha.get(path) !== h) out.changed.push(path);
  }
  for (const path of ha.keys()) if (!hb.has(path)) out.removed.push(path);
  for (const list of [out.changed, out.added, out.removed]) list.sort(naturalCompare);
  return out;
}

/**
 * How one compile cache changed. "appeared"/"disappeared" are about the folder itself (absent on one side), never a
 * folder that exists on both sides and went from empty to filled ("grown") or from filled to empty ("emptied").
 * An empty folder that appeared or disappeared is no change worth a line.
 */
function cacheDrift(x: CacheInfo | undefined, y: CacheInfo | undefined): CacheDrift | undefined {
  const name = (y ?? x)!.name;
  const path = (y ?? x)!.path;
  const files = { from: x?.exists ? x.files : null, to: y?.exists ? y.files : null };
  const bytes = { from: x?.exists ? x.bytes : null, to: y?.exists ? y.bytes : null };
  if (x?.error || y?.error) return undefined;
  const base = { name, path, files, bytes };
  if (x && y && x.path !== y.path) return { ...base, change: 'moved' };
  const existed = !!x?.exists;
  const exists = !!y?.exists;
  const fa = x?.files ?? 0;
  const fb = y?.files ?? 0;
  if (!existed && !exists) return undefined;
  if (!existed) return fb > 0 ? { ...base, change: 'appeared' } : undefined;
  if (!exists) return fa > 0 ? { ...base, change: 'disappeared' } : undefined;
  if (fa > 0 && fb === 0) return { ...base, change: 'emptied' };
  if (fb > fa || (y.bytes ?? 0) > (x.bytes ?? 0) * 1.1) return { ...base, change: 'grown' };
  if (fb < fa) return { ...base, change: 'shrunk' };
  return undefined;
}

function diffCaches(a: EnvSnapshot, b: EnvSnapshot): CacheDrift[] {
  const ca = new Map(a.caches.map((c) => [c.name, c]));
  const cb = new Map(b.caches.map((c) => [c.name, c]));
  const names = [...new Set([...ca.keys(), ...cb.keys()])].sort(naturalCompare);
  const out: CacheDrift[] = [];
  for (const n of names) {
    const d = cacheDrift(ca.get(n), cb.get(n));
    if (d) out.push(d);
  }
  return out;
}

export function computeDrift(baseline: EnvSnapshot, now: EnvSnapshot): Drift {
  const la = lineMap(baseline);
  const lb = lineMap(now);
  let differing = 0;
  for (const [k, v] of lb) if (la.get(k) !== v) differing++;
  for (const k of la.keys()) if (!lb.has(k)) differing++;
  // The training process's variables are not lines of the text (the baseline has no process): counted apart.
  const liveRun = diffLiveRun(baseline, now.liveRun);
  differing += liveRun?.process?.changes.length ?? 0;

  const torch: Drift['torch'] = {};
  const ta = baseline.torch;
  const tb = now.torch;
  if (!ta.error && !tb.error) {
    put(torch, 'version', change(ta.version, tb.version));
    put(torch, 'gitVersion', change(ta.gitVersion, tb.gitVersion));
    put(torch, 'cuda', change(ta.cuda, tb.cuda));
    put(torch, 'hip', change(ta.hip, tb.hip));
    put(torch, 'debug', change(String(ta.debug), String(tb.debug)));
    put(torch, 'location', change(ta.location, tb.location));
  }
  const da = baseline.deepInfo;
  const db = now.deepInfo;
  if (da && db && !da.error && !db.error) {
    put(
      torch,
      'cudnn',
      change(da.cudnn === null ? null : String(da.cudnn), db.cudnn === null ? null : String(db.cudnn)),
    );
    put(torch, 'nccl', change(da.nccl, db.nccl));
  }

  const cuda: Drift['cuda'] = {};
  const nv = (s: EnvSnapshot) => (s.cuda.nvcc?.found ? (s.cuda.nvcc.version ?? s.cuda.nvcc.release) : 'not found');
  if (!baseline.cuda.error && !now.cuda.error) put(cuda, 'nvcc', change(nv(baseline), nv(now)));
  if (!baseline.gpus.error && !now.gpus.error) put(cuda, 'driver', change(driverOf(baseline), driverOf(now)));

  const python: Drift['python'] = {};
  if (!baseline.python.error && !now.python.error) {
    put(python, 'version', change(baseline.python.version, now.python.version));
    put(python, 'executable', change(baseline.python.executable, now.python.executable));
    put(python, 'prefix', change(baseline.python.prefix, now.python.prefix));
  }

  const host: Drift['host'] = {};
  const ha = baseline.host;
  const hb = now.host;
  if (!ha.error && !hb.error) {
    const containerOf = (h: EnvSnapshot['host']) => (h.container?.detected ? (h.container.kind ?? 'yes') : 'no');
    put(host, 'hostname', change(ha.hostname, hb.hostname));
    put(host, 'os', change(ha.os?.prettyName ?? null, hb.os?.prettyName ?? null));
    put(host, 'kernel', change(ha.kernel, hb.kernel));
    put(host, 'libc', change(ha.libc, hb.libc));
    put(host, 'container', change(containerOf(ha), containerOf(hb)));
    put(host, 'cpu', change(ha.cpu?.model ?? null, hb.cpu?.model ?? null));
    put(host, 'cpuCount', change(String(ha.cpu?.affinity ?? ha.cpu?.count), String(hb.cpu?.affinity ?? hb.cpu?.count)));
    put(host, 'memory', change(formatBytes(ha.memory?.totalBytes), formatBytes(hb.memory?.totalBytes)));
  }

  return {
    unchanged: differing === 0,
    differingLines: differing,
    packages: diffPackages(baseline, now),
    torch,
    cuda,
    python,
    host,
    gpus: diffGpus(baseline, now),
    env: diffEnv(baseline, now),
    envSources: { baseline: baseline.env.source, now: now.env.source },
    liveRun,
    scripts: diffScripts(baseline, now),
    caches: diffCaches(baseline, now),
    errors: [
      ...baseline.errors.map((e) => ({ side: 'baseline' as const, part: e.part, message: e.message })),
      ...now.errors.map((e) => ({ side: 'now' as const, part: e.part, message: e.message })),
    ],
  };
}

// ------------------------------------------------------------------------------------------------ rendering

/** Variables that hold a `:`-separated list of folders: compared entry by entry. */
export function isPathList(name: string): boolean {
  return /(^|_)PATH$/.test(name) || name === 'LD_PRELOAD' || /_DIRS$/.test(name);
}

/** `PATH: +/opt/new/bin, −/usr/local/cuda-12/bin` (entries added and removed; order only: "reordered"). */
export function pathListChange(e: EnvChange): string {
  const split = (s: string | undefined) => (s === undefined ? [] : s.split(':').filter((x) => x !== ''));
  const a = split(e.from);
  const b = split(e.to);
  if (e.kind === 'added') return `${e.name} added (${listed(b, (x) => x)})`;
  if (e.kind === 'removed') return `${e.name} removed (was ${listed(a, (x) => x)})`;
  const sa = new Set(a);
  const sb = new Set(b);
  const added = b.filter((x) => !sa.has(x));
  const removed = a.filter((x) => !sb.has(x));
  const bits = [...added.map((x) => `+${x}`), ...removed.map((x) => `−${x}`)];
  if (bits.length === 0) return `${e.name} reordered`;
  return `${e.name}: ${listed(bits, (x) => x)}`;
}

const MAX_ITEMS = 8;

function v(x: string | number | null | undefined): string {
  return x === null || x === undefined ? 'none' : String(x);
}

/** `+cu128 → +cu130` when the local build part of torch's version changed (`2.11.0+cu128` → `2.11.0+cu130`). */
export function buildChange(from: string | null, to: string | null): string | undefined {
  const local = (s: string | null) => (s && s.includes('+') ? s.slice(s.indexOf('+')) : null);
  const a = local(from);
  const b = local(to);
  if (a === b || (from === null && to === null)) return undefined;
  return `${a ?? 'no local build'} → ${b ?? 'no local build'}`;
}

function shortHash(h: string | null): string {
  return h && /^[0-9a-f]{40}$/.test(h) ? h.slice(0, 10) : v(h);
}

function listed<T>(items: readonly T[], show: (t: T) => string): string {
  const shown = items.slice(0, MAX_ITEMS).map(show).join(', ');
  return items.length > MAX_ITEMS ? `${shown}, … and ${items.length - MAX_ITEMS} more` : shown;
}

function cacheLine(c: CacheDrift): string {
  const files = `${v(c.files.from)} → ${v(c.files.to)} files`;
  const bytes = `${c.bytes.from === null ? 'none' : formatBytes(c.bytes.from)} → ${c.bytes.to === null ? 'none' : formatBytes(c.bytes.to)}`;
  return `${c.name} ${c.change} (${files}, ${bytes})`;
}

/** The summary as `[label, text]` bullets, most important first; shared by the markdown and plain renderings. */
export function driftBullets(d: Drift): [string, string][] {
  const out: [string, string][] = [];
  const t = d.torch;
  const torchBits: string[] = [];
  const build = t.version ? buildChange(t.version.from, t.version.to) : undefined;
  // torch gone (another interpreter, a broken install) or new: one fact, not every field turned to "none".
  if (t.version && t.version.to === null && t.version.from !== null) {
    torchBits.push(`not importable now (was ${v(t.version.from)})`);
  } else if (t.version && t.version.from === null && t.version.to !== null) {
    torchBits.push(`now importable: ${v(t.version.to)}`);
  } else {
    // A swapped build (cu128 → cu130, a CPU wheel) explains more than any other line: it leads the summary.
    if (build) torchBits.push(`build ${build}`);
    if (t.version) torchBits.push(`${v(t.version.from)} → ${v(t.version.to)}`);
    if (t.gitVersion) torchBits.push(`git ${shortHash(t.gitVersion.from)} → ${shortHash(t.gitVersion.to)}`);
    if (t.cuda) torchBits.push(`built for CUDA ${v(t.cuda.from)} → ${v(t.cuda.to)}`);
    if (t.hip) torchBits.push(`HIP ${v(t.hip.from)} → ${v(t.hip.to)}`);
    if (t.debug) torchBits.push(`debug ${t.debug.from} → ${t.debug.to}`);
    if (t.location) torchBits.push(`now from ${v(t.location.to)}`);
  }
  if (t.cudnn) torchBits.push(`cuDNN ${v(t.cudnn.from)} → ${v(t.cudnn.to)}`);
  if (t.nccl) torchBits.push(`NCCL ${v(t.nccl.from)} → ${v(t.nccl.to)}`);
  if (torchBits.length) out.push(['torch', torchBits.join('; ')]);

  const p = d.packages;
  const triton = p.changed.find((c) => c.name === 'triton' || c.name === 'pytorch-triton');
  if (triton) out.push([triton.name, `${v(triton.from)} → ${v(triton.to)}`]);
  const others = p.changed.filter((c) => c !== triton && c.name !== 'torch');
  const pkgBits: string[] = [];
  if (others.length) pkgBits.push(`changed ${listed(others, (c) => `${c.name} ${v(c.from)} → ${v(c.to)}`)}`);
  if (p.added.length) pkgBits.push(`added ${listed(p.added, (c) => `${c.name} ${v(c.to)}`)}`);
  if (p.removed.length) pkgBits.push(`removed ${listed(p.removed, (c) => `${c.name} ${v(c.from)}`)}`);
  if (pkgBits.length) out.push(['packages', pkgBits.join('; ')]);

  const cudaBits: string[] = [];
  if (d.cuda.driver) cudaBits.push(`driver ${v(d.cuda.driver.from)} → ${v(d.cuda.driver.to)}`);
  if (d.cuda.nvcc) cudaBits.push(`nvcc ${v(d.cuda.nvcc.from)} → ${v(d.cuda.nvcc.to)}`);
  if (cudaBits.length) out.push(['CUDA', cudaBits.join('; ')]);

  const gpuBits: string[] = [];
  if (d.gpus.count) gpuBits.push(`${d.gpus.count.from} → ${d.gpus.count.to} GPUs`);
  const gpuChanges = d.gpus.changed.filter((c) => c.field !== 'driver_version');
  if (gpuChanges.length) gpuBits.push(listed(gpuChanges, (c) => `GPU ${c.index} ${c.field} ${v(c.from)} → ${v(c.to)}`));
  if (gpuBits.length) out.push(['GPUs', gpuBits.join('; ')]);

  // Each set of variables says where it came from: a new login (what the next launch gets), the training process.
  if (d.env.length) out.push([d.envSources.now ? `env of ${d.envSources.now}` : 'env', envText(d.env)]);
  const proc = d.liveRun?.process;
  if (proc?.changes.length) out.push([`env of ${proc.label}`, envText(proc.changes)]);

  const s = d.scripts;
  const scriptBits: string[] = [];
  if (s.changed.length) scriptBits.push(`changed ${listed(s.changed, (x) => x)}`);
  if (s.added.length) scriptBits.push(`new ${listed(s.added, (x) => x)}`);
  if (s.removed.length) scriptBits.push(`gone ${listed(s.removed, (x) => x)}`);
  if (scriptBits.length) out.push(['scripts', scriptBits.join('; ')]);

  if (d.caches.length) out.push(['compile caches', d.caches.map(cacheLine).join('; ')]);

  const py = d.python;
  const pyBits: string[] = [];
  if (py.executable) pyBits.push(`interpreter ${v(py.executable.from)} → ${v(py.executable.to)}`);
  else if (py.prefix) pyBits.push(`prefix ${v(py.prefix.from)} → ${v(py.prefix.to)}`);
  if (py.version) pyBits.push(`${v(py.version.from)} → ${v(py.version.to)}`);
  // Another interpreter (a venv not activated, a conda env) explains most other lines (every package "changed"):
  // it comes first, after only a swapped torch build.
  if (pyBits.length) out.splice(build ? 1 : 0, 0, ['python', pyBits.join('; ')]);

  const hostBits = Object.entries(d.host).map(([k, c]) => `${k} ${v(c.from)} → ${v(c.to)}`);
  if (hostBits.length) out.push(['host', hostBits.join('; ')]);

  if (d.errors.length) {
    out.push([
      NOT_COMPARED,
      listed(d.errors, (e) => `${e.part} failed on ${e.side === 'now' ? 'now' : 'the baseline'}`),
    ]);
  }
  return out;
}

function envText(changes: readonly EnvChange[]): string {
  // Plain settings (NCCL_P2P_DISABLE=1) first: a long PATH must not push them out of sight.
  const plain = changes.filter((e) => e.redacted || !isPathList(e.name));
  const paths = changes.filter((e) => !e.redacted && isPathList(e.name));
  const bits: string[] = [];
  if (plain.length)
    bits.push(
      listed(plain, (e) => {
        if (e.redacted) return `${e.name} ${e.kind} (secret)`;
        if (e.kind === 'added') return `${e.name}=${v(e.to)} added`;
        if (e.kind === 'removed') return `${e.name} removed (was ${v(e.from)})`;
        return `${e.name} ${v(e.from)} → ${v(e.to)}`;
      }),
    );
  for (const e of paths) bits.push(pathListChange(e));
  return bits.join('; ');
}

/**
 * Where the variables compared came from, one line (null when neither side recorded it and no run was asked
 * about): `Variables: baseline — a new login on gpu-box; now — a new login on gpu-box and the training process
 * 4242 (python3 train.py) of /runs/a (2 differing, 5 as the baseline's)`.
 */
export function envSourcesLine(d: Drift): string | null {
  const { baseline, now } = d.envSources;
  const live = d.liveRun;
  if (baseline === null && now === null && !live) return null;
  // Snapshots from before the source was recorded came from the resident helper: it is not guessed here.
  const notRecorded = 'source not recorded';
  let nowPart = `now — ${now ?? notRecorded}`;
  if (live?.process) {
    const p = live.process;
    nowPart += ` and ${p.label} of ${live.run} (${p.changes.length} differing, ${p.same} as the baseline's)`;
  } else if (live) {
    nowPart += live.error
      ? `; the training process of ${live.run} was not read: ${live.error}`
      : `; no training process of ${live.run} runs now`;
  }
  return `Variables: baseline — ${baseline ?? notRecorded}; ${nowPart}`;
}

export interface DriftTitles {
  baseline: string;
  now: string;
}

const NOT_COMPARED = 'not compared';
const MINOR: [string, string] = ['other', 'only minor lines differ: see the diff'];

/** The bullets a summary shows: driftBullets, or one "minor lines" bullet when only those differ. */
function summaryBullets(d: Drift): [string, string][] {
  const bullets = driftBullets(d);
  if (!d.unchanged && !bullets.some(([label]) => label !== NOT_COMPARED)) bullets.unshift(MINOR);
  return bullets;
}

/** How many differences the summary lists: one per bullet ("not compared" is none), so the headline matches. */
export function driftCount(d: Drift): number {
  return d.unchanged ? 0 : summaryBullets(d).filter(([label]) => label !== NOT_COMPARED).length;
}

function headline(d: Drift, titles: DriftTitles): string {
  if (d.unchanged) return `No drift: ${titles.now} matches ${titles.baseline}`;
  const n = driftCount(d);
  return `${n} difference${n === 1 ? '' : 's'} between ${titles.baseline} and ${titles.now}`;
}

export function renderDriftMarkdown(d: Drift, titles: DriftTitles = { baseline: 'the baseline', now: 'now' }): string {
  const lines = [`**${mdEscape(headline(d, titles))}**`, ''];
  for (const [label, text] of summaryBullets(d)) lines.push(`- **${mdEscape(label)}**: ${mdEscape(text)}`);
  const sources = envSourcesLine(d);
  if (sources) lines.push('', mdEscape(sources));
  return lines.join('\n') + '\n';
}

export function renderDriftText(d: Drift, titles: DriftTitles = { baseline: 'the baseline', now: 'now' }): string {
  const lines = [headline(d, titles)];
  for (const [label, text] of summaryBullets(d)) lines.push(`  ${label}: ${text}`);
  const sources = envSourcesLine(d);
  if (sources) lines.push(sources);
  return lines.join('\n') + '\n';
}

// `_` stays: names like NCCL_P2P_DISABLE are intraword, where CommonMark never starts emphasis.
function mdEscape(s: string): string {
  return s.replace(/([\\`*[\]<>#|])/g, '\\$1');
}
