import type { EnvSnapshot } from '../baselines/envProbe';
import type { Baseline } from '../baselines/store';
import { benchConfigSchema, throughputBenchProbe, type BenchConfig, type BenchResult } from '../bench/benchProbe';
import {
  throughputFromJsonl,
  throughputFromOutput,
  type CustomBenchmark,
  type ThroughputReading,
} from '../bench/customBenchmark';
import { envNameProblem, envValueProblem, type EnvMap } from '../actions/envMap';
import { actionFailure, runAction, type ActionResult } from '../actions/runner';
import { KnownGoodError, messageOf } from '../errors';
import { redactText } from '../redact';
import { parseFramedResult } from '../probes/catalogue';
import { extractFramed } from '../probes/runner';
import { probeTerminalCommand } from '../terminal/command';
import type { Transport } from '../transport/types';
import { newNonce } from '../util/nonce';
import { type BisectChange, type Measure } from './engine';

/*
 * The environment bisect (issue 26 item 1): the differences between a baseline's environment variables (and its
 * interpreter, when the host still has it) and now's, as bisect changes, and a Measure that runs the benchmark with
 * some of them taken back. A state is built from NOW: the benchmark process inherits the host's current environment
 * (so a secret set now is applied without ever passing through here in clear), and every change NOT applied is
 * reverted to the baseline's value through the run's environment map (core/actions/envMap.ts: names checked, values
 * data, applied by the guard with execve's env — never `env NAME=VALUE` argv, whose options a name could be).
 */

export interface EnvChange extends BisectChange {
  readonly kind: 'env' | 'python';
  /** The variable's name; for the interpreter, `python`. */
  readonly name: string;
  /** The baseline's value (the interpreter's path); null when it was not set. */
  readonly good: string | null;
  /** Now's value as recorded (secrets redacted); null when not set now. */
  readonly now: string | null;
}

export interface SkippedChange {
  readonly name: string;
  readonly why: string;
}

const REDACTED = /<redacted sha256:[0-9a-f]+>/;
const MAX_VALUE = 60;

function shown(v: string): string {
  return v.length > MAX_VALUE ? `${v.slice(0, MAX_VALUE - 1)}…` : v;
}

function envLabel(name: string, good: string | null, now: string | null): string {
  if (good === null) return `${name}=${shown(now ?? '')} (added)`;
  if (now === null) return `${name} unset (was ${shown(good)})`;
  return `${name}: ${shown(good)} → ${shown(now)}`;
}

/** The id of a variable's change (stable: the CLI's JSON and the What Changed? link name it). */
export const envChangeId = (name: string): string => `env:${name}`;
export const PYTHON_CHANGE_ID = 'python';

/**
 * The changes from `baseline` to `now`, in name order, the interpreter last. A variable whose baseline value was
 * recorded only as a hash (a secret) cannot be put back: it is skipped and named, never guessed. `goodPython` is the
 * baseline's interpreter when the host still has it (the caller checked), else undefined: then a changed interpreter
 * is skipped and named too.
 */
export function envChanges(
  baseline: EnvSnapshot,
  now: EnvSnapshot,
  opts: { goodPython?: string; nowPython?: string } = {},
): { changes: EnvChange[]; skipped: SkippedChange[] } {
  const a = baseline.env.vars;
  const b = now.env.vars;
  const names = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const changes: EnvChange[] = [];
  const skipped: SkippedChange[] = [];
  for (const name of names) {
    const good = a[name] ?? null;
    const cur = b[name] ?? null;
    if (good === cur) continue;
    const bad = envNameProblem(name) ?? (good !== null ? envValueProblem(good) : undefined);
    if (bad) {
      skipped.push({ name: shownName(name), why: `refused: ${bad}` });
      continue;
    }
    if (good !== null && REDACTED.test(good)) {
      skipped.push({ name, why: 'only a hash of its baseline value was recorded (a secret): it cannot be put back' });
      continue;
    }
    changes.push({ id: envChangeId(name), kind: 'env', name, good, now: cur, label: envLabel(name, good, cur) });
  }
  const was = baseline.python.executable;
  const is = now.python.executable;
  if (was && is && was !== is) {
    const bad = opts.goodPython !== undefined ? interpreterProblem(opts.goodPython) : undefined;
    if (bad) {
      skipped.push({ name: 'python', why: `refused: the baseline's interpreter ${bad}` });
    } else if (opts.goodPython) {
      changes.push({
        id: PYTHON_CHANGE_ID,
        kind: 'python',
        name: 'python',
        good: opts.goodPython,
        now: opts.nowPython ?? is,
        label: `interpreter: ${was} → ${is}`,
        detail: `Python ${baseline.python.version ?? '?'} → ${now.python.version ?? '?'}`,
      });
    } else {
      skipped.push({ name: 'python', why: `the baseline's interpreter ${was} is not on the host any more` });
    }
  }
  return { changes, skipped };
}

