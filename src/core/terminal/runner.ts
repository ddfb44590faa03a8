import { StringDecoder } from 'node:string_decoder';
import { messageOf } from '../errors';
import { extractFramed } from '../probes/runner';
import type { ProcessHandle, PtySize, Transport } from '../transport/types';
import { DIM, FrameFilter, RESET } from './frame';

/*
 * The process behind a terminal: started with a pty where the transport has one (SSH, containers over SSH), else
 * as a child process with pipes (This machine: a pty needs a native module). The runner owns the process and its
 * streams; a terminal (VS Code's Pseudoterminal, the CLI's stderr) only shows its output events and forwards keys.
 *
 * Without a pty nothing echoes what is typed and Ctrl+C is just a byte, so in that mode the runner plays the line
 * discipline itself: it echoes, edits the line (backspace), sends it on Enter, turns Ctrl+C into SIGINT of the
 * process group and Ctrl+D into end of input. Full-screen programs and raw key reads do not work there.
 */

export interface RunnerExit {
  exitCode: number | null;
  exitSignal?: string;
  /** It failed (could not start, or ended unsuccessfully) within `earlyMs`: the terminal should stay open. */
  early: boolean;
  /** Could not start, or the connection dropped. */
  error?: string;
  /** Ended because `stop()` was called (the terminal was closed). */
  stopped: boolean;
  durationMs: number;
}

export interface TerminalRunnerOptions {
  argv: readonly string[];
  /** The command line the terminal prints (`$ …`), human readable. */
  display: string;
  /** A line in words printed before it (what runs, where): the first thing a person reads. */
  headline?: string;
  /** Frame nonce of a probe run: the framed result is hidden from the output and kept for `framed()`. */
  nonce?: string;
  /** A pty is asked for unless false (default: every transport but This machine). */
  pty?: boolean;
  /** "Failed in the first second" window (default 1000 ms). */
  earlyMs?: number;
  /** Output kept for `output` (the tail beyond this is dropped; default 32 MB). */
  maxCaptureChars?: number;
  /** Color the `$ command` header and the exit line (default true). */
  color?: boolean;
  now?: () => number;
  /**
   * Runs after the process ended, before the exit line: what it returns is printed (a probe's result in words, where
   * a benchmark result was kept). A throw is printed as the error it is. `signal` aborts when the person stops it
   * (Ctrl+C typed, the terminal closed): an epilogue that runs more work (the restore's benchmarks) ends it then.
   */
  epilogue?: (
    exit: RunnerExit,
    runner: TerminalRunner,
    signal: AbortSignal,
  ) => Promise<string | undefined> | string | undefined;
}

type Listener<T> = (value: T) => void;

class Emitter<T> {
  private readonly listeners = new Set<Listener<T>>();
  on(l: Listener<T>): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
  fire(v: T): void {
    for (const l of [...this.listeners]) l(v);
  }
}

/** True for transports that can give a pty (everything reached over SSH). */
export function transportHasPty(t: Transport): boolean {
  return !(t.id === 'local' || t.id.startsWith('local/'));
}

const RED = '\x1b[31m';
const BOLD = '\x1b[1m';

export class TerminalRunner {
  private handle: ProcessHandle | undefined;
  private readonly outputs = new Emitter<string>();
  private readonly exits = new Emitter<RunnerExit>();
  private readonly decoder = new StringDecoder('utf8');
  private readonly errDecoder = new StringDecoder('utf8');
  private readonly filter: FrameFilter | undefined;
  private captured = '';
  private startedAt = 0;
  private state: 'new' | 'starting' | 'running' | 'done' = 'new';
  private size: PtySize | undefined;
  private line = '';
  private queued = '';
  private stopRequested = false;
  /** Ctrl+C was typed: ending early then is what the person asked for, not a failure to point out. */
  private interrupted = false;
  private exitValue: RunnerExit | undefined;
  /** Aborted when the person stops the run while the epilogue works (the process itself has ended by then). */
  private readonly epilogueAbort = new AbortController();
  private resolveExit!: (e: RunnerExit) => void;
  readonly pty: boolean;
  /** Resolves once, when the process is gone (or could not start). */
  readonly exited: Promise<RunnerExit>;

  constructor(
    private readonly transport: Transport,
    private readonly options: TerminalRunnerOptions,
  ) {
    this.pty = options.pty ?? transportHasPty(transport);
    this.filter = options.nonce !== undefined ? new FrameFilter(options.nonce, options.color !== false) : undefined;
    this.exited = new Promise((r) => (this.resolveExit = r));
  }

