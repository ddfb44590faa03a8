import type { ProbeOutcome } from '../probes/probe';
import { parseFramedResult } from '../probes/catalogue';
import { probeTerminalCommand, type TerminalCommand } from '../terminal/command';
import { TerminalRunner, type RunnerExit, type TerminalRunnerOptions } from '../terminal/runner';
import type { Transport } from '../transport/types';
import { newNonce } from '../util/nonce';
import { throughputBenchProbe, type BenchConfig, type BenchResult } from './benchProbe';

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

export function benchProcess(host: BenchHost, config: BenchConfig, options: BenchProcessOptions = {}): BenchProcess {
  const call = throughputBenchProbe(config);
  const nonce = newNonce();
  const command = probeTerminalCommand(host.python, call, nonce);
  const { epilogue, ...display } = options;
  const runner: TerminalRunner = new TerminalRunner(host.transport, {
    argv: command.argv,
    display: command.display,
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
