import { z } from 'zod';
import type { EnvMap } from '../actions/envMap';
import { MAX_SLOTS } from '../bisect/engine';
import { KnownGoodError } from '../errors';
import { defineProbe } from '../probes/probe';

/*
 * Which GPUs a replay's runs go to (issue 33 item 4, issue 37): only free ones (no process on it, low use), each a
 * slot of the bisect engine, so that k free GPUs run k states side by side, each state moved to the next GPU on its
 * next run. A run sees its GPU through CUDA_VISIBLE_DEVICES in its environment map (by UUID: nvidia-smi numbers GPUs
 * in PCI order, CUDA by default fastest first). When every GPU is busy the plan says so and the replay waits for the
 * person's word. The list comes from python/gpu_status.py --slots (nvidia-smi's CSV, bounded).
 */

const num = z.number().nullable().default(null);
const str = z.string().nullable().default(null);

export const gpuListSchema = z.looseObject({
  source: z.enum(['nvidia-smi', 'none', 'failed']),
  gpus: z
    .array(
      z.looseObject({
        index: z.number().int(),
        uuid: str,
        name: str,
        utilizationPct: num,
        memoryUsedMiB: num,
        memoryTotalMiB: num,
      }),
    )
    .default([]),
  processes: z
    .array(z.looseObject({ gpu: z.number().int().nullable().default(null), uuid: str, pid: num, memoryMiB: num }))
    .default([]),
  error: str,
  processesError: str,
  limited: str,
});
export type GpuListDoc = z.infer<typeof gpuListSchema>;

export const gpuListProbe = defineProbe('gpu_status', gpuListSchema, () => ['--slots']);

export interface Gpu {
  readonly index: number;
  readonly uuid: string | null;
  readonly name: string | null;
  readonly utilizationPct: number | null;
  readonly memoryUsedMiB: number | null;
  readonly memoryTotalMiB: number | null;
  /** The processes nvidia-smi lists on it; null when it could not list them. */
  readonly pids: readonly number[] | null;
}

/** The host's GPUs: `none` (no nvidia-smi) and `failed` have none, and `why` says so. */
export interface GpuList {
  readonly source: 'nvidia-smi' | 'none' | 'failed';
  readonly gpus: readonly Gpu[];
  readonly why?: string;
}

/** The probe's answer as a list: the processes put on their GPU. */
export function gpuListOf(doc: GpuListDoc): GpuList {
  const known = doc.processesError === null;
  const gpus = doc.gpus.map((g): Gpu => ({
    index: g.index,
    uuid: g.uuid,
    name: g.name,
    utilizationPct: g.utilizationPct,
    memoryUsedMiB: g.memoryUsedMiB,
    memoryTotalMiB: g.memoryTotalMiB,
    pids: known
      ? doc.processes
          .filter((p) => (p.uuid !== null && p.uuid === g.uuid) || (p.uuid === null && p.gpu === g.index))
          .map((p) => p.pid ?? -1)
      : null,
  }));
  const why =
    doc.source === 'none'
      ? 'no nvidia-smi'
      : doc.source === 'failed'
        ? (doc.error ?? 'nvidia-smi failed')
        : (doc.limited ?? undefined);
  return { source: doc.source, gpus, ...(why ? { why } : {}) };
}

export interface FreeLimits {
  /** Highest utilisation (%) of a free GPU (default 10). */
  readonly maxUtil?: number;
  /** Most memory (MiB) already taken on a free GPU (default 1024: a display server or a persistence daemon). */
  readonly maxMemMiB?: number;
}

export const DEFAULT_MAX_UTIL = 10;
export const DEFAULT_MAX_MEM_MIB = 1024;

