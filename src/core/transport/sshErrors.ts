import { homedir } from 'node:os';
import { KnownGoodError } from '../errors';

/*
 * A failed SSH connection, told as what was tried and what to do. ssh2 reports only "All configured authentication
 * methods failed" (or a socket error code): the facts come from the connection's own steps (which keys existed,
 * what the agent held, which of them the server refused, which methods it still offered), collected by
 * SshConnection and turned into one message here, so that each case is tested without a server.
 */

/** The action a person takes in the extension to fix host settings (the notification offers it as a button). */
export const EDIT_HOST = 'Edit Host…';

/** One authentication step of a connection, in the order they were taken. */
export type AuthAttempt =
  /** The agent was asked for its keys: `keys` of them (undefined: it did not answer), all refused when `refused`. */
  | { kind: 'agent'; socket: string; keys: number | undefined; refused: boolean }
  /** A key file offered to the server; `own`: named by the host (identityFile), not one of the defaults. */
  | { kind: 'key'; file: string; own: boolean; refused: boolean }
  /** A key file that could not be offered: unreadable, not a key, its passphrase not given. */
  | { kind: 'key-unusable'; file: string; why: string }
  | { kind: 'keyboard-interactive' | 'password'; refused: boolean };

export interface AuthFacts {
  user: string;
  /** `host:port` */
  where: string;
  attempts: AuthAttempt[];
  /** The agent socket looked for (the option or SSH_AUTH_SOCK); undefined when none is set. */
  agentSocket: string | undefined;
  /** False when `agentSocket` is set but no such socket exists. */
  agentSocketExists: boolean;
  /** Default key files (~/.ssh/id_*) looked for and not found. */
  defaultKeysMissing: string[];
  /** The methods the server said it would still take, at the end (undefined: it never said). */
  serverMethods: string[] | undefined;
}

/** `~/.ssh/id_rsa` for a path in this user's home: shorter, and what people type. */
export function tildePath(path: string, home = homedir()): string {
  return home && path.startsWith(home + '/') ? `~${path.slice(home.length)}` : path;
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function attemptText(a: AuthAttempt): string {
  switch (a.kind) {
    case 'agent':
      return a.keys === undefined
        ? `ssh-agent (${a.socket}: no answer)`
        : a.keys === 0
          ? 'ssh-agent (no identities)'
          : `ssh-agent (${plural(a.keys, 'key')}${a.refused ? ', refused' : ''})`;
    case 'key':
      return `key ${tildePath(a.file)}${a.refused ? ' (refused)' : ''}`;
    case 'key-unusable':
      return `key ${tildePath(a.file)} (${a.why})`;
    default:
      return `${a.kind}${a.refused ? ' (refused)' : ''}`;
  }
}

function agentText(f: AuthFacts): string {
  if (!f.agentSocket) return 'no ssh-agent is running (SSH_AUTH_SOCK is not set)';
  if (!f.agentSocketExists) return `the ssh-agent socket ${f.agentSocket} does not exist`;
  const agent = f.attempts.find((a) => a.kind === 'agent');
  if (agent?.kind === 'agent' && agent.keys === undefined) return `the ssh-agent at ${f.agentSocket} did not answer`;
  return 'the agent has no identities';
}

function missingKeysText(f: AuthFacts): string {
  const missing = f.defaultKeysMissing.map((p) => tildePath(p));
  const dirs = new Set(missing.map((p) => p.replace(/\/[^/]*$/, '')));
  if (missing.length > 0 && dirs.size === 1) {
    const names = missing.map((p) => p.slice(p.lastIndexOf('/') + 1));
    return `${[...dirs][0]} has no ${names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names.at(-1)}` : names[0]}`;
  }
  return missing.length ? `no ${missing.join(', ')}` : 'no key file is set';
}

/** Why authentication failed, from what was tried: no key offered, keys refused, a key unusable, a password refused. */
export function authFailure(f: AuthFacts): KnownGoodError {
  const who = `${f.user}@${f.where}`;
  const tried = f.attempts.map(attemptText);
  const triedText = `Tried: ${tried.length ? tried.join('; ') : 'nothing'}.`;
  const offered = f.attempts.filter((a) => (a.kind === 'agent' && (a.keys ?? 0) > 0) || a.kind === 'key');
  const unusable = f.attempts.filter(
    (a): a is Extract<AuthAttempt, { kind: 'key-unusable' }> => a.kind === 'key-unusable',
  );
  const passwords = f.attempts.filter((a) => a.kind === 'password' || a.kind === 'keyboard-interactive');
  const keysTaken = f.serverMethods === undefined || f.serverMethods.includes('publickey');
  const detail = { tried, user: f.user, where: f.where, action: EDIT_HOST };
  let head: string;
  if (!keysTaken && offered.length === 0) {
    head =
      `${who} does not take keys (it offers: ${f.serverMethods?.join(', ') || 'nothing'})` +
      `${passwords.length ? ' and the password was not accepted' : ''} — ${EDIT_HOST} to check the user, or ask the ` +
      `host's admin to allow your key`;
  } else if (offered.length === 0 && unusable.length > 0) {
    const u = unusable[0]!;
    head =
      `no key offered to ${who}: ${tildePath(u.file)} ${u.why}` +
      `${unusable.length > 1 ? ` (and ${plural(unusable.length - 1, 'other key')} unusable)` : ''} — ` +
      (/passphrase/.test(u.why)
        ? `connect again and give its passphrase, or load it into ssh-agent (ssh-add), or ${EDIT_HOST} to choose another key`
        : `${EDIT_HOST} to choose a key`);
  } else if (offered.length === 0) {
    head = `no key offered to ${who}: ${agentText(f)} and ${missingKeysText(f)} — ${EDIT_HOST} to choose a key`;
  } else {
    const names = offered.map((a) =>
      a.kind === 'agent' ? `the agent's ${plural(a.keys ?? 0, 'key')}` : tildePath((a as { file: string }).file),
    );
    const one = offered.length === 1 && offered[0]!.kind === 'key';
    head =
      `${who} refused ${one ? 'the key' : 'every key'} offered (${names.join(', ')}): ` +
      `the host does not know ${one ? 'it' : 'them'} for ${f.user} — ${EDIT_HOST} to choose another key or user, or ` +
      `add your public key to ~/.ssh/authorized_keys there (ssh-copy-id)`;
  }
  return new KnownGoodError('auth-failed', `${head}. ${triedText}`, detail);
}

