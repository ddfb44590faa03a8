import * as vscode from 'vscode';
import { messageOf } from '../core/errors';
import { fromKeptDocUri, KEPT_DOC_SCHEME, KeptDocuments, toKeptDocUri, type KeptStorage } from '../core/util/keptDocs';
import { closeTabs, openTabs, registerReadonlyFileSystemProvider, showTextDocument } from '../window';

/**
 * Documents of a scheme as a read-only file system: each file is one document, its text made by `read` when VS Code
 * reads it. A file system, not a TextDocumentContentProvider: VS Code (1.100) saves and restores the editors of a
 * file system's files across Reload Window and keeps none of a content provider's (it has no serializer for them);
 * read-only, such an editor takes no typing and closes without asking to save. Nothing is ever listed, written or
 * watched: the files change only when VS Code reads them again.
 */
export function registerReadonlyDocuments(
  scheme: string,
  read: (uri: vscode.Uri) => string | Promise<string>,
): vscode.Disposable {
  const never = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  const refuse = (uri: vscode.Uri): never => {
    throw vscode.FileSystemError.NoPermissions(uri);
  };
  const provider: vscode.FileSystemProvider = {
    onDidChangeFile: never.event,
    watch: () => new vscode.Disposable(() => undefined),
    // A fixed time and no size: the text is made when read (a data folder's listing runs probes); VS Code reads the
    // whole file whatever the size says, and a file that never changes is never read twice for one open model.
    stat: () => ({
      type: vscode.FileType.File,
      ctime: 0,
      mtime: 0,
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
    never.dispose();
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
