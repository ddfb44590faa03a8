import * as vscode from 'vscode';
import { Commands } from '../constants';
import { messageOf } from '../core/errors';
import { sshAddress, type HostSpec } from '../core/hosts';
import type { HostRegistry } from '../core/registry';
import type { Listings } from '../core/runs/listings';
import type { RunsListing } from '../core/runs/listRuns';
import {
  childrenOf,
  hostChildren,
  hostNode,
  type EntryNode,
  type HostInfo,
  type HostNode,
  type MessageNode,
  type RunsNode,
} from '../core/runs/model';
import type { SettingsProblemNode, TreeNode, TreeSection } from '../shared/treeSection';
import { DeferredChanges } from '../core/util/deferredChanges';
import { liveRowText, type LiveRunState } from '../core/whatChanged/liveWatch';

export interface ProviderOptions {
  newestFirst(): boolean;
  /**
   * Nothing configured yet (no SSH host, no local roots set): the view stays empty so that its welcome (Add Host…,
   * Add Checkpoint Root…, Open Settings; package.json viewsWelcome) shows instead of a lone "This machine".
   */
  unconfigured?(): boolean;
  /**
   * How the person last left a row (expanded true, collapsed false; undefined: never touched), kept across reloads
   * (core/runs/viewState.ts): VS Code asks a row's collapsibleState only when it first shows the row, so this is how a
   * reloaded window opens the same rows, and each host kept open lists (and connects) as its children are asked for.
   */
  expansionOf?(id: string): boolean | undefined;
  /** What the polls saw of a run's training process (core/whatChanged/liveWatch.ts): shown on the run's row. */
  live?(hostId: string, run: string): LiveRunState | undefined;
}

/**
 * Remote Runs: Host → root → run → checkpoint → files, built by the core model (src/core/runs/model.ts) from one
 * listing per host (one probe call through the host's resident helper). Expanding a node costs no remote call
 * when the listing has it, and one call (for that folder) when it was past the listing's depth. One bad host never
 * blocks the others: each lists on its own and shows its own error node with Retry.
 */
