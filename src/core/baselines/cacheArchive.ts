import { posix } from 'node:path';
import { z } from 'zod';
import { KnownGoodError } from '../errors';
import { defineProbe } from '../probes/probe';
import type { ProcessHandle, Transport } from '../transport/types';
import { formatBytes } from '../util/format';
import { writeRemoteFileAtomic } from './remote';
import { fileTime } from './store';
import { whyFailed } from '../transport/collect';

/*
 * Backing up and restoring the compile caches (inductor, triton, knownGood.env.cacheDirs) on the remote. The probe
 * python/cache_archive.py only reads (where the caches are, their size, free space, existing archives); the archive
 * is made by the remote `tar` run with argv, so a cancel kills it. Members are stored relative to `/` (`tar -C /`),
 * so a restore puts every file back where it came from, and a restore extracts only the members its manifest names.
 */

const num = z.number().nullable().default(null);

export const cacheEntrySchema = z.looseObject({
  name: z.string(),
  path: z.string(),
  realPath: z.string().nullable().default(null),
  member: z.string().nullable().default(null),
  exists: z.boolean(),
  files: num,
  bytes: num,
  unreadable: z.number().default(0),
  truncated: z.boolean().default(false),
  freeBytes: num,
  error: z.string().nullable().default(null),
});
export type CacheEntry = z.infer<typeof cacheEntrySchema>;

export const manifestSchema = z.looseObject({
  schema: z.literal(1),
  archive: z.string(),
  createdAt: z.string(),
  host: z.string().nullable().default(null),
  caches: z.array(
    z.looseObject({ name: z.string(), path: z.string(), member: z.string().min(1), files: num, bytes: num }),
  ),
  archiveBytes: num,
});
export type CacheManifest = z.infer<typeof manifestSchema>;

export const archiveEntrySchema = z.looseObject({
  name: z.string(),
  path: z.string(),
  bytes: z.number(),
  mtime: z.number(),
  manifestPath: z.string(),
  manifest: z.unknown().nullable().default(null),
  manifestError: z.string().nullable().default(null),
});

export const cachePlanSchema = z.looseObject({
  schema: z.literal(1),
  /** The checkpoint root whose `.known-good/` earlier versions archived into (still listed), if one was given. */
  root: z.string().nullable().default(null),
  rootExists: z.boolean(),
  dest: z.looseObject({
    dir: z.string(),
    exists: z.boolean(),
    freeBytes: num,
    freeAt: z.string().nullable().default(null),
    error: z.string().nullable().default(null),
  }),
  caches: z.array(cacheEntrySchema),
  archives: z.array(archiveEntrySchema),
  tar: z.looseObject({ path: z.string().nullable(), gnu: z.boolean(), version: z.string().nullable() }),
});
export type CachePlan = z.infer<typeof cachePlanSchema>;

export const cacheArchiveProbe = defineProbe(
  'cache_archive',
  cachePlanSchema,
  (root: string | undefined, cacheDirs: readonly string[] = []) => [
    ...(root ? [`--root=${root}`] : []),
    ...cacheDirs.map((d) => `--cache-dir=${d}`),
  ],
);

export interface ArchiveChoice {
  name: string;
  path: string;
  bytes: number;
  mtime: number;
  manifest?: CacheManifest;
  /** Why it cannot be restored (no or bad manifest). */
  problem?: string;
}

/** Archives of a plan with their manifests validated: one without a valid manifest is listed with its problem. */
export function archivesOf(plan: CachePlan): ArchiveChoice[] {
  return plan.archives
    .map((a): ArchiveChoice => {
      const base = { name: a.name, path: a.path, bytes: a.bytes, mtime: a.mtime };
      if (a.manifestError) return { ...base, problem: a.manifestError };
      const m = manifestSchema.safeParse(a.manifest);
      if (!m.success) return { ...base, problem: 'manifest is not valid' };
      const bad = m.data.caches.find((c) => !safeMember(c.member));
      if (bad) return { ...base, problem: `manifest names an unsafe path ${JSON.stringify(bad.member)}` };
      return { ...base, manifest: m.data };
    })
    .sort((a, b) => b.mtime - a.mtime);
}

/** A member relative to `/` that cannot climb out of it or be read as an option. */
export function safeMember(m: string): boolean {
  return m !== '' && m !== '.' && !m.startsWith('/') && !m.startsWith('-') && !m.split('/').includes('..');
}

export interface BackupPlan {
  caches: CacheEntry[];
  totalBytes: number;
  totalFiles: number;
  archive: string;
  temp: string;
  manifestPath: string;
  /** Free space is below the caches' (uncompressed) size: the archive may not fit. */
  lowSpace?: string;
}