/** Why `g` is not free, or undefined when it is. */
export function busyWhy(g: Gpu, limits: FreeLimits = {}): string | undefined {
  const maxUtil = limits.maxUtil ?? DEFAULT_MAX_UTIL;
  const maxMem = limits.maxMemMiB ?? DEFAULT_MAX_MEM_MIB;
  if (g.pids === null) return 'its processes could not be listed';
  if (g.pids.length)
    return `${g.pids.length === 1 ? 'a process is' : `${g.pids.length} processes are`} on it (pid ${g.pids
      .slice(0, 3)
      .map((p) => (p < 0 ? '?' : String(p)))
      .join(', ')}${g.pids.length > 3 ? ', …' : ''})`;
  if (g.utilizationPct === null) return 'its use is not reported';
  if (g.utilizationPct > maxUtil) return `${g.utilizationPct} % used (free: at most ${maxUtil} %)`;
  if (g.memoryUsedMiB === null) return 'its memory use is not reported';
  if (g.memoryUsedMiB > maxMem) return `${g.memoryUsedMiB} MiB of its memory taken (free: at most ${maxMem} MiB)`;
  return undefined;
}

/** The free GPUs (no process on them, low use, little memory taken), and the others with why. */
export function freeGpus(list: GpuList, limits: FreeLimits = {}): { free: Gpu[]; busy: { gpu: Gpu; why: string }[] } {
  const free: Gpu[] = [];
  const busy: { gpu: Gpu; why: string }[] = [];
  for (const gpu of list.gpus) {
    const why = busyWhy(gpu, limits);
    if (why) busy.push({ gpu, why });
    else free.push(gpu);
  }
  return { free, busy };
}

/** `--gpus`: the free ones (auto), none (runs as launched, one at a time), or these indexes whatever their use. */
export type GpuChoice = 'auto' | 'none' | readonly number[];

export function parseGpuChoice(text: string): GpuChoice {
  const t = text.trim();
  if (t === 'auto' || t === 'none') return t;
  const words = t.split(',').map((w) => w.trim());
  if (!words.length || words.some((w) => !/^\d{1,3}$/.test(w)))
    throw new KnownGoodError('usage', `--gpus ${text}: auto, none, or GPU indexes such as 0,1,3`);
  return [...new Set(words.map(Number))];
}

/** A slot of the bisect: one GPU. */
export interface GpuSlot {
  readonly index: number;
  readonly uuid: string | null;
  readonly name: string | null;
  /** Why it is busy, when it is used all the same (named, or the person's word). */
  readonly busy?: string;
}

export interface GpuPlan {
  /** One per slot: the runs go to these, k side by side. Empty: one at a time, CUDA_VISIBLE_DEVICES as launched. */
  readonly slots: readonly GpuSlot[];
  /** Every GPU is busy: the replay does not start without the person's word (`allowBusy`), then runs on slot 0. */
  readonly needsWord: boolean;
  /** The plan's lines about GPUs. */
  readonly text: string;
}

const slotOf = (g: Gpu, busy?: string): GpuSlot => ({
  index: g.index,
  uuid: g.uuid,
  name: g.name,
  ...(busy ? { busy } : {}),
});

const gpuName = (g: { index: number }) => `GPU ${g.index}`;

function sideBySide(slots: readonly GpuSlot[]): string {
  return slots.length > 1
    ? `${slots.length} states side by side, each moved to the next GPU on its next run`
    : 'one run at a time';
}

/**
 * Where the runs go: `auto` takes every free GPU (none free: the least used, and the plan waits for the person's
 * word); a list takes those GPUs even when busy (naming them is the word); `none` and a host without nvidia-smi run
 * one at a time without touching CUDA_VISIBLE_DEVICES.
 */
