import { baselineTitle } from '../baselines/documents';
import { captureSnapshot, type CaptureHost } from '../baselines/capture';
import type { EnvSnapshot } from '../baselines/envProbe';
import type { Baseline } from '../baselines/store';
import type { BenchConfig } from '../bench/benchProbe';
import type { CustomBenchmark } from '../bench/customBenchmark';
import { KnownGoodError } from '../errors';
import { redactText } from '../redact';
import { bisect, budgetRounds, budgetRuns, type BisectEvent, type BisectReport } from './engine';
import {
  baselineBenchConfig,
  benchConfigText,
  builtinMeasure,
  customMeasure,
  type BenchClock,
  envChanges,
  type EnvChange,
  type RunOutput,
  type SkippedChange,
} from './env';
import { bisectHeadline, renderBisectMarkdown } from './render';

/** Which benchmark measures each state: the built-in one (the baseline's recorded shape by default) or the user's. */
export type BisectBenchmark =
  | { readonly kind: 'builtin'; readonly config?: BenchConfig; readonly clock?: BenchClock }
  | { readonly kind: 'custom'; readonly bench: CustomBenchmark };

export interface EnvBisectHost extends CaptureHost {
  /** The interpreter the host is configured with (now's). */
  readonly python: string;
  readonly label: string;
}

export interface EnvBisectOptions {
  readonly benchmark: BisectBenchmark;
  /** Variables recorded besides the built-in families (the baseline's own extra ones are always added). */
  readonly extraVariables?: readonly string[];
  readonly repeats?: number;
  readonly threshold?: number;
  /** Each benchmark run is stopped after this long (default RUN_TIMEOUT_MS; TERM, then KILL after a grace). */
  readonly runTimeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Each engine event, as it happens. */
  readonly onEvent?: (e: BisectEvent, changes: readonly EnvChange[]) => void;
  /** Free text for the live view (the plan before the first run, what each run printed). */
  readonly onText?: RunOutput;
  /** The now snapshot, when the caller has one (tests); otherwise one is taken. */
  readonly now?: EnvSnapshot;
}

export interface EnvBisectOutcome {
  readonly host: string;
  readonly baseline: { readonly id: string; readonly label: string; readonly title: string };
  /** What measured each state, in words. */
  readonly benchmark: string;
  readonly unit: string;
  readonly changes: readonly EnvChange[];
  readonly skipped: readonly SkippedChange[];
  /** Absent when there was nothing to bisect (no difference, or only ones that cannot be put back). */
  readonly report?: BisectReport;
  readonly headline: string;
  readonly markdown: string;
}

async function hasFile(host: EnvBisectHost, path: string, signal?: AbortSignal): Promise<boolean> {
  const r = await host.transport.exec(['test', '-x', path], { timeoutMs: 30_000, ...(signal ? { signal } : {}) });
  return r.exitCode === 0;
}

/** The plan printed before the first run: what differs, what is left out, the budget. */
export function planText(
  changes: readonly EnvChange[],
  skipped: readonly SkippedChange[],
  benchmark: string,
  repeats = 3,
): string {
  const lines = [`Differences from the baseline (${changes.length}):`];
  for (const c of changes) lines.push(`  ${c.label}`);
  for (const s of skipped) lines.push(`  left out: ${s.name}: ${s.why}`);
  lines.push(`Benchmark: ${benchmark}`);
  if (changes.length)
    lines.push(
      `Budget: ${budgetRounds(changes.length)} rounds (⌈log₂ ${changes.length}⌉ + 2), at most ` +
        `${budgetRuns(changes.length, repeats)} runs (${repeats} of each state per round, interleaved)`,
    );
  return lines.join('\n') + '\n';
}