/** Which caches go in (those that exist and have files) and where the archive goes; pure. */
export function planBackup(plan: CachePlan, at: Date): BackupPlan {
  if (!plan.dest.dir.startsWith('/'))
    throw new KnownGoodError('probe-failed', `the archive folder is not an absolute path: ${plan.dest.dir}`);
  const caches = plan.caches.filter(
    (c) => c.exists && !c.error && (c.files ?? 0) > 0 && c.member && safeMember(c.member),
  );
  if (!caches.length) {
    const seen = plan.caches
      .map((c) => `${c.name} ${c.path} (${c.error ?? (c.exists ? 'empty' : 'absent')})`)
      .join(', ');
    throw new KnownGoodError('not-found', `no compile cache to back up: ${seen}`);
  }
  const totalBytes = caches.reduce((s, c) => s + (c.bytes ?? 0), 0);
  const totalFiles = caches.reduce((s, c) => s + (c.files ?? 0), 0);
  const base = `cache-${fileTime(at)}`;
  const archive = posix.join(plan.dest.dir, `${base}.tar.gz`);
  const out: BackupPlan = {
    caches,
    totalBytes,
    totalFiles,
    archive,
    temp: posix.join(plan.dest.dir, `.${base}.tar.gz.partial`),
    manifestPath: posix.join(plan.dest.dir, `${base}.json`),
  };
  const free = plan.dest.freeBytes;
  if (free !== null && free < totalBytes) {
    out.lowSpace = `${plan.dest.freeAt ?? plan.dest.dir} has ${formatBytes(free)} free; the caches hold ${formatBytes(totalBytes)} before compression`;
  }
  return out;
}

export const CHECKPOINT_RECORDS = 100;
/** GNU tar's record: 20 blocks of 512 bytes. */
export const RECORD_BYTES = 10240;
const CHECKPOINT_RE = /kg-checkpoint (\d+)/g;

function progressFlags(gnu: boolean): string[] {
  return gnu ? [`--checkpoint=${CHECKPOINT_RECORDS}`, '--checkpoint-action=echo=kg-checkpoint %u'] : [];
}

/** Short options only (GNU and BusyBox tar both take them); paths after `--`. */
export function tarCreateArgv(file: string, members: readonly string[], gnu: boolean): string[] {
  return [
    'tar',
    '-c',
    '-z',
    '-f',
    file,
    '-C',
    '/',
    ...progressFlags(gnu),
    ...(gnu ? ['--warning=no-file-changed'] : []),
    '--',
    ...members,
  ];
}

export function tarExtractArgv(file: string, members: readonly string[], gnu: boolean): string[] {
  return ['tar', '-x', '-z', '-f', file, '-C', '/', ...progressFlags(gnu), '--', ...members];
}

/** Bytes of tar stream done, from GNU tar's checkpoint lines (the newest one in `text`). */
export function checkpointBytes(text: string): number | undefined {
  let last: number | undefined;
  for (const m of text.matchAll(CHECKPOINT_RE)) last = Number(m[1]);
  return last === undefined ? undefined : last * RECORD_BYTES;
}

export interface TarRun {
  exitCode: number | null;
  stderr: string;
}

/**
 * Runs tar with streamed stderr for progress; aborting kills it (TERM, then KILL) and waits until it is gone, so
 * a cancelled backup leaves no tar writing behind.
 */
