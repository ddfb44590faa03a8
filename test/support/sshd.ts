import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { requireFile } from './require';

/**
 * A real OpenSSH sshd (Debian openssh-server) on a free loopback port, with a throwaway host key, user keys and
 * config in a temp folder: not the system service. Logins are as the current user (sshd run by root may log in as
 * root with a key; sshd run by another user can only log in as that user — both work without PAM).
 */
export interface TestSshd {
  port: number;
  user: string;
  dir: string;
  /** The sessions' HOME (a fresh folder of the test's unless `userHome`): where `~/…` on this host is. */
  home: string;
  /** Unencrypted ed25519 user key. */
  identityFile: string;
  /** ed25519 user key encrypted with `passphrase`. */
  encryptedIdentityFile: string;
  passphrase: string;
  /** known_hosts with the server's key (as `[127.0.0.1]:port`). */
  knownHostsFile: string;
  /** A known_hosts naming the same host with a DIFFERENT key (changed-key tests). */
  wrongKnownHostsFile: string;
  hostKeyFingerprint: string;
  /** Folder put first on the remote PATH (by the sessions' ~/.bashrc): test stand-ins such as `pct` go here. */
  binDir: string;
  /** Text of sshd's log (VERBOSE): one "Connection from" line per TCP connection. */
  log(): string;
  connectionCount(): number;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const SSHD = '/usr/sbin/sshd';

/**
 * The OpenSSH client's argv (without `ssh`) for one `ssh HOST CMD` to the test sshd: the usual way a person runs a
 * command, a new connection and login each time. `port` and `knownHosts` for a relay in front of it.
 */
export function opensshArgs(s: TestSshd, command: string, via: { port?: number; knownHosts?: string } = {}): string[] {
  return [
    '-p',
    String(via.port ?? s.port),
    '-i',
    s.identityFile,
    '-o',
    `UserKnownHostsFile=${via.knownHosts ?? s.knownHostsFile}`,
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    'BatchMode=yes',
    '-o',
    'LogLevel=ERROR',
    `${s.user}@127.0.0.1`,
    command,
  ];
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number, child: ChildProcess, logFile: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) {
      throw new Error(
        `sshd exited with ${child.exitCode}: ${existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''}`,
      );
    }
    const ok = await new Promise<boolean>((res) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        res(true);
      });
      s.once('error', () => res(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`sshd did not listen on ${port} within ${timeoutMs} ms`);
}

export interface SshdOptions {
  /** Shell lines every session runs first (its ~/.bashrc sources them, as BASH_ENV does for the shells it starts). */
  bashrc?: string;
  /**
   * Sessions keep the user's own HOME, and so run its ~/.bashrc (pyenv, conda…), as a real host would: for the
   * bench's "usual way". By default HOME is a fresh folder of the test's, so that a developer's shell start-up is
   * not part of the tests (a pyenv rehash killed mid-way leaves a lock that stalls every later shell for 60 s).
   */
  userHome?: boolean;
  /** sshd's MaxSessions: sessions (exec channels) one connection may have open at once (default 10, as OpenSSH). */
  maxSessions?: number;
}

export async function startSshd(options: SshdOptions = {}): Promise<TestSshd> {
  requireFile(SSHD, 'openssh-server');
  const dir = mkdtempSync(join(tmpdir(), 'kg-sshd-'));
  chmodSync(dir, 0o755);
  const keygen = (file: string, pass = '') =>
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', pass, '-C', 'known-good-test', '-f', file]);
  keygen(join(dir, 'host_ed25519'));
  keygen(join(dir, 'other_host_ed25519'));
  keygen(join(dir, 'id_ed25519'));
  const passphrase = 'correct horse battery';
  keygen(join(dir, 'id_encrypted'), passphrase);
  writeFileSync(
    join(dir, 'authorized_keys'),
    readFileSync(join(dir, 'id_ed25519.pub'), 'utf8') + readFileSync(join(dir, 'id_encrypted.pub'), 'utf8'),
  );
  const binDir = join(dir, 'bin');
  mkdirSync(binDir);
  const bashEnv = join(dir, 'bash_env');
  writeFileSync(bashEnv, `export PATH=${binDir}:$PATH\n${options.bashrc ?? ''}\n`);
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const home = join(dir, 'home');
  mkdirSync(home);
  // bash run by sshd reads ~/.bashrc and then stops: it never reads BASH_ENV (only the shells it starts do).
  writeFileSync(join(home, '.bashrc'), `. ${bashEnv}\n`);

  const port = await freePort();
  const logFile = join(dir, 'sshd.log');
  const config = join(dir, 'sshd_config');
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_ed25519')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'UsePAM no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      'LogLevel VERBOSE',
      `MaxSessions ${options.maxSessions ?? 10}`,
      'MaxStartups 100',
      'UseDNS no',
      // SetEnv overrides sshd's defaults (HOME included).
      `SetEnv BASH_ENV=${bashEnv}${options.userHome ? '' : ` HOME=${home}`}`,
      'Subsystem sftp internal-sftp',
      '',
    ].join('\n'),
  );
  const hostPub = readFileSync(join(dir, 'host_ed25519.pub'), 'utf8').split(' ');
  const otherPub = readFileSync(join(dir, 'other_host_ed25519.pub'), 'utf8').split(' ');
  const knownHostsFile = join(dir, 'known_hosts');
  writeFileSync(knownHostsFile, `[127.0.0.1]:${port} ${hostPub[0]} ${hostPub[1]}\n`);
  const wrongKnownHostsFile = join(dir, 'known_hosts_wrong');
  writeFileSync(wrongKnownHostsFile, `[127.0.0.1]:${port} ${otherPub[0]} ${otherPub[1]}\n`);
  const hostKeyFingerprint = execFileSync('ssh-keygen', ['-lf', join(dir, 'host_ed25519.pub')], {
    encoding: 'utf8',
  }).split(' ')[1]!;

  let child: ChildProcess;
  const start = async () => {
    child = spawn(SSHD, ['-D', '-f', config, '-E', logFile], { stdio: 'ignore' });
    await waitForPort(port, 30_000, child, logFile);
  };
  const stopChild = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    // Per-connection sshd processes outlive the listener; end them too so connections really drop.
    try {
      execFileSync('pkill', ['-TERM', '-P', String(child.pid)]);
    } catch {
      /* no sessions */
    }
    child.kill('SIGTERM');
    await gone;
  };
  await start();
  const log = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
  return {
    port,
    user: userInfo().username,
    dir,
    home: options.userHome ? userInfo().homedir : home,
    identityFile: join(dir, 'id_ed25519'),
    encryptedIdentityFile: join(dir, 'id_encrypted'),
    passphrase,
    knownHostsFile,
    wrongKnownHostsFile,
    hostKeyFingerprint,
    binDir,
    log,
    connectionCount: () => (log().match(/Connection from 127\.0\.0\.1 port \d+/g) ?? []).length,
    restart: async () => {
      await stopChild();
      await start();
    },
    stop: async () => {
      await stopChild();
      // Session processes (sshd children) end with their connections; the folder goes.
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
