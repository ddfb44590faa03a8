import * as vscode from 'vscode';
import { diffDocuments, snapshotDocument, baselineTitle, type EnvSide } from '../core/baselines/documents';
import type { EnvSnapshot } from '../core/baselines/envProbe';
import type { BaselineStore } from '../core/baselines/store';
import { fromEnvUri, toEnvUri, ENV_SCHEME, type EnvDoc, type EnvRef } from '../core/baselines/uri';
import { KnownGoodError } from '../core/errors';

interface Capture {
  snapshot: EnvSnapshot;
  title: string;
  hostLabel: string;
}

const MAX_CAPTURES = 20;

/**
 * Read-only documents of the `knownGood-env:` scheme: stored baselines read from the store, captures of "now"
 * kept in memory for the session (the newest 20).
 */
export class EnvContentProvider implements vscode.TextDocumentContentProvider {
  private readonly captures = new Map<string, Capture>();
  private next = 1;

  constructor(private readonly store: BaselineStore) {}

  remember(capture: Capture): EnvRef {
    const id = `c${Date.now().toString(36)}-${this.next++}`;
    this.captures.set(id, capture);
    for (const k of this.captures.keys()) {
      if (this.captures.size <= MAX_CAPTURES) break;
      this.captures.delete(k);
    }
    return { kind: 'capture', id };
  }

  async side(ref: EnvRef): Promise<EnvSide & { meta: string[] }> {
    if (ref.kind === 'capture') {
      const c = this.captures.get(ref.id);
      if (!c)
        throw new KnownGoodError(
          'not-found',
          'this capture is gone (captures of "now" last for the session): compare again',
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

export function registerEnvContent(store: BaselineStore): {
  provider: EnvContentProvider;
  disposable: vscode.Disposable;
} {
  const provider = new EnvContentProvider(store);
  return { provider, disposable: vscode.workspace.registerTextDocumentContentProvider(ENV_SCHEME, provider) };
}
