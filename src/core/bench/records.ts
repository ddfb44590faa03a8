import { benchConfigSchema, describeBenchConfig, type BenchConfig, type BenchResult } from './benchProbe';
import { compareThroughput, describeDifferences, formatRate, type ThroughputSample } from './compare';
import type { ThroughputReading } from './customBenchmark';
import type { Baseline, ThroughputResult } from '../baselines/store';
import { describeIssues } from '../util/zod';
import { KnownGoodError } from '../errors';

/*
 * The benchmark runs of issue 7 as they are picked, kept and compared: presets for the quick pick and the CLI's
 * `--config`, the record kept next to the host's baselines, and the comparison text.
 */

export interface BenchPreset {
  id: 'tiny' | 'gpu' | 'gpuCompile';
  label: string;
  detail: string;
  config: BenchConfig;
}

export const BENCH_PRESETS: readonly BenchPreset[] = [
  {
    id: 'tiny',
    label: 'Tiny (CPU)',
    // The probe runs a first step (compile, allocation), then the warm-up, then the timed steps: all three are counted
    // here, as its progress lines (`step 3/8`) count them.
    detail: '2×64, seq 64, batch 4: 6 timed steps after a first and 1 warm-up (8 in all); checks the benchmark runs',
    config: { device: 'cpu' },
  },
  {
    id: 'gpu',
    label: 'Default (GPU)',
    detail: '12×1024, seq 2048, batch 8, bf16 autocast: 20 timed steps after a first and 5 warm-up (26 in all)',
    config: { device: 'cuda' },
  },
  {
    id: 'gpuCompile',
    label: 'Default (GPU) with torch.compile',
    detail: 'the same shape compiled; compile time is reported on its own',
    config: { device: 'cuda', compile: true },
  },
];

/** `tiny`, `cpu`, `gpu`, or a JSON object of the probe's options (`{"layers": 4, "seq": 512}`). */
export function parseBenchConfig(word: string, compile = false): BenchConfig {
  const w = word.trim();
  let config: BenchConfig;
  if (w === 'tiny' || w === 'cpu') config = { device: 'cpu' };
  else if (w === 'gpu' || w === 'cuda') config = { device: 'cuda' };
  else {
    let raw: unknown;
    try {
      raw = JSON.parse(w);
    } catch {
      throw new KnownGoodError(
        'settings',
        `benchmark config ${JSON.stringify(word)}: expected tiny, gpu or a JSON object`,
      );
    }
    const r = benchConfigSchema.safeParse(raw);
    if (!r.success) throw new KnownGoodError('settings', `benchmark config: ${describeIssues(r.error)}`);
    config = r.data;
  }
  return compile ? { ...config, compile: true } : config;
}

export interface RecordMeta {
  hostId: string;
  hostLabel: string;
  label: string;
  at?: string;
}

/** What `BaselineStore.appendResult` keeps for a throughput_bench run. */
export function benchRecord(r: BenchResult, meta: RecordMeta): Omit<ThroughputResult, 'id' | 'at'> & { at?: string } {
  return {
    kind: 'throughput',
    baselineId: null,
    ...(meta.at !== undefined ? { at: meta.at } : {}),
    source: 'throughput_bench',
    label: meta.label,
    host: meta.hostId,
    hostLabel: meta.hostLabel,
    tokensPerSec: r.tokensPerSec.median,
    tokensPerSecMin: r.tokensPerSec.min,
    tokensPerSecMax: r.tokensPerSec.max,
    stepMs: r.stepMs.median,
    tflops: r.tflops,
    peakMemoryBytes: r.peakMemoryBytes,
    compileS: r.compileS,
    config: r.config,
    fingerprint: r.fingerprint,
    warnings: r.warnings,
  };
}

/** What is kept for the user's own benchmark command. */
export function customRecord(
  reading: ThroughputReading,
  meta: RecordMeta & { command: string; source: 'regex' | 'jsonl'; exitCode: number | null },
): Omit<ThroughputResult, 'id' | 'at'> & { at?: string } {
  return {
    kind: 'throughput',
    baselineId: null,
    ...(meta.at !== undefined ? { at: meta.at } : {}),
    source: `custom-${meta.source}`,
    label: meta.label,
    host: meta.hostId,
    hostLabel: meta.hostLabel,
    tokensPerSec: reading.tokensPerSec,
    values: reading.used,
    found: reading.found,
    exitCode: meta.exitCode,
    config: { command: meta.command },
    fingerprint: null,
  };
}

/** A kept result as the comparison reads it (loose: results written by newer versions keep their extra fields). */
export function sampleOf(r: ThroughputResult): ThroughputSample | undefined {
  const tps = r['tokensPerSec'];
  if (typeof tps !== 'number' || !Number.isFinite(tps)) return undefined;
  const rec = (v: unknown) =>
    typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  return { tokensPerSec: tps, fingerprint: rec(r['fingerprint']), config: rec(r['config']) };
}

export function resultLabel(r: ThroughputResult, baselines: readonly Baseline[] = []): string {
  if (r.baselineId) {
    const b = baselines.find((x) => x.id === r.baselineId);
    if (b) return b.label;
  }
  return typeof r['label'] === 'string' ? r['label'] : r.id;
}

/** The lines printed after a benchmark run. */
export function benchSummary(r: BenchResult): string[] {
  const lines = [
    `${formatRate(r.tokensPerSec.median)} tok/s (median; min ${formatRate(r.tokensPerSec.min)}, max ${formatRate(r.tokensPerSec.max)})` +
      `, ${r.stepMs.median.toFixed(1)} ms/step, ${r.tflops.toFixed(r.tflops < 10 ? 2 : 1)} TFLOP/s`,
    `config: ${describeBenchConfig(r.config)}`,
    `torch ${r.fingerprint.torch}${r.fingerprint.cuda ? `, CUDA ${r.fingerprint.cuda}` : ''}${r.fingerprint.triton ? `, triton ${r.fingerprint.triton}` : ''}` +
      `${r.fingerprint.gpu ? `, ${r.fingerprint.gpu}` : ''}`,
  ];
  if (r.compileS !== null) lines.push(`compile: ${r.compileS.toFixed(1)} s (not in the numbers above)`);
  if (r.peakMemoryBytes !== null) lines.push(`peak memory: ${(r.peakMemoryBytes / 2 ** 30).toFixed(2)} GiB`);
  for (const w of r.warnings) lines.push(`warning: ${w}`);
  return lines;
}

/** The read-only comparison document: the ratio line first, then what differs. */
export function comparisonDocument(
  now: { result: ThroughputResult; label: string },
  reference: { result: ThroughputResult; label: string },
  hostLabel: string,
): string {
  const a = sampleOf(now.result);
  const b = sampleOf(reference.result);
  if (!a || !b) throw new KnownGoodError('bad-output', 'a kept result has no tokens/s');
  const c = compareThroughput(a, { ...b, label: reference.label });
  const out = [
    `# Throughput on ${hostLabel}`,
    '',
    c.text,
    '',
    `now:      ${now.label} (${now.result.at})`,
    `baseline: ${reference.label} (${reference.result.at})`,
    '',
    '## Fingerprint fields that differ',
    ...(c.fingerprint.length ? describeDifferences(c.fingerprint).map((l) => `- ${l}`) : ['- none']),
    '',
    '## Configuration fields that differ',
    ...(c.config.length
      ? describeDifferences(c.config).map((l) => `- ${l}`)
      : ['- none (same shape: the ratio compares like with like)']),
  ];
  if (c.config.length) out.push('', 'The shapes differ: the ratio is only a hint.');
  return out.join('\n') + '\n';
}
