import type { Changepoint } from './changepoints';
import type { YoungRestart } from './youngRestart';

/*
 * The "What changed?" report as data: an adapter shows it (the Markdown renderer is one view of it), opens its
 * evidence links, and copies it. Nothing in it is hidden from the reader: every suspect carries its score and the
 * reasons that make up the score, every fact that could not be gathered is listed with why.
 */

/** A checkpoint as the report names it. */
export interface CheckpointLink {
  label: string;
  /** Remote path of the file the args were read from. */
  path: string;
  step: number;
}

/** Evidence an adapter can open; `kind` says which view. */
export type EvidenceLink =
  | { kind: 'args-diff'; title: string; hostId: string; a: CheckpointLink; b: CheckpointLink }
  | { kind: 'env-diff'; title: string; hostId: string; baselineId: string }
  /**
   * Confirm by bisect: run the environment bisect against that baseline (`change`: the suspect's bisect change id),
   * or with `packages` the package bisect against the env restored from it.
   */
  | { kind: 'bisect'; title: string; hostId: string; baselineId: string; change: string; packages?: boolean }
  | {
      kind: 'plot';
      title: string;
      hostId: string;
      log: string;
      series: string;
      /** The x range to zoom to. */
      window: { from: number; to: number };
      /** Where to draw the changepoints (x of the last point at the old level). */
      marks: number[];
    }
  | { kind: 'bench-compare'; title: string; hostId: string; referenceId: string | null; nowId: string | null }
  | { kind: 'file'; title: string; hostId: string; path: string }
  | {
      kind: 'text-diff';
      title: string;
      hostId: string;
      /** Two records side by side (a launch before and after a restart), as text; read-only. */
      a: { name: string; text: string };
      b: { name: string; text: string };
    }
  | {
      kind: 'git';
      title: string;
      hostId: string;
      repo: string;
      since: number | null;
      /** The commits (hash, time, subject) and their changed hunks as a diff, opened as a read-only document. */
      document?: string;
    }
  /**
   * Prove by Replay (issue 33): the run resumed from its known-good checkpoint in both recorded launches, with the
   * suspect's own change(s) bisected (the suspect's `subject` says which). Offered on a run with two recorded launches.
   */
  | { kind: 'replay'; title: string; hostId: string; run: string };

/** `restart`: the restart itself (what the resumed process loaded differs from what the launch before it had). */
export type SuspectSource = 'args' | 'env' | 'code' | 'data' | 'caches' | 'bench' | 'launch' | 'restart' | 'gpu';

/** What kind of change, by how well it is known to move throughput. */
export type SuspectCategory =
  | 'torch-build'
  | 'driver'
  | 'hardware'
  | 'compile'
  | 'memory'
  | 'host-sync'
  | 'attention'
  | 'dtype'
  | 'shape'
  | 'dataset'
  | 'dataloader'
  | 'frequency'
  | 'launch'
  | 'runtime-env'
  | 'compile-cache'
  | 'resume'
  | 'framework'
  | 'code'
  | 'python'
  | 'host'
  | 'other';

export interface ScoreReason {
  points: number;
  why: string;
}

/** When a change happened, as far as the facts tell. */
export interface ChangeTime {
  /** e.g. `between step_600 and step_700`, `file modified 2026-11-30 10:14`, `between baseline "before" and now`. */
  text: string;
  /** Between these checkpoints' steps (the change is in the later one). */
  steps?: { from: number; to: number };
  /** Epoch seconds (remote clock): a point (from = to) or a window. */
  time?: { from: number; to: number };
}

/**
 * What a suspect is about, for acting on it (Prove by Replay maps it to the replay's changes: core/replay/suspects.ts):
 * an arg (a checkpoint args key, dotted, or a launch's flag as written), a variable, files of the code (relative to
 * `repo`; none named: every file of that kind), a data path (absolute), or the restart itself.
 */
