import SSHConfig from 'ssh-config';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The text of ~/.ssh/config, or undefined when there is none (or it cannot be read). */
export function readUserSshConfig(): string | undefined {
  try {
    return readFileSync(join(homedir(), '.ssh', 'config'), 'utf8');
  } catch {
    return undefined;
  }
}

export interface SshConfigHost {
  alias: string;
  hostName?: string;
  user?: string;
  port?: number;
  identityFiles: string[];
  proxyJump?: string;
}

export function expandHome(p: string): string {
  return p === '~' ? homedir() : p.startsWith('~/') ? homedir() + p.slice(1) : p;
}

function isPattern(alias: string): boolean {
  return /[*?!]/.test(alias);
}

/** `Host` names of ~/.ssh/config without wildcards or negations, in file order. */
function aliases(config: SSHConfig): string[] {
  const out: string[] = [];
  for (const line of config) {
    if (line.type !== SSHConfig.DIRECTIVE || line.param.toLowerCase() !== 'host') continue;
    const values = Array.isArray(line.value) ? line.value.map((v) => v.val) : String(line.value).split(/\s+/);
    for (const v of values) if (v && !isPattern(v) && !out.includes(v)) out.push(v);
  }
  return out;
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** What OpenSSH would use for `alias` (first match wins, as in ssh_config(5)). */
export function resolveSshConfigHost(config: SSHConfig, alias: string): SshConfigHost {
  const c = config.compute(alias) as Record<string, string | string[] | undefined>;
  const get = (k: string) => {
    const key = Object.keys(c).find((x) => x.toLowerCase() === k.toLowerCase());
    return key ? c[key] : undefined;
  };
  const ids = get('IdentityFile');
  const port = Number(first(get('Port')));
  const hostName = first(get('HostName'));
  const user = first(get('User'));
  const jump = first(get('ProxyJump'));
  return {
    alias,
    ...(hostName ? { hostName: hostName.replace(/%h/g, alias) } : {}),
    ...(user ? { user } : {}),
    ...(Number.isInteger(port) && port > 0 ? { port } : {}),
    identityFiles: (Array.isArray(ids) ? ids : ids ? [ids] : []).map(expandHome),
    ...(jump && jump.toLowerCase() !== 'none' ? { proxyJump: jump } : {}),
  };
}

export interface ParsedSshConfig {
  hosts: SshConfigHost[];
  lookup(alias: string): SshConfigHost | undefined;
  problems: string[];
}

export function parseSshConfig(text: string | undefined): ParsedSshConfig {
  if (!text) return { hosts: [], lookup: () => undefined, problems: [] };
  let config: SSHConfig;
  try {
    config = SSHConfig.parse(text);
  } catch (e) {
    return { hosts: [], lookup: () => undefined, problems: [`~/.ssh/config: ${(e as Error).message}`] };
  }
  const names = aliases(config);
  return {
    hosts: names.map((a) => resolveSshConfigHost(config, a)),
    // Any name, not only listed aliases: `Host *` and pattern blocks apply to every host, as in ssh.
    lookup: (alias) => resolveSshConfigHost(config, alias),
    problems: [],
  };
}
