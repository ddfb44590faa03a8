import type { GpuHealth, GpuReading } from '../hardware/gpuProbe';
import { analyzeGpuNow } from '../hardware/timeline';
import { naturalCompare } from '../util/format';

/*
 * GPU health on every node (issue 34 item 4): python/gpu_health.py on each node at once (core/fleet/fleet.ts
 * `gpuFleet`), one row a node — its GPUs, the median SM clock of its busy GPUs against the fleet's, what nvidia-smi
 * shows wrong there now (throttling, clocks below their maximum, a link below its maximum, memory errors, a GPU
 * slower than the node's others: core/hardware/timeline.ts on the reading) and whose processes are on its GPUs — and
 * the odd nodes named: a finding, clocks below 90 % of the fleet's median, another GPU model or count than most, or
 * a user on its GPUs that most nodes do not have.
 */

export interface FleetGpuRow {
  node: string;
  /** `8 × NVIDIA H200`. */
  gpus: string;
  /** Median SM clock (MHz) of its GPUs at ≥ 50 % utilisation; null when none was busy. */
  smMHz: number | null;
  /** Its smMHz over the fleet's median; null without one. */
  ratio: number | null;
  /** What is wrong there, one line each (`GPU 5 throttling: hw_thermal_slowdown (…)`). */
  findings: string[];
  /** `alice python3` a distinct user and process on its GPUs. */
  processes: string[];
  /** Why it is odd; empty when it is not. */
  odd: string[];
}

export interface FleetGpu {
  rows: FleetGpuRow[];
  medianSmMHz: number | null;
  /** Nodes with a reason to look, the most reasons first; `oddest` the first. */
  odd: string[];
  oddest: string | null;
  /** Findings most nodes share: listed once, setting no node apart. */
  shared: string[];
  /** Nodes without nvidia-smi (said once each) or whose reading failed. */
  unread: { node: string; message: string }[];
  failed: { node: string; message: string }[];
}

export const SLOW_CLOCK_BELOW = 0.9;
const BUSY_UTIL = 50;

function median(xs: readonly number[]): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function modelOf(gpus: readonly GpuReading[]): string {
  const names = [...new Set(gpus.map((g) => g.name ?? '?'))];
  return gpus.length ? `${gpus.length} × ${names.join(' + ')}` : 'no GPU';
}

export function compareGpuHealth(
  results: ReadonlyMap<string, GpuHealth>,
  failed: readonly { node: string; message: string }[] = [],
): FleetGpu {
  const entries = [...results.entries()].sort((a, b) => naturalCompare(a[0], b[0]));
  const unread: FleetGpu['unread'] = [];
  const rows: FleetGpuRow[] = [];
  for (const [node, h] of entries) {
    if (!h.now) {
      unread.push({ node, message: h.said ?? (h.nowError ? `nvidia-smi: ${h.nowError}` : 'not read') });
      continue;
    }
    const busy = h.now.gpus.filter((g) => (g.util ?? 0) >= BUSY_UTIL && typeof g.smClock === 'number');
    const a = analyzeGpuNow(h.now, null);
    rows.push({
      node,
      gpus: modelOf(h.now.gpus),
      smMHz: median(busy.map((g) => g.smClock!)),
      ratio: null,
      findings: a.findings.map((f) => f.title),
      processes: [...new Set(h.now.processes.map((p) => `${p.user ?? '?'} ${p.comm ?? p.name ?? '?'}`))].sort(),
      odd: [],
    });
  }
  const med = median(rows.flatMap((r) => (r.smMHz !== null ? [r.smMHz] : [])));
  const count = <T>(xs: readonly T[]) => xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<T, number>());
  const models = count(rows.map((r) => r.gpus));
  const usualModel = [...models.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  // a user on the GPUs of fewer than half the nodes is not the job's
  const users = count(rows.flatMap((r) => [...new Set(r.processes.map((p) => p.split(' ')[0]!))]));
  // a finding most nodes share (the same GPU at its power cap on every node) is the fleet's, not what sets one apart
  const seen = count(rows.flatMap((r) => r.findings));
  const rare = (n: number) => rows.length <= 2 || n * 2 < rows.length;
  const shared = [...seen.entries()].filter(([, n]) => !rare(n)).map(([f]) => f);
  for (const r of rows) {
    r.ratio = med && r.smMHz !== null ? r.smMHz / med : null;
    r.odd.push(...r.findings.filter((f) => rare(seen.get(f) ?? 0)));
    if (r.ratio !== null && r.ratio < SLOW_CLOCK_BELOW)
      r.odd.push(`SM clock ${Math.round(r.smMHz!)} MHz, ${Math.round(r.ratio * 100)} % of the fleet's median`);
    if (rows.length > 2 && usualModel !== undefined && r.gpus !== usualModel)
      r.odd.push(`${r.gpus} where most nodes have ${usualModel}`);
    const foreign = [...new Set(r.processes.map((p) => p.split(' ')[0]!))].filter(
      (u) => rows.length > 2 && (users.get(u) ?? 0) * 2 < rows.length,
    );
    for (const u of foreign) {
      const what = r.processes.filter((p) => p.startsWith(`${u} `)).map((p) => p.slice(u.length + 1));
      r.odd.push(`${u}'s ${what.join(', ')} on its GPUs, a user most nodes do not have`);
    }
  }
  const odd = rows
    .filter((r) => r.odd.length)
    .sort((a, b) => b.odd.length - a.odd.length || (a.ratio ?? 1) - (b.ratio ?? 1) || naturalCompare(a.node, b.node))
    .map((r) => r.node);
  return { rows, medianSmMHz: med, odd, oddest: odd[0] ?? null, shared, unread, failed: [...failed] };
}

export function renderGpuText(g: FleetGpu, what: string): string {
  const n = g.rows.length;
  const out = [`# GPU health on every node: ${what}, ${n} node${n === 1 ? '' : 's'} read`];
  if (g.medianSmMHz !== null) out.push(`# median SM clock of the busy GPUs: ${Math.round(g.medianSmMHz)} MHz`);
  if (g.oddest) {
    const first = g.rows.find((r) => r.node === g.oddest)!;
    out.push(
      `# the odd node: ${g.oddest} (${first.odd[0]})${g.odd.length > 1 ? `; also ${g.odd.slice(1).join(', ')}` : ''}`,
    );
  } else if (n) out.push('# no node stands out');
  for (const f of g.shared) out.push(`# on most nodes: ${f}`);
  const w = Math.max(4, ...g.rows.map((r) => r.node.length));
  const gw = Math.max(4, ...g.rows.map((r) => r.gpus.length));
  out.push('', `${'node'.padEnd(w)}  ${'GPUs'.padEnd(gw)}  ${'SM MHz'.padStart(7)}  vs median  processes`);
  for (const r of g.rows) {
    const sm = r.smMHz === null ? 'idle' : String(Math.round(r.smMHz));
    const vs = r.ratio === null ? '' : `${Math.round(r.ratio * 100)}%`;
    out.push(
      `${r.node.padEnd(w)}  ${r.gpus.padEnd(gw)}  ${sm.padStart(7)}  ${vs.padStart(9)}  ${r.processes.join(', ') || '—'}`,
    );
    for (const o of r.odd) out.push(`${' '.repeat(w)}  ! ${o}`);
  }
  for (const u of g.unread) out.push(`${u.node.padEnd(w)}  not read: ${u.message}`);
  for (const f of g.failed) out.push(`${f.node.padEnd(w)}  failed: ${f.message}`);
  return out.join('\n') + '\n';
}
