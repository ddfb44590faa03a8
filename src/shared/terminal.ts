import * as vscode from 'vscode';
import type { HostSession } from '../core/registry';
import type { TerminalCommand } from '../core/terminal/command';
import { TerminalRunner, type RunnerExit, type TerminalRunnerOptions } from '../core/terminal/runner';
import { createTerminal } from '../window';
import { RunnerPseudoterminal } from './pty';

export interface TerminalRun {
  terminal: vscode.Terminal;
  runner: TerminalRunner;
  pty: RunnerPseudoterminal;
  /** Resolves when the process has ended and the epilogue was printed. */
  done: Promise<RunnerExit>;
}

/** Opens `Known Good: … @ host` running `command` on the host: a pty over SSH, a child process on This machine. */
export function runInTerminal(
  name: string,
  session: HostSession,
  command: TerminalCommand,
  extra: Pick<TerminalRunnerOptions, 'nonce' | 'epilogue'> = {},
): TerminalRun {
  return showInTerminal(
    name,
    new TerminalRunner(session.transport, { argv: command.argv, display: command.display, ...extra }),
  );
}

/** Opens `Known Good: … @ host` on a runner built elsewhere (core/bench/run.ts); it starts when the terminal opens. */
export function showInTerminal(name: string, runner: TerminalRunner): TerminalRun {
  const pty = new RunnerPseudoterminal(runner);
  const terminal = createTerminal({ name, pty, iconPath: new vscode.ThemeIcon('beaker') });
  terminal.show(true);
  return { terminal, runner, pty, done: runner.exited };
}
