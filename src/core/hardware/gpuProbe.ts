import { z } from 'zod';
import { defineProbe } from '../probes/probe';

/*
 * The GPUs as nvidia-smi shows them (python/kg_gpu.py): one reading now (python/gpu_health.py), and the timeline
 * python/kg_gpu_sampler.py records beside a launch (RUN/.known-good/gpu-timeline.jsonl), in one shape. A value
 * nvidia-smi answered [N/A], [Not Supported] or did not know is null.
 */

const num = z.number().nullable();
const int = z.number().int().nullable();
const bool = z.boolean().nullable();

/** One GPU at one moment. `uuid` and `name` come with a reading now; a timeline says them once, in its header. */
export const gpuReadingSchema = z.looseObject({
  index: z.number().int(),
  uuid: z.string().nullable().optional(),
  name: z.string().nullable().optional(),
  /** Percent of the sample period a kernel ran. */
  util: num,
  /** MHz. */
  smClock: num,
  smClockMax: num,
  memClock: num,
  memClockMax: num,
  /** W: power.draw.instant, else power.draw. */
  power: num,
  /** W: enforced.power.limit, else power.limit. */
  powerLimit: num,
  /** °C. */
  temp: num,
  /** MiB. */
  memUsed: num,
  memTotal: num,
  /** The clock-event (throttle) reasons active, by nvidia-smi's names (`sw_power_cap`); null when none was read. */
  reasons: z.array(z.string()).nullable(),
  pcieGen: int,
  pcieGenMax: int,
  pcieWidth: int,
  pcieWidthMax: int,
  /** ecc.errors.uncorrected.volatile.total: since the driver loaded. */
  eccUncorrected: int,
  retiredSbe: int,
  retiredDbe: int,
  retiredPending: bool,
  remappedCorrectable: int,
  remappedUncorrectable: int,
  remappedPending: bool,
  remappedFailure: bool,
});
export type GpuReading = z.infer<typeof gpuReadingSchema>;

/** A process nvidia-smi lists on a GPU, with what this host's /proc says of it (`seen` false: not in this /proc). */
export const gpuProcessSchema = z.looseObject({
  /** The GPU's index; null when its UUID matched none. */
  gpu: z.number().int().nullable(),
  pid: z.number().int(),
  /** The executable nvidia-smi names. */
  name: z.string().nullable(),
  memMiB: num,
  user: z.string().nullable(),
  comm: z.string().nullable(),
  /** Parent, grandparent, … (at most 8, up to PID 1). */
  ancestors: z.array(z.number().int()),
  seen: z.boolean(),
});
export type GpuProcess = z.infer<typeof gpuProcessSchema>;

export const gpuSampleSchema = z.looseObject({
  /** Epoch seconds, the host's clock. */
  t: z.number(),
  gpus: z.array(gpuReadingSchema),
  processes: z.array(gpuProcessSchema),
  errors: z.array(z.string()).optional(),
  /** The sample's nvidia-smi failed (the sampler goes on). */
  error: z.string().optional(),
});
export type GpuSample = z.infer<typeof gpuSampleSchema>;

/** A launch's first line in the timeline: what the sampler watched, and the GPUs as they were then. */
export const gpuHeaderSchema = z.looseObject({
  t: z.number(),
  /** The launch's PID (kg_record's, which the command replaced: the same). */
  pid: z.number().int(),
  samplerPid: z.number().int().optional(),
  host: z.string().nullable().optional(),
  intervalS: z.number(),
  capBytes: z.number(),
  fields: z.record(z.string(), z.string()),
  gpus: z.array(
    z.looseObject({ index: z.number().int(), uuid: z.string().nullable(), name: z.string().nullable(), memTotal: num }),
  ),
});
export type GpuHeader = z.infer<typeof gpuHeaderSchema>;

/** A launch's last line: why the sampler stopped, and what it cost (CPU seconds of its own and of nvidia-smi's). */
export const gpuEndSchema = z.looseObject({
  t: z.number(),
  pid: z.number().int(),
  why: z.string(),
  samples: z.number().int(),
  cpuS: z.number().nullable().optional(),
  childCpuS: z.number().nullable().optional(),
});
export type GpuEnd = z.infer<typeof gpuEndSchema>;

export const gpuTimelineSchema = z.object({
  run: z.string(),
  files: z.array(z.object({ path: z.string(), bytes: z.number() })),
  headers: z.array(gpuHeaderSchema),
  ends: z.array(gpuEndSchema),
  /** Oldest first; thinned to the probe's budget (`truncated` says so), every change kept first. */
  samples: z.array(gpuSampleSchema),
  total: z.number().int(),
  kept: z.number().int(),
  skipped: z.number().int(),
  truncated: z.string().nullable(),
  errors: z.array(z.string()),
});
export type GpuTimeline = z.infer<typeof gpuTimelineSchema>;

export const gpuHealthSchema = z.object({
  nvidiaSmi: z.string().nullable(),
  /** "no nvidia-smi on this host": said once, nothing read. */
  said: z.string().nullable(),
  now: gpuSampleSchema.extend({ fields: z.record(z.string(), z.string()) }).nullable(),
  /** nvidia-smi is there but its reading failed. */
  nowError: z.string().nullable(),
  timeline: gpuTimelineSchema.nullable(),
});
export type GpuHealth = z.infer<typeof gpuHealthSchema>;

export interface GpuHealthOptions {
  /** A run folder: its recorded GPU timeline too. */
  timeline?: string;
  /** The timeline only (no reading now). */
  noNow?: boolean;
  maxSamples?: number;
}

/** python/gpu_health.py: the GPUs now and, for a run, its recorded timeline. */
export const gpuHealthProbe = defineProbe(
  'gpu_health',
  gpuHealthSchema,
  (o: GpuHealthOptions = {}) => [
    ...(o.timeline !== undefined ? [`--timeline=${o.timeline}`] : []),
    ...(o.noNow ? ['--no-now'] : []),
    ...(o.maxSamples !== undefined ? [`--max-samples=${Math.round(o.maxSamples)}`] : []),
  ],
  { modules: ['kg_gpu', 'launch_sources'] },
);
