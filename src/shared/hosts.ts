import { KnownGoodError } from '../core/errors';
import { hostAddress, type HostSpec } from '../core/hosts';
import type { HostRegistry, HostSession } from '../core/registry';
import { showQuickPick } from '../window';

/** The configured hosts as features see them: look-ups, sessions and the one host picker. */
export interface Hosts {
  all(): readonly HostSpec[];
  find(hostId: string): HostSpec | undefined;
  /** The host of a target; a host no longer configured is a `not-found` error that names it. */
  get(hostId: string): HostSpec;
  session(host: HostSpec | string): HostSession;
  /** The host picker: the only host without asking when there is one; undefined when the person cancels. */
  pick(placeHolder: string): Promise<HostSpec | undefined>;
}

export function hostsOf(registry: HostRegistry): Hosts {
  return {
    all: () => registry.hosts(),
    find: (hostId) => registry.find(hostId),
    get(hostId) {
      const spec = registry.find(hostId);
      if (!spec) throw new KnownGoodError('not-found', `host ${hostId} is no longer configured`);
      return spec;
    },
    session: (host) => registry.session(host),
    async pick(placeHolder) {
      const hosts = registry.hosts();
      if (hosts.length === 1) return hosts[0];
      const pick = await showQuickPick(
        hosts.map((host) => ({
          label: host.name,
          description: hostAddress(host),
          detail: host.roots.length ? `roots: ${host.roots.join(', ')}` : 'no checkpoint roots',
          host,
        })),
        { placeHolder, matchOnDescription: true, ignoreFocusOut: true },
      );
      return pick?.host;
    },
  };
}
