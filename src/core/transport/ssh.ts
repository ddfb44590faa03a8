import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Duplex, Readable } from 'node:stream';
import { Client, utils, type AuthenticationType, type ClientChannel, type ConnectConfig } from 'ssh2';
import { KnownGoodError, messageOf } from '../errors';
import { sshAddress as endpointName, type SshEndpoint } from '../hosts';
import { appendKnownHost, checkHostKey, fingerprint, keyTypeOf, knownHostsName, readKnownHosts } from '../knownHosts';
import { shellJoin } from '../quote';
import { collect } from './collect';
import { newPidMarker, reportPidThenExec, signalCommand, stripPidMarker } from './pidMarker';
import type { ExecOptions, ExecResult, ProcessHandle, SpawnOptions, Transport } from './types';

export interface HostKeyQuestion {
  host: string;
  port: number;
  keyType: string;
  fingerprint: string;
  /** Key types known_hosts lists for this host (a different type is offered now). */
  otherTypes: string[];
}

/** How the core asks a person; the VS Code layer answers with input boxes, the CLI with its TTY. */
export interface SshPrompts {
  /** An unknown host key: true accepts it and appends it to known_hosts (OpenSSH's accept-new). */
  confirmHostKey(q: HostKeyQuestion): Promise<boolean>;
  passphrase?(keyFile: string, attempt: number): Promise<string | undefined>;
  password?(q: { user: string; host: string; prompt: string }): Promise<string | undefined>;
}

export interface SshOptions {
  /** known_hosts files read, in order; new keys are appended to the first. */
  knownHostsFiles: string[];
  connectTimeoutMs: number;
  keepaliveIntervalMs?: number;
  /** OpenSSH allows 10 sessions per connection by default; stay below it. */
  maxChannels?: number;
  /** ssh-agent socket (default $SSH_AUTH_SOCK). */
  agent?: string | undefined;
  /** Identity files tried after the host's own (default ~/.ssh/id_ed25519, id_ecdsa, id_rsa). */
  defaultIdentityFiles?: string[];
  prompts: SshPrompts;
  log?: (line: string) => void;
}

export function defaultKnownHostsFile(): string {
  return join(homedir(), '.ssh', 'known_hosts');
}

export function defaultIdentityFiles(): string[] {
  return ['id_ed25519', 'id_ecdsa', 'id_rsa'].map((n) => join(homedir(), '.ssh', n));
}

/** A counting semaphore: channels beyond the limit wait in order. */
class ChannelLimit {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly max: number) {}
  async acquire(): Promise<() => void> {
    if (this.active >= this.max) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      this.waiting.shift()?.();
    };
  }
}

/**
 * One pooled SSH connection to one endpoint: opened lazily on first use, shared by every operation, re-opened on
 * the next use after it drops. Channels are limited and queued.
 */
export class SshConnection {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private readonly limit: ChannelLimit;
  /** Connections made so far (for tests and the log). */
  connects = 0;

  constructor(
    readonly endpoint: SshEndpoint,
    private readonly options: SshOptions,
    private readonly pool: SshPool,
  ) {
    this.limit = new ChannelLimit(options.maxChannels ?? 8);
  }

  get name(): string {
    return endpointName(this.endpoint);
  }

  get connected(): boolean {
    return this.client !== undefined;
  }

