import * as vscode from 'vscode';
import { diffDocuments, snapshotDocument, baselineTitle, type EnvSide } from '../core/baselines/documents';
import { z } from 'zod';
import { envSnapshotSchema, type EnvSnapshot } from '../core/baselines/envProbe';
import type { KeptStorage } from '../core/util/keptDocs';
import { registerReadonlyDocuments } from '../shared/documents';
import type { BaselineStore } from '../core/baselines/store';
import { fromEnvUri, toEnvUri, ENV_SCHEME, type EnvDoc, type EnvRef } from '../core/baselines/uri';
import { KnownGoodError } from '../core/errors';

interface Capture {
  snapshot: EnvSnapshot;
  title: string;
  hostLabel: string;
}

const MAX_CAPTURES = 20;
/** Captures kept in the workspace's storage for after a reload: the newest few (a snapshot lists every package). */
const MAX_KEPT_CAPTURES = 6;
const KEPT_KEY = 'knownGood.envCaptures';

/** What the storage holds: data from an earlier window, parsed before use. */
const keptSchema = z.array(
  z.object({
    id: z.string(),
    capture: z.object({ snapshot: envSnapshotSchema, title: z.string(), hostLabel: z.string() }),
  }),
);

/**
 * Read-only documents of the `knownGood-env:` scheme: stored baselines read from the store, captures of "now"
 * kept for the session (the newest 20) and the newest few in the workspace's storage, so that a compare's editors
 * come back after a reload.
 */
export class EnvContentProvider {
  private readonly captures = new Map<string, Capture>();
  private next = 1;

  constructor(
    private readonly store: BaselineStore,
    private readonly kept?: KeptStorage,
  ) {}

  remember(capture: Capture): EnvRef {
    const id = `c${Date.now().toString(36)}-${this.next++}`;
    this.captures.set(id, capture);
    for (const k of this.captures.keys()) {
      if (this.captures.size <= MAX_CAPTURES) break;
      this.captures.delete(k);
    }
    if (this.kept) {
      const all = [...this.keptCaptures().filter((c) => c.id !== id), { id, capture }].slice(-MAX_KEPT_CAPTURES);
      // a lost write only loses this compare's editors at the next reload
      void Promise.resolve(this.kept.update(KEPT_KEY, all)).then(undefined, () => undefined);
    }
    return { kind: 'capture', id };
  }

  private keptCaptures(): z.infer<typeof keptSchema> {
    const r = keptSchema.safeParse(this.kept?.get(KEPT_KEY));
    return r.success ? r.data : [];
  }

  private capture(id: string): Capture | undefined {
    return this.captures.get(id) ?? this.keptCaptures().find((c) => c.id === id)?.capture;
  }

  async side(ref: EnvRef): Promise<EnvSide & { meta: string[] }> {
    if (ref.kind === 'capture') {
      const c = this.capture(ref.id);
      if (!c)
        throw new KnownGoodError(
          'not-found',
          'this capture is gone (the newest captures of "now" are kept): compare again',
        );
      return { snapshot: c.snapshot, title: c.title, meta: [`host ${c.hostLabel}`] };
    }
    const { baseline, file } = await this.store.get(ref.hostId, ref.id);
    return {
      snapshot: baseline.snapshot,
      title: `baseline ${baselineTitle(baseline)}`,
      meta: [
        `host ${baseline.hostLabel ?? baseline.host}${baseline.container ? ` (${baseline.container})` : ''}`,
        `file ${file}`,
      ],
    };
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const doc = fromEnvUri(uri);
    if (!doc) return `# not a Known Good environment document: ${uri.toString()}\n`;
    try {
      return await this.render(doc);
    } catch (e) {
      return `# ${e instanceof Error ? e.message : String(e)}\n`;
    }
  }

  private async render(doc: EnvDoc): Promise<string> {
    if (doc.view === 'open') {
      const s = await this.side(doc.ref);
      return snapshotDocument(s, s.meta);
    }
    const d = diffDocuments(await this.side(doc.left), await this.side(doc.right));
    if (doc.view === 'summary') return d.summaryMarkdown;
    return doc.side === 'left' ? d.left : d.right;
  }
}

export function envUri(doc: EnvDoc): vscode.Uri {
  return vscode.Uri.from(toEnvUri(doc));
}

export function registerEnvContent(
  store: BaselineStore,
  kept: KeptStorage,
): {
  provider: EnvContentProvider;
  disposable: vscode.Disposable;
} {
  const provider = new EnvContentProvider(store, kept);
  // a read-only file system, so VS Code restores a compare's editors after a reload
  const disposable = registerReadonlyDocuments(ENV_SCHEME, (uri) => provider.provideTextDocumentContent(uri));
  return { provider, disposable };
}
