import * as vscode from 'vscode';
import type { HostSession } from '../core/registry';
import type { HostSpec } from '../core/hosts';

/** Tree nodes are small records with a `kind` discriminant; the provider turns them into TreeItems. */
export type Node =
  | { kind: 'host'; host: HostSpec }
  | { kind: 'root'; host: HostSpec; root: string }
  | { kind: 'message'; id: string; label: string; detail?: string; icon?: string; retry?: HostSpec; severity?: 'error' | 'info' }
  | { kind: 'item'; id: string; host: HostSpec; item: unknown; label: string; collapsible: boolean };

export function hostItem(host: HostSpec, session: HostSession | undefined): vscode.TreeItem {
  const t = new vscode.TreeItem(host.name, vscode.TreeItemCollapsibleState.Collapsed);
  t.id = `host:${host.id}`;
  const where = host.ssh ? `${host.ssh.user}@${host.ssh.host}${host.ssh.port === 22 ? '' : `:${host.ssh.port}`}` : 'local';
  t.description = [where, host.container ? `${host.container.kind} ${host.container.id ?? ''}`.trim() : undefined]
    .filter(Boolean)
    .join(' · ');
  t.iconPath = new vscode.ThemeIcon(host.ssh ? 'remote' : 'vm');
  const connected = session?.connected ?? false;
  t.contextValue = ['host', host.ssh ? 'ssh' : 'local', connected ? 'connected' : 'disconnected', host.source].join(';');
  t.tooltip = new vscode.MarkdownString(
    [`**${host.name}** (${host.source})`, `- ${where}`, `- python: \`${host.python}\``, `- roots: ${host.roots.map((r) => `\`${r}\``).join(', ') || '(none)'}`].join('\n'),
  );
  return t;
}
