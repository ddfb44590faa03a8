// A run's GPU timeline on the dashboard's plots (issue 34 item 2), kept free of the DOM so it runs in plain Node: the
// host sends the samples by host time (core/hardware/gpuPlot.ts); they are placed on the log's steps through the
// log's own wall times (the sampler and the training loop read one host clock), so the GPU plots share the x axis of
// the throughput above them, whichever axis is chosen. Throttle periods and other processes become marks on every plot.
import { GPU_SERIES } from '../../src/core/hardware/gpuKeys';
import type { GpuPlot, RunData, SeriesData, XAxis } from '../../src/core/dashboard/protocol';
import type { CheckpointMark } from './data';

const GPU_KEYS: ReadonlySet<string> = new Set(Object.values(GPU_SERIES));

export function isGpuKey(key: string): boolean {
  return GPU_KEYS.has(key);
}

/**
 * The step a run's log was at at host time `t`, interpolated between the two logged points around it (the run's
 * longest series with wall times); undefined outside the log's time span or without wall times.
 */
export function stepOfTime(run: RunData): ((t: number) => number | undefined) | undefined {
  const s = run.series
    .filter((x) => x.t && x.t.length === x.x.length && !isGpuKey(x.key))
    .sort((a, b) => b.x.length - a.x.length)[0];
  if (!s?.t || s.t.length < 2) return undefined;
  const pairs = s.t.map((t, i) => [t, s.x[i]!] as const).sort((a, b) => a[0] - b[0]);
  return (t) => {
    if (t < pairs[0]![0] || t > pairs[pairs.length - 1]![0]) return undefined;
    let lo = 0;
    let hi = pairs.length - 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (pairs[mid]![0] <= t) lo = mid;
      else hi = mid;
    }
    const [t0, x0] = pairs[lo]!;
    const [t1, x1] = pairs[hi]!;
    return t1 > t0 ? x0 + ((x1 - x0) * (t - t0)) / (t1 - t0) : x0;
  };
}

/** The runs with their GPU series added (placed on their steps); a run without a plot or wall times is as it was. */
export function withGpu(runs: readonly RunData[], gpu: ReadonlyMap<string, GpuPlot>): RunData[] {
  return runs.map((r) => {
    const p = gpu.get(r.run.id);
    const place = p ? stepOfTime(r) : undefined;
    if (!p || !place) return r;
    const extra: SeriesData[] = [];
    for (const s of p.series) {
      const out: SeriesData = { key: s.key, x: [], min: [], max: [], last: [], t: [] };
      p.t.forEach((t, i) => {
        const x = place(t);
        const lo = s.min[i];
        const hi = s.max[i];
        if (x === undefined || lo == null || hi == null) return;
        out.x.push(x);
        out.min.push(lo);
        out.max.push(hi);
        out.last.push(s.last[i] ?? lo);
        out.t!.push(t);
      });
      if (out.x.length) extra.push(out);
    }
    return { ...r, series: [...r.series.filter((s) => !isGpuKey(s.key)), ...extra] };
  });
}

/** The plot title of a GPU series: which GPU the line is and what the band spans. */
export function gpuTitle(key: string, plots: readonly GpuPlot[]): string {
  if (!isGpuKey(key) || !plots.length) return key;
  const p = plots[0]!;
  const line = p.slowest !== null ? `line: GPU ${p.slowest}, the slowest` : 'no reading';
  const band = p.gpus.length > 1 ? `; band: GPUs ${p.gpus.join(', ')}` : '';
  return `${key} (${line}${band}${plots.length > 1 ? `; of ${plots.length} runs` : ''})`;
}

/**
 * Throttle periods and other processes on the run's GPUs, as marks on the chosen axis: where each began, and where it
 * ended when it did before the timeline's end. A mark that falls outside the log's span is left out.
 */
export function gpuMarks(
  runs: readonly RunData[],
  gpu: ReadonlyMap<string, GpuPlot>,
  inPlot: ReadonlySet<string>,
  axis: XAxis,
): CheckpointMark[] {
  const out: CheckpointMark[] = [];
  for (const r of runs) {
    const p = gpu.get(r.run.id);
    if (!p || !inPlot.has(r.run.id)) continue;
    const place = stepOfTime(r);
    const origin = r.series.flatMap((s) => (s.t?.length && !isGpuKey(s.key) ? [s.t[0]!] : []));
    const t0 = origin.length ? Math.min(...origin) : undefined;
    const at = (t: number): number | undefined =>
      axis === 'step' ? place?.(t) : axis === 'time' ? t : t0 !== undefined ? (t - t0) / 3600 : undefined;
    for (const m of p.marks) {
      const a = at(m.from);
      if (a !== undefined) out.push({ x: a, label: m.label, run: r.run.id });
      const b = m.to !== null ? at(m.to) : undefined;
      if (b !== undefined)
        out.push({ x: b, label: `${m.kind === 'throttle' ? 'throttle' : 'neighbour'} ends`, run: r.run.id });
    }
  }
  return out.sort((a, b) => a.x - b.x);
}
