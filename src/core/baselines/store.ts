import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join, posix } from 'node:path';
import { z } from 'zod';
import { KnownGoodError, messageOf } from '../errors';
import { parsePythonJson } from '../json';
import { describeIssues } from '../util/zod';
import { envSnapshotSchema, type EnvSnapshot } from './envProbe';

/*
 * Baselines on disk: `<dir>/<host folder>/<id>.r<revision>.json`, one file per baseline revision, written to a temp
 * file in the same folder, fsynced and renamed into place, so a crash leaves either the old file or the new one and
 * never half of one. Nothing is overwritten in place: a rename writes revision n+1, then removes revision n (a crash
 * between the two leaves both, and the higher revision wins). Throughput results (issue 7) sit next to them in
 * `<host folder>/results/`.
 */

export const BASELINE_SCHEMA = 1;

export const throughputResultSchema = z.looseObject({
  id: z.string(),
  at: z.string(),
  kind: z.string().default('throughput'),
  baselineId: z.string().nullable().default(null),
});
export type ThroughputResult = z.infer<typeof throughputResultSchema>;

/** Which benchmark result of a host is its known-good reference. */
export const benchReferenceSchema = z.object({ resultId: z.string().min(1), markedAt: z.string() });
export type BenchReference = z.infer<typeof benchReferenceSchema>;

export const baselineSchema = z.object({
  schema: z.literal(BASELINE_SCHEMA),
  id: z.string().regex(/^[A-Za-z0-9_-]+$/),
  revision: z.number().int().nonnegative().default(0),
  label: z.string(),
  /** The host's stable id (transport id, e.g. `ssh:user@gpu-box:22`). */
  host: z.string(),
  /** For messages: the host's name in the tree. */
  hostLabel: z.string().nullable().default(null),
  /** The configured container (e.g. `pct:200`), null when the host is used directly. */
  container: z.string().nullable().default(null),
  capturedAt: z.string(),
  snapshot: envSnapshotSchema,
  throughput: z.array(throughputResultSchema).optional(),
});
export type Baseline = z.infer<typeof baselineSchema>;
export type BaselineInput = z.input<typeof baselineSchema>;

export interface StoredBaseline {
  baseline: Baseline;
  file: string;
}

export interface StoreProblem {
  /** The file's path; the list goes on without it. */
  file: string;
  message: string;
}

export interface BaselineList {
  baselines: StoredBaseline[];
  problems: StoreProblem[];
}

const FILE_RE = /^([A-Za-z0-9_-]+)\.r(\d+)\.json$/;

/** A folder name for a host id: readable, safe on every file system, and unique through a short hash. */
export function hostFolder(hostId: string): string {
  const readable = hostId
    .replace(/[^A-Za-z0-9@._-]+/g, '_')
    .replace(/^[.]+/, '_')
    .slice(0, 60);
  return `${readable}-${createHash('sha256').update(hostId).digest('hex').slice(0, 8)}`;
}

/** `2026-11-29T11-37-05Z`: a time that sorts, and is a valid file name everywhere (no colons). */
export function fileTime(d: Date): string {
  return d
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/:/g, '-');
}

/** The host's own folder of Known Good, under the user's home (the one place we write unasked for a path). */
export const REMOTE_HOME_FOLDER = '~/.known-good';

/** Where a baseline's copy on the host goes: `~/.known-good/baselines/env-<time>.json` (resolved on the host). */
export function remoteBaselinePath(time: Date): string {
  return posix.join(REMOTE_HOME_FOLDER, 'baselines', `env-${fileTime(time)}.json`);
}

export function newBaselineId(at: Date = new Date()): string {
  return `${fileTime(at).replace(/-/g, '').replace('T', '-')}-${randomBytes(4).toString('hex')}`;
}

/**
 * Writes `data` to `path` atomically: a temp file in the same folder (same file system, so rename is atomic),
 * fsync, rename, then fsync of the folder so the rename itself survives a power cut. `exclusive` refuses to replace
 * an existing file.
 */
