import { closeSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseUserHostPort } from './hosts';
import type { ContainerSettings, HostSettings } from './settings';

/*
 * The Add Host / Edit Host wizard's decisions, without VS Code: which key files to offer, the short name a new host
 * gets, and the settings entry the answers make.
 */

/** How the host authenticates: a key file, or whatever ssh-agent (and the default ~/.ssh keys) offer. */
export type KeyChoice = { kind: 'file'; path: string } | { kind: 'agent' };

/** The first line of a private key file, in the formats ssh and ssh2 read (OpenSSH, PEM, PKCS#8, PuTTY). */
const PRIVATE_KEY_HEADER =
  /^(-----BEGIN (OPENSSH |RSA |DSA |EC |ENCRYPTED )?PRIVATE KEY-----|PuTTY-User-Key-File-\d+:)/;
/** A private key is a few KB; a bigger file in ~/.ssh is something else and is not read. */
const MAX_KEY_BYTES = 64 * 1024;

/** Whether `path` is a regular file that starts as a private key does (only its first bytes are read). */
function looksLikePrivateKey(path: string): boolean {
  let fd: number | undefined;
  try {
    const st = statSync(path);
    if (!st.isFile() || st.size > MAX_KEY_BYTES) return false;
    fd = openSync(path, 'r');
    const head = Buffer.alloc(64);
    const n = readSync(fd, head, 0, head.length, 0);
    return PRIVATE_KEY_HEADER.test(head.subarray(0, n).toString('latin1'));
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The private keys the wizard offers: the files ~/.ssh/config names (`named`, its IdentityFile lines, those that
 * exist), then those of a folder (default ~/.ssh) named `id_*` or whose content starts as a private key does, sorted;
 * `.pub` halves left out.
 */
export function listKeyFiles(dir = join(homedir(), '.ssh'), named: readonly string[] = []): string[] {
  const out = named.filter((p) => !p.includes('%') && looksLikePrivateKey(p));
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    names = [];
  }
  for (const f of names) {
    if (f.endsWith('.pub')) continue;
    const path = join(dir, f);
    if (/^id_[^.]+$/.test(f) || looksLikePrivateKey(path)) out.push(path);
  }
  return [...new Set(out)];
}

/**
 * The name the wizard offers for a new host: an ssh-config alias as is, an address as `user@host` (the port left
 * out; `root@10.0.0.5:2222` → `root@10.0.0.5`), the host alone when no user is given; `-2`, `-3`, … when another host
 * already has that name. The full address is shown once, beside it in the tree.
 */
export function shortHostName(target: string, taken: readonly string[]): string {
  const t = target.trim();
  const a = parseUserHostPort(t);
  const base = a ? (a.user ? `${a.user}@${a.host}` : a.host) : t;
  if (!taken.includes(base)) return base;
  for (let i = 2; ; i++) if (!taken.includes(`${base}-${i}`)) return `${base}-${i}`;
}

/** Why `name` cannot name a host (empty, another host's, This machine's), or undefined when it can. */
export function hostNameProblem(name: string, taken: readonly string[]): string | undefined {
  const n = name.trim();
  if (!n) return 'Give the host a name';
  if (n === 'This machine') return '"This machine" is the local host';
  if (taken.includes(n)) return `Another host is already named ${n}`;
  return undefined;
}

export interface HostAnswers {
  name: string;
  /** An ssh-config alias or `user@host[:port]`. */
  target: string;
  key: KeyChoice;
  /** `pct:200`, `docker:NAME`, `kubectl:POD`, or empty. */
  container: string;
  python: string;
  /** Comma-separated folders. */
  roots: string;
}

export function parseContainer(text: string): ContainerSettings | undefined {
  const m = /^(pct|docker|kubectl):(\S+)$/.exec(text.trim());
  return m ? { kind: m[1] as 'pct' | 'docker' | 'kubectl', id: m[2]! } : undefined;
}

export function containerText(c: ContainerSettings | undefined): string {
  return c && c.kind !== 'custom' && c.id ? `${c.kind}:${c.id}` : '';
}

/**
 * The settings entry for the wizard's answers. Editing keeps what the wizard does not ask (proxyJump, slurm, a custom
 * container, port/user written apart from the address) unless the address itself changed.
 */
export function hostEntryOf(a: HostAnswers, previous?: HostSettings): HostSettings {
  const target = a.target.trim();
  const sameAddress = previous?.host === target;
  const entry: HostSettings = { ...(sameAddress ? previous : {}), name: a.name.trim(), host: target };
  if (!sameAddress && previous?.slurm) entry.slurm = previous.slurm;
  if (a.key.kind === 'file') entry.identityFile = a.key.path;
  else delete entry.identityFile;
  const container = parseContainer(a.container);
  if (container) entry.container = container;
  else if (entry.container?.kind !== 'custom') delete entry.container;
  if (a.python.trim()) entry.python = a.python.trim();
  else delete entry.python;
  const roots = a.roots
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  if (roots.length) entry.roots = roots;
  else delete entry.roots;
  return entry;
}
