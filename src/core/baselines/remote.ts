import { posix } from 'node:path';
import { KnownGoodError, messageOf } from '../errors';
import type { Transport } from '../transport/types';
import { remoteBaselinePath, type Baseline } from './store';
import { whyFailed } from '../transport/collect';

/*
 * Files Known Good writes on the remote (the baseline copy the user asked for, archive manifests): stdin
 * carries the content, the paths and the byte count travel as positional parameters of a fixed `sh -c` script (never
 * spliced into it), and the file appears whole or not at all: a temp name in the same folder, its size checked
 * against the byte count (a connection that ends mid-write closes `cat`'s stdin like a finished write does), then
 * `mv`. The temp file is removed on any failure, a signal included. An existing file is never replaced.
 */

export const EXISTS_EXIT = 17;
export const SHORT_EXIT = 18;

export const REMOTE_WRITE_SCRIPT = [
  'set -e',
  'd=$1; f=$2; n=$3',
  // `~/…` is the user's home on the host (ours to fill: `~/.known-good/`), so its folders are made as needed.
  // Anywhere else only the last folder is created: a root that does not exist (a typo, an unmounted disk) is an
  // error, not something to create.
  'case $f in "~/"*) h=${HOME:?not set on the host}; d="$h/${d#??}"; f="$h/${f#??}"; mkdir -p -- "$d";; *) [ -d "$d" ] || mkdir -- "$d";; esac',
  't="$f.tmp.$$"',
  `trap 'rm -f -- "$t"' EXIT`,
  // A dropped connection can also end this shell by SIGHUP/SIGPIPE: exit through the EXIT trap.
  `trap 'exit 1' HUP INT TERM PIPE`,
  'cat > "$t"',
  // Unquoted: some wc pad the count with spaces.
  'got=$(wc -c < "$t")',
  `if [ $got -ne "$n" ]; then echo "received $got of $n bytes (the connection ended early?): $f not written" >&2; exit ${SHORT_EXIT}; fi`,
  `if [ -e "$f" ]; then echo "$f already exists: not overwritten" >&2; exit ${EXISTS_EXIT}; fi`,
  'mv -- "$t" "$f"',
].join('\n');

/** argv that writes exactly `bytes` bytes from stdin to `file` (absolute, or `~/…`), whole or not at all. */
export function remoteWriteArgv(file: string, bytes: number): string[] {
  if (!file.startsWith('/') && !file.startsWith('~/'))
    throw new KnownGoodError('settings', `remote path must be absolute or under ~/: ${file}`);
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new KnownGoodError('internal', `bad byte count ${bytes}`);
  return ['sh', '-c', REMOTE_WRITE_SCRIPT, 'sh', posix.dirname(file), file, String(bytes)];
}

/** Writes `data` to `file` on the remote atomically (see REMOTE_WRITE_SCRIPT); every remote file write goes here. */
export async function writeRemoteFileAtomic(
  transport: Transport,
  file: string,
  data: string | Buffer,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<void> {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const r = await transport.exec(remoteWriteArgv(file, bytes.length), {
    stdin: bytes,
    timeoutMs: options.timeoutMs ?? 30000,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (r.exitCode !== 0) {
    const why = whyFailed(r, 1);
    throw new KnownGoodError(
      r.exitCode === EXISTS_EXIT
        ? 'internal'
        : r.exitCode === SHORT_EXIT
          ? 'connection-lost'
          : /denied/i.test(why)
            ? 'permission-denied'
            : 'probe-failed',
      `could not write ${file} on ${transport.label}: ${why}`,
    );
  }
}

/**
 * The baseline's copy on the host (`knownGood.baselines.copyToRemote`, off by default): under the user's home,
 * `~/.known-good/baselines/env-<time>.json`, never in a checkpoint root (a folder shared with jobs and colleagues).
 * Copies an older version wrote to `<root>/.known-good/` stay where they are. Resolves to the path written, `~/…`.
 */
export async function copyBaselineToRemote(
  transport: Transport,
  baseline: Baseline,
  options: { signal?: AbortSignal } = {},
): Promise<string> {
  const at = Number.isNaN(Date.parse(baseline.capturedAt)) ? new Date() : new Date(baseline.capturedAt);
  const file = remoteBaselinePath(at);
  try {
    await writeRemoteFileAtomic(transport, file, JSON.stringify(baseline, null, 1) + '\n', options);
  } catch (e) {
    throw e instanceof KnownGoodError
      ? e
      : new KnownGoodError('probe-failed', `could not write ${file}: ${messageOf(e)}`);
  }
  return file;
}
