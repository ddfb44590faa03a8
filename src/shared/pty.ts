import * as vscode from 'vscode';
import type { RunnerExit, TerminalRunner } from '../core/terminal/runner';

/**
 * Adapts a TerminalRunner to VS Code's Pseudoterminal: output events become onDidWrite, keys go to the runner,
 * setDimensions resizes the remote pty, closing the terminal stops the process. Once the process has ended a key
 * closes the terminal, except after a failure in the first second: then it stays until closed by hand.
 */
export class RunnerPseudoterminal implements vscode.Pseudoterminal, vscode.Disposable {
  private readonly writes = new vscode.EventEmitter<string>();
  private readonly closes = new vscode.EventEmitter<number | void>();
  readonly onDidWrite = this.writes.event;
  readonly onDidClose = this.closes.event;
  private readonly unsubscribe: Array<() => void> = [];
  private exit: RunnerExit | undefined;
  /** Everything written, for tests through the extension API (a terminal's buffer is not readable otherwise). */
  screen = '';

  constructor(private readonly runner: TerminalRunner) {
    this.unsubscribe.push(
      runner.onOutput((text) => {
        this.screen = (this.screen + text).slice(-200_000);
        this.writes.fire(text);
      }),
      runner.onExit((e) => {
        this.exit = e;
        if (!e.stopped && !e.early) this.runner.print('\x1b[2mPress any key to close this terminal.\x1b[0m\n');
      }),
    );
  }

  open(dims: vscode.TerminalDimensions | undefined): void {
    void this.runner.start(dims ? { cols: dims.columns, rows: dims.rows } : undefined);
  }

  close(): void {
    this.runner.stop();
    this.dispose();
  }

  handleInput(data: string): void {
    if (this.exit) {
      if (!this.exit.early) this.closes.fire(this.exit.exitCode ?? undefined);
      return;
    }
    this.runner.write(data);
  }

  setDimensions(dims: vscode.TerminalDimensions): void {
    this.runner.resize({ cols: dims.columns, rows: dims.rows });
  }

  dispose(): void {
    for (const u of this.unsubscribe.splice(0)) u();
  }
}
