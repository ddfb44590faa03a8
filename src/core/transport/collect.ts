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
 * Runs a spawned process to completion: feeds stdin, collects output, enforces timeout and cancellation by
 * killing the process (TERM, then KILL) so the remote/local process really ends.
 */
export async function collect(
  handle: ProcessHandle,
  options: ExecOptions,
  describe: () => string,
): Promise<ExecResult> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  handle.stdout.on('data', (c: Buffer) => out.push(c));
  handle.stderr.on('data', (c: Buffer) => err.push(c));
  handle.stdin.on('error', () => {
    /* the process may exit before reading its stdin */
  });
  if (options.stdin !== undefined) handle.stdin.end(options.stdin);
  else handle.stdin.end();

  let stopReason: KnownGoodError | undefined;
  const stop = (reason: KnownGoodError) => {
    if (stopReason) return;
    stopReason = reason;
    handle.kill('TERM');
    setTimeout(() => handle.kill('KILL'), 2000).unref();
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
    const { exitCode, exitSignal } = await handle.exited;
    if (stopReason) throw stopReason;
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
