import * as vscode from 'vscode';
import type { HostSession } from '../core/registry';
import type { TerminalCommand } from '../core/terminal/command';
import { chooseTerminal } from '../core/terminal/reuse';
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

/** The terminals runInTerminal opened, by name: one per host and kind (see core/terminal/reuse.ts). */
const opened = new Map<string, { terminal: vscode.Terminal; pty: RunnerPseudoterminal }>();

/**
 * Runs `command` on the host in `Known Good: … @ host`: a pty over SSH, a child process on This machine. The terminal
 * of that name is reused once its process has ended; while it still runs, the new run gets `… (2)`.
 */
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

/**
 * Opens `Known Good: … @ host` on a runner built elsewhere (core/bench/run.ts) or by runInTerminal; it starts when the
 * terminal opens. The terminal of that name is reused once its process has ended.
 */
export function showInTerminal(name: string, runner: TerminalRunner): TerminalRun {
  const choice = chooseTerminal(name, (n) => {
    const t = opened.get(n);
    return t && { closed: t.terminal.exitStatus !== undefined, ended: t.pty.ended };
  });
  const known = opened.get(choice.name);
  if (choice.kind === 'reuse' && known) {
    known.pty.rerun(runner);
    known.terminal.show(true);
    return { terminal: known.terminal, runner, pty: known.pty, done: runner.exited };
  }
  const pty = new RunnerPseudoterminal(runner);
  const terminal = createTerminal({ name: choice.name, pty, iconPath: new vscode.ThemeIcon('beaker') });
  opened.set(choice.name, { terminal, pty });
  terminal.show(true);
  return { terminal, runner, pty, done: runner.exited };
}
