import { formatBytes, naturalCompare } from '../util/format';
import type { EnvSnapshot } from './envProbe';
import { formatLocalTime } from '../util/format';

/**
 * The canonical text of a snapshot: fixed sections, then sorted `key: value` lines, so that two captures of an
 * unchanged machine give identical text and `vscode.diff` shows only what changed. Values that move on their own
 * (free memory and disk, load, times, cache mtimes, the PCIe generation a GPU idles at) go to a separate list.
 */

export const SECTIONS = [
  'snapshot',
  'host',
  'python',
  'torch',
  'cuda',
  'gpus',
  'toolchain',
  'packages',
  'env',
  'scripts',
  'caches',
  'errors',
] as const;
export type Section = (typeof SECTIONS)[number];

export interface RenderedLine {
  section: Section;
  key: string;
  value: string;
}

export interface RenderedSnapshot {
  /** The diffed text: every stable fact, one line each. */
  text: string;
  /** Volatile values, shown apart and never diffed. */
  volatileText: string;
  lines: RenderedLine[];
  volatile: RenderedLine[];
}

function isoTime(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return 'none';
  return formatLocalTime(seconds * 1000);
}

/**
 * A cgroup limit as people read it. cgroup v1 writes "no limit" as the largest page-aligned counter
 * (9223372036854771712 with 4 KiB pages) and v2 as `max`: both read `unlimited`; a real memory limit gets its size.
 */
export function cgroupValue(key: string, raw: string): string {
  const v = raw.trim();
  if (/^max(\s|$)/.test(v)) return `unlimited (${v})`;
  if (/^memory/i.test(key) && /^\d+$/.test(v)) {
    const n = BigInt(v);
    if (n >= 2n ** 62n) return `unlimited (${v})`;
    return `${formatBytes(Number(n))} (${v})`;
  }
  return v;
}

