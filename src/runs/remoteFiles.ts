import * as vscode from 'vscode';
import type { HostSession } from '../core/registry';
import {
  fromRemoteFileUri,
  readFileProbe,
  renderFileText,
  REMOTE_FILE_SCHEME,
  toRemoteFileUri,
  type RemoteFileRef,
} from '../core/remote/readFile';

export function remoteFileUri(ref: RemoteFileRef): vscode.Uri {
  return vscode.Uri.from(toRemoteFileUri(ref));
}

/**
 * Read-only documents of remote logs, jsonl and configs (a read-only file system: shared/documents.ts): only the
 * last `maxBytes` cross the wire, with a header that says how much was left out; "Load More" reopens with four times
 * as much. A file that cannot be read fails the open with why (a folder: `not-regular`).
 */
export class RemoteFileProvider {
  constructor(private readonly registry: { session(hostId: string): HostSession }) {}

  async read(uri: vscode.Uri): Promise<string> {
    const ref = fromRemoteFileUri(uri);
    const session = this.registry.session(ref.hostId);
    const r = await session.probes.run(
      readFileProbe({ text: ref.path, ...(ref.pathB64 ? { b64: ref.pathB64 } : {}) }, { maxBytes: ref.maxBytes }),
    );
    return renderFileText(r.value, 'Run "Known Good: Load More of Remote File" to see more.');
  }
}

export { REMOTE_FILE_SCHEME };
