import { posix } from 'node:path';
import { KnownGoodError, messageOf } from '../errors';
import type { Transport } from '../transport/types';
import { remoteBaselinePath, type Baseline } from './store';
import { whyFailed } from '../transport/collect';

/*
 * Files Known Good writes on the remote (the baseline copy that travels with the run, archive manifests): stdin
 * carries the content, the paths travel as positional parameters of a fixed `sh -c` script (never spliced into
 * it), and the file appears whole or not at all: a temp name in the same folder, then `mv`. An existing file is
 * never replaced.
 */

export const EXISTS_EXIT = 17;

export const REMOTE_WRITE_SCRIPT = [
  'set -e',
  'd=$1; f=$2; t="$f.tmp.$$"',
  // Only the last folder is created: a root that does not exist (a typo, an unmounted disk) is an error, not
  // something to create.
  '[ -d "$d" ] || mkdir -- "$d"',
  `trap 'rm -f -- "$t"' EXIT`,
  'cat > "$t"',
  `if [ -e "$f" ]; then echo "$f already exists: not overwritten" >&2; exit ${EXISTS_EXIT}; fi`,
  'mv -- "$t" "$f"',
].join('\n');

export function remoteWriteArgv(file: string): string[] {
  if (!file.startsWith('/')) throw new KnownGoodError('settings', `remote path must be absolute: ${file}`);
  return ['sh', '-c', REMOTE_WRITE_SCRIPT, 'sh', posix.dirname(file), file];
}

export async function writeRemoteFileAtomic(
  transport: Transport,
  file: string,
  data: string,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<void> {
  const r = await transport.exec(remoteWriteArgv(file), {
    stdin: data,
    timeoutMs: options.timeoutMs ?? 30000,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (r.exitCode !== 0) {
    const why = whyFailed(r, 1);
    throw new KnownGoodError(
      r.exitCode === EXISTS_EXIT ? 'internal' : /denied/i.test(why) ? 'permission-denied' : 'probe-failed',
      `could not write ${file} on ${transport.label}: ${why}`,
    );
  }
}

/** The baseline's copy next to the first checkpoint root: `<root>/.known-good/env-<time>.json`. */
export async function copyBaselineToRemote(
  transport: Transport,
  root: string,
  baseline: Baseline,
  options: { signal?: AbortSignal } = {},
): Promise<string> {
  const at = Number.isNaN(Date.parse(baseline.capturedAt)) ? new Date() : new Date(baseline.capturedAt);
  const file = remoteBaselinePath(root, at);
  try {
    await writeRemoteFileAtomic(transport, file, JSON.stringify(baseline, null, 1) + '\n', options);
  } catch (e) {
    throw e instanceof KnownGoodError
      ? e
      : new KnownGoodError('probe-failed', `could not write ${file}: ${messageOf(e)}`);
  }
  return file;
}
