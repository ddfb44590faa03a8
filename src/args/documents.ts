import * as vscode from 'vscode';
import { messageOf } from '../core/errors';
import type { ArgsReader } from '../core/args/reader';
import type { CheckpointRef } from '../core/args/target';
import { checkpointLabel } from '../core/args/render';
import { ARGS_SCHEME, fromArgsUri, toArgsUri, type ArgsRef, type ArgsUriSpec } from '../core/args/uri';

export function argsUri(spec: ArgsUriSpec): vscode.Uri {
  return vscode.Uri.from(toArgsUri(spec));
}

export function refOf(r: ArgsRef): CheckpointRef {
  return { hostId: r.hostId, path: r.path, label: r.label ?? checkpointLabel(r.path) };
}

/**
 * The read-only `knownGood:` documents (args of one checkpoint, changed args of a pair): a thin adapter over the
 * core ArgsReader, which caches by host + path + size + mtime. A failure becomes the document's text (so a diff shows
 * which side failed and why) and one error notification.
 */
export class ArgsDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  constructor(
    private readonly reader: ArgsReader,
    private readonly hostLabel: (hostId: string) => string,
    private readonly report: (message: string) => void,
  ) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    let spec: ArgsUriSpec;
    try {
      spec = fromArgsUri(uri);
    } catch (e) {
      return `// ${messageOf(e)}\n`;
    }
    const ref = refOf(spec);
    try {
      if (spec.view === 'changed' && spec.other) return await this.reader.changed(refOf(spec.other), ref);
      if (spec.view === 'left' && spec.other) return await this.reader.diffSide(ref, refOf(spec.other), 'a');
      if (spec.view === 'right' && spec.other) return await this.reader.diffSide(refOf(spec.other), ref, 'b');
      return await this.reader.document(ref);
    } catch (e) {
      const message = messageOf(e);
      this.report(message);
      const what = spec.view === 'changed' ? 'changed args' : `args of ${ref.label}`;
      return [
        `// Known Good: could not read the ${what}`,
        `// host:  ${this.safeLabel(spec.hostId)}`,
        `// path:  ${spec.path}`,
        ...(spec.other ? [`// other: ${spec.other.path} (${this.safeLabel(spec.other.hostId)})`] : []),
        ...message.split('\n').map((l) => `// ${l}`),
        '',
      ].join('\n');
    }
  }

  private safeLabel(hostId: string): string {
    try {
      return this.hostLabel(hostId);
    } catch {
      return hostId;
    }
  }

  /** Ask VS Code to read an open document again (the reader then stats it and reads only if it changed). */
  reload(uri: vscode.Uri): void {
    if (vscode.workspace.textDocuments.some((d) => d.uri.toString() === uri.toString())) this.changed.fire(uri);
  }

  dispose(): void {
    this.changed.dispose();
  }
}

export { ARGS_SCHEME };