export async function writeFileAtomic(path: string, data: string | Buffer, exclusive = false): Promise<void> {
  const dir = join(path, '..');
  const tmp = join(dir, `.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
  const fh = await fs.open(tmp, 'wx', 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (e) {
    await fh.close().catch(() => undefined);
    await fs.rm(tmp, { force: true });
    throw e;
  }
  await fh.close();
  try {
    if (exclusive) {
      // link fails with EEXIST instead of replacing: "never overwrite" holds even against a racing writer.
      try {
        await fs.link(tmp, path);
        await fs.rm(tmp, { force: true });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw e;
        // A file system without hard links: names are unique (id + revision), so check, then rename.
        // An errno-shaped error, as fs.link throws it, for the caller's EEXIST handling.
        // eslint-disable-next-line no-restricted-syntax
        if (await exists(path)) throw Object.assign(new Error(`${path} exists`), { code: 'EEXIST' });
        await fs.rename(tmp, path);
      }
    } else {
      await fs.rename(tmp, path);
    }
  } catch (e) {
    await fs.rm(tmp, { force: true });
    throw e;
  }
  await syncDir(dir);
}

async function exists(path: string): Promise<boolean> {
  try {
    await fs.lstat(path);
    return true;
  } catch {
    return false;
  }
}

async function syncDir(dir: string): Promise<void> {
  let fh;
  try {
    fh = await fs.open(dir, 'r');
    await fh.sync();
  } catch {
    // Not supported on every platform (Windows); the rename is still atomic.
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

export interface SaveBaselineInput {
  label: string;
  host: string;
  hostLabel?: string | null;
  container?: string | null;
  snapshot: EnvSnapshot;
  throughput?: ThroughputResult[];
  /** Default: the snapshot's capturedAt. */
  capturedAt?: string;
}

/**
 * What changed in the store, said after the write: `hostId` is the store key the write used. `snapshot` is the
 * newest snapshot of the host when the change brought one: a saved baseline's, or a compare's "now" (announced).
 */
export interface StoreChange {
  hostId: string;
  kind: 'baseline' | 'result' | 'reference' | 'snapshot';
  snapshot?: EnvSnapshot;
}

export class BaselineStore {
  private readonly listeners = new Set<(change: StoreChange) => void>();

  /** @param dir the baselines folder, e.g. `<globalStorage>/baselines` */
  constructor(readonly dir: string) {}

  /** Called after each write (save, rename, delete, reference, result) and each announced snapshot. */
  onDidChange(listener: (change: StoreChange) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => void this.listeners.delete(listener) };
  }

  /** A snapshot of the host taken outside the store (a compare with now): listeners may show it as the newest. */
  announceSnapshot(hostId: string, snapshot: EnvSnapshot): void {
    this.emit({ hostId, kind: 'snapshot', snapshot });
  }

  private emit(change: StoreChange): void {
    // A listener's failure is its own: the write is done and the other listeners still hear of it.
    for (const l of [...this.listeners]) {
      try {
        l(change);
      } catch {
        // ignored
      }
    }
  }

  hostDir(hostId: string): string {
    return join(this.dir, hostFolder(hostId));
  }

  private fileFor(hostId: string, id: string, revision: number): string {
    return join(this.hostDir(hostId), `${id}.r${revision}.json`);
  }

  async save(input: SaveBaselineInput): Promise<StoredBaseline> {
    const baseline = baselineSchema.parse({
      schema: BASELINE_SCHEMA,
      id: newBaselineId(),
      revision: 0,
      label: input.label,
      host: input.host,
      hostLabel: input.hostLabel ?? null,
      container: input.container ?? null,
      capturedAt: input.capturedAt ?? input.snapshot.capturedAt,
      snapshot: input.snapshot,
      ...(input.throughput ? { throughput: input.throughput } : {}),
    } satisfies BaselineInput);
    const saved = await this.write(baseline);
    this.emit({ hostId: baseline.host, kind: 'baseline', snapshot: baseline.snapshot });
    return saved;
  }

  private async write(baseline: Baseline): Promise<StoredBaseline> {
    await fs.mkdir(this.hostDir(baseline.host), { recursive: true });
    await sweepTemps(this.hostDir(baseline.host));
    const file = this.fileFor(baseline.host, baseline.id, baseline.revision);
    try {
      await writeFileAtomic(file, JSON.stringify(baseline, null, 1) + '\n', true);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new KnownGoodError('internal', `baseline file ${file} already exists: not overwritten`);
      }
      throw new KnownGoodError('internal', `could not save baseline to ${file}: ${messageOf(e)}`);
    }
    return { baseline, file };
  }

  /** Every baseline (of one host, or of all), newest first; unreadable files are reported, not fatal. */
  async list(hostId?: string): Promise<BaselineList> {
    const dirs = hostId !== undefined ? [this.hostDir(hostId)] : await this.hostDirs();
    const out: BaselineList = { baselines: [], problems: [] };
    for (const dir of dirs) {
      let names: string[];
      try {
        names = await fs.readdir(dir);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
        out.problems.push({ file: dir, message: messageOf(e) });
        continue;
      }
      const best = new Map<string, { revision: number; name: string }>();
      for (const name of names) {
        const m = FILE_RE.exec(name);
        if (!m) continue; // temp files, results/, anything else
        const revision = Number(m[2]);
        const prev = best.get(m[1]!);
        if (!prev || revision > prev.revision) best.set(m[1]!, { revision, name });
      }
      for (const { name } of best.values()) {
        const file = join(dir, name);
        const r = await readBaseline(file);
        if (r.ok) out.baselines.push({ baseline: r.baseline, file });
        else out.problems.push(r.problem);
      }
    }
    out.baselines.sort(
      (a, b) =>
        b.baseline.capturedAt.localeCompare(a.baseline.capturedAt) || a.baseline.id.localeCompare(b.baseline.id),
    );
    out.problems.sort((a, b) => a.file.localeCompare(b.file));
    return out;
  }

  private async hostDirs(): Promise<string[]> {
    try {
      const ents = await fs.readdir(this.dir, { withFileTypes: true });
      return ents.filter((e) => e.isDirectory()).map((e) => join(this.dir, e.name));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
  }

  async get(hostId: string, id: string): Promise<StoredBaseline> {
    const files = await this.revisions(hostId, id);
    const last = files[files.length - 1];
    if (!last) throw new KnownGoodError('not-found', `no baseline ${id} for ${hostId}`);
    const r = await readBaseline(last.file);
    if (!r.ok) throw new KnownGoodError('bad-output', `baseline ${r.problem.file}: ${r.problem.message}`);
    return { baseline: r.baseline, file: last.file };
  }

  /** A new label: revision n+1 is written beside revision n, then n is removed. */
  async rename(hostId: string, id: string, label: string): Promise<StoredBaseline> {
    const current = await this.get(hostId, id);
    const next = { ...current.baseline, label, revision: current.baseline.revision + 1 };
    const saved = await this.write(next);
    for (const r of await this.revisions(hostId, id)) {
      if (r.revision < next.revision) await fs.rm(r.file, { force: true });
    }
    this.emit({ hostId, kind: 'baseline' });
    return saved;
  }

  async delete(hostId: string, id: string): Promise<void> {
    const files = await this.revisions(hostId, id);
    if (!files.length) throw new KnownGoodError('not-found', `no baseline ${id} for ${hostId}`);
    for (const r of files) await fs.rm(r.file, { force: true });
    await syncDir(this.hostDir(hostId));
    this.emit({ hostId, kind: 'baseline' });
  }

  private async revisions(hostId: string, id: string): Promise<{ revision: number; file: string }[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.hostDir(hostId));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const out: { revision: number; file: string }[] = [];
    for (const name of names) {
      const m = FILE_RE.exec(name);
      if (m && m[1] === id) out.push({ revision: Number(m[2]), file: join(this.hostDir(hostId), name) });
    }
    return out.sort((a, b) => a.revision - b.revision);
  }

  private referenceFile(hostId: string): string {
    return join(this.hostDir(hostId), 'reference.json');
  }

  /**
   * Marks one benchmark result as the host's known-good reference (null: unmark). Kept in `<host folder>/reference.json`,
   * replaced atomically: the dashboard's chart and "Compare Throughput" read it.
   */
  async setReference(hostId: string, resultId: string | null): Promise<void> {
    if (resultId === null) {
      await fs.rm(this.referenceFile(hostId), { force: true });
      this.emit({ hostId, kind: 'reference' });
      return;
    }
    const { results } = await this.listResults(hostId);
    if (!results.some((r) => r.result.id === resultId))
      throw new KnownGoodError('not-found', `no benchmark result ${resultId} kept for ${hostId}`);
    await fs.mkdir(this.hostDir(hostId), { recursive: true });
    const value: BenchReference = { resultId, markedAt: new Date().toISOString() };
    await writeFileAtomic(this.referenceFile(hostId), JSON.stringify(value) + '\n');
    this.emit({ hostId, kind: 'reference' });
  }

  /** The result marked as known-good, or null (none marked, or an unreadable mark: reported as none). */
  async reference(hostId: string): Promise<BenchReference | null> {
    try {
      const r = benchReferenceSchema.safeParse(JSON.parse(await fs.readFile(this.referenceFile(hostId), 'utf8')));
      return r.success ? r.data : null;
    } catch {
      return null;
    }
  }

  /** A benchmark result (issue 7), in its own file next to the host's baselines. */
  async appendResult(
    hostId: string,
    result: Omit<ThroughputResult, 'id' | 'at'> & { at?: string },
  ): Promise<{
    result: ThroughputResult;
    file: string;
  }> {
    const when = result.at !== undefined && !Number.isNaN(Date.parse(result.at)) ? new Date(result.at) : new Date();
    const at = result.at ?? when.toISOString();
    const id = newBaselineId(when);
    const value = throughputResultSchema.parse({ ...result, id, at });
    const dir = join(this.hostDir(hostId), 'results');
    await fs.mkdir(dir, { recursive: true });
    const file = join(dir, `${id}.json`);
    await writeFileAtomic(file, JSON.stringify(value, null, 1) + '\n', true);
    this.emit({ hostId, kind: 'result' });
    return { result: value, file };
  }

  async listResults(
    hostId: string,
  ): Promise<{ results: { result: ThroughputResult; file: string }[]; problems: StoreProblem[] }> {
    const dir = join(this.hostDir(hostId), 'results');
    const out: { results: { result: ThroughputResult; file: string }[]; problems: StoreProblem[] } = {
      results: [],
      problems: [],
    };
    let names: string[];
    try {
      names = await fs.readdir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return out;
      throw e;
    }
    for (const name of names.filter((n) => /^[A-Za-z0-9_-]+\.json$/.test(n)).sort()) {
      const file = join(dir, name);
      try {
        const r = throughputResultSchema.safeParse(parsePythonJson(await fs.readFile(file, 'utf8')));
        if (r.success) out.results.push({ result: r.data, file });
        else out.problems.push({ file, message: describeIssues(r.error) });
      } catch (e) {
        out.problems.push({ file, message: messageOf(e) });
      }
    }
    return out;
  }
}

const STALE_TEMP_MS = 60 * 60 * 1000;

/** Temp files of writers that died mid-write (an hour old: no live writer takes that long). */
async function sweepTemps(dir: string): Promise<void> {
  try {
    for (const name of await fs.readdir(dir)) {
      if (!name.startsWith('.tmp-')) continue;
      const p = join(dir, name);
      const st = await fs.stat(p).catch(() => undefined);
      if (st && Date.now() - st.mtimeMs > STALE_TEMP_MS) await fs.rm(p, { force: true });
    }
  } catch {
    // best effort: leftovers are ignored by list() anyway
  }
}

/** Reads and validates one baseline file. */
export async function readBaseline(
  file: string,
): Promise<{ ok: true; baseline: Baseline } | { ok: false; problem: StoreProblem }> {
  let raw: unknown;
  try {
    raw = parsePythonJson(await fs.readFile(file, 'utf8'));
  } catch (e) {
    return { ok: false, problem: { file, message: `not readable JSON: ${messageOf(e)}` } };
  }
  const r = baselineSchema.safeParse(raw);
  if (!r.success) return { ok: false, problem: { file, message: `not a valid baseline: ${describeIssues(r.error)}` } };
  return { ok: true, baseline: r.data };
}
