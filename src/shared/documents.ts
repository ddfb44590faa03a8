import * as vscode from 'vscode';
import { messageOf } from '../core/errors';
import { z } from 'zod';
import { fromKeptDocUri, KEPT_DOC_SCHEME, KeptDocuments, toKeptDocUri, type KeptStorage } from '../core/util/keptDocs';
import { closeTabs, openTabs, registerReadonlyFileSystemProvider, showTextDocument } from '../window';

/**
 * Documents of a scheme as a read-only file system: each file is one document, its text made by `read` when VS Code
 * reads it. A file system, not a TextDocumentContentProvider: VS Code (1.100) saves and restores the editors of a
 * file system's files across Reload Window and keeps none of a content provider's (it has no serializer for them);
 * read-only, such an editor takes no typing and closes without asking to save. Nothing is ever listed, written or
 * watched: a file changes when `onDidChange` names it, and VS Code reads it again.
 */
export function registerReadonlyDocuments(
  scheme: string,
  read: (uri: vscode.Uri) => string | Promise<string>,
  /** A document to read again (its source changed): VS Code re-reads an open one only when its mtime moved. */
  onDidChange?: vscode.Event<vscode.Uri>,
): vscode.Disposable {
  const changed = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  const versions = new Map<string, number>();
  const changes = onDidChange?.((uri) => {
    versions.set(uri.toString(), (versions.get(uri.toString()) ?? 0) + 1);
    changed.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  });
  const refuse = (uri: vscode.Uri): never => {
    throw vscode.FileSystemError.NoPermissions(uri);
  };
  const provider: vscode.FileSystemProvider = {
    onDidChangeFile: changed.event,
    watch: () => new vscode.Disposable(() => undefined),
    // A fixed time (moved only by onDidChange) and no size: the text is made when read (a data folder's listing runs
    // probes); VS Code reads the whole file whatever the size says, and a file whose time stays is read once a model.
    stat: (uri) => ({
      type: vscode.FileType.File,
      ctime: 0,
      mtime: versions.get(uri.toString()) ?? 0,
      size: 0,
      permissions: vscode.FilePermission.Readonly,
    }),
    // a failure fails the open (openTextDocument rejects with its message): the caller decides what to show
    readFile: async (uri) => {
      try {
        return Buffer.from(await read(uri), 'utf8');
      } catch (e) {
        throw vscode.FileSystemError.Unavailable(messageOf(e));
      }
    },
    readDirectory: (uri) => {
      throw vscode.FileSystemError.FileNotADirectory(uri);
    },
    createDirectory: refuse,
    writeFile: refuse,
    delete: refuse,
    rename: refuse,
  };
  const registration = registerReadonlyFileSystemProvider(scheme, provider);
  return new vscode.Disposable(() => {
    registration.dispose();
    changes?.dispose();
    changed.dispose();
  });
}

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
  /**
   * As `show`, in place of any other open document of that name: a plan or report made again (another attempt,
   * another run) takes the tab of the one before instead of opening one more beside it.
   */
  showReplacing(name: string, text: string, options?: vscode.TextDocumentShowOptions): Promise<vscode.TextEditor>;
}

export function registerDocuments(
  storage: KeptStorage,
  log: Pick<vscode.LogOutputChannel, 'error'>,
): Documents & vscode.Disposable {
  const kept = new KeptDocuments(storage, undefined, (m) => log.error(m));
  const registration = registerReadonlyDocuments(KEPT_DOC_SCHEME, (uri) => {
    const ref = fromKeptDocUri(uri);
    return ref ? kept.text(ref) : `not a Known Good document: ${uri.toString()}\n`;
  });
  const uri = (name: string, text: string) => vscode.Uri.from(toKeptDocUri(kept.add(name, text)));
  const show = async (name: string, text: string, options?: vscode.TextDocumentShowOptions) =>
    showTextDocument(uri(name, text), options);
  const showReplacing = async (name: string, text: string, options?: vscode.TextDocumentShowOptions) => {
    const next = uri(name, text);
    const shown = fromKeptDocUri(next)?.name;
    const editor = await showTextDocument(next, options);
    // The tabs as they are once the new one is open: a Tab object read before is stale once the tabs change
    // ("Tab close: Invalid tab not found!"); one closed meanwhile by the person is no failure.
    const others = openTabs().filter((t) => {
      if (!(t.input instanceof vscode.TabInputText)) return false;
      const ref = fromKeptDocUri(t.input.uri);
      return ref !== undefined && ref.name === shown && t.input.uri.toString() !== next.toString();
    });
    if (others.length)
      await closeTabs(others).then(undefined, (e: unknown) =>
        log.error(`could not close an earlier ${name}: ${messageOf(e)}`),
      );
    return editor;
  };
  return {
    uri,
    show,
    showReplacing,
    dispose: () => {
      registration.dispose();
    },
  };
}

/**
 * Texts by document URI in the workspace's storage, the newest `max`: what a document showed, for after a reload,
 * when what it was made from (a result this window held) is gone.
 */
export function keptTexts(
  storage: KeptStorage,
  key: string,
  max: number,
): { get(uri: string): string | undefined; set(uri: string, text: string): void } {
  const schema = z.array(z.tuple([z.string(), z.string()]));
  // data from an earlier window: anything but this shape is taken as nothing kept
  const all = () => schema.safeParse(storage.get(key)).data ?? [];
  return {
    get: (uri) => all().find(([u]) => u === uri)?.[1],
    set: (uri, text) => {
      const next = [...all().filter(([u]) => u !== uri), [uri, text]].slice(-max);
      // a lost write only loses this document's text at the next reload
      void Promise.resolve(storage.update(key, next)).then(undefined, () => undefined);
    },
  };
}
