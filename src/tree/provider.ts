import * as vscode from 'vscode';
import type { HostSpec } from '../core/hosts';
import type { HostRegistry } from '../core/registry';
import { hostItem, type Node } from './nodes';

/** Remote Runs: Host → root → runs/checkpoints/files. The provider delegates; the registry owns the hosts. */
export class RemoteRunsProvider implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  constructor(
    private readonly registry: HostRegistry,
    private readonly problems: () => string[],
  ) {}

  refresh(node?: Node): void {
    this.changed.fire(node);
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case 'host':
        return hostItem(node.host, this.registry.session(node.host));
      case 'root': {
        const t = new vscode.TreeItem(node.root, vscode.TreeItemCollapsibleState.Collapsed);
        t.id = `root:${node.host.id}:${node.root}`;
        t.iconPath = new vscode.ThemeIcon('folder-library');
        t.contextValue = 'root';
        t.tooltip = `${node.root} on ${node.host.name}`;
        return t;
      }
      case 'message': {
        const t = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.None);
        t.id = node.id;
        if (node.detail) t.description = node.detail;
        t.tooltip = [node.label, node.detail].filter(Boolean).join('\n');
        t.iconPath = new vscode.ThemeIcon(
          node.icon ?? (node.severity === 'error' ? 'error' : 'info'),
          node.severity === 'error' ? new vscode.ThemeColor('errorForeground') : undefined,
        );
        t.contextValue = node.retry ? 'message;retry' : 'message';
        return t;
      }
      case 'item': {
        const t = new vscode.TreeItem(
          node.label,
          node.collapsible ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None,
        );
        t.id = node.id;
        return t;
      }
    }
  }

  getChildren(node?: Node): Node[] {
    if (!node) {
      const hosts: Node[] = this.registry.hosts().map((host) => ({ kind: 'host', host }));
      const problems: Node[] = this.problems().map((p, i) => ({
        kind: 'message',
        id: `settings-problem:${i}`,
        label: p,
        severity: 'error',
        icon: 'warning',
      }));
      return [...hosts, ...problems];
    }
    if (node.kind === 'host') return this.rootsOf(node.host);
    return [];
  }

  private rootsOf(host: HostSpec): Node[] {
    if (host.roots.length === 0) {
      return [{ kind: 'message', id: `noroots:${host.id}`, label: 'No checkpoint roots: add one', icon: 'info' }];
    }
    return host.roots.map((root) => ({ kind: 'root', host, root }));
  }

  dispose(): void {
    this.changed.dispose();
  }
}
