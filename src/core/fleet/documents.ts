import { z } from 'zod';
import { docFileName, type UriParts } from '../util/docUri';
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

export function toFleetUri(doc: FleetDoc): UriParts {
  const q = new URLSearchParams();
  q.set('view', doc.view);
  if (doc.view === 'bench') q.set('run', doc.run);
  else q.set('capture', doc.capture);
  if (doc.view === 'drift') {
    q.set('host', doc.hostId);
    q.set('baseline', doc.baseline);
  }
  // `@@` hunks and `-`/`+` lines: the diff grammar colours the matrix.
  const ext = doc.view === 'bench' ? '.txt' : '.diff';
  return { scheme: FLEET_SCHEME, authority: '', path: `/${docFileName(doc.name, 'fleet')}${ext}`, query: q.toString() };
}

export function fromFleetUri(uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): FleetDoc | undefined {
  if (uri.scheme !== FLEET_SCHEME) return undefined;
  const q = new URLSearchParams(uri.query);
  const name = uri.path.replace(/^.*\//, '').replace(/\.(diff|txt)$/, '');
  const ok = (v: string | null): v is string => v !== null && id.safeParse(v).success;
  const view = q.get('view');
  const capture = q.get('capture');
  if (view === 'matrix' && ok(capture)) return { view, capture, name };
  const run = q.get('run');
  if (view === 'bench' && ok(run)) return { view, run, name };
  const hostId = q.get('host');
  const baseline = q.get('baseline');
  if (view === 'drift' && ok(capture) && hostId && ok(baseline)) return { view, capture, hostId, baseline, name };
  return undefined;
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