export type SuspectSubject =
  | { kind: 'arg'; key: string }
  | { kind: 'env'; name: string }
  | { kind: 'code'; repo: string | null; files: string[]; uncommitted?: boolean }
  | { kind: 'data'; path: string }
  | { kind: 'restart' };

/** What a replay (issue 33) said of a suspect, or of all the changes (Bisect All Changes), with its numbers. */
export interface ReplayProof {
  /** `confirmed`: the suspect's change (one of them) named and confirmed both ways by interleaved resumed runs. */
  verdict: 'confirmed' | 'not-reproduced' | 'inconclusive';
  /** The replay's headline (`Culprit: --work: 2 → 8 — …`, `Not reproduced by replay: …`). */
  headline: string;
  /** The replay change ids bisected (`arg:--work`, `env:NAME`, `code:model.py`). */
  changes: string[];
  /** The culprit's label when one was named. */
  culprit: string | null;
  /** Median speed of the known-good state and of now, as the replay measured them (the key of the run's log). */
  good: number | null;
  bad: number | null;
  unit: string;
  runs: number;
  wallSeconds: number;
  /** The restart itself: the known-good launch resumed vs the run's own level before the restart, in words. */
  restart?: string;
  /** When it ended (ISO). */
  at: string;
}

export interface Suspect {
  id: string;
  source: SuspectSource;
  category: SuspectCategory;
  /** `dataset openwebtext-10k → openwebtext-dedup-v2` */
  title: string;
  /** What the evidence says, in one or two sentences. */
  detail: string;
  when: ChangeTime;
  /** It changed where a metric shifted (the step or time window of a changepoint). */
  coincides: boolean;
  /**
   * When it changed rules it out: after the shift, or before it while the level held. Such suspects are listed
   * after every other one (whatever their score), under their own heading, and never lead the headline.
   */
  ruledOut: boolean;
  score: number;
  reasons: ScoreReason[];
  evidence: EvidenceLink[];
  /** What changed, for Prove by Replay (absent where nothing can be replayed: packages, the driver, caches). */
  subject?: SuspectSubject;
  /** Set once a replay ran on this suspect (or Bisect All Changes named it). */
  replay?: ReplayProof;
  /** How to prove it by running the run again (the restart itself: the replay); absent where there is no such proof. */
  prove?: ProveHint;
}

/**
 * A proof a suspect offers: `known-good replay HOST RUN` (src/core/replay/) resumes the run from the checkpoint before
 * the restart with nothing changed and compares its speed with the run's own before the restart.
 */
export interface ProveHint {
  kind: 'replay';
  /** The command line, its words quoted. */
  command: string;
  /** What it does, or what it needs first. */
  text: string;
  /** Whether the facts it needs are there (two launch records of kg_record.py: the command to run). */
  ready: boolean;
}

/** A difference that is never ranked (timestamps, run names, temp paths), kept so the reader sees it was seen. */
export interface CosmeticChange {
  source: SuspectSource;
  title: string;
  why: string;
  /**
   * A setting that changes what a step computes, not what it costs (learning rate, betas, warm-up, a save made less
   * often): with `when`, so a headline can say it was the only change at a restart.
   */
  inert?: boolean;
  when?: ChangeTime;
}

/** A fact that could not be gathered, and why (host down, no git, file gone): never a silent gap. */
export interface UnknownFact {
  fact: string;
  why: string;
}

export type ReferenceKind = 'marked-bench' | 'marked-baseline' | 'changepoint' | 'earliest' | 'none';

export interface ReferencePoint {
  kind: ReferenceKind;
  /** `step_600`, `baseline "good-run"` */
  label: string;
  /** Why this reference: shown, always. */
  why: string;
  checkpoint: CheckpointLink | null;
  /** Epoch seconds (remote clock). */
  time: number | null;
  baseline: { id: string; label: string; capturedAt: string; why: string } | null;
}

