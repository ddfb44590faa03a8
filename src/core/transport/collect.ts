import type { Readable } from 'node:stream';
import { KnownGoodError } from '../errors';
import type { ExecOptions, ExecResult, ProcessHandle } from './types';

/**
 * Why a command failed, in words: its last stderr lines, else how it ended (exit code, signal, or a channel that
 * closed without reporting an exit status).
 */
export function whyFailed(res: Pick<ExecResult, 'stderr' | 'exitCode' | 'exitSignal'>, lines = 3): string {
  const err = res.stderr
    .trim()
    .split('\n')
    .filter((l) => l.trim())
    .slice(-lines)
    .join(' | ');
  const how =
    res.exitCode !== null
      ? `exit code ${res.exitCode}`
      : res.exitSignal
        ? `killed by SIG${res.exitSignal.replace(/^SIG/, '')}`
        : 'ended without an exit status';
  return err ? `${err} (${how})` : how;
}

/** Resolves once the stream has ended or closed (at once if it already has), or after `capMs`. */
function drained(stream: Readable, capMs: number): Promise<void> {
  if (stream.readableEnded || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      stream.off('end', done);
      stream.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, capMs);
    stream.once('end', done);
    stream.once('close', done);
  });
}

/**
 * `starting` as the caller sees it: rejects with the signal's reason as soon as it aborts. A process that still
 * starts after that is stopped at once (TERM, then KILL), its output thrown away.
 */
export function abortableStart(
  starting: Promise<ProcessHandle>,
  signal: AbortSignal | undefined,
): Promise<ProcessHandle> {
  if (!signal) return starting;
  const stopLate = (h: ProcessHandle) => {
    h.stdout.resume();
    h.stderr.resume();
    h.stdin.on('error', () => undefined);
    h.stdin.end();
    h.kill('TERM');
    setTimeout(() => h.kill('KILL'), 2000).unref();
  };
  if (signal.aborted) {
    starting.then(stopLate, () => undefined);
    return Promise.reject(signal.reason as Error);
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      starting.then(stopLate, () => undefined);
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    starting.then(
      (h) => {
        signal.removeEventListener('abort', onAbort);
        resolve(h);
      },
      (e: Error) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** How long a stopped command has to confirm it ended before the timeout or cancel is reported anyway. */
export const STOP_CONFIRM_MS = 1000;

/**
 * Runs a process to completion: feeds stdin, collects output, enforces timeout and cancellation by killing the
 * process (TERM, then KILL) so the remote/local process really ends. `start` may be the process, or a function that
 * starts it: then the timeout also covers the start (a queued or unanswered SSH channel), and the function must
 * reject at once when its signal aborts (and stop the process itself if it still starts later).
 *
 * The timeout is reported on time even when the process cannot confirm that it stopped (a connection that stopped
 * answering): after STOP_CONFIRM_MS the error says so instead of waiting for the connection to drop.
 */
export async function collect(
  start: ProcessHandle | ((signal: AbortSignal) => Promise<ProcessHandle>),
  options: ExecOptions,
  describe: () => string,
): Promise<ExecResult> {
  const stopping = new AbortController();
  let handle: ProcessHandle | undefined;
  let stopReason: KnownGoodError | undefined;
  // Read through a function: the stop handlers set it between awaits, which TypeScript's narrowing cannot see.
  const stopped = (): KnownGoodError | undefined => stopReason;
  let unconfirmed!: () => void;
  const stopUnconfirmed = new Promise<'unconfirmed'>((r) => (unconfirmed = () => r('unconfirmed')));
  const kill = (h: ProcessHandle) => {
    h.kill('TERM');
    setTimeout(() => h.kill('KILL'), 2000).unref();
  };
  const stop = (reason: KnownGoodError) => {
    if (stopReason) return;
    stopReason = reason;
    stopping.abort(reason);
    if (handle) kill(handle);
    setTimeout(unconfirmed, STOP_CONFIRM_MS).unref();
  };
  const timer =
    options.timeoutMs !== undefined
      ? setTimeout(
          () =>
            stop(
              new KnownGoodError(
                'timeout',
                `${describe()} timed out after ${Math.round(options.timeoutMs! / 100) / 10} s`,
              ),
            ),
          options.timeoutMs,
        )
      : undefined;
  const onAbort = () => stop(new KnownGoodError('cancelled', `${describe()} was cancelled`));
  if (options.signal?.aborted) onAbort();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (typeof start === 'function') {
      const early = stopped();
      if (early) throw early;
      try {
        handle = await start(stopping.signal);
      } catch (e) {
        const reason = stopped();
        if (!reason) throw e;
        throw new KnownGoodError(
          reason.code,
          `${reason.message} before it started (waiting for a free channel, or for a connection that did not ` +
            `answer); if it still starts, it is stopped at once`,
          { started: false },
        );
      }
      if (stopped()) kill(handle);
    } else handle = start;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    handle.stdout.on('data', (c: Buffer) => out.push(c));
    handle.stderr.on('data', (c: Buffer) => err.push(c));
    handle.stdin.on('error', () => {
      /* the process may exit before reading its stdin */
    });
    if (options.stdin !== undefined) handle.stdin.end(options.stdin);
    else handle.stdin.end();

    const ended = await Promise.race([handle.exited.catch((e: unknown) => ({ error: e })), stopUnconfirmed]);
    const reason = stopped();
    if (reason) {
      if (ended === 'unconfirmed') {
        // A stop that never reached the host (the connection stopped answering, then this program exits) leaves the
        // command running there, re-parented to init: the group it runs as is what lets a person stop it.
        const group = handle.remoteGroup?.();
        throw new KnownGoodError(
          reason.code,
          `${reason.message}; it has not confirmed that it stopped (no exit ${STOP_CONFIRM_MS / 1000} s after ` +
            `TERM: the connection may not be answering, or the command ignores TERM; KILL follows). If the ` +
            `connection drops first (or this program exits), the command may still be running there` +
            (group !== undefined ? ` as process group ${group} (stop it there with: kill -TERM -- -${group})` : ''),
          { stopConfirmed: false, ...(group !== undefined ? { remoteGroup: group } : {}) },
        );
      }
      throw reason;
    }
    if (ended === 'unconfirmed') throw new KnownGoodError('internal', 'stop confirmation without a stop');
    if ('error' in ended) throw ended.error;
    const { exitCode, exitSignal } = ended;
    // The exit can be seen before the last output chunks have passed through a wrapping stream (the SSH stderr
    // filter that strips the PID line): wait for both streams to end, briefly.
    await Promise.all([drained(handle.stdout, 1000), drained(handle.stderr, 1000)]);
    return {
      stdout: Buffer.concat(out).toString('utf8'),
      stderr: Buffer.concat(err).toString('utf8'),
      exitCode,
      ...(exitSignal ? { exitSignal } : {}),
    };
  } finally {
    if (timer) clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}
