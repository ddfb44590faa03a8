import { z } from 'zod';
import { defineProbe } from '../probes/probe';
import { redactArgv } from '../redact';

/* python/what_changed.py: the facts no other probe gathers (data fingerprints, git state, file times). */

const str = z.string().nullable().default(null);
const num = z.number().nullable().default(null);

export const dataFingerprintSchema = z.looseObject({
  path: z.string(),
  exists: z.boolean(),
  kind: z.enum(['file', 'dir', 'other']).nullable().default(null),
  size: num,
  mtime: num,
  files: num,
  newestMtime: num,
  /** sha256 (16 hex) of a file's first and last MiB, or of a folder's sorted (path, size, mtime) list. */
  hash: str,
  truncated: z.boolean().default(false),
  error: str,
  /** What the data files hold (python/data_shape.py): rows, a sample's length, padding. */
  samples: z
    .array(
      z.looseObject({
        file: z.string(),
        format: z.string(),
        rows: num,
        rowLength: num,
        meanLength: num,
        medianLength: num,
        padded: z.boolean().nullable().default(null),
        meanLineBytes: num,
        /** A flat token file (nanoGPT's train.bin, no .idx beside it): its size in tokens if they are uint16. */
        tokensIfUint16: z.number().nullable().optional(),
        /** Parquet footers, Arrow IPC and saved HF datasets (python/data_columnar.py): top-level columns, types. */
        columns: z.array(z.string()).optional(),
        types: z.array(z.string()).optional(),
      }),
    )
    .optional(),
});
export type DataFingerprint = z.infer<typeof dataFingerprintSchema>;

/** A file of the commits since the reference, compared with the reference's commit (python/code_diff.py). */
export const codeChangeSchema = z.looseObject({
  file: z.string(),
  python: z.boolean().default(false),
  /** Only comments, docstrings and whitespace differ (compared token by token). */
  cosmetic: z.boolean().default(false),
  hunks: z
    .array(
      z.looseObject({
        function: str,
        lines: z.array(z.number()).default([]),
        /** The lines as written. */
        old: z.array(z.string()).default([]),
        new: z.array(z.string()).default([]),
        /** This hunk changes no token that runs (comments, docstrings, blank lines). */
        cosmetic: z.boolean().default(false),
        /** The lines of code it removed and added, comments and docstrings taken out: what is classified. */
        removed: z.array(z.string()).default([]),
        added: z.array(z.string()).default([]),
      }),
    )
    .default([]),
  /** Hunks in all (`hunks` holds the first 8). */
  hunkCount: z.number().default(0),
  functions: z.array(z.string()).default([]),
  error: str,
});
export type CodeChange = z.infer<typeof codeChangeSchema>;
export type CodeHunk = CodeChange['hunks'][number];

/** An uncommitted file compared with HEAD: as a code change, with when it was last written. */
export const dirtyChangeSchema = codeChangeSchema.extend({
  status: z.enum(['modified', 'added', 'deleted', 'renamed']).default('modified'),
  /** Its name at HEAD, when renamed. */
  from: str,
  /** Its mtime (remote clock): when it was last written; null for a deleted file. */
  mtime: num,
});
export type DirtyChange = z.infer<typeof dirtyChangeSchema>;

export const gitStateSchema = z.looseObject({
  path: z.string(),
  repo: str,
  head: str,
  branch: str,
  dirty: z.boolean().nullable().default(null),
  dirtyFiles: z.array(z.string()).default([]),
  /** The uncommitted files compared with HEAD (the first 20, Python first); `dirtyNotCompared` more were not. */
  dirtyChanges: z.array(dirtyChangeSchema).default([]),
  dirtyNotCompared: z.number().default(0),
  changedSince: z.array(z.string()).default([]),
  commitsSince: num,
  headTime: num,
  /** The commits since the reference, newest first. */
  commits: z
    .array(
      z.looseObject({
        hash: z.string(),
        time: z.number(),
        subject: z.string(),
        /** The files it changed (the first 50). */
        files: z.array(z.string()).default([]),
      }),
    )
    .default([]),
  /** The commit the checkout was at by the reference's time. */
  base: str,
  codeChanges: z.array(codeChangeSchema).default([]),
  error: str,
});
export type GitState = z.infer<typeof gitStateSchema>;

export const fileStatSchema = z.looseObject({
  path: z.string(),
  exists: z.boolean(),
  size: num,
  mtime: num,
  error: str,
});
export type FileStat = z.infer<typeof fileStatSchema>;