  async ready(): Promise<Client> {
    if (this.client) return this.client;
    if (!this.connecting) {
      this.connecting = this.connect().finally(() => {
        this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  private async connect(): Promise<Client> {
    const e = this.endpoint;
    const opts = this.options;
    const log = opts.log ?? (() => undefined);
    let sock: Duplex | undefined;
    if (e.proxyJump) {
      const jump = this.pool.connection(e.proxyJump);
      const jc = await jump.ready();
      sock = await new Promise<Duplex>((resolve, reject) =>
        jc.forwardOut('127.0.0.1', 0, e.host, e.port, (err, ch) =>
          err
            ? reject(
                new KnownGoodError('unreachable', `${jump.name} could not reach ${e.host}:${e.port}: ${err.message}`),
              )
            : resolve(ch),
        ),
      );
    }
    const entries = await readKnownHosts(opts.knownHostsFiles);
    const names = [knownHostsName(e.host, e.port)];
    if (e.alias !== e.host) names.push(knownHostsName(e.alias, e.port));
    let failure: KnownGoodError | undefined;
    const tried: string[] = [];
    const auth = this.authMethods(tried);

    const client = new Client();
    const config: ConnectConfig = {
      host: e.host,
      port: e.port,
      username: e.user,
      readyTimeout: opts.connectTimeoutMs,
      keepaliveInterval: opts.keepaliveIntervalMs ?? 15000,
      keepaliveCountMax: 3,
      ...(sock ? { sock } : {}),
      hostVerifier: (key: Buffer, verify: (ok: boolean) => void) => {
        const verdict = checkHostKey(entries, names, key);
        const fp = fingerprint(key);
        if (verdict.status === 'known') return verify(true);
        if (verdict.status === 'revoked') {
          failure = new KnownGoodError(
            'host-key-rejected',
            `the host key of ${this.name} (${fp}) is marked @revoked in known_hosts`,
          );
          return verify(false);
        }
        if (verdict.status === 'changed') {
          failure = new KnownGoodError(
            'host-key-changed',
            `HOST KEY CHANGED for ${knownHostsName(e.host, e.port)}: known_hosts has ${verdict.expected.join(', ')} ` +
              `(line ${verdict.line} of ${opts.knownHostsFiles[0] ?? 'known_hosts'}), the server now offers ${fp}. ` +
              `Refusing to connect: this can be an attack. If the machine was reinstalled, remove the old line ` +
              `(ssh-keygen -R '${knownHostsName(e.host, e.port)}') and connect again.`,
            { expected: verdict.expected, actual: fp },
          );
          return verify(false);
        }
        opts.prompts
          .confirmHostKey({
            host: e.host,
            port: e.port,
            keyType: keyTypeOf(key),
            fingerprint: fp,
            otherTypes: verdict.otherTypes,
          })
          .then(async (ok) => {
            if (!ok) {
              failure = new KnownGoodError(
                'host-key-rejected',
                `the host key of ${this.name} (${fp}) was not accepted`,
              );
              return verify(false);
            }
            const file = opts.knownHostsFiles[0] ?? defaultKnownHostsFile();
            await appendKnownHost(file, e.host, e.port, key);
            log(`added ${knownHostsName(e.host, e.port)} ${keyTypeOf(key)} ${fp} to ${file}`);
            verify(true);
          })
          .catch((err: unknown) => {
            failure = new KnownGoodError(
              'host-key-rejected',
              `could not verify the host key of ${this.name}: ${messageOf(err)}`,
            );
            verify(false);
          });
      },
      authHandler: (methodsLeft, _partial, next) => {
        // ssh2 accepts `false` for "no more methods" though its types do not say so.
        const done = next as (a: unknown) => void;
        auth(methodsLeft).then(done, () => done(false));
      },
    };

    return new Promise<Client>((resolve, reject) => {
      let isReady = false;
      client.once('ready', () => {
        isReady = true;
        this.connects++;
        this.client = client;
        log(`connected to ${this.name}${e.proxyJump ? ` via ${endpointName(e.proxyJump)}` : ''}`);
        resolve(client);
      });
      client.on('error', (err: Error & { level?: string; code?: string }) => {
        if (isReady) {
          log(`${this.name}: ${err.message}`);
          return;
        }
        reject(failure ?? this.describeConnectError(err, tried));
      });
      client.on('close', () => {
        if (this.client === client) {
          this.client = undefined;
          log(`connection to ${this.name} closed`);
        }
        if (!isReady)
          reject(failure ?? new KnownGoodError('unreachable', `${this.name} closed the connection during set-up`));
      });
      client.connect(config);
      // Nagle's algorithm costs ~85 ms per exec channel on small writes.
      client.setNoDelay(true);
    });
  }

  private describeConnectError(err: Error & { level?: string; code?: string }, tried: string[]): KnownGoodError {
    const where = `${this.endpoint.host}:${this.endpoint.port}`;
    if (err.level === 'client-timeout') {
      return new KnownGoodError(
        'timeout',
        `could not connect to ${where} within ${Math.round(this.options.connectTimeoutMs / 1000)} s (knownGood.connectTimeoutSeconds)`,
      );
    }
    if (err.level === 'client-authentication') {
      return new KnownGoodError(
        'auth-failed',
        `authentication as ${this.endpoint.user} on ${where} failed; tried: ${tried.join(', ') || 'nothing (no key, agent or password)'}. ` +
          `Check the user, set identityFile, or load the key into ssh-agent.`,
        { tried },
      );
    }
    switch (err.code) {
      case 'ECONNREFUSED':
        return new KnownGoodError(
          'unreachable',
          `${where} refused the connection: is sshd running and is the port right?`,
        );
      case 'ENOTFOUND':
      case 'EAI_AGAIN':
        return new KnownGoodError(
          'unreachable',
          `host name ${this.endpoint.host} not found (check the name or ~/.ssh/config)`,
        );
      case 'EHOSTUNREACH':
      case 'ENETUNREACH':
      case 'ETIMEDOUT':
        return new KnownGoodError('unreachable', `${where} is unreachable (${err.code}): check the network or VPN`);
      default:
        return new KnownGoodError('unreachable', `could not connect to ${where}: ${err.message}`);
    }
  }

  /** The methods OpenSSH would try, in its order: agent, identity files, keyboard-interactive, password. */
  private authMethods(tried: string[]): (left: AuthenticationType[] | null) => Promise<unknown> {
    const e = this.endpoint;
    const opts = this.options;
    const agent = opts.agent ?? process.env['SSH_AUTH_SOCK'];
    const keyFiles = [...new Set([...e.identityFiles, ...(opts.defaultIdentityFiles ?? defaultIdentityFiles())])];
    type Step = () => Promise<unknown>;
    const steps: Array<{ type: AuthenticationType; run: Step }> = [];
    if (agent && existsSync(agent)) {
      steps.push({
        type: 'publickey',
        run: () => {
          tried.push('ssh-agent');
          return Promise.resolve({ type: 'agent', username: e.user, agent });
        },
      });
    }
    for (const file of keyFiles) {
      steps.push({
        type: 'publickey',
        run: async () => {
          let data: Buffer;
          try {
            data = readFileSync(file);
          } catch {
            return undefined;
          }
          let parsed = utils.parseKey(data);
          let passphrase: string | undefined;
          for (
            let attempt = 1;
            parsed instanceof Error && /encrypt|passphrase/i.test(parsed.message) && attempt <= 3;
            attempt++
          ) {
            passphrase = await opts.prompts.passphrase?.(file, attempt);
            if (passphrase === undefined) {
              tried.push(`publickey ${file} (passphrase not given)`);
              return undefined;
            }
            parsed = utils.parseKey(data, passphrase);
          }
          if (parsed instanceof Error) {
            tried.push(`publickey ${file} (${parsed.message})`);
            return undefined;
          }
          tried.push(`publickey ${file}`);
          return {
            type: 'publickey',
            username: e.user,
            key: data,
            ...(passphrase !== undefined ? { passphrase } : {}),
          };
        },
      });
    }
    if (opts.prompts.password) {
      const ask = (q: { user: string; host: string; prompt: string }) => opts.prompts.password!(q);
      steps.push({
        type: 'keyboard-interactive',
        run: () => {
          tried.push('keyboard-interactive');
          return Promise.resolve({
            type: 'keyboard-interactive',
            username: e.user,
            prompt: (
              _name: string,
              _instructions: string,
              _lang: string,
              prompts: Array<{ prompt: string; echo?: boolean }>,
              finish: (answers: string[]) => void,
            ) => {
              void (async () => {
                const answers: string[] = [];
                for (const p of prompts)
                  answers.push((await ask({ user: e.user, host: e.host, prompt: p.prompt })) ?? '');
                finish(answers);
              })();
            },
          });
        },
      });
      steps.push({
        type: 'password',
        run: async () => {
          const password = await ask({ user: e.user, host: e.host, prompt: `Password for ${endpointName(e)}` });
          if (password === undefined) return undefined;
          tried.push('password');
          return { type: 'password', username: e.user, password };
        },
      });
    }
    let i = 0;
    return async (left) => {
      while (i < steps.length) {
        const step = steps[i++]!;
        if (left && !left.includes(step.type)) continue;
        const method = await step.run();
        if (method) return method;
      }
      return false;
    };
  }

  /** Opens an exec channel (queued behind the channel limit). */
  async open(argv: readonly string[], pty?: SpawnOptions['pty']): Promise<ProcessHandle> {
    const client = await this.ready();
    const release = await this.limit.acquire();
    // `exec` lets the remote shell replace itself. sshd makes that shell a session (and process-group) leader, so
    // the PID it prints first is the group to signal: OpenSSH ignores "signal" requests on sessions without a pty,
    // and closing the channel does not end the process either.
    const marker = pty ? undefined : newPidMarker();
    const command = marker ? reportPidThenExec(marker, argv) : `exec ${shellJoin(argv)}`;
    // The listener goes on inside the exec callback: a fast command's output, exit status and close can arrive in
    // the same read as the exec reply. ssh2 passes the exit status to 'close' (undefined when none came).
    let closed!: (end: { code: number | null | undefined; signal: string | undefined; connected: boolean }) => void;
    const closing = new Promise<Parameters<typeof closed>[0]>((r) => (closed = r));
    const openOnce = () =>
      new Promise<ClientChannel>((resolve, reject) =>
        client.exec(
          command,
          pty
            ? { pty: { rows: pty.rows, cols: pty.cols, term: pty.term ?? 'xterm-256color', width: 0, height: 0 } }
            : {},
          (err, ch) => {
            if (err) return reject(err);
            ch.once('close', (code?: number | null, signal?: string) =>
              closed({ code, signal, connected: !!this.client }),
            );
            resolve(ch);
          },
        ),
      );
    let channel: ClientChannel | undefined;
    for (let attempt = 0; !channel; attempt++) {
      try {
        channel = await openOnce();
      } catch (err) {
        // sshd refuses a session ("open failed") while it is still tearing down one that just closed here
        // (MaxSessions counts it until its process is reaped): a moment later there is room again.
        if (attempt < 8 && this.client === client && /open failed/i.test(messageOf(err))) {
          await new Promise((r) => setTimeout(r, 25 * 2 ** attempt));
          continue;
        }
        release();
        throw new KnownGoodError('connection-lost', `could not open a channel on ${this.name}: ${messageOf(err)}`);
      }
    }
    const exited = closing.then(({ code, signal, connected }) => {
      release();
      if (code === undefined && !connected)
        throw new KnownGoodError('connection-lost', `the connection to ${this.name} dropped while a command ran`);
      return { exitCode: code ?? null, ...(signal ? { exitSignal: signal.replace(/^SIG/, '') } : {}) };
    });
    exited.catch(() => undefined);
    let pid: number | undefined;
    let pending: string | undefined;
    const signalGroup = (signal: string) => {
      if (pid === undefined) {
        pending = signal;
        return;
      }
      // A channel of its own, outside the queue: stopping must not wait behind the work it stops. Without a
      // connection nothing can be sent any more (the process then sees its pipes close).
      try {
        client.exec(signalCommand(signal, pid), (err, ch) => {
          if (err) return;
          ch.on('data', () => undefined);
          ch.stderr.on('data', () => undefined);
          ch.on('close', () => undefined);
        });
      } catch {
        /* not connected any more */
      }
    };
    const stderr: Readable = marker
      ? stripPidMarker(channel.stderr, marker, (p) => {
          pid = p;
          if (pending) signalGroup(pending);
        })
      : channel.stderr;
    return {
      stdin: channel,
      stdout: channel,
      stderr,
      exited,
      resize: ({ cols, rows }) => channel.setWindow(rows, cols, 0, 0),
      kill: (signal = 'TERM') => {
        try {
          channel.signal(signal);
        } catch {
          /* channel gone */
        }
        if (marker) signalGroup(signal);
        if (signal === 'KILL') channel.close();
        else setTimeout(() => channel.close(), 1500).unref();
      },
    };
  }

  close(): void {
    this.client?.end();
    this.client = undefined;
  }
}

/** Runs argv on one SSH connection from the pool. */
export class SshTransport implements Transport {
  readonly id: string;
  constructor(
    private readonly connection: SshConnection,
    readonly label: string,
  ) {
    this.id = `ssh:${connection.name}`;
  }

  async exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    const handle = await this.connection.open(argv);
    const res = await collect(handle, options, () => `${argv[0]} on ${this.label}`);
    if (res.exitCode === 127 && /(command not found|not found|No such file)/.test(res.stderr) && res.stdout === '') {
      throw new KnownGoodError(
        'command-not-found',
        `${argv[0]} not found on ${this.label}: ${res.stderr.trim().split('\n').pop()}`,
      );
    }
    return res;
  }

  spawn(argv: readonly string[], options: SpawnOptions = {}): Promise<ProcessHandle> {
    return this.connection.open(argv, options.pty);
  }

  dispose(): void {
    /* the pool owns the connection */
  }
}

/** One connection per endpoint (user@host:port, via the same jump), shared by every transport and operation. */
export class SshPool {
  private readonly connections = new Map<string, SshConnection>();
  constructor(private readonly options: SshOptions) {}

  private key(e: SshEndpoint): string {
    return `${endpointName(e)}${e.proxyJump ? ` via ${this.key(e.proxyJump)}` : ''}`;
  }

  connection(e: SshEndpoint): SshConnection {
    const k = this.key(e);
    let c = this.connections.get(k);
    if (!c) {
      c = new SshConnection(e, this.options, this);
      this.connections.set(k, c);
    }
    return c;
  }

  transport(e: SshEndpoint, label: string): SshTransport {
    return new SshTransport(this.connection(e), label);
  }

  disconnect(e: SshEndpoint): void {
    this.connections.get(this.key(e))?.close();
  }

  dispose(): void {
    for (const c of this.connections.values()) c.close();
    this.connections.clear();
  }
}