/** Bisects the environment differences between `baseline` and the host now with the benchmark. */
export async function envBisect(
  host: EnvBisectHost,
  baseline: Baseline,
  opts: EnvBisectOptions,
): Promise<EnvBisectOutcome> {
  const signal = opts.signal;
  const extra = [...new Set([...(baseline.snapshot.env.extraRequested ?? []), ...(opts.extraVariables ?? [])])];
  const now =
    opts.now ??
    (await captureSnapshot(host, {
      scriptGlobs: [],
      cacheDirs: [],
      extraVariables: extra,
      ...(signal ? { signal } : {}),
    }));
  const was = baseline.snapshot.python.executable;
  const builtin = opts.benchmark.kind === 'builtin';
  const goodPython =
    builtin && was && was !== now.python.executable && (await hasFile(host, was, signal)) ? was : undefined;
  const { changes, skipped } = envChanges(baseline.snapshot, now, {
    ...(goodPython ? { goodPython } : {}),
    nowPython: host.python,
  });
  if (!builtin && baseline.snapshot.python.executable !== now.python.executable)
    skipped.push({ name: 'python', why: 'your own benchmark command names its interpreter itself' });
  let benchmark: string;
  let unit: string;
  let measure;
  const measureHost = { ...host, ...(opts.runTimeoutMs !== undefined ? { runTimeoutMs: opts.runTimeoutMs } : {}) };
  let ran: string | undefined;
  if (opts.benchmark.kind === 'builtin') {
    const recorded = baselineBenchConfig(baseline);
    const config = opts.benchmark.config ?? recorded.config;
    const given = Object.keys(config).length > 0;
    // `{}` says nothing: the probe takes its defaults for the device it finds (a tiny model on a CPU), and the
    // configuration it really ran is printed once the first run tells it
    benchmark =
      `python/throughput_bench.py ${given ? JSON.stringify(config) : 'with its defaults for the device it finds'}` +
      (opts.benchmark.config ? '' : recorded.from ? ` (as the baseline's result ${recorded.from})` : '');
    unit = 'tok/s';
    const clock = opts.benchmark.clock ?? 'wall';
    if (clock === 'cpu') benchmark += ', tokens per CPU-second of its process';
    measure = builtinMeasure(measureHost, changes, host.python, config, opts.onText, clock, (c) => {
      if (ran !== undefined) return;
      ran = benchConfigText(c);
      opts.onText?.(`Benchmark configuration (as it ran): ${ran}\n`);
    });
  } else {
    const b = opts.benchmark.bench;
    benchmark = `${redactText(b.command)} (speed from ${b.jsonl ? `${b.jsonl.path} key ${b.jsonl.key}` : `regex ${b.regex}`})`;
    unit = 'per s';
    measure = customMeasure(measureHost, changes, b, opts.onText);
  }
  const base = {
    host: host.label,
    baseline: { id: baseline.id, label: baseline.label, title: baselineTitle(baseline) },
    benchmark,
    unit,
    changes,
    skipped,
  };
  opts.onText?.(planText(changes, skipped, benchmark, opts.repeats));
  if (changes.length === 0) {
    const headline = skipped.length
      ? `Nothing to bisect: the differences from the baseline cannot be put back (${skipped.map((s) => s.name).join(', ')})`
      : 'Nothing to bisect: the environment variables and the interpreter are as in the baseline';
    return { ...base, headline, markdown: envMarkdown(base, undefined, headline) };
  }
  const report = await bisect(changes, measure, {
    ...(opts.repeats !== undefined ? { repeats: opts.repeats } : {}),
    ...(opts.threshold !== undefined ? { threshold: opts.threshold } : {}),
    ...(signal ? { signal } : {}),
    onEvent: (e) => opts.onEvent?.(e, changes),
  });
  const headline = bisectHeadline(report);
  const measured = ran ? { ...base, benchmark: `${base.benchmark}; it ran ${ran}` } : base;
  return { ...measured, report, headline, markdown: envMarkdown(measured, report, headline) };
}

function envMarkdown(
  o: Pick<EnvBisectOutcome, 'host' | 'baseline' | 'benchmark' | 'unit' | 'skipped'>,
  report: BisectReport | undefined,
  headline: string,
): string {
  const head = [
    `Host: ${o.host}. Baseline: ${o.baseline.title}. Benchmark: ${o.benchmark}.`,
    ...(o.skipped.length
      ? ['', 'Left out (cannot be put back):', ...o.skipped.map((s) => `- ${s.name}: ${s.why}`)]
      : []),
    '',
  ];
  const subject = `environment of ${o.host} vs baseline "${o.baseline.label}"`;
  if (!report) return [`# Bisect: ${subject}`, '', `**${headline}**`, '', ...head].join('\n');
  const md = renderBisectMarkdown(report, { unit: o.unit, subject });
  // The host/baseline/benchmark lines go right under the headline.
  const lines = md.split('\n');
  return [...lines.slice(0, 4), ...head, ...lines.slice(4)].join('\n');
}

/** Thrown by callers that need a baseline and got none. */
export function noBaseline(host: string): KnownGoodError {
  return new KnownGoodError('usage', `${host} has no saved baseline: save one first (Known Good: Save Baseline)`);
}
