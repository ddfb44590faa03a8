import { z } from 'zod';
import { ckptArgsProbe } from '../args/argsProbe';
import { renderArgsDocument } from '../args/render';
import { envSnapshotProbe, type EnvSnapshot } from '../baselines/envProbe';
import { formatBytes } from '../util/format';
import { KnownGoodError } from '../errors';
import { parsePythonJson } from '../json';
import { defineProbe, type ProbeCall, type ProbeOutcome } from './probe';
import { probeOutcome } from './runner';
import { listRunsProbe } from '../runs/listRuns';
import { renderTextTree } from '../runs/textTree';

/*
 * "Known Good: Run Probe…": which probes a person can run in a terminal, what each needs (a root, a checkpoint),
 * and a few human lines for its result. The result itself goes on to the feature that owns it.
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

export type ProbeId = 'listRuns' | 'ckptArgs' | 'envSnapshot' | 'compileCache' | 'gpuStatus' | 'torchCheck';

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
  id: ProbeId;
  /** Shown in the quick pick and in the terminal's name. */
  label: string;
  detail: string;
  /** What must be asked first, if the context does not give it. */
  needs?: 'checkpoint' | 'roots';
  call(ctx: ProbeContext): ProbeCall<unknown>;
  /** A few lines for a person; the terminal shows them after the run. */
  summarize(value: unknown, ctx: ProbeContext): string;
}

function cacheLines(s: EnvSnapshot): string[] {
  const caches = s.caches ?? [];
  if (!Array.isArray(caches) || caches.length === 0) return ['no compile caches found'];
  return caches.map((c) =>
    !c.exists
      ? `${c.name}: ${c.path} (absent)`
      : `${c.name}: ${c.path}  ${c.files ?? '?'} files, ${formatBytes(c.bytes)}` +
        (c.newestMtime ? `, newest ${new Date(c.newestMtime * 1000).toISOString().replace(/\.\d+Z$/, 'Z')}` : '') +
        (c.truncated ? ' (walk cut short)' : ''),
  );
}

function snapshotLines(s: EnvSnapshot): string[] {
  const t = s.torch;
  const lines = [
    `python ${s.python?.version ?? '?'} (${s.python?.executable ?? '?'})`,
    t?.found ? `torch ${t.version ?? '?'}  cuda ${t.cuda ?? 'none'}` : 'torch: not installed',
    `packages: ${s.packages?.count ?? '?'}`,
    `GPUs: ${s.gpus?.gpus?.map((g) => g.name).join(', ') || 'none'}`,
  ];
  return [...lines, ...cacheLines(s).map((l) => `cache ${l}`)];
}

export const PROBES: readonly ProbeChoice[] = [
  {
    id: 'listRuns',
    label: 'List runs',
    detail: 'python/list_runs.py: runs and checkpoints under the roots',
    needs: 'roots',
    call: (ctx) => listRunsProbe(ctx.folder !== undefined ? [ctx.folder] : ctx.roots),
    summarize: (v) => renderTextTree(listRunsProbe([]).parse(v)),
  },
  {
    id: 'ckptArgs',
    label: 'Checkpoint args',
    detail: 'python/ckpt_args.py: the args saved in a checkpoint (no torch, weights not read)',
    needs: 'checkpoint',
    call: (ctx) => ckptArgsProbe(ctx.checkpoint ?? ''),
    summarize: (v, ctx) =>
      renderArgsDocument(ckptArgsProbe('').parse(v), { host: ctx.hostLabel, capturedAt: new Date() }),
  },
  {
    id: 'envSnapshot',
    label: 'Environment snapshot',
    detail: 'python/env_snapshot.py: packages, torch, CUDA, GPUs, env vars, caches (can be saved as a baseline)',
    call: (ctx) => envSnapshotProbe({ roots: ctx.roots }),
    summarize: (v) => snapshotLines(envSnapshotProbe().parse(v)).join('\n'),
  },
  {
    id: 'compileCache',
    label: 'Compile-cache state',
    detail: 'python/env_snapshot.py, cache part: inductor/triton caches, files, size, newest entry',
    call: (ctx) => envSnapshotProbe({ roots: ctx.roots }),
    summarize: (v) => cacheLines(envSnapshotProbe().parse(v)).join('\n'),
  },
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

export function probeChoice(id: string): ProbeChoice {
  const p = PROBES.find((x) => x.id === id);
  if (!p) throw new KnownGoodError('settings', `unknown probe ${id}: one of ${PROBES.map((x) => x.id).join(', ')}`);
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
