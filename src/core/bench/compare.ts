/*
 * "4.3K tok/s now vs 12.8K tok/s at baseline "good-run" (0.34×)", and which parts of the fingerprint and of the
 * benchmark configuration differ: a slower number only means something next to what changed.
 */

export interface ThroughputSample {
  tokensPerSec: number;
  /** Software/hardware fingerprint (throughput_bench's `fingerprint`, or what a custom benchmark recorded). */
  fingerprint?: Readonly<Record<string, unknown>> | null;
  /** The benchmark configuration; a different shape makes the ratio meaningless, so it is listed apart. */
  config?: Readonly<Record<string, unknown>> | null;
}

export interface BaselineThroughput extends ThroughputSample {
  label: string;
}

export interface FieldDifference {
  field: string;
  now: unknown;
  baseline: unknown;
}

export interface ThroughputComparison {
  text: string;
  /** now / baseline; null when the baseline has no positive number. */
  ratio: number | null;
  fingerprint: FieldDifference[];
  config: FieldDifference[];
}

/** 12800 → `12.8K`, 4321000 → `4.3M`, 512 → `512`. */
export function formatRate(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const units: [number, string][] = [
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'K'],
  ];
  for (const [div, suffix] of units) {
    if (Math.abs(n) >= div) return `${(n / div).toFixed(1)}${suffix}`;
  }
  return Math.round(n).toString();
}

function formatRatio(r: number): string {
  if (r >= 10) return r.toFixed(1);
  return r.toFixed(2);
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return (a ?? null) === (b ?? null);
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Keys whose values differ, in a stable order (keys of `now` first, then those only the baseline has). */
export function differingFields(
  now: Readonly<Record<string, unknown>> | null | undefined,
  baseline: Readonly<Record<string, unknown>> | null | undefined,
  ignore: readonly string[] = [],
): FieldDifference[] {
  if (!now || !baseline) return [];
  const keys = [...Object.keys(now), ...Object.keys(baseline).filter((k) => !(k in now))];
  const out: FieldDifference[] = [];
  for (const field of keys) {
    if (ignore.includes(field)) continue;
    if (!same(now[field], baseline[field]))
      out.push({ field, now: now[field] ?? null, baseline: baseline[field] ?? null });
  }
  return out;
}

/** Fields that describe the run, not the environment: never reported as drift. */
const CONFIG_NOISE = ['steps', 'warmup'];
/** Varies between identical machines and runs. */
const FINGERPRINT_NOISE = ['threads'];

export function compareThroughput(now: ThroughputSample, baseline: BaselineThroughput): ThroughputComparison {
  const ratio = baseline.tokensPerSec > 0 ? now.tokensPerSec / baseline.tokensPerSec : null;
  const text =
    `${formatRate(now.tokensPerSec)} tok/s now vs ${formatRate(baseline.tokensPerSec)} tok/s at baseline ` +
    `${JSON.stringify(baseline.label)}` +
    (ratio !== null ? ` (${formatRatio(ratio)}×)` : '');
  return {
    text,
    ratio,
    fingerprint: differingFields(now.fingerprint, baseline.fingerprint, FINGERPRINT_NOISE),
    config: differingFields(now.config, baseline.config, CONFIG_NOISE),
  };
}

/** One line per difference, e.g. `torch: 2.11.0 (baseline 2.10.0)`. */
export function describeDifferences(diffs: readonly FieldDifference[]): string[] {
  const show = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? 'none'));
  return diffs.map((d) => `${d.field}: ${show(d.now)} (baseline ${show(d.baseline)})`);
}

/**
 * What "Compare Throughput with Baseline" can do with the results kept for a host. Too few results is not a failure:
 * `info` carries a message the adapter shows as information (with the way forward), not as an error.
 */
export type ComparisonChoice<R> =
  { kind: 'info'; code: 'no-results' | 'only-one'; message: string } | { kind: 'choose'; newest: R; others: R[] };

export function comparisonChoice<R extends { result: { id: string; at: string } }>(
  all: readonly R[],
  hostName: string,
): ComparisonChoice<R> {
  const newest = [...all].sort((a, b) => b.result.at.localeCompare(a.result.at))[0];
  if (!newest)
    return {
      kind: 'info',
      code: 'no-results',
      message: `No benchmark result kept for ${hostName} yet: run "Known Good: Run Throughput Benchmark" first.`,
    };
  const others = all.filter((r) => r.result.id !== newest.result.id);
  if (!others.length)
    return {
      kind: 'info',
      code: 'only-one',
      message:
        `Only one benchmark result for ${hostName} so far: run "Known Good: Run Throughput Benchmark" again ` +
        `(after a change, or on the known-good set-up) to have something to compare it with.`,
    };
  return { kind: 'choose', newest, others };
}
