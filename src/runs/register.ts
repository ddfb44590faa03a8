import * as vscode from 'vscode';
import { sshAddress } from '../core/hosts';
import type { HostRegistry } from '../core/registry';
import { findPythonsProbe, pythonPickOrder } from '../core/probes/hostProbes';
import { fromRemoteFileUri, REMOTE_FILE_SCHEME } from '../core/remote/readFile';
import { newestCheckpoint } from '../core/runs/model';
import type { HostSettings } from '../core/settings';
import { Commands } from '../constants';
import type { RegisterCommand } from '../shared/commands';
import { registerReadonlyDocuments } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import { showInfo, showInputBox, showQuickPick, showWarning } from '../window';
import { withCancellableProgress } from '../shared/progress';
import { hostWizard } from './hostWizard';
import { RemoteFileProvider, remoteFileUri } from './remoteFiles';

/** What Remote Runs' own commands need from the extension. */
export interface RunsDeps {
  command: RegisterCommand;
  track(d: vscode.Disposable): void;
  hosts: Hosts;
  registry: Pick<HostRegistry, 'disconnect'>;
  settings: SettingsAccess;
  tree: {
    reload(hostId?: string): void;
    /** Lists again keeping the old listing shown until the new one arrives. */
    relist(hostId?: string): void;
    ensureListing(hostId: string): Promise<import('../core/runs/listRuns').RunsListing | undefined>;
    resolvePath(hostId: string, ids: string[]): Promise<unknown>;
  };
  reveal(node: unknown): Thenable<void>;
}