export async function runTar(
  transport: Transport,
  argv: readonly string[],
  opts: { signal?: AbortSignal; onBytes?: (bytes: number) => void } = {},
): Promise<TarRun> {
  if (opts.signal?.aborted) throw new KnownGoodError('cancelled', 'cancelled');
  const handle: ProcessHandle = await transport.spawn(argv);
  handle.stdin.on('error', () => undefined);
  handle.stdin.end();
  const errText: string[] = [];
  let tail = '';
  handle.stdout.resume();
  handle.stderr.on('data', (c: Buffer) => {
    const s = c.toString('utf8');
    tail = (tail + s).slice(-200);
    const b = checkpointBytes(tail);
    if (b !== undefined) {
      opts.onBytes?.(b);
      tail = tail.slice(tail.lastIndexOf('kg-checkpoint'));
    }
    const plain = s
      .split('\n')
      .filter((l) => l && !/kg-checkpoint \d+/.test(l))
      .join('\n');
    if (plain) errText.push(plain);
  });
  let aborted = false;
  const onAbort = () => {
    aborted = true;
    handle.kill('TERM');
    setTimeout(() => handle.kill('KILL'), 2000).unref();
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const { exitCode } = await handle.exited;
    if (aborted) throw new KnownGoodError('cancelled', `tar on ${transport.label} was cancelled`);
    return { exitCode, stderr: errText.join('\n') };
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

async function checked(transport: Transport, argv: string[], what: string): Promise<void> {
  const r = await transport.exec(argv, { timeoutMs: 60000 });
  if (r.exitCode !== 0) {
    throw new KnownGoodError('probe-failed', `${what} on ${transport.label} failed: ${whyFailed(r)}`);
  }
}

export interface BackupResult {
  archive: string;
  manifestPath: string;
  manifest: CacheManifest;
  /** tar's complaints that did not stop it (files changed while read). */
  warning?: string;
}

export interface TarProgress {
  (fraction: number | undefined, message: string): void;
}

/** Archives the caches of `plan` to a temp name, then moves it into place and writes its manifest beside it. */
export async function backupCaches(
  transport: Transport,
  cachePlan: CachePlan,
  backup: BackupPlan,
  opts: { signal?: AbortSignal; progress?: TarProgress; hostLabel?: string } = {},
): Promise<BackupResult> {
  if (!cachePlan.dest.exists)
    await checked(transport, ['mkdir', '-p', '--', posix.dirname(backup.archive)], 'creating the archive folder');
  const members = backup.caches.map((c) => c.member!);
  const total = Math.max(backup.totalBytes, 1);
  let run: TarRun;
  try {
    run = await runTar(transport, tarCreateArgv(backup.temp, members, cachePlan.tar.gnu), {
      ...(opts.signal ? { signal: opts.signal } : {}),
      onBytes: (b) =>
        opts.progress?.(Math.min(b / total, 0.99), `${formatBytes(b)} of ${formatBytes(backup.totalBytes)} read`),
    });
  } catch (e) {
    // Only our own partial file: removing it needs no confirmation.
    await transport.exec(['rm', '-f', '--', backup.temp], { timeoutMs: 30000 }).catch(() => undefined);
    throw e;
  }
  // GNU tar exits 1 when a file changed while it was read: the archive is complete, the cache was in use.
  if (run.exitCode !== 0 && run.exitCode !== 1) {
    await transport.exec(['rm', '-f', '--', backup.temp], { timeoutMs: 30000 }).catch(() => undefined);
    throw new KnownGoodError('probe-failed', `tar on ${transport.label} failed: ${whyFailed(run)}`);
  }
  await checked(transport, ['mv', '--', backup.temp, backup.archive], 'moving the archive into place');
  const size = await transport.exec(['wc', '-c', '--', backup.archive], { timeoutMs: 30000 }).catch(() => undefined);
  const archiveBytes = size && size.exitCode === 0 ? Number(size.stdout.trim().split(/\s+/)[0]) : NaN;
  const manifest: CacheManifest = manifestSchema.parse({
    schema: 1,
    archive: posix.basename(backup.archive),
    createdAt: new Date().toISOString(),
    host: opts.hostLabel ?? transport.label,
    caches: backup.caches.map((c) => ({
      name: c.name,
      path: c.path,
      member: c.member,
      files: c.files,
      bytes: c.bytes,
    })),
    archiveBytes: Number.isFinite(archiveBytes) ? archiveBytes : null,
  });
  await writeRemoteFileAtomic(transport, backup.manifestPath, JSON.stringify(manifest, null, 1) + '\n');
  return {
    archive: backup.archive,
    manifestPath: backup.manifestPath,
    manifest,
    ...(run.exitCode === 1
      ? { warning: `some files changed while they were archived: ${run.stderr.trim().split('\n').slice(-2).join(' ')}` }
      : {}),
  };
}

/** Extracts the members the manifest names back to where they were; files of the same name are replaced. */
export async function restoreArchive(
  transport: Transport,
  archive: ArchiveChoice & { manifest: CacheManifest },
  gnu: boolean,
  opts: { signal?: AbortSignal; progress?: TarProgress } = {},
): Promise<void> {
  const members = archive.manifest.caches.map((c) => c.member);
  for (const m of members)
    if (!safeMember(m)) throw new KnownGoodError('bad-output', `unsafe member ${JSON.stringify(m)} in ${archive.name}`);
  const total = Math.max(
    archive.manifest.caches.reduce((s, c) => s + (c.bytes ?? 0), 0),
    1,
  );
  const run = await runTar(transport, tarExtractArgv(archive.path, members, gnu), {
    ...(opts.signal ? { signal: opts.signal } : {}),
    onBytes: (b) => opts.progress?.(Math.min(b / total, 0.99), `${formatBytes(b)} of ${formatBytes(total)} restored`),
  });
  if (run.exitCode !== 0) {
    throw new KnownGoodError('probe-failed', `tar on ${transport.label} failed: ${whyFailed(run)}`);
  }
}
