import type { GpuHealth } from '../../hardware/gpuProbe';
import { analyzeGpuNow, analyzeGpuTimeline, type HardwareFinding } from '../../hardware/timeline';
import type { ReducedSeries } from '../../metrics/metricsProbe';
import type { Changepoint } from '../changepoints';
import type { WhatChangedFacts } from '../facts';
import type { ChangeTime, EvidenceLink, UnknownFact } from '../model';
import { logShifts } from '../throughput';
import { isoOf, type Draft } from './draft';

/*
 * Cause: the machine. What the run's GPU timeline (python/kg_gpu_sampler.py, started by kg_record.py) or, without
 * one, a reading now (python/gpu_health.py) shows: throttling, clocks below their maximum, another process on the
 * run's GPUs, a PCIe link below its maximum, memory errors, one GPU slower than the others (core/hardware/timeline.ts).
 * Each is dated by the samples around its onset, in steps through the log's wall times where it has them, so that it
 * is scored and ruled out by timing like every other cause.
 */

/** What the hardware facts are called where they are not known. */
const GPU_FACT = 'the GPUs (clocks, throttling, other processes)';

/** Where `t` falls in the log: the last step logged at or before it, and the first logged at or after it. */
function stepsAround(series: ReducedSeries, from: number, to: number): { from: number; to: number } {
  const t = series.t!;
  let a = (series.x[0] ?? 0) - 1;
  let b = (series.x[series.x.length - 1] ?? 0) + 1;
  for (let i = 0; i < series.x.length; i++) {
    const x = series.x[i]!;
    const ti = t[i]!;
    if (ti <= from && x > a) a = x;
    if (ti >= to && x < b) b = x;
  }
  return { from: a, to: Math.max(b, a + 1) };
}

/** When a finding began, as the scoring reads it. */
function whenOf(
  f: HardwareFinding,
  series: ReducedSeries | undefined,
  main: { cp: Changepoint } | undefined,
): ChangeTime {
  const until = f.until !== undefined ? `, gone after ${isoOf(f.until)}` : '';
  if (!f.onset) return { text: 'seen now; since when is not recorded (no GPU timeline)' };
  const { from, to } = f.onset;
  if (from === null) {
    const text = `already at ${isoOf(to)}, the first sample that could show it${until}`;
    // there from the start: before a later shift it cannot explain the drop; at or after one, when it began is not
    // known (the timeline may have begun after the good period)
    if (series?.t && main) {
      const s = stepsAround(series, to, to);
      const lo = main.cp.at - (main.cp.firstAfter - main.cp.at);
      if (s.to <= lo) return { text: `${text} (step ${s.to})`, steps: { from: (series.x[0] ?? 0) - 1, to: s.to } };
    }
    return { text };
  }
  if (series?.t) {
    const steps = stepsAround(series, from, to);
    return { text: `between ${isoOf(from)} and ${isoOf(to)} (steps ${steps.from}–${steps.to})${until}`, steps };
  }
  // no wall times in the log: the first sample that showed it, as a point
  return { text: `first seen at ${isoOf(to)} (not at ${isoOf(from)})${until}`, time: { from: to, to } };
}

function titleOf(f: HardwareFinding): string {
  if (!f.onset) return `${f.title} (seen now)`;
  return f.onset.from === null
    ? `${f.title} (already at ${isoOf(f.onset.to)})`
    : `${f.title} since ${isoOf(f.onset.to)}`;
}

/**
 * The hardware drafts: the timeline's findings when the run has one, else what the GPUs show now (its timing
 * unknown). What cannot be read goes to `unknown`: no nvidia-smi (said once), a reading that failed, processes of
 * another PID namespace, a run launched without kg_record.
 */
export function hardwareDrafts(
  facts: WhatChangedFacts,
  main: { key: string; cp: Changepoint } | undefined,
  unknown: UnknownFact[],
): Draft[] {
  const gpu: GpuHealth | null | undefined = facts.gpu;
  if (!gpu) return [];
  const tl = gpu.timeline;
  for (const e of tl?.errors ?? []) unknown.push({ fact: 'GPU timeline', why: e });
  const recorded = !!tl && tl.samples.length > 0;
  let analysis;
  if (recorded) analysis = analyzeGpuTimeline(tl);
  else if (gpu.now) {
    const live = facts.probe?.launches?.[0]?.live?.records[0]?.pid ?? null;
    analysis = analyzeGpuNow(gpu.now, live);
    if (facts.run !== null)
      unknown.push({
        fact: 'GPU timeline of this run',
        why: `not recorded: launch it through kg_record.py (python3 kg_record.py --run ${facts.run} -- CMD …) to keep one; what the GPUs show now is listed without when it began`,
      });
  } else {
    unknown.push({ fact: GPU_FACT, why: gpu.said ?? (gpu.nowError ? `nvidia-smi: ${gpu.nowError}` : 'not read') });
    return [];
  }
  unknown.push(...analysis.notes);
  // the log's series as the report reads them (speed from wall times included), none of their changepoints again
  const logSeries = logShifts(facts.log, new Set()).series;
  const series = main ? logSeries.find((s) => s.key === main.key && s.t) : logSeries.find((s) => s.t);
  const file = tl?.files[tl.files.length - 1]?.path;
  const fileLink: EvidenceLink[] =
    recorded && file ? [{ kind: 'file', title: `GPU timeline ${file}`, hostId: facts.host.id, path: file }] : [];
  return analysis.findings.map((f) => {
    const evidence: EvidenceLink[] = [];
    if (f.window && f.onset)
      evidence.push({
        kind: 'text-diff',
        title: `GPU samples around ${isoOf(f.onset.to)}`,
        hostId: facts.host.id,
        a: { name: `GPU samples before ${isoOf(f.onset.to)}.txt`, text: f.window.before },
        b: { name: `GPU samples from ${isoOf(f.onset.to)}.txt`, text: f.window.after },
      });
    evidence.push(...fileLink);
    return {
      source: 'gpu',
      category: 'hardware',
      title: titleOf(f),
      detail: `${f.detail}${tl?.truncated ? ` (timeline thinned: ${tl.truncated})` : ''}`,
      when: whenOf(f, series, main),
      evidence,
    };
  });
}
