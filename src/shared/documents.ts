import * as vscode from 'vscode';
import { fromKeptDocUri, KEPT_DOC_SCHEME, KeptDocuments, toKeptDocUri, type KeptStorage } from '../core/util/keptDocs';
import { registerTextDocumentContentProvider, showTextDocument } from '../window';

/**
 * Text Known Good writes for people to read (evidence, plans, reports), opened as read-only `knownGood-doc:`
 * documents kept in the workspace's storage (core/util/keptDocs.ts): never an Untitled buffer that asks to be saved,
 * and back with its text after Reload Window.
 */
export interface Documents {
  /** The URI of `text` named `name` (kept from now on): for a diff of two of them. */
  uri(name: string, text: string): vscode.Uri;
  /** Opens `text` as a read-only document named `name` (its extension gives the language). */
  show(name: string, text: string, options?: vscode.TextDocumentShowOptions): Promise<vscode.TextEditor>;
}

export function registerDocuments(
  storage: KeptStorage,
  log: Pick<vscode.LogOutputChannel, 'error'>,
): Documents & vscode.Disposable {
  const kept = new KeptDocuments(storage, undefined, (m) => log.error(m));
  const registration = registerTextDocumentContentProvider(KEPT_DOC_SCHEME, {
    provideTextDocumentContent(uri) {
      const ref = fromKeptDocUri(uri);
      return ref ? kept.text(ref) : `not a Known Good document: ${uri.toString()}\n`;
    },
  });
  const uri = (name: string, text: string) => vscode.Uri.from(toKeptDocUri(kept.add(name, text)));
  const show = async (name: string, text: string, options?: vscode.TextDocumentShowOptions) =>
    showTextDocument(uri(name, text), options);
  return {
    uri,
    show,
    dispose: () => {
      registration.dispose();
    },
  };
}
