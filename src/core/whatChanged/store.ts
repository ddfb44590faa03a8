import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { messageOf } from '../errors';
import { parsePythonJson } from '../json';
import { fileTime, writeFileAtomic, type BaselineStore } from '../baselines/store';
import { dataFingerprintSchema, launchRecordSchema, type LaunchRecord } from './factsProbe';
import type { DataRecord, KnownGoodMarks } from './facts';

/*
 * What "What changed?" keeps beside a host's baselines (`<baselines>/<host folder>/what-changed/`): the known-good
 * baseline mark (`marks.json`) and the data fingerprints taken with each report (`data-<time>.json`), so that the next report
 * has the data as it was at its reference. Written with the baselines' durable write (temp, fsync, rename).
 * The known-good benchmark result is not kept here: it is the host's one bench reference (BaselineStore.reference,
 * which the dashboard's "mark as reference" and Compare Throughput use too), so there is one such mark per host.
 */

const marksSchema = z.object({ baselineId: z.string().optional(), benchId: z.string().optional() });
const recordSchema = z.object({ at: z.number(), run: z.string(), paths: z.array(dataFingerprintSchema) });
const liveSchema = z.object({ run: z.string(), record: launchRecordSchema });

/** At most this many data records are kept per host (the oldest go first). */
const MAX_RECORDS = 200;

export class WhatChangedStore {
  constructor(private readonly baselines: BaselineStore) {}

  dir(hostId: string): string {
    return join(this.baselines.hostDir(hostId), 'what-changed');
  }

  /** The marked baseline (marks.json) and the host's bench reference (BaselineStore.reference) as the marked result. */
  async marks(hostId: string): Promise<KnownGoodMarks> {
    const [own, reference] = await Promise.all([this.ownMarks(hostId), this.baselines.reference(hostId)]);
    return {
      ...(own.baselineId ? { baselineId: own.baselineId } : {}),
      ...(reference ? { benchId: reference.resultId } : {}),
    };
  }

  private async ownMarks(hostId: string): Promise<KnownGoodMarks> {
    try {
      const r = marksSchema.safeParse(parsePythonJson(await fs.readFile(join(this.dir(hostId), 'marks.json'), 'utf8')));
      return r.success ? r.data : {};
    } catch {
      return {};
    }
  }

  /**
   * Marks a baseline or a benchmark result known-good (the reference every later report starts from). A result is
   * marked as the host's bench reference (it must be one of the host's kept results); a baseline in marks.json.
   */
  async mark(hostId: string, marks: KnownGoodMarks): Promise<void> {
    if (marks.benchId !== undefined) await this.baselines.setReference(hostId, marks.benchId);
    if (marks.baselineId === undefined) return;
    const next = { baselineId: marks.baselineId };
    await fs.mkdir(this.dir(hostId), { recursive: true });
    const file = join(this.dir(hostId), 'marks.json');
    await writeFileAtomic(file, JSON.stringify(next, null, 1) + '\n');
  }

  /** Data fingerprints kept for this run, oldest first; unreadable files are skipped. */
  async dataHistory(hostId: string, run: string): Promise<DataRecord[]> {
    return this.readKept(hostId, 'data', (d) => {
      const r = recordSchema.safeParse(d);
      return r.success && r.data.run === run ? { at: r.data.at, paths: r.data.paths } : undefined;
    });
  }

  async saveData(hostId: string, run: string, record: DataRecord): Promise<string | undefined> {
    if (!record.paths.length) return undefined;
    return this.writeKept(hostId, 'data', record.at, { at: record.at, run, paths: record.paths });
  }

  /** The run's live processes kept by earlier reports (python/live_process.py), oldest first: one file a process. */
  async liveHistory(hostId: string, run: string): Promise<LaunchRecord[]> {
    const out = await this.readKept(hostId, 'live', (d) => {
      const r = liveSchema.safeParse(d);
      return r.success && r.data.run === run ? r.data.record : undefined;
    });
    return out.sort((a, b) => (a.time ?? 0) - (b.time ?? 0));
  }

  /** Keeps a live process seen now, once per process (its PID and start time). */
  async saveLive(hostId: string, run: string, record: LaunchRecord, known: readonly LaunchRecord[]): Promise<boolean> {
    if (known.some((k) => k.pid === record.pid && k.time === record.time)) return false;
    await this.writeKept(hostId, 'live', record.time ?? Date.now() / 1000, { run, record });
    return true;
  }

  /** The kept `<kind>-*.json` files that `pick` takes, oldest first; half-written or foreign files are skipped. */
  private async readKept<T>(hostId: string, kind: string, pick: (data: unknown) => T | undefined): Promise<T[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.dir(hostId));
    } catch {
      return [];
    }
    const out: T[] = [];
    const re = new RegExp(`^${kind}-[\\w-]+\\.json$`);
    for (const name of names.filter((n) => re.test(n)).sort()) {
      try {
        const v = pick(parsePythonJson(await fs.readFile(join(this.dir(hostId), name), 'utf8')));
        if (v !== undefined) out.push(v);
      } catch {
        // a half-written or foreign file: not a record
      }
    }
    return out;
  }

  /** Writes one `<kind>-<time>-<random>.json` (durably); the oldest of that kind go past MAX_RECORDS. */
  private async writeKept(hostId: string, kind: string, at: number, body: unknown): Promise<string> {
    const dir = this.dir(hostId);
    await fs.mkdir(dir, { recursive: true });
    const file = join(dir, `${kind}-${fileTime(new Date(at * 1000))}-${Math.random().toString(36).slice(2, 8)}.json`);
    await writeFileAtomic(file, JSON.stringify(body, null, 1) + '\n', true);
    try {
      const names = (await fs.readdir(dir)).filter((n) => n.startsWith(`${kind}-`)).sort();
      for (const n of names.slice(0, Math.max(0, names.length - MAX_RECORDS)))
        await fs.rm(join(dir, n), { force: true });
    } catch (e) {
      void messageOf(e); // pruning is best effort
    }
    return file;
  }
}