function shownName(name: string): string {
  const s = JSON.stringify(name);
  return s.length > 62 ? `${s.slice(0, 61)}…` : s;
}

/** Why a recorded interpreter path cannot be argv[0] of a run, or undefined: absolute, no control characters. */
export function interpreterProblem(path: string): string | undefined {
  // eslint-disable-next-line no-control-regex
  if (!path.startsWith('/') || /[\x00-\x1f\x7f]/.test(path)) return `${shownName(path)} is not an absolute path`;
  return undefined;
}

/** The environment map that takes every change NOT in `applied` back to the baseline, and the interpreter to run. */
export function stateEnv(
  changes: readonly EnvChange[],
  applied: ReadonlySet<string>,
  nowPython: string,
): { env: EnvMap; python: string } {
  const unset: string[] = [];
  const set: Record<string, string> = {};
  let python = nowPython;
  for (const c of changes) {
    if (applied.has(c.id)) continue;
    if (c.kind === 'python') python = c.good ?? nowPython;
    else if (c.good === null) unset.push(c.name);
    else set[c.name] = c.good;
  }
  return { env: { set, unset }, python };
}

/** The benchmark a baseline was measured with: its newest built-in result's configuration, else the defaults. */
export function baselineBenchConfig(baseline: Baseline): { config: BenchConfig; from?: string } {
  const results = [...(baseline.throughput ?? [])].reverse();
  for (const r of results) {
    if (r['source'] !== 'throughput_bench') continue;
    const c = r['config'];
    if (typeof c !== 'object' || c === null) continue;
    const keys = Object.keys(benchConfigSchema.shape) as (keyof BenchConfig)[];
    const picked = Object.fromEntries(
      keys
        .filter((k) => (c as Record<string, unknown>)[k] !== undefined)
        .map((k) => [k, (c as Record<string, unknown>)[k]]),
    );
    const parsed = benchConfigSchema.safeParse(picked);
    if (parsed.success)
      return { config: parsed.data, from: `${typeof r['label'] === 'string' ? r['label'] : r.id} (${r.at})` };
  }
  return { config: {} };
}

export interface MeasureHost {
  readonly transport: Transport;
  readonly label: string;
  /** The host's interpreter: it runs the guard of every run (python/kg_guard.py). */
  readonly python: string;
  /** Each run is stopped after this long (TERM, then KILL after the guard's grace); default RUN_TIMEOUT_MS. */
  readonly runTimeoutMs?: number;
}

/** A benchmark run's limit when none is given. */
export const RUN_TIMEOUT_MS = 15 * 60_000;

/** What a run printed, for the live terminal (progress lines of the benchmark, the user's command's output). */
export type RunOutput = (text: string) => void;

/** ONE run of `argv` in a state, under the guard: bounded, owned, its output capped; `shown` streams go to output. */
async function runState(
  host: MeasureHost,
  argv: readonly string[],
  env: EnvMap,
  signal: AbortSignal | undefined,
  output: RunOutput | undefined,
  shown: readonly ('stdout' | 'stderr')[],
): Promise<ActionResult> {
  return runAction(
    host.transport,
    { argv, env, timeoutMs: host.runTimeoutMs ?? RUN_TIMEOUT_MS },
    {
      python: host.python,
      ...(signal ? { signal } : {}),
      ...(output ? { onOutput: (t, stream) => (shown.includes(stream) ? output(redactText(t)) : undefined) } : {}),
    },
  );
}

/**
 * A small exec under the bisect's signal, through a signal of its own: the transport listens on the signal it gets
 * for as long as it likes, and a bisect makes dozens of runs under one signal (Node warns past 10 listeners).
 */
async function execUnder(
  transport: Transport,
  argv: readonly string[],
  signal: AbortSignal | undefined,
): Promise<Awaited<ReturnType<Transport['exec']>>> {
  if (!signal) return transport.exec(argv, { timeoutMs: 60_000 });
  const own = new AbortController();
  const stop = () => own.abort(signal.reason);
  if (signal.aborted) stop();
  signal.addEventListener('abort', stop, { once: true });
  try {
    return await transport.exec(argv, { signal: own.signal, timeoutMs: 60_000 });
  } finally {
    signal.removeEventListener('abort', stop);
  }
}

/**
 * Which clock the built-in benchmark's speed is read on: `wall` (what training feels; the default) or `cpu`, tokens
 * per CPU-second of the benchmark's process — on a shared CPU host another tenant's load moves wall time by 2x and
 * CPU time by a few percent, but a change that only costs wall time (fewer threads, waiting) does not show on it.
 */