  /** Display text (CRLF line ends, ANSI allowed). Subscribe before `start`. */
  onOutput(l: Listener<string>): () => void {
    return this.outputs.on(l);
  }

  onExit(l: Listener<RunnerExit>): () => void {
    if (this.exitValue) {
      const v = this.exitValue;
      queueMicrotask(() => l(v));
      return () => undefined;
    }
    return this.exits.on(l);
  }

  get running(): boolean {
    return this.state === 'running';
  }

  get exit(): RunnerExit | undefined {
    return this.exitValue;
  }

  /** Everything the process printed on stdout (pty: everything), `\r\n` turned into `\n`. */
  get output(): string {
    return this.captured;
  }

  /** The framed result document of a probe run, if it printed one. */
  framed(): string | undefined {
    return this.options.nonce !== undefined ? extractFramed(this.captured, this.options.nonce) : undefined;
  }

  /** Writes a message into the terminal (not to the process): `\n` becomes `\r\n`. */
  print(text: string): void {
    this.outputs.fire(text.replace(/\r?\n/g, '\r\n'));
  }

  private get color(): boolean {
    return this.options.color !== false;
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  async start(size?: PtySize): Promise<void> {
    if (this.state !== 'new') return;
    this.state = 'starting';
    if (size) this.size = size;
    if (this.options.headline) this.print(`${this.options.headline}\n`);
    this.print(this.color ? `${BOLD}$ ${this.options.display}${RESET}\n` : `$ ${this.options.display}\n`);
    this.startedAt = this.now();
    let handle: ProcessHandle;
    try {
      const cols = this.size?.cols ?? 80;
      const rows = this.size?.rows ?? 24;
      handle = await this.transport.spawn(this.options.argv, this.pty ? { pty: { cols, rows } } : {});
    } catch (e) {
      this.finish({ exitCode: null, error: messageOf(e), notStarted: true });
      return;
    }
    // Measured from here: on a busy host the login shell alone can take longer than the window.
    this.startedAt = this.now();
    this.handle = handle;
    if (this.stopRequested) {
      this.state = 'running';
      this.stop();
    } else {
      this.state = 'running';
    }
    handle.stdin.on('error', () => {
      /* the process may exit before it reads its input */
    });
    handle.stdout.on('data', (c: Buffer) => this.onStdout(this.decoder.write(c)));
    handle.stderr.on('data', (c: Buffer) => this.onStderr(this.errDecoder.write(c)));
    if (this.size && this.pty) handle.resize(this.size);
    if (this.queued) {
      const q = this.queued;
      this.queued = '';
      this.write(q);
    }
    handle.exited.then(
      (r) => {
        // Let the last 'data' events of the streams arrive first.
        const sig = r.exitSignal?.replace(/^SIG/, '');
        setImmediate(() => this.finish({ exitCode: r.exitCode, ...(sig ? { exitSignal: sig } : {}) }));
      },
      (e: unknown) => this.finish({ exitCode: null, error: messageOf(e) }),
    );
  }

  private keep(text: string): void {
    this.captured += text.replace(/\r\n/g, '\n');
    const max = this.options.maxCaptureChars ?? 32 * 1024 * 1024;
    if (this.captured.length > max) this.captured = this.captured.slice(this.captured.length - max);
  }

  private display(text: string): void {
    if (!text) return;
    // A pty already ends lines with CRLF (onlcr); pipes do not, and a terminal needs the CR.
    this.outputs.fire(this.pty ? text : text.replace(/\r?\n/g, '\r\n'));
  }

  private onStdout(text: string): void {
    if (!text) return;
    this.keep(text);
    this.display(this.filter ? this.filter.push(text) : text);
  }

  private onStderr(text: string): void {
    this.display(text);
  }

  private finish(r: { exitCode: number | null; exitSignal?: string; error?: string; notStarted?: boolean }): void {
    if (this.state === 'done') return;
    this.state = 'done';
    const rest = this.decoder.end();
    if (rest) this.onStdout(rest);
    if (this.filter) this.display(this.filter.flush());
    const errRest = this.errDecoder.end();
    if (errRest) this.display(errRest);
    const durationMs = this.now() - this.startedAt;
    const failed = r.error !== undefined || r.exitCode !== 0;
    const early =
      r.notStarted === true ||
      (failed && !this.stopRequested && !this.interrupted && durationMs < (this.options.earlyMs ?? 1000));
    const exit: RunnerExit = {
      exitCode: r.exitCode,
      ...(r.exitSignal ? { exitSignal: r.exitSignal } : {}),
      ...(r.error !== undefined ? { error: r.error } : {}),
      early,
      stopped: this.stopRequested,
      durationMs,
    };
    void this.conclude(exit);
  }

  private async conclude(exit: RunnerExit): Promise<void> {
    if (this.options.epilogue) {
      try {
        const text = await this.options.epilogue(exit, this, this.epilogueAbort.signal);
        if (text) this.print(`\n${text.replace(/\n?$/, '\n')}`);
      } catch (e) {
        this.print(`\n${this.color ? RED : ''}✗ ${messageOf(e)}${this.color ? RESET : ''}\n`);
      }
    }
    this.exitValue = exit;
    this.print(this.exitLine(exit));
    this.exits.fire(exit);
    this.resolveExit(exit);
  }

  /** The last line printed: the exit code (or why it failed), and how long it ran. */
  exitLine(e: RunnerExit): string {
    const secs = `${(e.durationMs / 1000).toFixed(1)} s`;
    const red = (s: string) => (this.color ? `${RED}${s}${RESET}` : s);
    const dim = (s: string) => (this.color ? `${DIM}${s}${RESET}` : s);
    let what: string;
    if (e.error !== undefined) what = `✗ ${e.error}`;
    else if (e.exitSignal) what = `Process ended by signal ${e.exitSignal} after ${secs}`;
    else what = `Process exited with code ${e.exitCode ?? '?'} after ${secs}`;
    const lines = ['', e.error !== undefined || e.exitCode !== 0 ? red(what) : dim(what)];
    if (e.early)
      lines.push(
        red('The command failed within its first second; this terminal stays open so the message can be read.'),
      );
    return lines.join('\n') + '\n';
  }

  /** Keys typed in the terminal. */
  write(data: string): void {
    if (this.state === 'new' || this.state === 'starting') {
      this.queued += data;
      return;
    }
    const h = this.handle;
    if (this.state === 'done' && !this.exitValue && data.includes('\x03') && !this.epilogueAbort.signal.aborted) {
      this.interrupted = true;
      this.outputs.fire('^C\r\n');
      this.epilogueAbort.abort();
      return;
    }
    if (this.state !== 'running' || !h) return;
    if (data.includes('\x03')) this.interrupted = true;
    if (this.pty) {
      h.stdin.write(data);
      return;
    }
    this.lineDiscipline(h, data);
  }

  private lineDiscipline(h: ProcessHandle, data: string): void {
    // Cursor keys and other escape sequences: nothing to edit them with here.
    if (data.startsWith('\x1b')) return;
    for (const ch of data) {
      if (ch === '\x03') {
        this.outputs.fire('^C\r\n');
        this.line = '';
        h.kill('INT');
      } else if (ch === '\x04') {
        if (this.line) {
          h.stdin.write(this.line);
          this.line = '';
        } else {
          h.stdin.end();
        }
      } else if (ch === '\r' || ch === '\n') {
        this.outputs.fire('\r\n');
        h.stdin.write(this.line + '\n');
        this.line = '';
      } else if (ch === '\x7f' || ch === '\b') {
        if (this.line) {
          this.line = [...this.line].slice(0, -1).join('');
          this.outputs.fire('\b \b');
        }
      } else if (ch >= ' ') {
        this.line += ch;
        this.outputs.fire(ch);
      }
    }
  }

  resize(size: PtySize): void {
    this.size = size;
    if (this.state === 'running' && this.pty) this.handle?.resize(size);
  }

  /** Ends the process (the terminal was closed): SIGHUP as a closing terminal sends, then SIGKILL. */
  stop(): void {
    this.stopRequested = true;
    this.epilogueAbort.abort();
    const h = this.handle;
    if (this.state !== 'running' || !h) return;
    h.kill('HUP');
    // OpenSSH ignores signal requests on pty sessions; closing the channel hangs up the pty as closing a real
    // terminal would (SIGHUP to the remote's foreground group), so that comes soon after.
    setTimeout(
      () => {
        if (this.state === 'running') h.kill('KILL');
      },
      this.pty ? 300 : 2000,
    ).unref();
  }
}
