import { userInfo } from 'node:os';
import type { SlurmSettings } from './fleet/settings';
import type { ContainerSettings, HostSettings, KnownGoodSettings } from './settings';
import { expandHome, type ParsedSshConfig } from './sshConfig';

export interface SshEndpoint {
  /** Address to connect to (HostName after ssh config). */
  host: string;
  port: number;
  user: string;
  identityFiles: string[];
  proxyJump?: SshEndpoint;
  /** The name the user typed (alias), for known_hosts it is `host` that counts, as in OpenSSH. */
  alias: string;
}

export interface HostSpec {
  /** Stable id used in URIs, storage and the tree: `local`, `settings:<name>`, `ssh-config:<alias>`. */
  id: string;
  name: string;
  source: 'local' | 'settings' | 'ssh-config' | 'cli';
  ssh?: SshEndpoint;
  container?: ContainerSettings;
  python: string;
  roots: string[];
  /** Set when the host is a Slurm login node. */
  slurm?: SlurmSettings;
  /**
   * Restricted Mode: the fields of the workspace's entry for this host that are not used (they run code:
   * CODE_RUNNING_HOST_FIELDS in core/settings.ts).
   */
  restricted?: readonly string[];
}

export const LOCAL_HOST_ID = 'local';

export function localHost(roots: string[], python = 'python3'): HostSpec {
  return { id: LOCAL_HOST_ID, name: 'This machine', source: 'local', python, roots };
}

/** `[user@]host[:port]`, `[user@][v6]:port`; the user part may itself contain no `@`. */
export function parseUserHostPort(text: string): { user?: string; host: string; port?: number } | undefined {
  const m = /^(?:([^@\s]+)@)?(\[[^\]]+\]|[^:@\s[\]]+)(?::(\d{1,5}))?$/.exec(text.trim());
  if (!m) return undefined;
  const host = m[2]!.replace(/^\[|\]$/g, '');
  const port = m[3] ? Number(m[3]) : undefined;
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  return { ...(m[1] ? { user: m[1] } : {}), host, ...(port ? { port } : {}) };
}

/**
 * The SSH endpoint for a name as ssh would resolve it: an ssh-config alias gives HostName/User/Port/IdentityFile/
 * ProxyJump; explicit values (settings, CLI flags) win over the config's.
 */
export function resolveEndpoint(
  target: string,
  sshConfig: ParsedSshConfig,
  explicit: { port?: number; user?: string; identityFile?: string; proxyJump?: string } = {},
  depth = 0,
): SshEndpoint {
  const parsed = parseUserHostPort(target) ?? { host: target };
  const cfg = sshConfig.lookup(parsed.host);
  const jumpText = explicit.proxyJump ?? cfg?.proxyJump;
  const endpoint: SshEndpoint = {
    alias: parsed.host,
    host: cfg?.hostName ?? parsed.host,
    port: explicit.port ?? parsed.port ?? cfg?.port ?? 22,
    user: explicit.user ?? parsed.user ?? cfg?.user ?? userInfo().username,
    identityFiles: [
      ...(explicit.identityFile ? [expandHome(explicit.identityFile)] : []),
      ...(cfg?.identityFiles ?? []),
    ],
  };
  if (jumpText && depth < 3) {
    // One hop is what we support (the first of a comma list); a jump host's own ProxyJump is followed up to 3 deep.
    const hop = jumpText.split(',')[0]!.trim();
    endpoint.proxyJump = resolveEndpoint(hop, sshConfig, {}, depth + 1);
  }
  return endpoint;
}

export function hostFromSettings(h: HostSettings, settings: KnownGoodSettings, sshConfig: ParsedSshConfig): HostSpec {
  const restricted = settings.restrictedHosts.find((r) => r.name === h.name)?.ignored;
  return {
    id: `settings:${h.name}`,
    name: h.name,
    source: 'settings',
    ssh: resolveEndpoint(h.host, sshConfig, {
      ...(h.port ? { port: h.port } : {}),
      ...(h.user ? { user: h.user } : {}),
      ...(h.identityFile ? { identityFile: h.identityFile } : {}),
      ...(h.proxyJump ? { proxyJump: h.proxyJump } : {}),
    }),
    ...(h.container ? { container: h.container } : {}),
    ...(h.slurm ? { slurm: h.slurm } : {}),
    python: h.python ?? 'python3',
    roots: h.roots?.length ? h.roots : settings.defaultRoots,
    ...(restricted?.length ? { restricted } : {}),
  };
}

/** This machine first, then settings hosts, then ssh-config hosts that no settings entry already names. */
export function resolveHosts(
  settings: KnownGoodSettings,
  sshConfig: ParsedSshConfig,
  localRoots?: string[],
): HostSpec[] {
  const out: HostSpec[] = [localHost(localRoots ?? settings.defaultRoots)];
  const named = new Set<string>();
  for (const h of settings.hosts) {
    out.push(hostFromSettings(h, settings, sshConfig));
    named.add(h.host);
  }
  if (settings.includeSshConfigHosts) {
    for (const c of sshConfig.hosts) {
      if (named.has(c.alias)) continue;
      out.push({
        id: `ssh-config:${c.alias}`,
        name: c.alias,
        source: 'ssh-config',
        ssh: resolveEndpoint(c.alias, sshConfig),
        python: 'python3',
        roots: settings.defaultRoots,
      });
    }
  }
  return out;
}

/** `user@host`, `user@host:2222`: how an SSH endpoint is written everywhere (messages, pickers, the tree). */
export function sshAddress(e: Pick<SshEndpoint, 'user' | 'host' | 'port'>): string {
  return `${e.user}@${e.host}${e.port === 22 ? '' : `:${e.port}`}`;
}

/** A host's address for pickers and descriptions: its `user@host[:port]`, or `local`. */
export function hostAddress(h: Pick<HostSpec, 'ssh'>): string {
  return h.ssh ? sshAddress(h.ssh) : 'local';
}

/** For messages: `gpu-box`, `gpu-box (container 200)`. */
export function hostLabel(h: Pick<HostSpec, 'name' | 'container'>): string {
  if (!h.container) return h.name;
  return `${h.name} (${h.container.kind === 'custom' ? 'container' : `container ${h.container.id}`})`;
}
