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

  private dims: vscode.TerminalDimensions | undefined;

  constructor(private runner: TerminalRunner) {
    this.attach(runner);
  }

  /** The next run in this same terminal (its process has ended): a rule under the last output, then the new one. */
  rerun(runner: TerminalRunner): void {
    for (const u of this.unsubscribe.splice(0)) u();
    this.runner = runner;
    this.exit = undefined;
    this.screen = '';
    this.attach(runner);
    this.writes.fire(`\r\n\x1b[2m${'─'.repeat(Math.min(60, this.dims?.columns ?? 60))}\x1b[0m\r\n`);
    void runner.start(this.dims ? { cols: this.dims.columns, rows: this.dims.rows } : undefined);
  }

  /** The process ended (a key would close the terminal): the next run may use it. */
  get ended(): boolean {
    return this.exit !== undefined;
  }

  private attach(runner: TerminalRunner): void {
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
    this.dims = dims;
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
    this.dims = dims;
    this.runner.resize({ cols: dims.columns, rows: dims.rows });
  }

  dispose(): void {
    for (const u of this.unsubscribe.splice(0)) u();
  }
}
