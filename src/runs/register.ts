import * as vscode from 'vscode';
import type { Container } from '../container';
import { hostAddress, parseUserHostPort, sshAddress } from '../core/hosts';
import { findPythonsProbe } from '../core/probes/hostProbes';
import { fromRemoteFileUri, REMOTE_FILE_SCHEME } from '../core/remote/readFile';
import { newestCheckpoint, type EntryNode, type HostNode, type MessageNode, type RootNode } from '../core/runs/model';
import type { HostSettings } from '../core/settings';
import { Commands } from '../constants';
import { showInfo, showInputBox, showQuickPick, showWarning, withProgress } from '../window';
import { RemoteFileProvider, remoteFileUri } from './remoteFiles';

type AnyNode = HostNode | RootNode | EntryNode | MessageNode | undefined;

function hostIdOf(node: unknown): string | undefined {
  if (!node || typeof node !== 'object') return undefined;
  const n = node as { kind?: string; hostId?: string; host?: { id?: string }; id?: string };
  if (n.kind === 'host') return n.host?.id;
  if (typeof n.hostId === 'string') return n.hostId;
  if (n.kind === 'message' && typeof n.id === 'string') {
    // Message ids start with the parent's id: ["host","<id>"]#code
    const m = /^\["host","((?:[^"\\]|\\.)*)"\]/.exec(n.id);
    return m ? (JSON.parse(`"${m[1]!}"`) as string) : undefined;
  }
  return undefined;
}

