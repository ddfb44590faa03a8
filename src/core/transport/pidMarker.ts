import { randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import { shellJoin } from '../quote';

/*
 * Stopping a command that runs without a terminal: neither OpenSSH (which ignores "signal" requests on sessions
 * without a pty) nor `docker exec`/`pct exec` (whose client dying leaves the process in the container running)
 * passes a signal on. So the command is started through `sh`, which prints its PID on stderr behind a random marker
 * and then replaces itself with the command: that PID is what to signal, from a second command on the same side.
 */

export function newPidMarker(): string {
  return `@@KG-PID-${randomBytes(6).toString('hex')}`;
}

/** The shell text that prints `<marker> <pid>` on stderr, then becomes argv (each word quoted). */
export function reportPidThenExec(marker: string, argv: readonly string[]): string {
  return `echo "${marker} $$" >&2; exec ${shellJoin(argv)}`;
}

/** A shell command that sends `signal` to pid's process group if it leads one, else to pid. */
export function signalCommand(signal: string, pid: number): string {
  return `kill -${signal} -- -${pid} 2>/dev/null || kill -${signal} ${pid} 2>/dev/null`;
}

/**
 * The stream stderr minus the marker line (calls onPid with the PID once it is seen). Output before the marker is
 * passed on; a stream that never shows it within 64 KiB is passed on untouched.
 */
export function stripPidMarker(stderr: Readable, marker: string, onPid: (pid: number) => void): Readable {
  const out = new PassThrough();
  let head = '';
  let found = false;
  const line = new RegExp(`(^|\\n)${marker} (\\d+)\\n`);
  stderr.on('data', (chunk: Buffer) => {
    if (found) return void out.write(chunk);
    head += chunk.toString('latin1');
    const m = line.exec(head);
    if (m) {
      found = true;
      const rest = head.slice(0, m.index + m[1]!.length) + head.slice(m.index + m[0].length);
      if (rest) out.write(Buffer.from(rest, 'latin1'));
      onPid(Number(m[2]));
    } else if (head.length > 65536) {
      found = true;
      out.write(Buffer.from(head, 'latin1'));
    }
  });
  stderr.on('end', () => {
    if (!found && head) out.write(Buffer.from(head, 'latin1'));
    out.end();
  });
  return out;
}
