import * as vscode from 'vscode';
import { messageOf } from '../core/errors';
import { sshAddress, type HostSpec } from '../core/hosts';
import type { HostRegistry } from '../core/registry';
import { listRunsProbe, type RunsListing } from '../core/runs/listRuns';
import {
  childrenOf,
  graftListing,
  hostChildren,
  hostNode,
  remoteNow,
  type EntryNode,
  type HostInfo,
  type HostNode,
  type HostState,
  type MessageNode,
  type RunsNode,
} from '../core/runs/model';
import type { SectionNode, TreeSection } from '../shared/treeSection';

export type TreeNode = RunsNode | SectionNode | SettingsProblemNode;
interface SettingsProblemNode {
  kind: 'settings-problem';
  id: string;
  label: string;
}

interface HostEntry {
  state: HostState;
  listing?: RunsListing;
  receivedAt?: number;
  error?: string;
  loading?: Promise<void>;
  /** Folders past the listing's depth, listed on expansion: node id → grafted entry. */
  grafts: Map<string, EntryNode['entry']>;
}

export interface ProviderOptions {
  newestFirst(): boolean;
  depth(): number;
  maxEntries(): number;
  log(line: string): void;
}

/**
 * Remote Runs: Host → root → run → checkpoint → files, built by the core model (src/core/runs/model.ts) from one
 * listing per host (one probe call through the host's resident helper). Expanding a node costs no remote call
 * when the listing has it, and one call (for that folder) when it was past the listing's depth. One bad host never
 * blocks the others: each lists on its own and shows its own error node with Retry.
 */
