import { z } from 'zod';
import { defineProbe } from '../probes/probe';
import { redactValue } from '../redact';

/*
 * The document python/env_snapshot.py prints. Every part may have failed on the remote, in which case it is
 * `{ error }` alone: so every field of a part defaults to null (or empty) rather than being required, and objects are
 * loose so a newer probe's extra fields survive into a stored baseline.
 */

const str = z.string().nullable().default(null);
const num = z.number().nullable().default(null);
const bool = z.boolean().nullable().default(null);
const err = z.string().nullable().default(null);

const detectionSchema = z.looseObject({
  detected: z.boolean().default(false),
  kind: str,
  evidence: z.array(z.string()).default([]),
});

export const hostInfoSchema = z.looseObject({
  error: err,
  hostname: str,
  os: z.looseObject({ id: str, versionId: str, prettyName: str }).nullable().default(null),
  kernel: str,
  kernelVersion: str,
  machine: str,
  libc: str,
  cpu: z.looseObject({ model: str, count: num, affinity: num }).nullable().default(null),
  memory: z.looseObject({ totalBytes: num, availableBytes: num }).nullable().default(null),
  shm: z.looseObject({ path: str, totalBytes: num, freeBytes: num, error: err }).nullable().default(null),
  disks: z
    .array(z.looseObject({ path: z.string(), exists: bool, totalBytes: num, freeBytes: num, error: err }))
    .default([]),
  cgroup: z.record(z.string(), z.string()).default({}),
  container: detectionSchema.nullable().default(null),
  virtualization: detectionSchema.nullable().default(null),
  load: z.array(z.number()).nullable().default(null),
  uptimeS: num,
});

export const pythonInfoSchema = z.looseObject({
  error: err,
  version: str,
  fullVersion: str,
  implementation: str,
  executable: str,
  prefix: str,
  basePrefix: str,
  venv: bool,
  conda: z.looseObject({ env: str, prefix: str }).nullable().default(null),
  condaActivePrefix: str,
  platform: str,
  bits: num,
});

const versionMap = z.record(z.string(), z.string().nullable());

export const packagesInfoSchema = z.looseObject({
  error: err,
  count: num,
  /** normalised distribution name (PEP 503) -> version, every distribution of that interpreter */
  packages: versionMap.default({}),
  /** name -> source folder, for editable installs */
  editable: z.record(z.string(), z.string()).default({}),
  /** distributions found again later on sys.path (never imported) */
  shadowed: z.record(z.string(), z.array(z.looseObject({ version: str, path: str }))).default({}),
  broken: z.array(z.string()).default([]),
  key: versionMap.default({}),
  conda: z.record(z.string(), z.string()).nullable().default(null),
  /** name -> the tool that installed it (the dist-info's INSTALLER: pip, uv, conda). Absent in older baselines. */
  installers: z.record(z.string(), z.string()).default({}),
  /** name -> where a direct install came from (PEP 610 direct_url.json): editable, a local folder, a VCS, a file. */
  directUrls: z
    .record(z.string(), z.looseObject({ url: z.string(), kind: z.string().default('unknown'), vcs: str, commit: str }))
    .default({}),
  /** name -> the installed names its metadata pins with `==` (always, not under an extra): they move together. */
  pins: z.record(z.string(), z.array(z.string())).default({}),
  /** Where this interpreter's pip/uv install from (pip's configuration files and PIP_*, UV_* variables). */
  indexes: z
    .looseObject({
      error: err,
      indexUrl: str,
      extraIndexUrls: z.array(z.string()).default([]),
      findLinks: z.array(z.string()).default([]),
      noIndex: z.boolean().default(false),
      sources: z.array(z.string()).default([]),
      uv: z.record(z.string(), z.string()).default({}),
    })
    .nullable()
    .default(null),
});