/** Remote Runs: the tree's own commands (hosts, roots, files). */
export function registerRuns(c: Container): void {
  const tree = c.tree;
  const registry = c.registry;
  const settings = c.settings;
  const updateHosts = (change: (hosts: HostSettings[]) => HostSettings[]) => settings.updateHosts(change);
  c.track(vscode.workspace.registerTextDocumentContentProvider(REMOTE_FILE_SCHEME, new RemoteFileProvider(registry)));

  c.command(Commands.refresh, (node?: unknown) => tree.reload(hostIdOf(node)));
  c.command(Commands.retry, (node?: unknown) => tree.reload(hostIdOf(node)));
  c.command(Commands.connect, (node?: unknown) => {
    const id = hostIdOf(node);
    if (id) return tree.ensureListing(id);
    return undefined;
  });
  c.command(Commands.disconnect, (node?: unknown) => {
    const id = hostIdOf(node);
    if (!id) return;
    registry.disconnect(id);
    tree.reload(id);
  });

  c.command(Commands.copyPath, async (node?: AnyNode) => {
    if (!node) return;
    let text: string | undefined;
    if (
      node.kind === 'root' ||
      node.kind === 'run' ||
      node.kind === 'checkpoint' ||
      node.kind === 'folder' ||
      node.kind === 'file'
    ) {
      text = node.remotePath;
    } else if (node.kind === 'host') {
      const spec = registry.find(node.host.id);
      text = spec?.ssh ? sshAddress(spec.ssh) : spec?.name;
    }
    if (text) await vscode.env.clipboard.writeText(text);
  });

  c.command(Commands.openFile, async (node?: EntryNode) => {
    if (!node || node.kind !== 'file') return;
    const maxBytes = settings.current.maxOpenBytes;
    const uri = remoteFileUri({
      hostId: node.hostId,
      path: node.remotePath,
      ...(node.remotePathB64 ? { pathB64: node.remotePathB64 } : {}),
      maxBytes,
    });
    const doc = await vscode.workspace.openTextDocument(uri);
    if (/\.jsonl$/i.test(node.remotePath))
      await vscode.languages.setTextDocumentLanguage(doc, 'jsonl').then(undefined, () => undefined);
    await vscode.window.showTextDocument(doc, { preview: true });
  });

  c.command(Commands.loadMore, async () => {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== REMOTE_FILE_SCHEME) {
      void showInfo('Open a remote file from Remote Runs first.');
      return;
    }
    const ref = fromRemoteFileUri(editor.document.uri);
    const doc = await vscode.workspace.openTextDocument(remoteFileUri({ ...ref, maxBytes: ref.maxBytes * 4 }));
    await vscode.window.showTextDocument(doc, { preview: true });
  });

  c.command(Commands.revealNewest, async (node?: unknown) => {
    const ids = hostIdOf(node) ? [hostIdOf(node)!] : registry.hosts().map((h) => h.id);
    for (const hostId of ids) {
      const listing = await tree.ensureListing(hostId);
      const newest = listing && newestCheckpoint(listing, hostId);
      if (!newest) continue;
      const target = await tree.resolvePath(hostId, newest.ids);
      if (target) {
        await c.treeView.reveal(target, { select: true, focus: true, expand: true });
        return;
      }
    }
    void showInfo('No checkpoint found in the listed roots.');
  });

  c.command(Commands.addHost, async () => {
    const target = await showInputBox({
      title: 'Add Host (1/4)',
      prompt: 'An ~/.ssh/config alias, or user@host[:port]',
      placeHolder: 'gpu-box or root@10.0.0.5:22',
      ignoreFocusOut: true,
      validateInput: (v) =>
        v.trim() && parseUserHostPort(v.trim()) ? undefined : 'Expected an alias or user@host[:port]',
    });
    if (!target) return;
    const container = await showInputBox({
      title: 'Add Host (2/4): container (optional)',
      prompt: 'Run inside a container: pct:200, docker:NAME or kubectl:POD; empty for none',
      ignoreFocusOut: true,
      validateInput: (v) =>
        !v.trim() || /^(pct|docker|kubectl):\S+$/.test(v.trim())
          ? undefined
          : 'Expected pct:ID, docker:NAME or kubectl:POD',
    });
    if (container === undefined) return;
    const python = await showInputBox({
      title: 'Add Host (3/4): Python (optional)',
      prompt: 'Interpreter on the remote (empty: python3; "Select Remote Python" can find one later)',
      ignoreFocusOut: true,
    });
    if (python === undefined) return;
    const defaults = settings.current.defaultRoots;
    const roots = await showInputBox({
      title: 'Add Host (4/4): checkpoint roots',
      prompt: 'Comma-separated folders on the remote',
      value: defaults.join(', '),
      ignoreFocusOut: true,
    });
    if (roots === undefined) return;
    const name = target.trim();
    const entry: HostSettings = { name, host: name };
    const ct = container.trim();
    if (ct) {
      const [kind, id] = ct.split(/:(.*)/s) as ['pct' | 'docker' | 'kubectl', string];
      entry.container = { kind, id };
    }
    if (python.trim()) entry.python = python.trim();
    const list = roots
      .split(',')
      .map((r) => r.trim())
      .filter(Boolean);
    if (list.length) entry.roots = list;
    await updateHosts((hosts) => [...hosts.filter((h) => h.name !== name), entry]);
  });

  c.command(Commands.removeHost, async (node?: HostNode) => {
    const spec = node && registry.find(node.host.id);
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
    const spec = registry.find(hostId);
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

  c.command(Commands.addRoot, async (node?: unknown) => {
    const hostId = hostIdOf(node) ?? (await pickHost(c));
    if (!hostId) return;
    const root = await showInputBox({
      title: 'Add Checkpoint Root',
      prompt: 'Folder on the remote, e.g. /workspace/checkpoints',
      ignoreFocusOut: true,
    });
    if (!root?.trim()) return;
    await setRoots(hostId, (roots) => [...roots.filter((r) => r !== root.trim()), root.trim()]);
  });

  c.command(Commands.removeRoot, async (node?: RootNode) => {
    if (!node || node.kind !== 'root') return;
    const root = node.listing.root;
    await setRoots(node.hostId, (roots) => roots.filter((r) => r !== root));
  });

  c.command(Commands.selectPython, async (node?: unknown) => {
    const hostId = hostIdOf(node) ?? (await pickHost(c));
    const spec = hostId ? registry.find(hostId) : undefined;
    if (!spec) return;
    const session = registry.session(spec);
    const found = await withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: `Looking for Python interpreters on ${session.label}…`,
        cancellable: true,
      },
      (_p, token) => {
        const ac = new AbortController();
        token.onCancellationRequested(() => ac.abort());
        return session.probes.runOnce(findPythonsProbe(), { signal: ac.signal, timeoutMs: 120000 });
      },
    );
    const items = found.value.candidates.map((cand) => ({
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

export async function pickHost(c: Container): Promise<string | undefined> {
  const hosts = c.registry.hosts();
  if (hosts.length === 1) return hosts[0]!.id;
  const pick = await showQuickPick(
    hosts.map((h) => ({ label: h.name, description: hostAddress(h), id: h.id })),
    { title: 'Known Good: pick a host', ignoreFocusOut: true },
  );
  return pick?.id;
}
