import { createHash, createHmac } from 'node:crypto';
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** `host` for port 22, `[host]:port` otherwise: how OpenSSH names a host in known_hosts. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** The key type inside an SSH public key blob (first length-prefixed string). */
export function keyTypeOf(blob: Buffer): string {
  if (blob.length < 4) return 'unknown';
  const len = blob.readUInt32BE(0);
  return blob.subarray(4, 4 + len).toString('ascii');
}

/** `SHA256:…` as `ssh-keygen -lf` prints it. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

export interface KnownHostEntry {
  marker?: '@revoked' | '@cert-authority';
  patterns: string;
  keyType: string;
  key: Buffer;
  line: number;
}

export function parseKnownHosts(text: string): KnownHostEntry[] {
  const out: KnownHostEntry[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const parts = line.split(/\s+/);
    let marker: KnownHostEntry['marker'];
    if (parts[0] === '@revoked' || parts[0] === '@cert-authority') marker = parts.shift() as KnownHostEntry['marker'];
    const [patterns, keyType, b64] = parts;
    if (!patterns || !keyType || !b64) return;
    const key = Buffer.from(b64, 'base64');
    if (key.length === 0) return;
    out.push({ ...(marker ? { marker } : {}), patterns, keyType, key, line: i + 1 });
  });
  return out;
}

function globToRegExp(glob: string): RegExp {
  const esc = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${esc}$`, 'i');
}

/** Does a known_hosts host field (comma list, globs, `!negation`, hashed `|1|salt|hash`) name `name`? */
export function patternsMatch(patterns: string, name: string): boolean {
  if (patterns.startsWith('|1|')) {
    const [, , salt, hash] = patterns.split('|');
    if (!salt || !hash) return false;
    const h = createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64');
    return h === hash;
  }
  let matched = false;
  for (const p of patterns.split(',')) {
    if (p.startsWith('!')) {
      if (globToRegExp(p.slice(1)).test(name)) return false;
    } else if (globToRegExp(p).test(name)) {
      matched = true;
    }
  }
  return matched;
}

export type HostKeyVerdict =
  | { status: 'known' }
  | { status: 'unknown'; otherTypes: string[] }
  | { status: 'changed'; expected: string[]; line: number }
  | { status: 'revoked' };

/**
 * OpenSSH's rule: a key listed for the host is accepted; a different key of the SAME type listed for the host is a
 * changed key (refused); a revoked key is refused; no key of that type listed means unknown (ask the user).
 */
export function checkHostKey(entries: KnownHostEntry[], names: string[], blob: Buffer): HostKeyVerdict {
  const type = keyTypeOf(blob);
  const forHost = entries.filter((e) => names.some((n) => patternsMatch(e.patterns, n)) || e.patterns === '*');
  if (entries.some((e) => e.marker === '@revoked' && e.key.equals(blob))) return { status: 'revoked' };
  const plain = forHost.filter((e) => !e.marker);
  if (plain.some((e) => e.key.equals(blob))) return { status: 'known' };
  const sameType = plain.filter((e) => e.keyType === type);
  if (sameType.length > 0) {
    return { status: 'changed', expected: sameType.map((e) => fingerprint(e.key)), line: sameType[0]!.line };
  }
  return { status: 'unknown', otherTypes: [...new Set(plain.map((e) => e.keyType))] };
}

export async function readKnownHosts(files: string[]): Promise<KnownHostEntry[]> {
  const all: KnownHostEntry[] = [];
  for (const f of files) {
    try {
      all.push(...parseKnownHosts(await readFile(f, 'utf8')));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  return all;
}

/** Appends a plain entry, as OpenSSH's StrictHostKeyChecking=accept-new does. */
export async function appendKnownHost(file: string, host: string, port: number, blob: Buffer): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  let prefix = '';
  try {
    const cur = await readFile(file, 'utf8');
    if (cur.length > 0 && !cur.endsWith('\n')) prefix = '\n';
  } catch {
    /* new file */
  }
  await appendFile(file, `${prefix}${knownHostsName(host, port)} ${keyTypeOf(blob)} ${blob.toString('base64')}\n`, {
    mode: 0o600,
  });
}
