import type { Readable, Writable } from 'node:stream';

export interface ExecOptions {
  /** Written to the command's stdin, which is then closed. Without it stdin is closed at once. */
  stdin?: string | Buffer;
  /**
   * The command is stopped (remote process signalled, channel closed) after this long: KnownGoodError 'timeout'.
   * It counts from the call (after connecting), the wait for a free channel included, and is reported on time even
   * when the connection stops answering (the message then says the stop is not confirmed).
   */
  timeoutMs?: number;
  /** Aborting stops the command the same way: KnownGoodError 'cancelled'. */
  signal?: AbortSignal;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  /** null when the process ended by a signal. */
  exitCode: number | null;
  exitSignal?: string;
}

export interface KillOptions {
  readonly closeAfterMs?: number;
}

export interface PtySize {
  cols: number;
  rows: number;
}

export interface SpawnOptions {
  /** Ask for a pseudo-terminal (interactive use: Ctrl+C, resize, colours). */
  pty?: PtySize & { term?: string };
  /**
   * Aborting before the process has started rejects at once with the signal's reason (a queued or unanswered
   * SSH channel); a process that still starts after that is stopped.
   */
  signal?: AbortSignal;
}

/** A running process whose streams are used directly (terminals, the resident helper). */
export interface ProcessHandle {
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Resolves once, when the process is gone. */
  readonly exited: Promise<{ exitCode: number | null; exitSignal?: string }>;
  resize(size: PtySize): void;
  /**
   * Ends the process: a signal first, then the channel/process is closed (over SSH 1.5 s after a signal other than
   * KILL, or `closeAfterMs`: a guarded action keeps it open for the guard's report while it stops the command).
   */
  kill(signal?: 'INT' | 'TERM' | 'KILL' | 'HUP', options?: KillOptions): void;
  /**
   * The remote process group the command runs as, once known (SSH without a pty): what a person can stop by hand
   * when a stop cannot be confirmed.
   */
  remoteGroup?(): number | undefined;
}

/**
 * Runs argv somewhere: on this machine, over SSH, or inside a container on either. Words are never re-split or
 * expanded: over SSH each word is quoted with `shellQuote` for the remote login shell.
 */
export interface Transport {
  /** Stable id, e.g. `local`, `ssh:user@host:22`, `ssh:user@host:22/pct:200`. */
  readonly id: string;
  /** For messages: `gpu-box`, `gpu-box (container 200)`. */
  readonly label: string;
  exec(argv: readonly string[], options?: ExecOptions): Promise<ExecResult>;
  spawn(argv: readonly string[], options?: SpawnOptions): Promise<ProcessHandle>;
  /** Closes pooled resources (a no-op for local). */
  dispose(): void;
}