export class RemoteRunsProvider implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  private readonly emitter = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  /**
   * Change events wait while any getChildren is in flight. VS Code fetches a node's children again when a change is
   * fired for it (or an ancestor) during a fetch, and the second fetch then fails with "Element with id … is
   * already registered", leaving that node empty (seen with the Slurm section while its squeue answered; VS Code
   * issue #71698). Held events are merged: one for the whole tree wins over per-node ones.
   */
  private readonly changed = new DeferredChanges<TreeNode>((n) => this.emitter.fire(n));
  private readonly hostNodes = new Map<string, HostNode>();
  private readonly parents = new Map<string, TreeNode | undefined>();
  private readonly sections: TreeSection[] = [];

  private readonly unsubscribe: () => void;

  constructor(
    private readonly registry: HostRegistry,
    /** The listings of every host (src/core/runs/listings.ts): this view only maps them to tree items. */
    readonly listings: Listings,
    private readonly problems: () => string[],
    private readonly options: ProviderOptions,
  ) {
    this.unsubscribe = listings.onDidChange((hostId) =>
      this.changed.fire(hostId === undefined ? undefined : this.hostNodes.get(hostId)),
    );
  }

  registerSection(section: TreeSection): vscode.Disposable {
    this.sections.push(section);
    this.changed.fire(undefined);
    return new vscode.Disposable(() => {
      const i = this.sections.indexOf(section);
      if (i >= 0) this.sections.splice(i, 1);
      this.changed.fire(undefined);
    });
  }

  private selected: { hostId: string; path: string } | undefined;

  /**
   * The checkpoint selected for compare: its row says so and its contextValue gets `selectedForCompare`. The ref's
   * path may be the file inside a checkpoint folder (the one holding the args), so the folder's row counts too.
   */
  markSelected(ref: { hostId: string; path: string } | undefined): void {
    this.selected = ref;
    this.changed.fire(undefined);
  }

  private isSelected(node: RunsNode): boolean {
    const s = this.selected;
    if (!s || node.kind !== 'checkpoint' || node.hostId !== s.hostId) return false;
    return s.path === node.remotePath || s.path.startsWith(`${node.remotePath.replace(/\/+$/, '')}/`);
  }

  /** Re-render (no remote call). */
  refresh(node?: TreeNode): void {
    this.changed.fire(node);
  }

  /** Forget listings (of one host, or all) and list again when shown. */
  reload(hostId?: string): void {
    this.listings.reload(hostId);
  }

  listing(hostId: string): RunsListing | undefined {
    return this.listings.listing(hostId);
  }

  /** Lists a host now (or waits for the listing in flight) and returns it. */
  ensureListing(hostId: string): Promise<RunsListing | undefined> {
    return this.listings.ensure(hostId);
  }

  private hostInfo(host: HostSpec): HostInfo {
    const st = this.listings.get(host.id);
    // The address once: not again beside a name that already is the address (older Add Host wrote it as the name).
    const address = host.ssh ? sshAddress(host.ssh) : undefined;
    const where = address && address !== host.name ? address : undefined;
    const container = host.container
      ? host.container.kind === 'custom'
        ? 'container'
        : `${host.container.kind} ${host.container.id}`
      : undefined;
    // What runs code in the workspace's entry for this host is not used until the folder is trusted: say so here,
    // where the person sees the host behave differently from what the entry says.
    const restricted = host.restricted?.length
      ? `Restricted Mode: the folder's ${host.restricted.join(', ')} not used`
      : undefined;
    const detail = [where, container, restricted].filter(Boolean).join(' · ');
    return {
      id: host.id,
      label: host.name,
      state: st?.state ?? 'disconnected',
      // Nothing to connect to (this machine, a local container): never "not connected".
      ...(host.ssh ? {} : { local: true }),
      ...(detail ? { detail } : {}),
      ...(st?.error ? { error: st.error } : {}),
      ...(st?.errorCode ? { errorCode: st.errorCode } : {}),
    };
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
      return this.kept(item);
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
    const selected = this.isSelected(node);
    const live = node.kind === 'run' ? liveRowText(this.options.live?.(node.hostId, node.remotePath)) : undefined;
    const description =
      [selected ? 'selected for compare' : undefined, live?.description, node.description]
        .filter(Boolean)
        .join(' · ') || undefined;
    if (description) t.description = description;
    const tooltip = [node.tooltip, ...(live?.tooltip ?? [])].filter(Boolean).join('\n');
    if (tooltip) t.tooltip = tooltip;
    // Screen readers (and UI tests) read "label, description", not the multi-line tooltip.
    t.accessibilityInformation = { label: description ? `${node.label}, ${description}` : node.label };
    t.contextValue = selected ? `${node.contextValue};selectedForCompare` : node.contextValue;
    if (node.kind === 'message') {
      const color =
        node.severity === 'error'
          ? new vscode.ThemeColor('errorForeground')
          : node.severity === 'warning'
            ? new vscode.ThemeColor('problemsWarningIcon.foreground')
            : undefined;
      t.iconPath = new vscode.ThemeIcon(node.icon, color);
      if (node.action === 'retry') t.command = { command: Commands.retry, title: 'Retry', arguments: [node] };
      // A connection failure is fixed in the host's settings: the click opens them (Retry stays inline).
      if (node.action === 'editHost')
        t.command = { command: Commands.editHost, title: 'Edit Host…', arguments: [node] };
    } else {
      t.iconPath = new vscode.ThemeIcon(node.icon);
    }
    if (node.kind === 'checkpoint') {
      t.command = { command: Commands.argsOpen, title: 'Open Args', arguments: [node] };
    } else if (node.kind === 'file' && /\bopenable\b/.test(node.contextValue)) {
      t.command = { command: Commands.openFile, title: 'Open', arguments: [node] };
    }
    if (node.kind === 'host') {
      const spec = this.registry.find(node.host.id);
      t.contextValue = `${node.contextValue};${spec?.ssh ? 'ssh' : 'local'};${spec?.source ?? ''}`;
    }
    return this.kept(t);
  }

  private kept(item: vscode.TreeItem): vscode.TreeItem {
    const open = item.id && item.collapsibleState ? this.options.expansionOf?.(item.id) : undefined;
    if (open !== undefined)
      item.collapsibleState = open
        ? vscode.TreeItemCollapsibleState.Expanded
        : vscode.TreeItemCollapsibleState.Collapsed;
    return item;
  }

  getParent(node: TreeNode): TreeNode | undefined {
    return this.parents.get(this.idOf(node));
  }

  /** A row's id as its TreeItem has it (what expansion is kept by). */
  idOf(node: TreeNode): string {
    return node.kind === 'section' ? `section:${node.section}:${node.hostId}:${node.key}` : node.id;
  }

  private remember(parent: TreeNode | undefined, kids: TreeNode[]): TreeNode[] {
    for (const k of kids) this.parents.set(this.idOf(k), parent);
    return kids;
  }

  getChildren(node?: TreeNode): Promise<TreeNode[]> {
    return this.changed.during(this.fetchChildren(node));
  }

  private async fetchChildren(node?: TreeNode): Promise<TreeNode[]> {
    if (!node) {
      if (this.options.unconfigured?.() && this.problems().length === 0) return [];
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
        this.listings.startIfIdle(host);
        const kids: TreeNode[] = hostChildren(this.hostInfo(host), this.listings.listing(host.id));
        for (const s of this.sections) kids.push(...s.hostNodes(host));
        return this.remember(node, kids);
      }
      case 'message':
        return [];
      default: {
        const opts = this.modelOptions(node.hostId);
        if (node.kind !== 'root' && (node.kind === 'run' || node.kind === 'folder' || node.kind === 'checkpoint')) {
          const grafted = this.listings.graft(node.hostId, node.id);
          if (grafted) return this.remember(node, childrenOf({ ...node, entry: grafted, needsListing: false }, opts));
          if (node.needsListing) return this.remember(node, await this.listFolder(node));
        }
        return this.remember(node, childrenOf(node, opts));
      }
    }
  }

  private modelOptions(hostId: string) {
    const now = this.listings.remoteNow(hostId);
    return { newestFirst: this.options.newestFirst(), ...(now !== undefined ? { now } : {}) };
  }

  /** One remote call for a folder that was past the listing's depth. */
  private async listFolder(node: EntryNode): Promise<RunsNode[]> {
    try {
      const grafted = await this.listings.listFolder(node.hostId, node.id, node.entry, node.remotePath);
      if (!grafted) return [];
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

  /**
   * The node path from a host down to the node with `ids.at(-1)` (a section's rows too), building nodes as the model
   * does; the host's own node for no ids (its children are not asked for: that would connect it).
   */
  async resolvePath(hostId: string, ids: string[]): Promise<TreeNode | undefined> {
    const host = this.registry.find(hostId);
    if (!host) return undefined;
    let cur: TreeNode = this.nodeOfHost(host);
    for (const id of ids) {
      const kids = await this.fetchChildren(cur);
      const next: TreeNode | undefined = kids.find((k) => this.idOf(k) === id);
      if (!next) return undefined;
      cur = next;
    }
    return cur;
  }

  /** Where a shown row is: its host and the ids below the host down to it (what resolvePath takes back). */
  pathOf(node: TreeNode): { hostId: string; ids: string[] } | undefined {
    const ids: string[] = [];
    for (let cur: TreeNode | undefined = node; cur; cur = this.getParent(cur)) {
      if (cur.kind === 'host') return { hostId: cur.host.id, ids: ids.reverse() };
      if (cur.kind === 'settings-problem') return undefined;
      ids.push(this.idOf(cur));
    }
    return undefined;
  }

  dispose(): void {
    this.unsubscribe();
    this.changed.dispose();
    this.emitter.dispose();
  }
}