export type BenchClock = 'wall' | 'cpu';

/** ONE run of python/throughput_bench.py in the state `applied`: its median tokens/s on `clock`. */
export function builtinMeasure(
  host: MeasureHost,
  changes: readonly EnvChange[],
  nowPython: string,
  config: BenchConfig,
  output?: RunOutput,
  clock: BenchClock = 'wall',
  /** Each run's configuration as the benchmark resolved it (its defaults for the device it found filled in). */
  onConfig?: (ran: BenchResult['config']) => void,
): Measure {
  return async (applied, signal) => {
    const { env, python } = stateEnv(changes, applied, nowPython);
    const call = throughputBenchProbe(config);
    const nonce = newNonce();
    const cmd = probeTerminalCommand(python, call, nonce);
    const r = await runState(host, cmd.argv, env, signal, output, ['stderr']);
    const framed = extractFramed(r.stdout, nonce);
    const failed = actionFailure(r, 'The benchmark', host.label);
    // a benchmark that ended and answered says why it failed itself (its framed error, with its code)
    if (failed && !(r.ended === 'exited' && framed !== undefined)) throw failed;
    if (framed === undefined)
      throw new KnownGoodError('bad-output', `The benchmark on ${host.label} printed no result: ${r.message}`);
    let value: BenchResult;
    try {
      value = parseFramedResult(call, framed, host.label).value;
    } catch (e) {
      // The known-good state runs the interpreter the baseline ran: when that one lacks torch, choosing another
      // interpreter for the host changes nothing; the baseline's env is what is gone.
      if (python !== nowPython && e instanceof KnownGoodError && e.detail?.['probeCode'] === 'no-torch')
        throw new KnownGoodError(
          'usage',
          `The baseline's interpreter ${python} has no torch now, and the known-good state runs the benchmark with ` +
            `the interpreter the baseline ran, so it cannot be measured. Restore Known Good rebuilds the baseline's ` +
            `packages in a new env (then Bisect Packages against the Restored Env), or bisect with your own benchmark ` +
            `command, which names its interpreter itself.`,
          { baselineInterpreter: python, probeCode: 'no-torch' },
        );
      throw e;
    }
    onConfig?.(value.config);
    if (clock === 'wall') return value.tokensPerSec.median;
    const cpu = value.cpuTokensPerSec?.median;
    if (cpu === undefined)
      throw new KnownGoodError('bad-output', `the benchmark on ${host.label} reported no CPU time per step`);
    return cpu;
  };
}

/** A resolved benchmark configuration in words: `cpu fp32, 2 layers × 64 wide, 4 heads, seq 64, batch 4, …`. */
export function benchConfigText(c: BenchResult['config']): string {
  return (
    `${c.device} ${c.dtype}, ${c.layers} layers × ${c.width} wide, ${c.heads} heads, seq ${c.seq}, batch ${c.batch}, ` +
    `vocab ${c.vocab}, ${c.steps} timed steps after ${c.warmup} warm-up${c.compile ? ', torch.compile' : ''}`
  );
}

/** ONE run of the user's own command in the state `applied`: its speed read by regex or from its jsonl. */
export function customMeasure(
  host: MeasureHost,
  changes: readonly EnvChange[],
  bench: CustomBenchmark,
  output?: RunOutput,
): Measure {
  return async (applied, signal) => {
    const { env } = stateEnv(changes, applied, host.python);
    // The user's own command line (a setting or --bench, never a file): the host's sh runs it as written.
    const r = await runState(host, ['sh', '-c', bench.command], env, signal, output, ['stdout', 'stderr']);
    const failed = actionFailure(r, 'Your benchmark command', host.label);
    if (failed) throw failed;
    let reading: ThroughputReading | undefined;
    if (bench.jsonl) {
      const tail = await execUnder(host.transport, ['tail', '-c', '4194304', '--', bench.jsonl.path], signal);
      if (tail.exitCode !== 0)
        throw new KnownGoodError('not-found', `could not read ${bench.jsonl.path}: ${messageOf(tail.stderr.trim())}`);
      reading = throughputFromJsonl(tail.stdout, bench.jsonl.key, bench.lastN);
    } else reading = throughputFromOutput(`${r.stdout}\n${r.stderr}`, bench.regex!, bench.lastN);
    if (!reading)
      throw new KnownGoodError(
        'bad-output',
        bench.jsonl
          ? `no "${bench.jsonl.key}" values in ${bench.jsonl.path}`
          : `no throughput matched ${bench.regex!} in the command's output`,
      );
    return reading.tokensPerSec;
  };
}