export const torchInfoSchema = z.looseObject({
  error: err,
  found: z.boolean().default(false),
  /** torch's own string, with its local build (`2.11.0+cu130`), from torch/version.py. */
  version: str,
  versionPy: str,
  /** The installed distribution's version (pip's `torch==…`, without the local build on some wheels). */
  distVersion: str,
  location: str,
  gitVersion: str,
  cuda: str,
  hip: str,
  debug: bool,
  bundledLibs: z.array(z.string()).nullable().default(null),
});

export const nvccInfoSchema = z.looseObject({
  error: err,
  found: z.boolean().default(false),
  path: str,
  release: str,
  version: str,
});

export const cudaInfoSchema = z.looseObject({
  error: err,
  nvcc: nvccInfoSchema.nullable().default(null),
  cudaHome: str,
  ldconfig: z.record(z.string(), z.array(z.string())).nullable().default(null),
});

/** One row of `nvidia-smi --query-gpu=…`, keyed by nvidia-smi's own field names; unsupported fields are null. */
export const gpuSchema = z.looseObject({
  index: z.number(),
  name: str,
  driver_version: str,
  'memory.total': num,
  'clocks.max.sm': num,
  'clocks.max.mem': num,
  'power.limit': num,
  persistence_mode: str,
  compute_mode: str,
  'pcie.link.gen.current': num,
  'pcie.link.width.current': num,
  'pcie.link.gen.max': num,
  'pcie.link.width.max': num,
  uuid: str,
  'pci.bus_id': str,
  vbios_version: str,
});
export type GpuInfo = z.infer<typeof gpuSchema>;

export const topologySchema = z.looseObject({
  columns: z.array(z.string()).default([]),
  rows: z.array(z.looseObject({ name: z.string(), cells: z.array(z.string()) })).default([]),
  raw: str,
});

export const gpusInfoSchema = z.looseObject({
  error: err,
  tool: str,
  /** `not found` when the machine has no nvidia-smi: that is a fact about the machine, not a failure. */
  status: z.string().default('error'),
  gpus: z.array(gpuSchema).default([]),
  topology: topologySchema.nullable().default(null),
  topologyError: err,
});

export const envInfoSchema = z.looseObject({
  error: err,
  /**
   * name -> value, or `<redacted sha256:…>` for secrets. The probe redacts on the host; redacted again here (a no-op
   * on redacted values) for snapshots from an older probe or a baseline saved before.
   */
  vars: z
    .record(z.string(), z.string())
    .default({})
    .transform((vars) => Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, redactValue(k, v)]))),
  extraRequested: z.array(z.string()).default([]),
  missingExtra: z.array(z.string()).default([]),
  /**
   * Where the variables came from, in words (`a new login on gpu-box`): set by `captureSnapshot`, which knows how the
   * probe was started. Null in snapshots from before it was recorded (they came from the resident helper: the
   * environment of the connection's start).
   */
  source: str,
});

/**
 * The run asked about (`--run`) and its training process if one runs now (python/live_process.py): the variables
 * it started with, of the same families as `env.vars`, redacted on the host.
 */
export const liveRunSchema = z.looseObject({
  error: err,
  path: z.string().default(''),
  supported: z.boolean().default(false),
  scanned: z.number().default(0),
  process: z
    .looseObject({
      pid: z.number(),
      argv: z.array(z.string()).default([]),
      exe: str,
      startTime: num,
      vars: z
        .record(z.string(), z.string())
        .default({})
        .transform((vars) => Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, redactValue(k, v)]))),
      missingExtra: z.array(z.string()).default([]),
      errors: z.array(z.string()).default([]),
    })
    .nullable()
    .default(null),
  /** Other processes of the run (a `tail -f` of its log, a second launch): not compared. */
  others: z.number().default(0),
});
export type LiveRun = z.infer<typeof liveRunSchema>;

export const scriptFileSchema = z.looseObject({
  path: z.string(),
  size: num,
  mtime: num,
  sha256: str,
  md5: str,
  error: err,
});

export const scriptsInfoSchema = z.looseObject({
  error: err,
  patterns: z.array(z.string()).default([]),
  files: z.array(scriptFileSchema).default([]),
  unmatched: z.array(z.string()).default([]),
  truncated: z.boolean().default(false),
});

