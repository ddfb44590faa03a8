import { PassThrough, Writable, type Readable } from 'node:stream';
import { collect } from '../core/transport/collect';
import type { ExecResult, ProcessHandle, Transport } from '../core/transport/types';

export interface RawExecOptions {
  timeoutMs: number;
  /** Aborting stops the command (TERM to its group), as the timeout does. */
  signal?: AbortSignal;
  /** Piped to the command's stdin, which ends with it; without it the command's stdin is closed at once. */
  stdin?: Readable;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/**
 * Runs argv with its output passed on as it comes: bytes, never decoded (transport.exec gives text, and invalid UTF-8
 * comes back as U+FFFD), at the pace the reader takes them, so memory stays bounded whatever the command writes.
 * collect() still owns the process's life — the timeout, the stop (TERM, then KILL) and whether the stop was
 * confirmed — through a view of the handle without its streams.
 *
 * The timeout counts once the command has started (as transport.exec over SSH counts it after connecting, which has
 * its own limit, paused while a person answers a prompt), and it covers handing the output to the reader: a command
 * writing faster than its reader reads waits for it, as it would behind ssh.
 */
export async function execRaw(
  transport: Transport,
  argv: readonly string[],
  o: RawExecOptions,
): Promise<Pick<ExecResult, 'exitCode' | 'exitSignal'>> {
  const handle = await transport.spawn(argv);
  const out = passOn(handle.stdout, o.stdout);
  const err = passOn(handle.stderr, o.stderr);
  const unfeed = feed(handle.stdin, o.stdin);
  try {
    const ended = await collect(
      lifeOf(handle, () => {
        // Stopped: the rest is not wanted, and a reader that stopped reading must not hold up the stop's
        // confirmation (an SSH channel reports its close only once its output has been read).
        out.discard();
        err.discard();
      }),
      { timeoutMs: o.timeoutMs, ...(o.signal ? { signal: o.signal } : {}) },
      () => `${argv[0]} on ${transport.label}`,
    );
    // Ended: what it wrote is on its way (a wrapping stream, such as the container's PID filter, may end a little
    // after the exit); all of it reaches the reader before the exit status is reported.
    await Promise.all([out.done, err.done]);
    return { exitCode: ended.exitCode, ...(ended.exitSignal ? { exitSignal: ended.exitSignal } : {}) };
  } finally {
    unfeed();
  }
}

/**
 * `from` piped into `to` without ending it. A reader that goes away (EPIPE) ends the output, as a closed pipe does:
 * the rest is read and dropped, so the command is not held up by a pipe nobody reads.
 */
function passOn(from: Readable, to: NodeJS.WritableStream): { done: Promise<void>; discard(): void } {
  let discarding = false;
  const discard = () => {
    if (discarding) return;
    discarding = true;
    from.unpipe(to);
    from.resume();
  };
  const done = new Promise<void>((resolve) => {
    const finish = () => {
      to.removeListener('error', discard);
      resolve();
    };
    from.once('end', finish);
    from.once('close', finish);
    from.once('error', finish);
  });
  to.once('error', discard);
  if ((to as Partial<Writable>).destroyed === true) discard();
  else from.pipe(to, { end: false });
  return { done, discard };
}

/** The command's stdin fed from `from` (ended with it), or closed at once; returns how to stop feeding it. */
function feed(to: Writable, from: Readable | undefined): () => void {
  to.on('error', () => {
    /* the command may end without reading all of its stdin */
  });
  if (!from) {
    to.end();
    return () => undefined;
  }
  from.pipe(to);
  return () => {
    from.unpipe(to);
    from.pause();
  };
}

/** The handle as collect() sees it: the process's exit and its stop, with no streams (they are passed on above). */
function lifeOf(h: ProcessHandle, onStop: () => void): ProcessHandle {
  const none = () => new PassThrough().end();
  return {
    stdin: new Writable({ write: (_chunk, _encoding, done) => done() }),
    stdout: none(),
    stderr: none(),
    exited: h.exited,
    resize: (size) => h.resize(size),
    kill: (signal) => {
      onStop();
      h.kill(signal);
    },
    remoteGroup: () => h.remoteGroup?.(),
  };
}