export class RemoteRunsProvider implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly state = new Map<string, HostEntry>();
  private readonly hostNodes = new Map<string, HostNode>();
  private readonly parents = new Map<string, TreeNode | undefined>();
  private readonly sections: TreeSection[] = [];

  constructor(
    private readonly registry: HostRegistry,
    private readonly problems: () => string[],
    private readonly options: ProviderOptions,
  ) {}

  registerSection(section: TreeSection): vscode.Disposable {
    this.sections.push(section);
    this.changed.fire(undefined);
    return new vscode.Disposable(() => {
      const i = this.sections.indexOf(section);
      if (i >= 0) this.sections.splice(i, 1);
      this.changed.fire(undefined);
    });
  }

  /** Re-render (no remote call). */
  refresh(node?: TreeNode): void {
    this.changed.fire(node);
  }

  /** Forget listings (of one host, or all) and list again when shown. */
  reload(hostId?: string): void {
    if (hostId) {
      this.state.delete(hostId);
      this.changed.fire(this.hostNodes.get(hostId));
    } else {
      this.state.clear();
      this.changed.fire(undefined);
    }
  }

  listing(hostId: string): RunsListing | undefined {
    return this.state.get(hostId)?.listing;
  }

  /** Lists a host now (or waits for the listing in flight) and returns it. */
  async ensureListing(hostId: string): Promise<RunsListing | undefined> {
    const host = this.registry.find(hostId);
    if (!host) return undefined;
    const st = this.entry(hostId);
    if (!st.listing && !st.loading) this.load(host);
    await st.loading;
    return this.state.get(hostId)?.listing;
  }

  private entry(hostId: string): HostEntry {
    let st = this.state.get(hostId);
    if (!st) {
      st = { state: 'disconnected', grafts: new Map() };
      this.state.set(hostId, st);
    }
    return st;
  }

  private hostInfo(host: HostSpec): HostInfo {
    const st = this.state.get(host.id);
    const where = host.ssh ? sshAddress(host.ssh) : undefined;
    const container = host.container
      ? host.container.kind === 'custom'
        ? 'container'
        : `${host.container.kind} ${host.container.id}`
      : undefined;
    return {
      id: host.id,
      label: host.name,
      state: st?.state ?? 'disconnected',
      ...(where || container ? { detail: [where, container].filter(Boolean).join(' · ') } : {}),
      ...(st?.error ? { error: st.error } : {}),
    };
  }

  /**
   * Lists a host's roots. `quiet` when called from getChildren: firing a change for the node VS Code is fetching
   * children of makes it fetch them twice at once ("Element with id … is already registered"); the loading row
   * returned with the children already shows the state.
   */
  private load(host: HostSpec, quiet = false): void {
    const st = this.entry(host.id);
    const session = this.registry.session(host);
    st.state = session.connected && host.ssh ? 'listing' : host.ssh ? 'connecting' : 'listing';
    st.error = undefined;
    if (host.roots.length === 0) {
      // Nothing to list: no probe, and the model says "No checkpoint roots: add one".
      st.listing = { roots: [], depth: 0, maxEntries: 0, now: Date.now() / 1000, user: null, elapsedMs: 0 };
      st.receivedAt = Date.now();
      st.state = 'connected';
      if (!quiet) this.fireHost(host.id);
      return;
    }
    if (!quiet) this.fireHost(host.id);
    st.loading = (async () => {
      try {
        const r = await session.probes.run(
          listRunsProbe(host.roots, { depth: this.options.depth(), maxEntries: this.options.maxEntries() }),
        );
        st.listing = r.value;
        st.receivedAt = Date.now();
        st.grafts.clear();
        st.state = 'connected';
        this.options.log(
          `${host.name}: listed ${host.roots.length} root(s) in ${r.value.elapsedMs} ms (python ${r.python.executable})`,
        );
      } catch (e) {
        st.state = 'error';
        st.error = messageOf(e);
        this.options.log(`${host.name}: ${st.error}`);
      } finally {
        st.loading = undefined;
        this.fireHost(host.id);
      }
    })();
  }

  private fireHost(hostId: string): void {
    this.changed.fire(this.hostNodes.get(hostId));
  }

  private nodeOfHost(host: HostSpec): HostNode {
    const fresh = hostNode(this.hostInfo(host));
    const cur = this.hostNodes.get(host.id);
    // Keep the object VS Code already knows, with fresh contents: fire(node) then finds it.
    if (cur) {
      Object.assign(cur, fresh);
      return cur;
    }
    this.hostNodes.set(host.id, fresh);
    return fresh;
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    if (node.kind === 'host') {
      // The host's state (connecting, connected, failed) changes after the node was handed out: describe it now.
      const spec = this.registry.find(node.host.id);
      if (spec) node = this.nodeOfHost(spec);
    }
    if (node.kind === 'section') {
      const section = this.sections.find((s) => s.id === node.section);
      const item = section ? section.treeItem(node) : new vscode.TreeItem('(feature not loaded)');
      item.id ??= `section:${node.section}:${node.hostId}:${node.key}`;
      return item;
    }
    if (node.kind === 'settings-problem') {
      const t = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.None);
      t.id = node.id;
      t.iconPath = new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground'));
      t.tooltip = node.label;
      t.contextValue = 'message;settings';
      t.command = { command: 'workbench.action.openSettings', title: 'Open Settings', arguments: ['knownGood.hosts'] };
      return t;
    }
    const collapsible =
      node.collapsible === 'none'
        ? vscode.TreeItemCollapsibleState.None
        : node.collapsible === 'expanded'
          ? vscode.TreeItemCollapsibleState.Expanded
          : vscode.TreeItemCollapsibleState.Collapsed;
    const t = new vscode.TreeItem(node.label, collapsible);
    t.id = node.id;
    if (node.description) t.description = node.description;
    if (node.tooltip) t.tooltip = node.tooltip;
    // Screen readers (and UI tests) read "label, description", not the multi-line tooltip.
    t.accessibilityInformation = { label: node.description ? `${node.label}, ${node.description}` : node.label };
    t.contextValue = node.contextValue;
    if (node.kind === 'message') {
      const color =
        node.severity === 'error'
          ? new vscode.ThemeColor('errorForeground')
          : node.severity === 'warning'
            ? new vscode.ThemeColor('problemsWarningIcon.foreground')
            : undefined;
      t.iconPath = new vscode.ThemeIcon(node.icon, color);
      if (node.action === 'retry') t.command = { command: 'knownGood.hosts.retry', title: 'Retry', arguments: [node] };
    } else {
      t.iconPath = new vscode.ThemeIcon(node.icon);
    }
    if (node.kind === 'checkpoint') {
      t.command = { command: 'knownGood.args.open', title: 'Open Args', arguments: [node] };
    } else if (node.kind === 'file' && /\bopenable\b/.test(node.contextValue)) {
      t.command = { command: 'knownGood.remote.openFile', title: 'Open', arguments: [node] };
    }
    if (node.kind === 'host') {
      const spec = this.registry.find(node.host.id);
      t.contextValue = `${node.contextValue};${spec?.ssh ? 'ssh' : 'local'};${spec?.source ?? ''}`;
    }
    return t;
  }

  getParent(node: TreeNode): TreeNode | undefined {
    return this.parents.get(this.idOf(node));
  }

  private idOf(node: TreeNode): string {
    return node.kind === 'section' ? `section:${node.section}:${node.hostId}:${node.key}` : node.id;
  }

  private remember(parent: TreeNode | undefined, kids: TreeNode[]): TreeNode[] {
    for (const k of kids) this.parents.set(this.idOf(k), parent);
    return kids;
  }

  async getChildren(node?: TreeNode): Promise<TreeNode[]> {
    if (!node) {
      const hosts = this.registry.hosts().map((h) => this.nodeOfHost(h));
      const problems: SettingsProblemNode[] = this.problems().map((p, i) => ({
        kind: 'settings-problem',
        id: `settings-problem:${i}`,
        label: p,
      }));
      return this.remember(undefined, [...hosts, ...problems]);
    }
    switch (node.kind) {
      case 'settings-problem':
        return [];
      case 'section': {
        const section = this.sections.find((s) => s.id === node.section);
        return this.remember(node, section ? await section.children(node) : []);
      }
      case 'host': {
        const host = this.registry.find(node.host.id);
        if (!host) return [];
        const st = this.entry(host.id);
        if (!st.listing && !st.loading && st.state !== 'error') this.load(host, true);
        const kids: TreeNode[] = hostChildren(this.hostInfo(host), st.listing);
        for (const s of this.sections) kids.push(...s.hostNodes(host));
        return this.remember(node, kids);
      }
      case 'message':
        return [];
      default: {
        const opts = this.modelOptions(node.hostId);
        if (node.kind !== 'root' && (node.kind === 'run' || node.kind === 'folder' || node.kind === 'checkpoint')) {
          const grafted = this.state.get(node.hostId)?.grafts.get(node.id);
          if (grafted) return this.remember(node, childrenOf({ ...node, entry: grafted, needsListing: false }, opts));
          if (node.needsListing) return this.remember(node, await this.listFolder(node));
        }
        return this.remember(node, childrenOf(node, opts));
      }
    }
  }

  private modelOptions(hostId: string) {
    const st = this.state.get(hostId);
    return {
      newestFirst: this.options.newestFirst(),
      ...(st?.listing && st.receivedAt ? { now: remoteNow(st.listing, st.receivedAt) } : {}),
    };
  }

  /** One remote call for a folder that was past the listing's depth. */
  private async listFolder(node: EntryNode): Promise<RunsNode[]> {
    const host = this.registry.find(node.hostId);
    if (!host) return [];
    try {
      const r = await this.registry
        .session(host)
        .probes.run(listRunsProbe([node.remotePath], { depth: 2, maxEntries: this.options.maxEntries() }));
      const sub = r.value.roots[0];
      if (!sub) return [];
      const grafted = graftListing(node.entry, sub);
      this.entry(node.hostId).grafts.set(node.id, grafted);
      return childrenOf({ ...node, entry: grafted, needsListing: false }, this.modelOptions(node.hostId));
    } catch (e) {
      const m: MessageNode = {
        kind: 'message',
        hostId: node.hostId,
        id: `${node.id}#error`,
        label: messageOf(e),
        icon: 'error',
        contextValue: 'message;error',
        collapsible: 'none',
        severity: 'error',
      };
      return [m];
    }
  }

  /** The node path from a host down to the node with `ids.at(-1)`, building nodes as the model does. */
  async resolvePath(hostId: string, ids: string[]): Promise<TreeNode | undefined> {
    const host = this.registry.find(hostId);
    if (!host) return undefined;
    let cur: TreeNode = this.nodeOfHost(host);
    let kids = await this.getChildren(cur);
    for (const id of ids) {
      const next: TreeNode | undefined = kids.find((k) => k.kind !== 'section' && k.id === id);
      if (!next) return undefined;
      cur = next;
      if (id !== ids[ids.length - 1]) kids = await this.getChildren(cur);
    }
    return cur;
  }

  dispose(): void {
    this.changed.dispose();
  }
}