/** A socket-level failure before SSH began (refused, DNS, unreachable), by the socket's error code. */
export function socketFailure(host: string, port: number, code: string | undefined, message: string): KnownGoodError {
  const where = `${host}:${port}`;
  const detail = { where, code, action: EDIT_HOST };
  switch (code) {
    case 'ECONNREFUSED':
      return new KnownGoodError(
        'unreachable',
        `${where} refused the connection: nothing listens on port ${port} there — is sshd running, and is the port ` +
          `right? ${EDIT_HOST} to change the port`,
        detail,
      );
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new KnownGoodError(
        'unreachable',
        `host name ${host} not found (DNS${code === 'EAI_AGAIN' ? ' did not answer' : ''}) — check the spelling, the ` +
          `VPN or ~/.ssh/config; ${EDIT_HOST} to fix the address`,
        detail,
      );
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ETIMEDOUT':
      return new KnownGoodError(
        'unreachable',
        `${where} is unreachable (${code}): no route to it — check the network or VPN; ${EDIT_HOST} if the address ` +
          `is wrong`,
        detail,
      );
    default:
      return new KnownGoodError('unreachable', `could not connect to ${where}: ${message}`, detail);
  }
}

/** No SSH greeting or no login within the connect timeout. */
export function connectTimeout(host: string, port: number, seconds: number): KnownGoodError {
  return new KnownGoodError(
    'timeout',
    `no answer from ${host}:${port} within ${seconds} s (knownGood.connectTimeoutSeconds; time spent answering a ` +
      `prompt does not count): a firewall dropping packets, a VPN not connected, or the wrong address or port — ` +
      `${EDIT_HOST} to check them`,
    { where: `${host}:${port}`, action: EDIT_HOST },
  );
}

/** A known_hosts entry that names another key for this host. */
export function hostKeyChanged(
  name: string,
  expected: string[],
  line: number,
  file: string,
  offered: string,
): KnownGoodError {
  return new KnownGoodError(
    'host-key-changed',
    `HOST KEY CHANGED for ${name}: known_hosts has ${expected.join(', ')} (line ${line} of ${tildePath(file)}), ` +
      `the server now offers ${offered}. Refusing to connect: this can be an attack. If the machine was ` +
      `reinstalled, remove the old line (ssh-keygen -R '${name}') and connect again.`,
    { expected, actual: offered },
  );
}

/** Is this a failure a person fixes in the host's settings (the failed row opens Edit Host…)? */
export function isHostSettingsFailure(code: string | undefined): boolean {
  return (
    code === 'auth-failed' ||
    code === 'unreachable' ||
    code === 'timeout' ||
    code === 'host-key-changed' ||
    code === 'host-key-rejected' ||
    code === 'container-not-running' ||
    code === 'command-not-found'
  );
}
