import { localHost } from '../../src/core/hosts';
import type { ProbeCall, ProbeRunnerLike } from '../../src/core/probes/probe';
import { Listings } from '../../src/core/runs/listings';
import type { RootListing, RunEntry } from '../../src/core/runs/listRuns';

/**
 * Listings holding `roots` as This machine's listing (id `local`), as if list_runs.py had answered them: what
 * Listings.resolve reads, without a process. `graft` lists a folder past the depth as that root listing.
 */
export async function listingsOf(roots: RootListing[], graft?: RootListing): Promise<Listings> {
  const probes: ProbeRunnerLike = {
    run<R>(call: ProbeCall<R>) {
      const folder = call.args[call.args.indexOf('--depth') + 1] === '2';
      const value = { roots: folder && graft ? [graft] : roots };
      return Promise.resolve({
        value: { depth: 3, maxEntries: 5000, now: 1_700_000_000, user: 'me', elapsedMs: 1, ...value } as R,
        python: { executable: '/usr/bin/python3', version: '3.12' },
      });
    },
  };
  const host = localHost(roots.map((r) => r.path));
  const l = new Listings({
    find: (id) => (id === host.id ? host : undefined),
    session: () => ({ connected: true, probes }),
    depth: () => 3,
    maxEntries: () => 5000,
    log: () => undefined,
  });
  await l.ensure(host.id);
  return l;
}

/** An entry of a listing at `path` (relative to its root): a small file of no role unless `extra` says otherwise. */
export function entry(path: string, extra: Partial<RunEntry> = {}): RunEntry {
  return { name: path.split('/').pop() || 'ck', path, kind: 'file', size: 1, mtime: 1, role: 'other', ...extra };
}

/** A root listing at `path` whose entry holds `children` (`root`: the root as the settings write it). */
export function rootListing(path: string, children: RunEntry[], root = path): RootListing {
  const e = entry('', { kind: 'dir', role: 'dir', children });
  return { root, path, status: 'ok', message: '', signature: null, entry: e };
}
