import type { Container } from '../container';
import { KnownGoodError } from '../core/errors';
import { hostAddress, type HostSpec } from '../core/hosts';
import { showQuickPick } from '../window';

/** What a command was invoked on: a host node, a root/run/checkpoint node, `{ hostId }` (tests), or nothing. */
export interface NodeTarget {
  hostId?: string;
  folder?: string;
  checkpoint?: string;
}

export function targetOf(node: unknown): NodeTarget {
  if (typeof node !== 'object' || node === null) return {};
  const n = node as { kind?: unknown; hostId?: unknown; host?: { id?: unknown }; remotePath?: unknown; root?: unknown };
  const hostId = typeof n.hostId === 'string' ? n.hostId : typeof n.host?.id === 'string' ? n.host.id : undefined;
  const path = typeof n.remotePath === 'string' ? n.remotePath : typeof n.root === 'string' ? n.root : undefined;
  const out: NodeTarget = hostId !== undefined ? { hostId } : {};
  if (path !== undefined) {
    if (n.kind === 'checkpoint') out.checkpoint = path;
    else if (n.kind === 'root' || n.kind === 'run' || n.kind === 'folder') out.folder = path;
  }
  return out;
}

export async function hostFor(c: Container, target: NodeTarget, placeHolder: string): Promise<HostSpec | undefined> {
  if (target.hostId !== undefined) {
    const spec = c.registry.find(target.hostId);
    if (!spec) throw new KnownGoodError('not-found', `host ${target.hostId} is no longer configured`);
    return spec;
  }
  const hosts = c.registry.hosts();
  if (hosts.length === 1) return hosts[0];
  const pick = await showQuickPick(
    hosts.map((host) => ({
      label: host.name,
      description: hostAddress(host),
      host,
    })),
    { placeHolder, ignoreFocusOut: true },
  );
  return pick?.host;
}
