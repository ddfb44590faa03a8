import type {
  GpuHeader,
  GpuHealth,
  GpuProcess,
  GpuReading,
  GpuSample,
  GpuTimeline,
} from '../../src/core/hardware/gpuProbe';

/*
 * GPU timelines for unit tests, in the shape python/gpu_health.py returns them, with readings taken from the H200 rows
 * of test/fixtures/nvidia-smi/ — nvidia-smi output WRITTEN in the format NVIDIA documents (`--query-gpu=…
 * --format=csv,noheader,nounits`), not recorded: no GPU was lent when they were made.
 */

/** An H200 under load as r580-h200x8-steady.gpu.csv has it; `over` changes what a test needs. */
export function h200(index: number, over: Partial<GpuReading> = {}): GpuReading {
  return {
    index,
    util: 100,
    smClock: 1980,
    smClockMax: 1980,
    memClock: 3201,
    memClockMax: 3201,
    power: 612.45,
    powerLimit: 700,
    temp: 61,
    memUsed: 121034,
    memTotal: 143771,
    reasons: [],
    pcieGen: 5,
    pcieGenMax: 5,
    pcieWidth: 16,
    pcieWidthMax: 16,
    eccUncorrected: 0,
    retiredSbe: null,
    retiredDbe: null,
    retiredPending: null,
    remappedCorrectable: 0,
    remappedUncorrectable: 0,
    remappedPending: false,
    remappedFailure: false,
    ...over,
  };
}

/** A process on a GPU as --query-compute-apps lists it, with what /proc says of it. */
export function proc(pid: number, gpu: number, over: Partial<GpuProcess> = {}): GpuProcess {
  return {
    gpu,
    pid,
    name: '/usr/bin/python3',
    memMiB: 71020,
    user: 'alice',
    comm: 'python3',
    ancestors: [],
    seen: true,
    ...over,
  };
}

/** A launch's header line: its PID, `gpus` H200s. */
export function header(t: number, pid: number, gpus = 2): GpuHeader {
  const static_ = Array.from({ length: gpus }, (_, i) => ({
    index: i,
    uuid: `GPU-${i}`,
    name: 'NVIDIA H200',
    memTotal: 143771,
  }));
  return { t, pid, intervalS: 5, capBytes: 64 << 20, fields: {}, gpus: static_ };
}

/** `n` samples 5 s apart from `t0`, the readings and the processes from `at(k)`. */
export function samples(
  t0: number,
  n: number,
  at: (k: number) => { gpus: GpuReading[]; processes: GpuProcess[] },
): GpuSample[] {
  return Array.from({ length: n }, (_, k) => ({ t: t0 + 5 * k, ...at(k) }));
}

/** The run's ranks (children of the launch `root`), one on each of `gpus`. */
export const ranks = (gpus: number[], root: number): GpuProcess[] =>
  gpus.map((g, i) => proc(root + 1 + i, g, { ancestors: [root, 1] }));

/** What gpu_health.py returns for a run: a reading now (the last sample) and the recorded timeline. */
export function healthOf(run: string, headers: GpuHeader[], s: GpuSample[], now?: GpuSample | null): GpuHealth {
  const timeline: GpuTimeline = {
    run,
    files: [{ path: `${run}/.known-good/gpu-timeline.jsonl`, bytes: 1 }],
    headers,
    ends: [],
    samples: s,
    total: s.length,
    kept: s.length,
    skipped: 0,
    truncated: null,
    errors: [],
  };
  const last = now === undefined ? s[s.length - 1] : now;
  return {
    nvidiaSmi: '/usr/bin/nvidia-smi',
    said: null,
    now: last ? { ...last, fields: {} } : null,
    nowError: null,
    timeline: s.length || headers.length ? timeline : null,
  };
}
