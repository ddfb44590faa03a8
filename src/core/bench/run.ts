import { guardedCommand } from '../actions/guard';
import type { ProbeOutcome } from '../probes/probe';
import { parseFramedResult } from '../probes/catalogue';
import { probeTerminalCommand, type TerminalCommand } from '../terminal/command';
import { TerminalRunner, type RunnerExit, type TerminalRunnerOptions } from '../terminal/runner';
import type { Transport } from '../transport/types';
import { newNonce } from '../util/nonce';
import { benchArgs, throughputBenchProbe, type BenchConfig, type BenchResult } from './benchProbe';
import { displayWord } from '../terminal/command';

/*
 * One process run of python/throughput_bench.py, for the extension (in a terminal: a pty over SSH, its result kept
 * in the epilogue) and for the CLI (pipes, progress on stderr, the result after the exit): the probe call, its frame
 * nonce, the command line and the runner are built here once.
 */

export interface BenchHost {
  transport: Transport;
  python: string;
  /** The host's name in messages (`… on gpu-box printed no result`). */
  label: string;
}

export interface BenchProcess {
  /** Not started: the terminal adapter starts it when it opens, the CLI itself. */
  runner: TerminalRunner;
  command: TerminalCommand;
  /** The parsed result of an ended run; a KnownGoodError (`probe-failed`, `bad-output`) when it printed none. */
  result(): ProbeOutcome<BenchResult>;
}

export interface BenchProcessOptions extends Pick<TerminalRunnerOptions, 'pty' | 'color'> {
  /**
   * Runs when the process has ended, before the exit line, with the parse of its result: what it returns is printed
   * (the extension keeps the result there and says so).
   */
  epilogue?: (exit: RunnerExit, result: () => ProbeOutcome<BenchResult>) => Promise<string | undefined>;
}

/** A benchmark run's limit in a terminal (a compile of a large model counts): TERM, then KILL after the grace. */
export const BENCH_TIMEOUT_MS = 3600_000;

export function benchProcess(host: BenchHost, config: BenchConfig, options: BenchProcessOptions = {}): BenchProcess {
  const call = throughputBenchProbe(config);
  const nonce = newNonce();
  const packed = probeTerminalCommand(host.python, call, nonce);
  // Under the guard (core/actions/guard.ts): bounded, and stopped on the host when the terminal or the CLI goes.
  const guarded = guardedCommand(host.python, packed.argv, { timeoutMs: BENCH_TIMEOUT_MS });
  const command: TerminalCommand = { argv: guarded.argv, display: benchDisplay(host.python, config, packed.display) };
  const { epilogue, ...display } = options;
  const runner: TerminalRunner = new TerminalRunner(host.transport, {
    argv: command.argv,
    display: command.display,
    headline: benchHeadline(host, config),
    nonce,
    ...display,
    ...(epilogue ? { epilogue: (exit: RunnerExit) => epilogue(exit, result) } : {}),
  });
  // the runner calls the epilogue only after it was built
  function result(): ProbeOutcome<BenchResult> {
    return parseFramedResult(call, runner.framed(), host.label);
  }
  return { runner, command, result };
}

/**
 * python/throughput_bench.py's step counts when the configuration names none (its CPU_DEFAULTS and CUDA_DEFAULTS; a
 * unit test keeps them equal). Besides these it runs one first step (compile, allocation), never timed.
 */
export const BENCH_DEFAULT_STEPS = { cpu: { steps: 6, warmup: 1 }, cuda: { steps: 20, warmup: 5 } } as const;

/** What a run does, in words: `6 timed steps after a first step and 1 warm-up (8 in all)`. */
export function benchStepsText(config: BenchConfig): string {
  const d = config.device === 'cpu' || config.device === 'cuda' ? BENCH_DEFAULT_STEPS[config.device] : undefined;
  const steps = config.steps ?? d?.steps;
  const warmup = config.warmup ?? d?.warmup;
  if (steps === undefined || warmup === undefined) {
    const c = BENCH_DEFAULT_STEPS;
    return `${config.steps ?? `${c.cuda.steps} (GPU) or ${c.cpu.steps} (CPU)`} timed steps after a first step and warm-up`;
  }
  return `${steps} timed steps after a first step and ${warmup} warm-up (${1 + warmup + steps} in all)`;
}

/** The terminal's first line: what runs, with which Python, where. */
export function benchHeadline(host: Pick<BenchHost, 'python' | 'label'>, config: BenchConfig): string {
  const device = config.device && config.device !== 'auto' ? `${config.device}, ` : '';
  return `Known Good benchmark: ${device}${benchStepsText(config)}${config.compile ? ', torch.compile' : ''}, ${host.python} on ${host.label}`;
}

/**
 * The command as a person would run it by hand (the script is python/throughput_bench.py of the extension, runnable
 * as is): what travels instead, the script packed into one argv word, is named after it, not shown.
 */
export function benchDisplay(python: string, config: BenchConfig, packed: string): string {
  const size = /: ([\d.]+ K?B) zlib\+base64>/.exec(packed)?.[1];
  const words = [python, '-u', 'throughput_bench.py', ...benchArgs(config)].map(displayWord).join(' ');
  return `${words}  # throughput_bench.py travels in the command line${size ? ` (${size} packed)` : ''}`;
}
