import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { computeDrift, renderDriftText, type Drift } from '../baselines/drift';
import { envSnapshotSchema, type EnvSnapshot } from '../baselines/envProbe';
import { naturalCompare } from '../util/format';
import { hostFolder, newBaselineId, writeFileAtomic } from '../baselines/store';
import { benchResultSchema, type BenchResult } from '../bench/benchProbe';
import { KnownGoodError, messageOf } from '../errors';
import { describeIssues } from '../util/zod';
import { compareNodes, majorityNode } from './matrix';

/**
 * A fleet baseline: the snapshots of every node of a job, saved together (with each node's benchmark if one was
 * run), so that a later capture of the fleet says which node drifted. Kept apart from single-host baselines, one
 * file per baseline, written atomically and never overwritten.
 */

export const FLEET_BASELINE_SCHEMA = 1;

export const fleetBaselineSchema = z.object({
  schema: z.literal(FLEET_BASELINE_SCHEMA),
  kind: z.literal('fleet'),
  id: z.string().regex(/^[A-Za-z0-9_-]+$/),
  label: z.string(),
  /** The login node's host id. */
  host: z.string(),
  hostLabel: z.string().nullable().default(null),
  jobId: z.string().nullable().default(null),
  capturedAt: z.string(),
  nodes: z.record(z.string(), envSnapshotSchema),
  bench: z.record(z.string(), benchResultSchema).optional(),
  /** Nodes asked that did not answer when it was captured. */
  failed: z.array(z.object({ node: z.string(), message: z.string() })).default([]),
});
export type FleetBaseline = z.infer<typeof fleetBaselineSchema>;

export interface SaveFleetInput {
  label: string;
  host: string;
  hostLabel?: string | null;
  jobId?: string | null;
  snapshots: ReadonlyMap<string, EnvSnapshot>;
  bench?: ReadonlyMap<string, BenchResult>;
  failed?: readonly { node: string; message: string }[];
}

export interface StoredFleetBaseline {
  baseline: FleetBaseline;
  file: string;
}

export class FleetBaselineStore {
  /** @param dir e.g. `<globalStorage>/fleet-baselines`, `~/.known-good/fleet-baselines` */
  constructor(readonly dir: string) {}

  hostDir(hostId: string): string {
    return join(this.dir, hostFolder(hostId));
  }

  async save(input: SaveFleetInput): Promise<StoredFleetBaseline> {
    if (input.snapshots.size === 0) throw new KnownGoodError('settings', 'no node answered: nothing to save');
    const at = new Date();
    const baseline = fleetBaselineSchema.parse({
      schema: FLEET_BASELINE_SCHEMA,
      kind: 'fleet',
      id: newBaselineId(at),
      label: input.label,
      host: input.host,
      hostLabel: input.hostLabel ?? null,
      jobId: input.jobId ?? null,
      capturedAt: at.toISOString(),
      nodes: Object.fromEntries(input.snapshots),
      ...(input.bench?.size ? { bench: Object.fromEntries(input.bench) } : {}),
      failed: [...(input.failed ?? [])],
    });
    const dir = this.hostDir(input.host);
    await fs.mkdir(dir, { recursive: true });
    const file = join(dir, `fleet-${baseline.id}.json`);
    try {
      await writeFileAtomic(file, JSON.stringify(baseline) + '\n', true);
    } catch (e) {
      throw new KnownGoodError('internal', `could not save the fleet baseline to ${file}: ${messageOf(e)}`);
    }
    return { baseline, file };
  }

  /** A host's fleet baselines, newest first; unreadable files are reported, not fatal. */
  async list(
    hostId: string,
  ): Promise<{ baselines: StoredFleetBaseline[]; problems: { file: string; message: string }[] }> {
    const dir = this.hostDir(hostId);
    let names: string[];
    try {
      names = await fs.readdir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { baselines: [], problems: [] };
      throw e;
    }
    const baselines: StoredFleetBaseline[] = [];
    const problems: { file: string; message: string }[] = [];
    for (const name of names.filter((n) => /^fleet-[A-Za-z0-9_-]+\.json$/.test(n))) {
      const file = join(dir, name);
      try {
        baselines.push({ baseline: await readFleetBaseline(file), file });
      } catch (e) {
        problems.push({ file, message: messageOf(e) });
      }
    }
    baselines.sort((a, b) => b.baseline.capturedAt.localeCompare(a.baseline.capturedAt));
    return { baselines, problems };
  }

