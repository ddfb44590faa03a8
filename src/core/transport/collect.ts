import { KnownGoodError } from '../errors';
import type { ExecOptions, ExecResult, ProcessHandle } from './types';

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