export function planGpus(list: GpuList | undefined, choice: GpuChoice, host: string, limits: FreeLimits = {}): GpuPlan {
  const cpu = (why: string): GpuPlan => ({
    slots: [],
    needsWord: false,
    text: `GPUs: ${why}: the runs go one at a time (slots = 1), CUDA_VISIBLE_DEVICES as the launch had it`,
  });
  if (choice === 'none') return cpu('none asked for (--gpus none)');
  if (!list || list.source !== 'nvidia-smi' || list.gpus.length === 0) {
    const why =
      !list || list.source === 'none'
        ? `no nvidia-smi on ${host} (CPU only)`
        : list.source === 'failed'
          ? `nvidia-smi failed on ${host} (${list.why ?? 'no reason given'})`
          : `nvidia-smi lists no GPU on ${host}`;
    if (choice !== 'auto')
      throw new KnownGoodError('usage', `--gpus ${choice.join(',')}: no GPU can be chosen, ${why}`);
    return cpu(why);
  }
  const { free, busy } = freeGpus(list, limits);
  const busyText = busy.map((b) => `${gpuName(b.gpu)} (${b.why})`).join(', ');
  const limited = list.why ? ` (${list.why})` : '';
  if (choice !== 'auto') {
    const byIndex = new Map(list.gpus.map((g) => [g.index, g]));
    const unknown = choice.filter((i) => !byIndex.has(i));
    if (unknown.length)
      throw new KnownGoodError(
        'usage',
        `--gpus ${choice.join(',')}: ${host} has no GPU ${unknown.join(', ')} (its GPUs: ${list.gpus.map((g) => g.index).join(', ')})`,
      );
    if (choice.length > MAX_SLOTS) throw new KnownGoodError('usage', `--gpus: at most ${MAX_SLOTS} GPUs side by side`);
    const slots = choice.map((i) => {
      const g = byIndex.get(i)!;
      return slotOf(g, busyWhy(g, limits));
    });
    const named = slots.filter((s) => s.busy).map((s) => `${gpuName(s)} (${s.busy})`);
    return {
      slots,
      needsWord: false,
      text:
        `GPUs: ${slots.map(gpuName).join(', ')} as named (--gpus): ${sideBySide(slots)}${limited}` +
        (named.length ? `\n  busy, used because they were named: ${named.join(', ')}` : ''),
    };
  }
  if (free.length) {
    const slots = free.slice(0, MAX_SLOTS).map((g) => slotOf(g));
    return {
      slots,
      needsWord: false,
      text:
        `GPUs: ${free.length} free of ${list.gpus.length} on ${host}: ${slots.map(gpuName).join(', ')}: ` +
        `${sideBySide(slots)}${limited}` +
        (busy.length ? `\n  not used (busy): ${busyText}` : ''),
    };
  }
  const least = [...busy].sort((a, b) => load(a.gpu) - load(b.gpu))[0]!;
  return {
    slots: [slotOf(least.gpu, least.why)],
    needsWord: true,
    text:
      `GPUs: every GPU on ${host} is busy: ${busyText}${limited}\n` +
      `  the replay waits for your word: run anyway, one run at a time on ${gpuName(least.gpu)} (the least used; ` +
      `its speeds are shared with what runs there), or name the GPUs to use (--gpus 0,1)`,
  };
}

/** How much else uses a GPU, for picking the least used: processes first, then use, then memory. */
function load(g: Gpu): number {
  return (g.pids?.length ?? 99) * 1e9 + (g.utilizationPct ?? 100) * 1e6 + (g.memoryUsedMiB ?? 1e6);
}

/** A run's environment with its slot's GPU as the only one it sees (over what the state sets or unsets). */
export function withGpu(env: EnvMap, slot: GpuSlot | undefined): EnvMap {
  if (!slot) return env;
  return {
    set: { ...env.set, CUDA_VISIBLE_DEVICES: slot.uuid ?? String(slot.index) },
    unset: env.unset.filter((n) => n !== 'CUDA_VISIBLE_DEVICES'),
  };
}

/** What a slot is called in the report and the live lines; undefined when the runs have no GPU of their own. */
export function gpuSlotLabel(plan: GpuPlan): ((slot: number) => string) | undefined {
  if (!plan.slots.length) return undefined;
  return (slot) => {
    const s = plan.slots[slot];
    return s ? gpuName(s) : `slot ${slot}`;
  };
}
