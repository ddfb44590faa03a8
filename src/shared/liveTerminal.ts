import * as vscode from 'vscode';
import { createTerminal } from '../window';

/**
 * A terminal that shows long work as it runs (a bisect, a replay: the plan, each run's speed, each decision). The
 * engine owns the work and its processes; this only prints, and says when to stop: Ctrl+C or closing the terminal
 * aborts `abort.signal`, which reaches every run (runAction: the guard on the host stops the process).
 */
export class LiveTerminal implements vscode.Pseudoterminal {
  private readonly writes = new vscode.EventEmitter<string>();
  private readonly closes = new vscode.EventEmitter<number | void>();
  readonly onDidWrite = this.writes.event;
  readonly onDidClose = this.closes.event;
  readonly abort = new AbortController();
  private readonly opened: Promise<void>;
  private resolveOpen!: () => void;
  private ended = false;
  /** Everything written, for tests through the extension API (a terminal's buffer is not readable otherwise). */
  screen = '';
  constructor() {
    this.opened = new Promise((r) => (this.resolveOpen = r));
  }
  open(): void {
    this.resolveOpen();
  }
  close(): void {
    this.abort.abort();
  }
  handleInput(data: string): void {
    if (this.ended) {
      this.closes.fire();
      return;
    }
    if (data.includes('\x03') && !this.abort.signal.aborted) {
      this.write('^C\n\x1b[33mStopping: the run in progress is stopped on the host, nothing more starts.\x1b[0m\n');
      this.abort.abort();
    }
  }
  write(text: string): void {
    this.screen += text;
    void this.opened.then(() => this.writes.fire(text.replace(/\r?\n/g, '\r\n')));
  }
  end(): void {
    this.ended = true;
    this.write('\x1b[2mPress any key to close this terminal.\x1b[0m\n');
  }
}

/** Opens `name` on a new LiveTerminal and shows it (focus stays where it was). */
export function openLiveTerminal(name: string, icon = 'debug-alt'): LiveTerminal {
  const pty = new LiveTerminal();
  const terminal = createTerminal({ name, pty, iconPath: new vscode.ThemeIcon(icon) });
  terminal.show(true);
  return pty;
}