export interface SeriesChangepoints {
  key: string;
  /** The series is tok/s or another throughput. */
  throughput: boolean;
  points: number;
  noise: number;
  changepoints: Changepoint[];
}

export interface ThroughputSummary {
  /** From the log: the level at the reference and the latest level. */
  /**
   * `byLaunch`: a restarted run, compared launch with launch (the latest launch's median level against the one
   * before's), as no slowdown happened inside the latest launch.
   */
  /**
   * `young`: the latest restart has too few points after it to judge its launch (core/whatChanged/changepoints.ts
   * tooLittleAfterRestart): without a drop, the verdict is `unknown` and the headline says so, never "steady".
   */
  log: {
    key: string;
    reference: number;
    now: number;
    ratio: number | null;
    byLaunch?: boolean;
    young?: YoungRestart;
  } | null;
  /** From the benchmark results kept for this host. */
  bench: {
    reference: { id: string; at: string; tokensPerSec: number } | null;
    now: { id: string; at: string; tokensPerSec: number } | null;
    ratio: number | null;
  } | null;
  /** Lower by at least DROP_RATIO on either. */
  dropped: boolean;
}

export interface WhatChangedReport {
  schema: 1;
  /** One line: the numbers, the ratio and the first suspect. */
  headline: string;
  /**
   * `regression`: a drop or a changepoint to explain; `steady`: neither, so nothing is ranked; `unknown`: no metrics
   * log and no benchmark pair to tell (host down, log gone), or too little logged after the latest restart to judge
   * it (`throughput.log.young`), so nothing is ranked either.
   */
  verdict: 'regression' | 'steady' | 'unknown';
  host: { id: string; label: string };
  /** null: a report on the host (environment and benchmarks only). */
  run: string | null;
  generatedAt: string;
  reference: ReferencePoint;
  now: { checkpoint: CheckpointLink | null; time: number | null; envCapturedAt: string | null; log: string | null };
  throughput: ThroughputSummary;
  changepoints: { method: string; why: string; series: SeriesChangepoints[] };
  /**
   * The run's launches after the first (a new version_N, event file or rotated log; a step going back; a wall-time
   * gap), with what changed there (the suspects whose change lands on one). Absent in reports kept from before.
   */
  restarts?: {
    step: number;
    time: number | null;
    gapSeconds: number | null;
    signals: string[];
    source?: string;
    changed: string[];
    /**
     * The resume state the checkpoints around it hold (python/resume_facts.py), compared: the checkpoint before and
     * the first after, and what differs (empty: the same). Absent where they were not read.
     */
    resume?: { before: string; after: string; differences: string[] };
  }[];
  /**
   * The run's launch records (python/kg_record.py, `.known-good/launches.jsonl`): whether they exist and how many;
   * absent for a report on the host or one kept from before.
   */
  launches?: {
    recorded: boolean;
    path: string;
    records: number;
    /** The run's training process running now (python/live_process.py), with the CUDA libraries it loaded. */
    running?: { pid: number | null; command: string; libs: string[]; started: number | null }[];
  };
  /** The files of the run's metrics history, oldest launch first (absent: one file, `now.log`). */
  logSources?: string[];
  /** Ranked, highest score first, the ones their timing rules out last; empty when the verdict is steady. */
  suspects: Suspect[];
  /**
   * The run has two launches recorded by kg_record.py, so it can be replayed (Prove by Replay on a suspect, Bisect All
   * Changes on the report).
   */
  replayable?: boolean;
  /** Bisect All Changes: what the replay of every change said (set once it ran). */
  replay?: ReplayProof;
  /** Differences seen but not ranked: cosmetic ones, and every one when nothing needs explaining. */
  unranked: (CosmeticChange | Suspect)[];
  unknown: UnknownFact[];
  gathered: {
    roundTrips: number;
    requests: number;
    elapsedMs: number;
    roundMs?: number[];
    checkpointsRead: number;
    checkpoints: number;
  };
}