/** Remote Runs: the tree's own commands (hosts, roots, files). */
export function registerRuns(d: RunsDeps): void {
  const { command, tree, hosts, settings } = d;
  const updateHosts = (change: (hosts: HostSettings[]) => HostSettings[]) => settings.updateHosts(change);
  const remoteFiles = new RemoteFileProvider(hosts);
  d.track(registerReadonlyDocuments(REMOTE_FILE_SCHEME, (uri) => remoteFiles.read(uri)));

  const any = { kinds: ['host'] } as const;
  command(Commands.refresh, any, (t) => tree.relist(t?.hostId));
  command(Commands.retry, any, (t) => tree.relist(t?.hostId));
  command(Commands.connect, any, (t) => (t ? tree.ensureListing(t.hostId) : undefined));
  command(Commands.disconnect, any, (t) => {
    if (!t) return;
    d.registry.disconnect(t.hostId);
    tree.reload(t.hostId);
  });

  command(Commands.copyPath, { kinds: ['host', 'root', 'run', 'checkpoint', 'log'] }, async (t) => {
    if (!t) return;
    let text: string | undefined;
    if (t.kind === 'host') {
      const spec = hosts.find(t.hostId);
      text = spec?.ssh ? sshAddress(spec.ssh) : spec?.name;
    } else {
      text = t.path;
    }
    if (text) await vscode.env.clipboard.writeText(text);
  });

  command(Commands.openFile, { kinds: ['log'] }, async (t, { resolved }) => {
    if (!t) return;
    const maxBytes = settings.current.maxOpenBytes;
    // a name that is not UTF-8 is opened by its exact bytes
    const b64 = resolved?.kind === 'log' ? resolved.pathB64 : undefined;
    const uri = remoteFileUri({ hostId: t.hostId, path: t.path, ...(b64 ? { pathB64: b64 } : {}), maxBytes });
    const doc = await vscode.workspace.openTextDocument(uri);
    if (/\.jsonl$/i.test(t.path))
      await vscode.languages.setTextDocumentLanguage(doc, 'jsonl').then(undefined, () => undefined);
    await vscode.window.showTextDocument(doc, { preview: true });
  });

  command(Commands.loadMore, null, async () => {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== REMOTE_FILE_SCHEME) {
      void showInfo('Open a remote file from Remote Runs first.');
      return;
    }
    const ref = fromRemoteFileUri(editor.document.uri);
    const doc = await vscode.workspace.openTextDocument(remoteFileUri({ ...ref, maxBytes: ref.maxBytes * 4 }));
    await vscode.window.showTextDocument(doc, { preview: true });
  });

  command(Commands.revealNewest, any, async (t) => {
    const ids = t ? [t.hostId] : hosts.all().map((h) => h.id);
    for (const hostId of ids) {
      const listing = await tree.ensureListing(hostId);
      const newest = listing && newestCheckpoint(listing, hostId);
      if (!newest) continue;
      const target = await tree.resolvePath(hostId, newest.ids);
      if (target) {
        await d.reveal(target);
        return;
      }
    }
    void showInfo('No checkpoint found in the listed roots.');
  });

  command(Commands.addHost, null, async () => {
    const entry = await hostWizard({
      defaultRoots: settings.current.defaultRoots,
      taken: hosts.all().map((h) => h.name),
    });
    if (!entry) return;
    await updateHosts((list) => [...list.filter((h) => h.name !== entry.name), entry]);
  });

  // Also on a failed host's error row: the target of a message row is its host.
  command(Commands.editHost, { kinds: ['host'], pick: 'Edit which host?' }, async ({ hostId }) => {
    const spec = hosts.get(hostId);
    if (spec.source === 'local') {
      void showInfo('This machine has no connection settings: edit its roots with Add Checkpoint Root….');
      return;
    }
    const previous = settings.current.hosts.find((h) => h.name === spec.name);
    const entry = await hostWizard({
      ...(previous ? { previous } : { target: spec.name }),
      defaultRoots: settings.current.defaultRoots,
      taken: hosts
        .all()
        .filter((h) => h.id !== hostId)
        .map((h) => h.name),
    });
    if (!entry) return;
    // The settings change reconnects this host only (the pool replaces a connection whose options changed).
    await updateHosts((list) =>
      previous ? list.map((h) => (h.name === previous.name ? entry : h)) : [...list, entry],
    );
  });

  command(Commands.removeHost, { kinds: ['host'] }, async (t) => {
    const spec = t && hosts.find(t.hostId);
    if (!spec) return;
    if (spec.source !== 'settings') {
      void showInfo(
        spec.source === 'ssh-config'
          ? `${spec.name} comes from ~/.ssh/config; set knownGood.includeSshConfigHosts to false to hide those hosts.`
          : `${spec.name} cannot be removed.`,
      );
      return;
    }
    const ok = await showWarning(
      `Remove ${spec.name} from Known Good?`,
      { modal: true, detail: 'Its baselines are kept.' },
      'Remove',
    );
    if (ok !== 'Remove') return;
    await updateHosts((hosts) => hosts.filter((h) => h.name !== spec.name));
  });

  const setRoots = async (hostId: string, change: (roots: string[]) => string[]) => {
    const spec = hosts.find(hostId);
    if (!spec) return;
    const next = change(spec.roots);
    if (spec.source === 'local') {
      await settings.setLocalRoots(next);
    } else if (spec.source === 'settings') {
      await updateHosts((hosts) => hosts.map((h) => (h.name === spec.name ? { ...h, roots: next } : h)));
    } else {
      // An ssh-config host gets a settings entry of its own (same alias), which then replaces it in the tree.
      await updateHosts((hosts) => [...hosts, { name: spec.name, host: spec.name, roots: next }]);
    }
    tree.reload(hostId);
  };

  command(Commands.addRoot, { kinds: ['host'], pick: 'Add a checkpoint root to which host?' }, async ({ hostId }) => {
    const root = await showInputBox({
      title: 'Add Checkpoint Root',
      prompt: 'Folder on the remote, e.g. /workspace/checkpoints',
      ignoreFocusOut: true,
    });
    if (!root?.trim()) return;
    await setRoots(hostId, (roots) => [...roots.filter((r) => r !== root.trim()), root.trim()]);
  });

  command(Commands.removeRoot, { kinds: ['root'] }, async (t) => {
    if (!t) return;
    // the root as written in the settings (`~/ckpt`), which the listing keeps beside the path it expanded to; a
    // missing root has no entry, so it is looked up in the listing rather than resolved
    const root = (await tree.ensureListing(t.hostId))?.roots.find((r) => r.path === t.path)?.root;
    if (root === undefined) return;
    await setRoots(t.hostId, (roots) => roots.filter((r) => r !== root));
  });

  command(Commands.selectPython, { kinds: ['host'], pick: 'Select the Python of which host?' }, async ({ hostId }) => {
    const spec = hosts.get(hostId);
    const session = hosts.session(spec);
    const found = await withCancellableProgress(`Looking for Python interpreters on ${session.label}…`, (signal) =>
      session.probes.runOnce(findPythonsProbe(), { signal, timeoutMs: 120000 }),
    );
    if (!found) return;
    const items = pythonPickOrder(found.value.candidates).map((cand) => ({
      label: cand.path,
      description: [
        cand.version ? `Python ${cand.version}` : 'broken',
        cand.torch ? `torch ${cand.torch}` : 'no torch',
        cand.venv ? 'venv' : '',
      ]
        .filter(Boolean)
        .join(' · '),
      detail: cand.error ?? (cand.executable !== cand.path ? `→ ${cand.executable}` : undefined),
      path: cand.path,
    }));
    const pick = await showQuickPick(items, {
      title: `Python for ${spec.name} (now: ${spec.python})`,
      ignoreFocusOut: true,
    });
    if (!pick) return;
    if (spec.source === 'settings') {
      await updateHosts((hosts) => hosts.map((h) => (h.name === spec.name ? { ...h, python: pick.path } : h)));
    } else if (spec.source === 'ssh-config') {
      await updateHosts((hosts) => [...hosts, { name: spec.name, host: spec.name, python: pick.path }]);
    } else {
      await settings.setLocalPython(pick.path);
    }
    void showInfo(`${spec.name} now uses ${pick.path}.`);
  });
}