export const cacheInfoSchema = z.looseObject({
  name: z.string(),
  path: z.string(),
  exists: z.boolean().default(false),
  files: num,
  bytes: num,
  newestMtime: num,
  oldestMtime: num,
  unreadableDirs: z.number().default(0),
  truncated: z.boolean().default(false),
  error: err,
});
export type CacheInfo = z.infer<typeof cacheInfoSchema>;

export const deepInfoSchema = z.looseObject({
  error: err,
  importMs: num,
  torchVersion: str,
  cudaBuild: str,
  hipBuild: str,
  cxx11abi: bool,
  cudnn: num,
  nccl: str,
  cudaAvailable: bool,
  devices: z
    .array(
      z.looseObject({ index: z.number(), name: str, capability: str, totalMemoryBytes: num, multiProcessors: num }),
    )
    .default([]),
});

export const envSnapshotSchema = z.looseObject({
  schema: z.literal(1),
  capturedAt: z.string(),
  tookMs: num,
  deep: z.boolean().default(false),
  host: hostInfoSchema,
  python: pythonInfoSchema,
  packages: packagesInfoSchema,
  torch: torchInfoSchema,
  cuda: cudaInfoSchema,
  gpus: gpusInfoSchema,
  toolchain: z.record(z.string(), z.string().nullable()).default({}),
  env: envInfoSchema,
  liveRun: liveRunSchema.nullable().default(null),
  scripts: scriptsInfoSchema,
  caches: z.array(cacheInfoSchema).default([]),
  deepInfo: deepInfoSchema.nullable().default(null),
  timings: z.record(z.string(), z.number()).default({}),
  errors: z.array(z.looseObject({ part: z.string(), message: z.string().nullable().default(null) })).default([]),
});

export type EnvSnapshot = z.infer<typeof envSnapshotSchema>;
/** What a snapshot looks like before parsing (fixtures are written in this shape, as the probe prints them). */
export type EnvSnapshotInput = z.input<typeof envSnapshotSchema>;

export interface EnvSnapshotOptions {
  /** Globs of training scripts to hash (`knownGood.env.scriptGlobs`). */
  scripts?: readonly string[];
  /** Compile caches besides inductor's and triton's. */
  cacheDirs?: readonly string[];
  /** Checkpoint roots whose free disk is recorded. */
  roots?: readonly string[];
  /** Variables to record besides the built-in families (`knownGood.env.extraVariables`). */
  extraVars?: readonly string[];
  /** Import torch (seconds) for cuDNN/NCCL as torch loads them, device capability and CUDA availability. */
  deep?: boolean;
  /** A run folder: its training process's variables, if one runs now, are read too (`liveRun`). */
  run?: string;
}

export function envSnapshotArgs(opts: EnvSnapshotOptions = {}): string[] {
  // `--flag=value` so a value that starts with `-` is never read as a flag.
  const args: string[] = [];
  for (const s of opts.scripts ?? []) args.push(`--script=${s}`);
  for (const d of opts.cacheDirs ?? []) args.push(`--cache-dir=${d}`);
  for (const r of opts.roots ?? []) args.push(`--root=${r}`);
  for (const v of opts.extraVars ?? []) args.push(`--extra-var=${v}`);
  if (opts.deep) args.push('--deep');
  if (opts.run !== undefined) args.push(`--run=${opts.run}`);
  return args;
}

export const envSnapshotProbe = defineProbe(
  'env_snapshot',
  envSnapshotSchema,
  (opts: EnvSnapshotOptions = {}) => envSnapshotArgs(opts),
  { modules: ['env_host', 'env_python', 'env_tools', 'kg_redact', 'live_process'] },
);

/** Parses a stored or fixture snapshot; throws a ZodError naming the first bad fields. */
export function parseEnvSnapshot(raw: unknown): EnvSnapshot {
  return envSnapshotSchema.parse(raw);
}
