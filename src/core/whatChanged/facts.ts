import type { Restart } from '../metrics/restarts';
import type { ArgValue } from '../args/argsProbe';
import type { GpuHealth } from '../hardware/gpuProbe';
import type { EnvSnapshot } from '../baselines/envProbe';
import type { Baseline, ThroughputResult } from '../baselines/store';
import type { MetricsReduction } from '../metrics/metricsProbe';
import type { WhatChangedProbeResult, DataFingerprint, LaunchRecord } from './factsProbe';
import type { UnknownFact } from './model';
import type { ResumeFacts } from './resumeFacts';

/*
 * Everything "What changed?" gathered, as plain data: the analysis (analyze.ts) is a pure function of this, so the
 * ranking is tested on facts written by hand as well as on facts gathered over a real sshd.
 */

export interface CheckpointFact {
  label: string;
  /** Remote path of the checkpoint (file or folder). */
  path: string;
  /** The file its args are read from (a folder's training-state file). */
  argsPath: string;
  step: number;
  /** Epoch seconds, remote clock. */
  mtime: number | null;
}

export interface ArgsFact {
  label: string;
  step: number;
  /** The args as read (nested objects kept); null when they could not be read. */
  args: ArgValue | null;
  error?: string;
}

/** One checkpoint's resume-path facts (python/resume_facts.py), or why they could not be read. */
export interface ResumeSide {
  checkpoint: CheckpointFact;
  facts: ResumeFacts | null;
  error?: string;
}

/** Marks the user set: "this is known good". */
export interface KnownGoodMarks {
  baselineId?: string;
  benchId?: string;
}

/** Data fingerprints kept from an earlier report (the reference side of the data comparison). */
export interface DataRecord {
  /** Epoch seconds (remote clock) when they were taken. */
  at: number;
  paths: DataFingerprint[];
}

export interface WhatChangedFacts {
  host: { id: string; label: string };
  /** The run folder on the remote; null for a host (environment and benchmarks only). */
  run: string | null;
  /** Epoch seconds on the remote's clock when the facts were gathered. */
  remoteNow: number;
  /** Ascending by step. */
  checkpoints: CheckpointFact[];
  /** Ascending by step: every checkpoint's args, or an even sample of them for a run with very many. */
  args: ArgsFact[];
  /**
   * The run's metrics history: `path` its newest file, `reduction` the stitched series of every file (`sources`,
   * oldest launch first) and `restarts` the launches after the first (core/metrics/history.ts).
   */
  log: { path: string; reduction: MetricsReduction; sources?: string[]; restarts?: Restart[] } | null;
  env: { now: EnvSnapshot | null; baselines: Baseline[] };
  bench: ThroughputResult[];
  marks: KnownGoodMarks;
  /** A baseline named by the caller (CLI word, a click on a baseline): the known-good reference. */
  chosenBaselineId?: string;
  probe: WhatChangedProbeResult | null;
  dataHistory: DataRecord[];
  /**
   * The resume state around the restart a slowdown came with (causes/restart.ts `resumePair`): the last checkpoint
   * the launch before wrote and the first one the resumed launch wrote. Absent for a run without a restart.
   */
  resume?: { restart: number; before: ResumeSide; after: ResumeSide };
  /** The run's live processes seen by earlier reports (one record a process, oldest first): a new PID is a restart. */
  liveHistory?: LaunchRecord[];
  /** The GPUs now and the run's recorded GPU timeline (python/gpu_health.py); null when it could not be read. */
  gpu?: GpuHealth | null;
  unknown: UnknownFact[];
  /** `roundMs`: how long each round took (local reads included in the first). */
  gathered: { roundTrips: number; requests: number; elapsedMs: number; roundMs?: number[] };
}
