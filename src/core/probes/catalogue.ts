import { z } from 'zod';
import { KnownGoodError } from '../errors';
import { parsePythonJson } from '../json';
import { defineProbe, type ProbeCall, type ProbeOutcome } from './probe';
import { probeOutcome } from './runner';

/*
 * "Known Good: Run Probe…": what a probe a person can run in a terminal is (what it needs: a root, a checkpoint; a
 * few human lines for its result) and the host probes that belong to no feature. Each feature's own choices live
 * with it (core/runs/probeChoice.ts, core/args/probeChoice.ts, core/baselines/probeChoices.ts); the Run Probe
 * feature lists them all (src/probes/choices.ts). The result itself goes on to the feature that owns it.
 */

export const gpuStatusSchema = z.looseObject({
  source: z.string().nullable(),
  driver: z.string().nullable().default(null),
  gpus: z.array(
    z.looseObject({
      index: z.number().nullable(),
      name: z.string().nullable(),
      memoryUsedMiB: z.number().nullable(),
      memoryTotalMiB: z.number().nullable(),
      utilizationPct: z.number().nullable(),
      temperatureC: z.number().nullable(),
      powerW: z.number().nullable(),
    }),
  ),
  processes: z.array(
    z.looseObject({ gpu: z.number().nullable(), pid: z.number().nullable(), name: z.string().nullable() }),
  ),
});
export const gpuStatusProbe = defineProbe('gpu_status', gpuStatusSchema, () => []);

export const torchCheckSchema = z.looseObject({
  imported: z.boolean(),
  importSeconds: z.number().nullable(),
  error: z.string().nullable(),
  version: z.string().nullable(),
  cuda: z.string().nullable(),
  cudaAvailable: z.boolean().nullable(),
  deviceCount: z.number(),
  devices: z.array(z.looseObject({ index: z.number(), name: z.string(), capability: z.string() })),
  triton: z.string().nullable(),
});
export const torchCheckProbe = defineProbe('torch_check', torchCheckSchema, () => []);

/** Where the probe was asked from: a host, one of its roots, a run folder, a checkpoint. */
export interface ProbeContext {
  hostLabel: string;
  roots: readonly string[];
  /** A selected folder (root or run). */
  folder?: string;
  /** A selected checkpoint. */
  checkpoint?: string;
}

export interface ProbeChoice {
  /** `listRuns`, `gpuStatus`, …: what Run Probe's second argument names. */
  id: string;
  /** Shown in the quick pick and in the terminal's name. */
  label: string;
  detail: string;
  /** What must be asked first, if the context does not give it. */
  needs?: 'checkpoint' | 'roots';
  call(ctx: ProbeContext): ProbeCall<unknown>;
  /** A few lines for a person; the terminal shows them after the run. */
  summarize(value: unknown, ctx: ProbeContext): string;
}

/** The host probes: GPU status and the torch import check. */
export const HOST_PROBE_CHOICES: readonly ProbeChoice[] = [
  {
    id: 'gpuStatus',
    label: 'GPU status',
    detail: 'python/gpu_status.py: nvidia-smi memory, utilisation, temperature, processes',
    call: () => gpuStatusProbe(),
    summarize: (v) => {
      const r = gpuStatusProbe().parse(v);
      if (r.source === 'none') return `no nvidia-smi on this host${r.driver ? ` (driver: ${r.driver})` : ''}`;
      return r.gpus.length
        ? `${r.gpus.length} GPU(s), ${r.processes.length} compute process(es)`
        : 'nvidia-smi lists no GPU';
    },
  },
  {
    id: 'torchCheck',
    label: 'Torch import check',
    detail: 'python/torch_check.py: import time, version, CUDA available, devices',
    call: () => torchCheckProbe(),
    summarize: (v) => {
      const r = torchCheckProbe().parse(v);
      if (!r.imported) return `import torch FAILED after ${r.importSeconds ?? '?'} s: ${r.error ?? ''}`;
      return (
        `torch ${r.version ?? '?'} imported in ${r.importSeconds ?? '?'} s; cuda ${r.cuda ?? 'none'}, ` +
        `available: ${r.cudaAvailable ? `yes, ${r.deviceCount} device(s)` : 'no'}`
      );
    },
  },
];

/** The choice named `id` among `choices` (a settings mistake when none is). */
export function findProbeChoice(choices: readonly ProbeChoice[], id: string): ProbeChoice {
  const p = choices.find((x) => x.id === id);
  if (!p) throw new KnownGoodError('settings', `unknown probe ${id}: one of ${choices.map((x) => x.id).join(', ')}`);
  return p;
}

/** `Known Good: <probe> @ <host>` */
export function terminalName(what: string, hostLabel: string): string {
  return `Known Good: ${what} @ ${hostLabel}`;
}

/** The framed document of a terminal run → the probe's parsed result (the same checks as a one-shot run). */
export function parseFramedResult<R>(call: ProbeCall<R>, framed: string | undefined, where: string): ProbeOutcome<R> {
  if (framed === undefined) throw new KnownGoodError('probe-failed', `${call.probe} on ${where} printed no result`);
  return probeOutcome(call, parsePythonJson(framed), where);
}