  /** By file, id, or label (the newest with that label). */
  async find(hostId: string, word: string): Promise<StoredFleetBaseline> {
    if (word.includes('/') || word.endsWith('.json')) return { baseline: await readFleetBaseline(word), file: word };
    const { baselines } = await this.list(hostId);
    const hit = baselines.find((b) => b.baseline.id === word) ?? baselines.find((b) => b.baseline.label === word);
    if (!hit)
      throw new KnownGoodError('not-found', `no fleet baseline "${word}" for ${hostId} in ${this.hostDir(hostId)}`);
    return hit;
  }
}

export async function readFleetBaseline(file: string): Promise<FleetBaseline> {
  let raw: unknown;
  try {
    raw = JSON.parse(await fs.readFile(file, 'utf8'));
  } catch (e) {
    throw new KnownGoodError('bad-output', `fleet baseline ${file}: ${messageOf(e)}`);
  }
  const r = fleetBaselineSchema.safeParse(raw);
  if (!r.success) throw new KnownGoodError('bad-output', `fleet baseline ${file}: ${describeIssues(r.error)}`);
  return r.data;
}

export function baselineSnapshots(b: FleetBaseline): Map<string, EnvSnapshot> {
  return new Map(Object.entries(b.nodes).sort((x, y) => naturalCompare(x[0], y[0])));
}

export interface FleetNodeDrift {
  node: string;
  /**
   * unchanged/drifted: compared with its own snapshot in the baseline; new: not in the baseline (another job got
   * other nodes), compared with the baseline's majority node; missing: in the baseline, not answering now.
   */
  status: 'unchanged' | 'drifted' | 'new' | 'new-drifted' | 'missing';
  /** The baseline node it was compared with. */
  against: string | null;
  drift: Drift | null;
}

export interface FleetDrift {
  nodes: FleetNodeDrift[];
  /** Nodes whose environment moved since the baseline (or, new ones, differ from its majority). */
  drifted: string[];
  missing: string[];
}

export function compareFleetWithBaseline(baseline: FleetBaseline, now: ReadonlyMap<string, EnvSnapshot>): FleetDrift {
  const then = baselineSnapshots(baseline);
  const rep = majorityNode(compareNodes(then));
  const out: FleetNodeDrift[] = [];
  for (const node of [...new Set([...then.keys(), ...now.keys()])].sort(naturalCompare)) {
    const a = then.get(node);
    const b = now.get(node);
    if (!b) {
      out.push({ node, status: 'missing', against: node, drift: null });
      continue;
    }
    const against = a ? node : rep;
    if (against === undefined) continue;
    const drift = computeDrift(a ?? then.get(against)!, b);
    // A new node is another machine: its hostname and GPU UUIDs differ by nature, as in Compare Nodes.
    const status = a
      ? drift.unchanged
        ? 'unchanged'
        : 'drifted'
      : compareNodes(
            new Map([
              [against, then.get(against)!],
              [node, b],
            ]),
          ).rows.length === 0
        ? 'new'
        : 'new-drifted';
    out.push({ node, status, against, drift });
  }
  return {
    nodes: out,
    drifted: out.filter((n) => n.status === 'drifted' || n.status === 'new-drifted').map((n) => n.node),
    missing: out.filter((n) => n.status === 'missing').map((n) => n.node),
  };
}

export function renderFleetDriftText(d: FleetDrift, title: string): string {
  const out = [`# ${title}`];
  out.push(
    d.drifted.length
      ? `# drifted: ${d.drifted.join(', ')}`
      : `# no node drifted (${d.nodes.filter((n) => n.drift).length} compared)`,
  );
  if (d.missing.length) out.push(`# in the baseline but not answering now: ${d.missing.join(', ')}`);
  for (const n of d.nodes) {
    if (n.status === 'unchanged' || n.status === 'new' || !n.drift) continue;
    const baseline =
      n.status === 'new-drifted'
        ? `the baseline's majority node ${n.against} (${n.node} is new)`
        : `${n.node} in the baseline`;
    out.push('', renderDriftText(n.drift, { baseline, now: `${n.node} now` }).trimEnd());
  }
  return out.join('\n') + '\n';
}
