import { z } from 'zod';
import { defineProbe } from '../probes/probe';
import { oneShotProgram } from '../probes/sources';

/*
 * python/throughput_bench.py: a training-step microbenchmark shaped like a transformer block stack. Objects are
 * loose so that a newer probe's extra fields survive into stored results.
 */

/** What the user may set (settings, CLI `--config`); anything left out takes the probe's per-device default. */
export const benchConfigSchema = z.strictObject({
  layers: z.number().int().positive().optional(),
  width: z.number().int().positive().optional(),
  heads: z.number().int().positive().optional(),
  seq: z.number().int().positive().optional(),
  batch: z.number().int().positive().optional(),
  vocab: z.number().int().positive().optional(),
  steps: z.number().int().positive().optional(),
  warmup: z.number().int().nonnegative().optional(),
  dtype: z.enum(['bf16', 'fp32', 'fp16']).optional(),
  device: z.enum(['auto', 'cuda', 'cpu']).optional(),
  compile: z.boolean().optional(),
  attention: z.enum(['sdpa', 'flex']).optional(),
});
export type BenchConfig = z.infer<typeof benchConfigSchema>;

const stats = z.looseObject({ median: z.number(), min: z.number(), max: z.number() });
const str = z.string().nullable().default(null);
const num = z.number().nullable().default(null);

export const benchFingerprintSchema = z.looseObject({
  torch: z.string(),
  torchGit: str,
  cuda: str,
  hip: str,
  cudnn: num,
  triton: str,
  gpu: str,
  capability: str,
  gpuCount: z.number().default(0),
  driver: str,
  python: str,
  platform: str,
  cpu: str,
  cpuCount: num,
  threads: num,
});
export type BenchFingerprint = z.infer<typeof benchFingerprintSchema>;

export const benchResultSchema = z.looseObject({
  tokensPerSec: stats,
  stepMs: stats,
  stepTimesMs: z.array(z.number()).default([]),
  /** Tokens per CPU-second of the benchmark's process (older probes: absent). */
  cpuTokensPerSec: stats.nullable().optional(),
  tflops: z.number(),
  flopsPerToken: z.number(),
  params: z.number().int(),
  paramsNonEmbedding: z.number().int(),
  peakMemoryBytes: num,
  peakMemorySource: str,
  firstStepMs: num,
  compileS: num,
  loss: num,
  config: z.looseObject({
    layers: z.number().int(),
    width: z.number().int(),
    heads: z.number().int(),
    seq: z.number().int(),
    batch: z.number().int(),
    vocab: z.number().int(),
    steps: z.number().int(),
    warmup: z.number().int(),
    dtype: z.string(),
    device: z.string(),
    compile: z.boolean(),
    attention: z.string(),
    attentionUsed: z.string(),
    tokensPerStep: z.number().int(),
  }),
  fingerprint: benchFingerprintSchema,
  warnings: z.array(z.string()).default([]),
});
export type BenchResult = z.infer<typeof benchResultSchema>;

/** The probe's argv for a configuration (options left out are not passed). */
export function benchArgs(config: BenchConfig = {}): string[] {
  const c = benchConfigSchema.parse(config);
  const args: string[] = [];
  for (const k of ['layers', 'width', 'heads', 'seq', 'batch', 'vocab', 'steps', 'warmup'] as const) {
    const v = c[k];
    if (v !== undefined) args.push(`--${k}`, String(v));
  }
  if (c.dtype) args.push('--dtype', c.dtype);
  if (c.device) args.push('--device', c.device);
  if (c.attention) args.push('--attention', c.attention);
  if (c.compile) args.push('--compile');
  return args;
}

export const throughputBenchProbe = defineProbe('throughput_bench', benchResultSchema, (config: BenchConfig = {}) =>
  benchArgs(config),
);

/**
 * The argv that runs the benchmark in a terminal as if typed: a fresh interpreter (`-u` so each progress line shows
 * at once) with the probe program inline, so nothing has to be copied to the host. Its result document is printed
 * between the marker lines of `nonce`; `extractFramed` (probes/runner) takes it out of the terminal's output.
 */
export function benchTerminalArgv(python: string, config: BenchConfig, nonce: string): string[] {
  return [python, '-u', '-c', oneShotProgram(throughputBenchProbe(config), nonce), ...benchArgs(config)];
}

/** A short human line for a configuration, e.g. `12×1024 h16 seq 2048 b8 bf16 cuda sdpa compiled`. */
export function describeBenchConfig(c: BenchResult['config']): string {
  return (
    `${c.layers}×${c.width} h${c.heads} seq ${c.seq} b${c.batch} ${c.dtype} ${c.device} ${c.attentionUsed}` +
    (c.compile ? ' compiled' : '')
  );
}
