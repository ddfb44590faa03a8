import type { Baseline, ThroughputResult } from '../baselines/store';
import { messageOf } from '../errors';
import { redactText } from '../redact';
import { baselineBenchConfig, builtinMeasure, customMeasure, type MeasureHost, type RunOutput } from '../bisect/env';
import type { BisectBenchmark } from '../bisect/envBisect';
import { inVenvCommand, restoredSpeedLine } from './run';

/*
 * After a restore (issue 26 item 2): the benchmark in the restored env and in the host's env now, beside the result
 * kept for the baseline — "restored: 284K tok/s vs 285K at baseline, 190K now". One function for the CLI's
 * `restore --run --bench` and the extension's Restore Known Good…; the runs are the env bisect's measures (the
 * built-in benchmark with the baseline's recorded shape, or the user's command), so a speed means the same there.
 */

export interface RestoredSpeeds {
  restored?: number;
  now?: number;
  baseline?: number;
  /** Which kept result `baseline` is (its label and time), or why there is none. */
  baselineFrom: string;
  /** What measured, in words. */
  benchmark: string;
  unit: string;
  /** A run that failed, by side: its error. */
  errors: { side: 'restored' | 'now'; error: string }[];
  /** `restored: … vs … at baseline, … now`. */
  line: string;
}

function speedOf(r: ThroughputResult): number | undefined {
  const v = r['tokensPerSec'];
  // kept records hold a number; a result copied whole from the probe holds its stats object
  const n = typeof v === 'object' && v !== null ? (v as { median?: unknown }).median : v;
  return typeof n === 'number' && Number.isFinite(n) ? n : undefined;
}

function matches(r: ThroughputResult, benchmark: BisectBenchmark): boolean {
  const source = typeof r['source'] === 'string' ? r['source'] : '';
  // kept built-in results are wall-clock speeds: a CPU-clock run has no kept figure to stand beside
  if (benchmark.kind === 'builtin') return source === 'throughput_bench' && (benchmark.clock ?? 'wall') === 'wall';
  const config = r['config'] as { command?: unknown } | undefined;
  return source.startsWith('custom-') && config?.command === benchmark.bench.command;
}

/** A result this close to a baseline's capture was measured in that environment, as far as anything tells. */
const NEAR_MS = 24 * 3600_000;

/**
 * The speed kept for `baseline` with this benchmark: the newest matching result saved with the baseline, else one of
 * `results` kept for it (`baselineId`), else the host's result marked Known-Good (`reference`), else the matching
 * result measured nearest to the baseline's capture within a day (its time is named: the reader judges).
 */
export function keptSpeed(
  baseline: Baseline,
  benchmark: BisectBenchmark,
  results: readonly ThroughputResult[] = [],
  reference?: string,
): { speed: number; from: string } | undefined {
  const label = (r: ThroughputResult) => `${typeof r['label'] === 'string' ? r['label'] : r.id} (${r.at})`;
  const captured = Date.parse(baseline.capturedAt);
  const gap = (r: ThroughputResult) => Math.abs(Date.parse(r.at) - captured);
  const near = results.filter((r) => gap(r) <= NEAR_MS).sort((a, b) => gap(b) - gap(a));
  const pools: [readonly ThroughputResult[], (r: ThroughputResult) => string][] = [
    [baseline.throughput ?? [], () => 'kept with the baseline'],
    [results.filter((r) => r.baselineId === baseline.id), () => 'kept with the baseline'],
    [results.filter((r) => r.id === reference), () => 'the result marked Known-Good'],
    [near, (r) => `measured ${Math.round(gap(r) / 60_000)} min from the baseline's capture`],
  ];
  for (const [pool, why] of pools)
    for (const r of [...pool].reverse()) {
      const speed = speedOf(r);
      if (speed !== undefined && matches(r, benchmark)) return { speed, from: `${label(r)}, ${why(r)}` };
    }
  return undefined;
}

export interface RestoredSpeedsOptions {
  envDir: string;
  /** The host's interpreter now (the built-in benchmark's "now" side). */
  nowPython: string;
  baseline: Baseline;
  benchmark: BisectBenchmark;
  /** The host's kept results and its marked reference, for the baseline's figure. */
  results?: readonly ThroughputResult[];
  reference?: string;
  signal?: AbortSignal;
  /** Progress for a live view: which side runs, what it printed. */
  onText?: RunOutput;
}

/** The benchmark once in the restored env, then once in the host's env now; a side that fails is named, not fatal. */
export async function restoredSpeeds(host: MeasureHost, o: RestoredSpeedsOptions): Promise<RestoredSpeeds> {
  const b = o.benchmark;
  const restoredPython = `${o.envDir}/bin/python`;
  const config = b.kind === 'builtin' ? (b.config ?? baselineBenchConfig(o.baseline).config) : undefined;
  const measureIn = (side: 'restored' | 'now') => {
    if (b.kind === 'builtin')
      return builtinMeasure(host, [], side === 'restored' ? restoredPython : o.nowPython, config!, o.onText, b.clock);
    const command = side === 'restored' ? inVenvCommand(o.envDir, b.bench.command) : b.bench.command;
    return customMeasure(host, [], { ...b.bench, command }, o.onText);
  };
  const out: Pick<RestoredSpeeds, 'restored' | 'now' | 'errors'> = { errors: [] };
  for (const side of ['restored', 'now'] as const) {
    o.onText?.(`benchmark in the ${side === 'restored' ? `restored env (${o.envDir})` : "host's env now"}…\n`);
    try {
      out[side] = await measureIn(side)(new Set(), o.signal);
    } catch (e) {
      if (o.signal?.aborted) throw e;
      out.errors.push({ side, error: messageOf(e) });
    }
  }
  const kept = keptSpeed(o.baseline, b, o.results, o.reference);
  const unit = b.kind === 'builtin' ? 'tok/s' : 'per s';
  const speeds = {
    ...(out.restored !== undefined ? { restored: out.restored } : {}),
    ...(out.now !== undefined ? { now: out.now } : {}),
    ...(kept ? { baseline: kept.speed } : {}),
  };
  return {
    ...out,
    ...speeds,
    baselineFrom: kept?.from ?? 'no result of this benchmark is kept for the baseline',
    benchmark:
      b.kind === 'builtin'
        ? `python/throughput_bench.py ${JSON.stringify(config)}`
        : `${redactText(b.bench.command)} (speed from ${b.bench.jsonl ? `${b.bench.jsonl.path} key ${b.bench.jsonl.key}` : `regex ${b.bench.regex}`})`,
    unit,
    line: restoredSpeedLine(speeds, unit),
  };
}

/** The lines a terminal or a report shows: the figure, where the baseline's comes from, what failed. */
export function restoredSpeedsText(s: RestoredSpeeds): string {
  return [
    s.line,
    `  benchmark: ${s.benchmark}`,
    `  baseline's figure: ${s.baselineFrom}`,
    ...s.errors.map((e) => `  ${e.side === 'restored' ? 'in the restored env' : 'now'}: ${e.error}`),
  ].join('\n');
}
