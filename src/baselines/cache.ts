import {
  archivesOf,
  backupCaches,
  cacheArchiveProbe,
  planBackup,
  restoreArchive,
  type BackupResult,
  type CachePlan,
} from '../core/baselines/cacheArchive';
import { shortTime } from '../core/baselines/documents';
import { formatBytes, timeAgo } from '../core/util/format';
import { KnownGoodError } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { showInfo, showQuickPick, showWarning } from '../window';
import type { TargetOf } from '../core/runs/targets';
import { withCancellableProgress } from '../shared/progress';
import type { BaselinesFeature } from './common';
import { BaselineCommands } from '../constants';

/**
 * Back up the compile caches before clearing them, and put an archive back. Known Good deletes nothing here: a
 * backup only adds files under the host's `~/.known-good/cache-archives/` (never in a checkpoint root), and a restore (which replaces files of the same name) asks
 * first, in a modal dialog that says what goes where.
 */
export function registerCacheCommands(f: BaselinesFeature): void {
  const { command, hosts, log } = f;

  async function hostAndPlan(t: TargetOf<'host'>): Promise<{ spec: HostSpec; plan: CachePlan } | undefined> {
    const spec = hosts.get(t.hostId);
    // archives go under the host's ~/.known-good/cache-archives/; the first root is only read, for archives an
    // earlier version left in <root>/.known-good/
    const root = spec.roots[0];
    const session = hosts.session(spec);
    const { cacheDirs } = f.settings.current.baselines;
    const plan = await withCancellableProgress(
      `Looking at the compile caches on ${spec.name}`,
      async (signal) => (await session.probes.run(cacheArchiveProbe(root, cacheDirs), { signal })).value,
    );
    return plan && { spec, plan };
  }

  const backupOn = { kinds: ['host'], pick: 'Back up the compile caches of which host?' } as const;
  command(BaselineCommands.backupCache, backupOn, async (t): Promise<BackupResult | undefined> => {
    const got = await hostAndPlan(t);
    if (!got) return undefined;
    const { spec, plan } = got;
    const backup = planBackup(plan, new Date());
    if (backup.lowSpace) {
      const go = await showWarning(
        `There may not be room for the cache archive on ${spec.name}.`,
        {
          modal: true,
          detail: `${backup.lowSpace}. Compression usually shrinks compile caches a lot; a failed archive leaves nothing behind.`,
        },
        'Archive Anyway',
      );
      if (go !== 'Archive Anyway') return undefined;
    }
    const what = backup.caches.map((x) => `${x.name} (${x.files ?? '?'} files)`).join(', ');
    const session = hosts.session(spec);
    const result = await withCancellableProgress(
      `Archiving ${what}, ${formatBytes(backup.totalBytes)}, on ${spec.name}`,
      (signal, report) =>
        backupCaches(session.transport, plan, backup, {
          signal,
          hostLabel: session.label,
          progress: (fraction, message) => report(message, fraction),
        }),
    );
    if (!result) {
      void showInfo(`Cache backup on ${spec.name} cancelled: tar was stopped and its partial file removed.`);
      return undefined;
    }
    log.info(`${spec.name}: archived ${what} to ${result.archive}`);
    const size = result.manifest.archiveBytes !== null ? ` (${formatBytes(result.manifest.archiveBytes)})` : '';
    const msg = `Archived ${what} to ${result.archive}${size}.`;
    void (result.warning ? showWarning(`${msg} ${result.warning}`, {}) : showInfo(msg));
    return result;
  });

  const restoreOn = { kinds: ['host'], pick: 'Restore a compile cache archive on which host?' } as const;
  command(BaselineCommands.restoreCache, restoreOn, async (t) => {
    const got = await hostAndPlan(t);
    if (!got) return undefined;
    const { spec, plan } = got;
    const archives = archivesOf(plan);
    if (!archives.length) {
      void showInfo(`No cache archives in ${plan.dest.dir} on ${spec.name}: back up the caches first.`);
      return undefined;
    }
    const pick = await showQuickPick(
      archives.map((a) => ({
        label: a.problem ? `$(error) ${a.name}` : a.name,
        description: `${formatBytes(a.bytes)} · ${timeAgo(new Date(a.mtime * 1000).toISOString())}`,
        detail:
          a.problem ??
          a.manifest?.caches
            .map((x) => `${x.name} ${x.path} (${x.files ?? '?'} files, ${formatBytes(x.bytes)})`)
            .join(' · '),
        a,
      })),
      { placeHolder: `Restore which archive from ${plan.dest.dir}?`, matchOnDetail: true, ignoreFocusOut: true },
    );
    if (!pick) return undefined;
    const { a } = pick;
    if (!a.manifest)
      throw new KnownGoodError(
        'bad-output',
        `${a.name} cannot be restored by Known Good: ${a.problem ?? 'no manifest'}`,
      );
    const manifest = a.manifest;
    const lines = manifest.caches.map(
      (x) => `  ${x.name} → /${x.member} (${x.files ?? '?'} files, ${formatBytes(x.bytes)})`,
    );
    const tight = manifest.caches.filter((x) => {
      const here = plan.caches.find((p) => p.member === x.member);
      return here?.freeBytes != null && x.bytes != null && here.freeBytes < x.bytes;
    });
    const answer = await showWarning(
      `Restore ${a.name} on ${spec.name}?`,
      {
        modal: true,
        detail: [
          `Archived ${shortTime(manifest.createdAt)}. Puts back:`,
          ...lines,
          'Files with the same names are replaced; nothing else is deleted.',
          ...(tight.length ? [`Low space for: ${tight.map((x) => x.name).join(', ')}.`] : []),
        ].join('\n'),
      },
      'Restore',
    );
    if (answer !== 'Restore') return undefined;
    const session = hosts.session(spec);
    const done = await withCancellableProgress(`Restoring ${a.name} on ${spec.name}`, async (signal, report) => {
      await restoreArchive(session.transport, { ...a, manifest }, plan.tar.gnu, {
        signal,
        progress: (fraction, message) => report(message, fraction),
      });
      return true;
    });
    if (!done) {
      void showInfo(`Restore on ${spec.name} cancelled: tar was stopped; files already extracted stay.`);
      return undefined;
    }
    log.info(`${spec.name}: restored ${a.path}`);
    void showInfo(`Restored ${manifest.caches.map((x) => x.name).join(' and ')} from ${a.name} on ${spec.name}.`);
    return a.path;
  });
}