/** A key part as written: quoted when it could break the `key: value` line (control characters, `: `, edges). */
export function keyPart(part: string): string {
  // eslint-disable-next-line no-control-regex
  if (part === '' || /[\u0000-\u001f\u007f"]|: |^\s|\s$/.test(part)) return JSON.stringify(part);
  return part;
}

function valueText(v: unknown): string {
  if (v === null || v === undefined) return 'none';
  if (typeof v === 'string') {
    // eslint-disable-next-line no-control-regex
    return /[\u0000-\u001f\u007f]|^\s|\s$/.test(v) || v === '' ? JSON.stringify(v) : v;
  }
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.length ? v.map(valueText).join(', ') : 'none';
  return JSON.stringify(v);
}

class Lines {
  readonly stable: RenderedLine[] = [];
  readonly volatile: RenderedLine[] = [];
  add(section: Section, key: string, value: unknown): void {
    this.stable.push({ section, key, value: valueText(value) });
  }
  vol(section: Section, key: string, value: unknown): void {
    this.volatile.push({ section, key, value: valueText(value) });
  }
}

/** Byte counts and timestamps that only the volatile list shows. */
export const VOLATILE_GPU_FIELDS: ReadonlySet<string> = new Set(['pcie.link.gen.current']);

const GPU_KEYS: Record<string, string> = {
  driver_version: 'driver',
  'memory.total': 'memory.total.mib',
  'power.limit': 'power.limit.w',
  'clocks.max.sm': 'clocks.max.sm.mhz',
  'clocks.max.mem': 'clocks.max.mem.mhz',
};

function renderHost(s: EnvSnapshot, l: Lines): void {
  const h = s.host;
  if (h.error) l.add('host', 'host.error', h.error);
  l.add('host', 'host.hostname', h.hostname);
  l.add('host', 'host.os', h.os?.prettyName ?? h.os?.id ?? null);
  l.add('host', 'host.kernel', h.kernel);
  l.add('host', 'host.machine', h.machine);
  l.add('host', 'host.libc', h.libc);
  l.add('host', 'host.cpu.model', h.cpu?.model ?? null);
  l.add('host', 'host.cpu.count', h.cpu?.count ?? null);
  l.add('host', 'host.cpu.affinity', h.cpu?.affinity ?? null);
  l.add('host', 'host.memory.total', formatBytes(h.memory?.totalBytes));
  l.vol('host', 'host.memory.available', formatBytes(h.memory?.availableBytes));
  if (h.shm) {
    l.add('host', 'host.shm.total', h.shm.error ?? formatBytes(h.shm.totalBytes));
    l.vol('host', 'host.shm.free', formatBytes(h.shm.freeBytes));
  }
  for (const d of h.disks) {
    const k = `host.disk.${keyPart(d.path)}`;
    l.add('host', `${k}.total`, d.error ?? formatBytes(d.totalBytes));
    l.vol('host', `${k}.free`, formatBytes(d.freeBytes));
  }
  for (const [k, v] of Object.entries(h.cgroup)) l.add('host', `host.cgroup.${keyPart(k)}`, cgroupValue(k, v));
  const c = h.container;
  l.add('host', 'host.container', c ? (c.detected ? (c.kind ?? 'yes') : 'no') : null);
  if (c?.evidence.length) l.add('host', 'host.container.evidence', c.evidence.slice().sort());
  const v = h.virtualization;
  l.add('host', 'host.virtualization', v ? (v.detected ? (v.kind ?? 'yes') : 'no') : null);
  l.vol('host', 'host.load', h.load);
  l.vol('host', 'host.uptime.s', h.uptimeS);
}

function renderPython(s: EnvSnapshot, l: Lines): void {
  const p = s.python;
  if (p.error) l.add('python', 'python.error', p.error);
  l.add('python', 'python.version', p.version);
  l.add('python', 'python.implementation', p.implementation);
  l.add('python', 'python.executable', p.executable);
  l.add('python', 'python.prefix', p.prefix);
  l.add('python', 'python.venv', p.venv);
  l.add('python', 'python.conda.env', p.conda ? (p.conda.env ?? p.conda.prefix) : 'no');
}

function renderTorch(s: EnvSnapshot, l: Lines): void {
  const t = s.torch;
  if (t.error) l.add('torch', 'torch.error', t.error);
  l.add('torch', 'torch.found', t.found);
  l.add('torch', 'torch.version', t.version);
  l.add('torch', 'torch.git', t.gitVersion);
  l.add('torch', 'torch.cuda', t.cuda);
  l.add('torch', 'torch.hip', t.hip);
  l.add('torch', 'torch.debug', t.debug);
  l.add('torch', 'torch.location', t.location);
  if (t.bundledLibs) l.add('torch', 'torch.bundledLibs', t.bundledLibs);
  const d = s.deepInfo;
  if (!d) return;
  if (d.error) l.add('torch', 'torch.loaded.error', d.error);
  l.add('torch', 'torch.loaded.cudnn', d.cudnn);
  l.add('torch', 'torch.loaded.nccl', d.nccl);
  l.add('torch', 'torch.loaded.cudaAvailable', d.cudaAvailable);
  l.add('torch', 'torch.loaded.cxx11abi', d.cxx11abi);
  for (const dev of d.devices) {
    l.add('torch', `torch.device.${dev.index}.name`, dev.name);
    l.add('torch', `torch.device.${dev.index}.capability`, dev.capability);
  }
  l.vol('torch', 'torch.importMs', d.importMs);
}

function renderCuda(s: EnvSnapshot, l: Lines): void {
  const c = s.cuda;
  if (c.error) l.add('cuda', 'cuda.error', c.error);
  const n = c.nvcc;
  l.add('cuda', 'cuda.nvcc', n?.found ? (n.version ?? n.release ?? n.error ?? 'unknown') : 'not found');
  if (n?.found) l.add('cuda', 'cuda.nvcc.path', n.path);
  l.add('cuda', 'cuda.home', c.cudaHome);
  for (const [lib, files] of Object.entries(c.ldconfig ?? {})) l.add('cuda', `cuda.ldconfig.${keyPart(lib)}`, files);
}

function renderGpus(s: EnvSnapshot, l: Lines): void {
  const g = s.gpus;
  l.add('gpus', 'gpus.status', g.status);
  if (g.error) l.add('gpus', 'gpus.error', g.error);
  l.add('gpus', 'gpus.count', g.gpus.length);
  for (const gpu of g.gpus) {
    for (const [field, value] of Object.entries(gpu)) {
      if (field === 'index') continue;
      const key = `gpu.${gpu.index}.${GPU_KEYS[field] ?? field}`;
      if (VOLATILE_GPU_FIELDS.has(field)) l.vol('gpus', key, value);
      else l.add('gpus', key, value);
    }
  }
  const t = g.topology;
  if (t) {
    l.add('gpus', 'gpus.topology.columns', t.columns.join(' | '));
    for (const row of t.rows) l.add('gpus', `gpus.topology.${keyPart(row.name)}`, row.cells.join(' | '));
  }
  if (g.topologyError) l.add('gpus', 'gpus.topology.error', g.topologyError);
}

function renderPackages(s: EnvSnapshot, l: Lines): void {
  const p = s.packages;
  if (p.error) l.add('packages', 'packages.error', p.error);
  l.add('packages', 'packages.count', p.count);
  for (const [name, version] of Object.entries(p.packages)) {
    const ed = p.editable[name];
    l.add(
      'packages',
      `packages.${keyPart(name)}`,
      ed !== undefined ? `${version ?? 'none'} (editable ${ed})` : version,
    );
  }
  for (const [name, copies] of Object.entries(p.shadowed)) {
    l.add(
      'packages',
      `packages.shadowed.${keyPart(name)}`,
      copies.map((c) => `${c.version ?? '?'} at ${c.path ?? '?'}`),
    );
  }
  for (const b of p.broken) l.add('packages', `packages.broken.${keyPart(b)}`, 'no name in metadata');
  for (const [name, v] of Object.entries(p.conda ?? {})) l.add('packages', `conda.${keyPart(name)}`, v);
}

function renderScripts(s: EnvSnapshot, l: Lines): void {
  const sc = s.scripts;
  if (sc.error) l.add('scripts', 'scripts.error', sc.error);
  for (const pat of sc.unmatched) l.add('scripts', `scripts.unmatched.${keyPart(pat)}`, 'no file matches');
  if (sc.truncated) l.add('scripts', 'scripts.truncated', true);
  for (const f of sc.files) {
    const k = `script.${keyPart(f.path)}`;
    if (f.error) l.add('scripts', `${k}.error`, f.error);
    l.add('scripts', `${k}.sha256`, f.sha256);
    l.add('scripts', `${k}.size`, f.size);
    l.vol('scripts', `${k}.mtime`, isoTime(f.mtime));
  }
}

function renderCaches(s: EnvSnapshot, l: Lines): void {
  for (const c of s.caches) {
    const k = `cache.${keyPart(c.name)}`;
    l.add('caches', `${k}.path`, c.path);
    l.add('caches', `${k}.exists`, c.exists);
    if (c.error) l.add('caches', `${k}.error`, c.error);
    if (!c.exists) continue;
    l.add('caches', `${k}.files`, c.files);
    l.add('caches', `${k}.bytes`, c.bytes);
    if (c.unreadableDirs) l.add('caches', `${k}.unreadableDirs`, c.unreadableDirs);
    if (c.truncated) l.add('caches', `${k}.truncated`, true);
    l.vol('caches', `${k}.newest`, isoTime(c.newestMtime));
    l.vol('caches', `${k}.oldest`, isoTime(c.oldestMtime));
  }
}

export function renderLines(s: EnvSnapshot): { lines: RenderedLine[]; volatile: RenderedLine[] } {
  const l = new Lines();
  l.add('snapshot', 'snapshot.schema', s.schema);
  l.add('snapshot', 'snapshot.deep', s.deep);
  const at = Date.parse(s.capturedAt);
  l.vol('snapshot', 'snapshot.capturedAt', Number.isNaN(at) ? s.capturedAt : formatLocalTime(at));
  l.vol('snapshot', 'snapshot.tookMs', s.tookMs);
  for (const [k, v] of Object.entries(s.timings)) l.vol('snapshot', `snapshot.timing.${keyPart(k)}`, v);
  renderHost(s, l);
  renderPython(s, l);
  renderTorch(s, l);
  renderCuda(s, l);
  renderGpus(s, l);
  for (const [tool, v] of Object.entries(s.toolchain))
    l.add('toolchain', `toolchain.${keyPart(tool)}`, v ?? 'not found');
  renderPackages(s, l);
  for (const [name, v] of Object.entries(s.env.vars)) l.add('env', `env.${keyPart(name)}`, v);
  if (s.env.error) l.add('env', 'env.error', s.env.error);
  for (const name of s.env.missingExtra) l.add('env', `env.${keyPart(name)}`, 'unset');
  renderScripts(s, l);
  renderCaches(s, l);
  for (const e of s.errors) l.add('errors', `error.${keyPart(e.part)}`, e.message);
  return { lines: sortLines(l.stable), volatile: sortLines(l.volatile) };
}

function sortLines(lines: RenderedLine[]): RenderedLine[] {
  const order = new Map<Section, number>(SECTIONS.map((s, i) => [s, i]));
  return lines.slice().sort((a, b) => order.get(a.section)! - order.get(b.section)! || naturalCompare(a.key, b.key));
}

function toText(lines: readonly RenderedLine[]): string {
  const out: string[] = [];
  let section: Section | undefined;
  for (const line of lines) {
    if (line.section !== section) {
      if (section !== undefined) out.push('');
      out.push(`[${line.section}]`);
      section = line.section;
    }
    out.push(`${line.key}: ${line.value}`);
  }
  return out.join('\n') + '\n';
}

export function renderSnapshot(s: EnvSnapshot): RenderedSnapshot {
  const { lines, volatile } = renderLines(s);
  return { text: toText(lines), volatileText: toText(volatile), lines, volatile };
}

/** key -> value of the diffed lines, for comparing two snapshots line by line. */
export function lineMap(s: EnvSnapshot): Map<string, string> {
  return new Map(renderLines(s).lines.map((l) => [l.key, l.value]));
}
