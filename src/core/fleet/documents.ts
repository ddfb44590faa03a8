import { z } from 'zod';
import { defineDocUri, docFileName, type UriParts } from '../util/docUri';
import { newBaselineId } from '../baselines/store';
import { KnownGoodError } from '../errors';
import { compareFleetWithBaseline, renderFleetDriftText, type FleetBaselineStore } from './baseline';
import { renderBenchText, type FleetBench } from './bench';
import type { FailedNode, FleetCapture } from './fleet';
import { renderMatrixText } from './matrix';

/*
 * The read-only Fleet documents, addressed by URI (`knownGood-fleet:`), for the VS Code layer's content provider:
 * a pure codec plus the text of each document. Captures and benchmark runs live in memory for the session
 * (`FleetResults`); a node's own snapshot and "node vs majority" open as the usual environment documents (each
 * node's snapshot registered as an env capture), so only the fleet-wide views are here.
 */

export const FLEET_SCHEME = 'knownGood-fleet';

const id = z.string().regex(/^[A-Za-z0-9_-]+$/);

export type FleetDoc =
  /** Compare Nodes: the matrix of the fields that differ. */
  | { view: 'matrix'; capture: string; name: string }
  /** Benchmark every node: side by side. */
  | { view: 'bench'; run: string; name: string }
  /** A capture against a stored fleet baseline: which node drifted. */
  | { view: 'drift'; capture: string; hostId: string; baseline: string; name: string };

const fleetDocSchema: z.ZodType<FleetDoc> = z.discriminatedUnion('view', [
  z.object({ view: z.literal('matrix'), capture: id, name: z.string() }),
  z.object({ view: z.literal('bench'), run: id, name: z.string() }),
  z.object({ view: z.literal('drift'), capture: id, hostId: z.string().min(1), baseline: id, name: z.string() }),
]);

const fleetDocUri = defineDocUri<FleetDoc>(FLEET_SCHEME, {
  schema: fleetDocSchema,
  what: 'Fleet document',
  encode(doc) {
    // `@@` hunks and `-`/`+` lines: the diff grammar colours the matrix.
    const path = `/${docFileName(doc.name, 'fleet')}${doc.view === 'bench' ? '.txt' : '.diff'}`;
    if (doc.view === 'bench') return { path, fields: { view: doc.view, run: doc.run } };
    if (doc.view === 'matrix') return { path, fields: { view: doc.view, capture: doc.capture } };
    return { path, fields: { view: doc.view, capture: doc.capture, host: doc.hostId, baseline: doc.baseline } };
  },
  decode: (fields, path) => ({
    view: fields.get('view'),
    capture: fields.get('capture'),
    run: fields.get('run'),
    hostId: fields.get('host'),
    baseline: fields.get('baseline'),
    name: path.replace(/^.*\//, '').replace(/\.(diff|txt)$/, ''),
  }),
});

export function toFleetUri(doc: FleetDoc): UriParts {
  return fleetDocUri.to(doc);
}

/** The Fleet document a URI names; undefined for another scheme or a query it did not write. */
export function fromFleetUri(uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): FleetDoc | undefined {
  return fleetDocUri.parse(uri);
}

interface Held<T> {
  value: T;
  /** For titles: `job 4242 on login1`. */
  what: string;
}

/** The session's Fleet results, by id, the oldest dropped past `limit` (each capture holds every node's snapshot). */
export class FleetResults {
  private readonly captures = new Map<string, Held<FleetCapture>>();
  private readonly benches = new Map<string, Held<{ bench: FleetBench; failed: FailedNode[] }>>();

  constructor(private readonly limit = 8) {}

  addCapture(capture: FleetCapture, what: string): string {
    return this.add(this.captures, { value: capture, what });
  }

  addBench(bench: FleetBench, what: string): string {
    return this.add(this.benches, { value: { bench, failed: bench.failed }, what });
  }

  capture(key: string): Held<FleetCapture> | undefined {
    return this.captures.get(key);
  }

  private add<T>(map: Map<string, T>, v: T): string {
    const key = newBaselineId();
    map.set(key, v);
    while (map.size > this.limit) map.delete(map.keys().next().value!);
    return key;
  }

  /** Whether this window still holds the result a document is made from (not after a reload). */
  holds(doc: FleetDoc): boolean {
    return doc.view === 'bench' ? this.benches.has(doc.run) : this.captures.has(doc.capture);
  }

  /** The text of a Fleet document; a result no longer held is said so, not thrown. */
  async text(doc: FleetDoc, store?: FleetBaselineStore): Promise<string> {
    const gone =
      '# This Fleet result is no longer held (the window was reloaded, or newer runs replaced it): run it again.\n';
    if (doc.view === 'bench') {
      const b = this.benches.get(doc.run);
      return b ? renderBenchText(b.value.bench, b.what) : gone;
    }
    const c = this.captures.get(doc.capture);
    if (!c) return gone;
    if (doc.view === 'matrix') return renderMatrixText(c.value.matrix, { what: c.what, failed: c.value.failed });
    if (!store) throw new KnownGoodError('internal', 'a fleet drift document needs the fleet baseline store');
    const b = await store.find(doc.hostId, doc.baseline);
    const text = renderFleetDriftText(
      compareFleetWithBaseline(b.baseline, c.value.snapshots),
      `${c.what} against fleet baseline "${b.baseline.label}"`,
    );
    // Why a node is missing now: the capture knows (the drift only knows it did not answer).
    const why = c.value.failed.map((f) => `# no answer from ${f.node}: ${f.message}\n`).join('');
    const [head, ...rest] = text.split(/(?<=\n)/);
    return [head, why, ...rest].join('');
  }
}
