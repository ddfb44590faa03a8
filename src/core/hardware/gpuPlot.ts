import type { GpuMark, GpuPlot } from '../dashboard/protocol';
import type { ProbeRunnerLike } from '../probes/probe';
import { GPU_SERIES } from './gpuKeys';
import { gpuHealthProbe } from './gpuProbe';
import type { GpuReading, GpuTimeline } from './gpuProbe';
import { analyzeGpuTimeline, REASON_TEXT } from './timeline';

/*
 * A run's GPU timeline as the dashboard draws it under the throughput (issue 34 item 2): per sample time, the SM
 * clock, utilisation and power of the run's GPUs (the line: the slowest GPU, the one with the lowest median SM clock;
 * the band: every GPU of the run), and marks for the periods a throttle reason was active and another process was on
 * the run's GPUs. Times are the host's (the sampler's); the webview places them on the step axis through the log's own
 * wall times (webview/src/data.ts `withGpu`). Pure.
 */

/** At most this many points a series: as many as a log's reduction sends. */
const MAX_POINTS = 2000;
/** Periods shorter than this many samples in a row are not marked (a flicker). */
const MIN_RUN = 2;
const MAX_MARKS = 60;

function median(xs: readonly number[]): number | null {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Periods (first and last sample time) where `on(sample index)` held for at least MIN_RUN samples in a row. */
function periods(t: readonly number[], on: (i: number) => boolean): { from: number; to: number; open: boolean }[] {
  const out: { from: number; to: number; open: boolean }[] = [];
  let start = -1;
  for (let i = 0; i <= t.length; i++) {
    const yes = i < t.length && on(i);
    if (yes && start < 0) start = i;
    if (!yes && start >= 0) {
      if (i - start >= MIN_RUN) out.push({ from: t[start]!, to: t[i - 1]!, open: i === t.length });
      start = -1;
    }
  }
  return out;
}

function gpuList(gs: readonly number[]): string {
  return gs.length === 1 ? `GPU ${gs[0]}` : `GPUs ${gs.join(', ')}`;
}

/** The plot of a recorded timeline; null when it has no sample with a reading. */
export function gpuPlotOf(tl: Pick<GpuTimeline, 'headers' | 'samples'>): GpuPlot | null {
  const samples = tl.samples.filter((s) => !s.error && s.gpus.length).sort((a, b) => a.t - b.t);
  if (!samples.length) return null;
  const analysis = analyzeGpuTimeline(tl);
  const all = [...new Set(samples.flatMap((s) => s.gpus.map((g) => g.index)))].sort((a, b) => a - b);
  const gpus = analysis.runGpus ?? all;
  const at = samples.map((s) => new Map(s.gpus.map((g) => [g.index, g])));
  const medians = gpus.map((g) => ({
    g,
    m: median(at.flatMap((m) => (typeof m.get(g)?.smClock === 'number' ? [m.get(g)!.smClock!] : []))),
  }));
  const slowest = medians.filter((x) => x.m !== null).sort((a, b) => a.m! - b.m! || a.g - b.g)[0]?.g ?? null;

  const step = Math.max(1, Math.ceil(samples.length / MAX_POINTS));
  const keep = samples.map((_, i) => i).filter((i) => i % step === 0 || i === samples.length - 1);
  const seriesOf = (key: string, value: (r: GpuReading) => number | null) => {
    const min: (number | null)[] = [];
    const max: (number | null)[] = [];
    const last: (number | null)[] = [];
    for (const i of keep) {
      const vs = gpus.map((g) => at[i]!.get(g)).flatMap((r) => (r && value(r) !== null ? [value(r)!] : []));
      min.push(vs.length ? Math.min(...vs) : null);
      max.push(vs.length ? Math.max(...vs) : null);
      const own = slowest !== null ? at[i]!.get(slowest) : undefined;
      last.push(own ? value(own) : null);
    }
    return { key, min, max, last };
  };

  const t = samples.map((s) => s.t);
  const marks: GpuMark[] = [];
  // throttle periods, per reason, on the GPUs drawn (an idle GPU's gpu_idle is no throttle)
  for (const reason of Object.keys(REASON_TEXT)) {
    const hit = (i: number) => gpus.filter((g) => at[i]!.get(g)?.reasons?.includes(reason));
    for (const p of periods(t, (i) => hit(i).length > 0)) {
      const i = t.indexOf(p.from);
      marks.push({
        kind: 'throttle',
        label: `${reason} on ${gpuList(hit(i))}`,
        from: p.from,
        to: p.open ? null : p.to,
      });
    }
  }
  // another process on the run's GPUs: as the findings name it, from its first sample to its last
  for (const f of analysis.findings) {
    if (f.kind !== 'neighbour' || !f.onset) continue;
    // short enough to be drawn beside its line: "bob's python3 on GPU 0" (the title has the PIDs)
    const m = /^another process on (.*?): (.*?) \(PID/.exec(f.title);
    const label = m ? `${m[2]} on ${m[1]}` : f.title;
    marks.push({ kind: 'neighbour', label, from: f.onset.to, to: f.until ?? null });
  }
  marks.sort((a, b) => a.from - b.from);
  return {
    gpus,
    slowest,
    t: keep.map((i) => t[i]!),
    series: [
      seriesOf(GPU_SERIES.sm, (r) => r.smClock),
      seriesOf(GPU_SERIES.util, (r) => r.util),
      seriesOf(GPU_SERIES.power, (r) => r.power),
    ],
    marks: marks.slice(0, MAX_MARKS),
    thinned: samples.length - keep.length,
  };
}

/** A run folder's recorded GPU timeline as the dashboard's plot (python/gpu_health.py); null when it has none. */
export async function readGpuPlot(probes: ProbeRunnerLike, runFolder: string): Promise<GpuPlot | null> {
  const { value } = await probes.run(gpuHealthProbe({ timeline: runFolder, noNow: true }));
  return value.timeline ? gpuPlotOf(value.timeline) : null;
}
