import type { RunData } from '../../src/core/dashboard/protocol';
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

const DASH_RUN = 4242;

/**
 * The dashboard's case (issue 34 item 2): 40 samples 5 s apart from t = 1000 on GPUs 0 and 1; GPU 1 at its power cap for samples 10–19; bob's process on
 * GPU 0 from sample 24; the log logs a step a second from t = 1000 (step 10), its tok/s halving at step 130 (t = 1120).
 */
export function dashboardTimeline() {
  return {
    headers: [header(990, DASH_RUN)],
    samples: samples(1000, 40, (k) => ({
      gpus: [
        h200(0, { smClock: 1980, util: 100, power: 650 }),
        h200(1, k >= 10 && k < 20 ? { reasons: ['sw_power_cap'], smClock: 1500, power: 700 } : { smClock: 1900 }),
      ],
      processes: [...ranks([0, 1], DASH_RUN), ...(k >= 24 ? [proc(7001, 0, { user: 'bob', memMiB: 20480 })] : [])],
    })),
  };
}

export function dashboardLogRun(): RunData {
  const x = Array.from({ length: 180 }, (_, i) => 10 + i);
  const t = x.map((s) => 1000 + (s - 10));
  const y = x.map((s) => (s < 130 ? 12800 : 6400));
  return {
    run: {
      id: 'h:/r/train_log.jsonl',
      label: 'r',
      host: 'h',
      path: '/r/train_log.jsonl',
      lines: 180,
      skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
    },
    series: [
      { key: 'loss', x, min: y.map(() => 2), max: y.map(() => 2), last: y.map(() => 2), t },
      { key: 'tok_s', x, min: y, max: y, last: y, t },
    ],
  };
}