/** One launch as python/kg_record.py recorded it, slimmed by what_changed.py to what can move speed. */
export const launchRecordSchema = z.looseObject({
  /** kg_record, or the tool that recorded it (lightning, hydra, wandb, mlflow: python/launch_sources.py). */
  source: z.string().default('kg_record'),
  /** The folder another tool's record is in. */
  where: str,
  /** Another tool's configuration of the launch, flat (dotted keys, values as text). */
  config: z.record(z.string(), z.string()).default({}),
  time: num,
  /** Redacted again here: a record an older kg_record.py wrote may hold what its rules let through (`-p SECRET`). */
  argv: z
    .array(z.string())
    .default([])
    .transform((a) => redactArgv(a)),
  cwd: str,
  env: z.record(z.string(), z.string()).default({}),
  interpreter: str,
  python: str,
  gitHead: str,
  gitDiff: str,
  torch: str,
  driver: str,
  packages: z.record(z.string(), z.string()).default({}),
  /** A live process (source `live`, python/live_process.py): its PID and the CUDA libraries it loaded (name → version). */
  pid: z.number().nullable().optional(),
  libs: z.record(z.string(), z.string()).default({}),
});
export type LaunchRecord = z.infer<typeof launchRecordSchema>;

/** The run's training process if it runs now (python/live_process.py: /proc, same user, bounded). */
export const liveProcessesSchema = z.looseObject({
  scanned: z.number().default(0),
  truncated: z.boolean().default(false),
  error: str,
  tookMs: num,
  records: z.array(launchRecordSchema).default([]),
});
export type LiveProcesses = z.infer<typeof liveProcessesSchema>;

/** One run of a poll (`--live`): its processes now, or `unchanged` when its log was as the last poll saw it. */
export const livePollSchema = liveProcessesSchema.extend({
  run: z.string(),
  /** The log's size and mtime as one word (null: no log given): passed back as `seen` at the next poll. */
  logState: str,
  /** The log is as at the last poll: /proc was not looked at for this run (its `records` are empty, not "none"). */
  unchanged: z.boolean().default(false),
});
export type LivePoll = z.infer<typeof livePollSchema>;

export const launchRecordsSchema = z.looseObject({
  path: z.string(),
  /** false: this run's launches were not recorded (no .known-good/launches.jsonl). */
  exists: z.boolean(),
  records: z.array(launchRecordSchema).default([]),
  /** The launches other tools recorded (Lightning, Hydra, wandb, MLflow), oldest first within a source. */
  others: z.array(launchRecordSchema).default([]),
  live: liveProcessesSchema.nullable().optional(),
  error: str,
});
export type LaunchRecords = z.infer<typeof launchRecordsSchema>;

export const whatChangedProbeSchema = z.looseObject({
  now: z.number(),
  paths: z.array(dataFingerprintSchema),
  git: z.array(gitStateSchema),
  stats: z.array(fileStatSchema),
  launches: z.array(launchRecordsSchema).optional(),
  live: z.array(livePollSchema).optional(),
  elapsedMs: z.number(),
});
export type WhatChangedProbeResult = z.infer<typeof whatChangedProbeSchema>;

export interface WhatChangedProbeOptions {
  /** Files or folders to fingerprint (paths the training args name). */
  paths?: readonly string[];
  /** Files or folders whose git checkout is described. */
  git?: readonly string[];
  /** Files whose size and mtime are wanted (torch/version.py: when that torch was installed). */
  stats?: readonly string[];
  /** Epoch seconds: git lists the files changed by commits since then. */
  since?: number;
  /** Run folders whose recorded launches (.known-good/launches.jsonl) are read. */
  launches?: readonly string[];
  /** A poll of running runs: each run's process now; none looked for when its log's state is still `seen`. */
  live?: readonly { run: string; log?: string | undefined; seen?: string | null | undefined }[];
}

export const whatChangedProbe = defineProbe(
  'what_changed',
  whatChangedProbeSchema,
  (o: WhatChangedProbeOptions) => {
    // `--flag=value` so a path that starts with `-` is never read as a flag.
    const args: string[] = [];
    for (const p of o.paths ?? []) args.push(`--path=${p}`);
    for (const p of o.git ?? []) args.push(`--git=${p}`);
    for (const p of o.stats ?? []) args.push(`--stat=${p}`);
    if (o.since !== undefined && Number.isFinite(o.since)) args.push(`--since=${o.since}`);
    for (const p of o.launches ?? []) args.push(`--launches=${p}`);
    for (const l of o.live ?? [])
      args.push(`--live=${l.run}`, `--live-log=${l.log ?? ''}`, `--live-seen=${l.seen ?? ''}`);
    return args;
  },
  { modules: ['code_diff', 'data_columnar', 'data_shape', 'kg_git', 'kg_redact', 'launch_sources', 'live_process'] },
);
