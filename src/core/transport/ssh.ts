import { createHash } from 'node:crypto';
import { constants as fsConstants, existsSync, statSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Duplex, Readable } from 'node:stream';
import {
  Client,
  OpenSSHAgent,
  utils,
  type AuthenticationType,
  type ClientChannel,
  type ConnectConfig,
  type IdentityCallback,
  type ParsedKey,
} from 'ssh2';
import { isKnownGoodError, KnownGoodError, messageOf } from '../errors';
import { sshAddress as endpointName, type SshEndpoint } from '../hosts';
import { appendKnownHost, checkHostKey, fingerprint, keyTypeOf, knownHostsName, readKnownHosts } from '../knownHosts';
import { shellJoin } from '../quote';
import { abortableStart, collect } from './collect';
import { authFailure, connectTimeout, hostKeyChanged, socketFailure, type AuthFacts } from './sshErrors';
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
  /**
   * OpenSSH allows 10 sessions per connection by default; stay below it. A server that allows fewer (MaxSessions)
   * refuses the excess: that limit is learned and the excess waits in the queue.
   */
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

/** An OpenSSH agent whose key count is reported as it is read (ssh2 asks once per connection). */
class CountingAgent extends OpenSSHAgent {
  constructor(
    socket: string,
    private readonly counted: (n: number | undefined) => void,
  ) {
    super(socket);
  }

  override getIdentities(cb: IdentityCallback<ParsedKey>): void {
    super.getIdentities((err, keys) => {
      this.counted(err ? undefined : (keys?.length ?? 0));
      cb(err, keys);
    });
  }
}

export function defaultIdentityFiles(): string[] {
  return ['id_ed25519', 'id_ecdsa', 'id_rsa'].map((n) => join(homedir(), '.ssh', n));
}

/** A slot in the channel queue: `seq` keeps its place when it has to queue again. */
interface Slot {
  seq: number;
  release(): void;
}

/**
 * A counting semaphore: channels beyond the limit wait in order. The limit starts at maxChannels and drops to what
 * the server really allows when it refuses a session (sshd's MaxSessions); while lowered it rises by one every
 * RECHECK_MS, so a limit learned from a passing refusal does not stay.
 */
class ChannelLimit {
  private static readonly RECHECK_MS = 10_000;
  private active = 0;
  private max: number;
  private loweredAt = 0;
  private nextSeq = 0;
  private readonly waiting: Array<{ seq: number; grant(): void }> = [];
  constructor(private readonly ceiling: number) {
    this.max = ceiling;
  }

  /** The limit last learned from a refusal (for the log: said once, not at every re-check). */
  learned: number | undefined;

  /**
   * The server refused a session while `open` of ours were open: that is its limit for now. From 3 up one session
   * stays free for the channel that stops a command (a timeout must not wait for the command it stops).
   */
  learn(open: number): number {
    this.learned = open;
    this.max = Math.max(1, Math.min(this.ceiling, open >= 3 ? open - 1 : open));
    this.loweredAt = Date.now();
    return this.max;
  }

  /** Waits for a slot; aborting leaves the queue (rejecting with the signal's reason). */
  acquire(signal?: AbortSignal, seq = this.nextSeq++): Promise<Slot> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason as Error);
      const onAbort = () => {
        const i = this.waiting.indexOf(waiter);
        if (i < 0) return;
        this.waiting.splice(i, 1);
        reject(signal!.reason as Error);
      };
      const waiter = {
        seq,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve(this.slot(seq));
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const at = this.waiting.findIndex((w) => w.seq > seq);
      this.waiting.splice(at < 0 ? this.waiting.length : at, 0, waiter);
      this.pump();
    });
  }

  private slot(seq: number): Slot {
    this.active++;
    let released = false;
    return {
      seq,
      release: () => {
        if (released) return;
        released = true;
        this.active--;
        this.pump();
      },
    };
  }

  private pump(): void {
    if (this.max < this.ceiling && Date.now() - this.loweredAt > ChannelLimit.RECHECK_MS) {
      this.max++;
      this.loweredAt = Date.now();
    }
    while (this.waiting.length > 0 && this.active < this.max) this.waiting.shift()!.grant();
  }
}

/** A deadline that stops counting while a person is being asked something (a passphrase, a host key). */
class PausableDeadline {
  private left: number;
  private since = 0;
  private timer: NodeJS.Timeout | undefined;
  private paused = 0;
  private over = false;
  constructor(
    ms: number,
    private readonly expire: () => void,
  ) {
    this.left = ms;
    this.run();
  }

  private run(): void {
    this.since = Date.now();
    this.timer = setTimeout(() => {
      this.over = true;
      this.expire();
    }, this.left);
  }

  async during<T>(asking: () => Promise<T>): Promise<T> {
    if (this.paused++ === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.left -= Date.now() - this.since;
    }
    try {
      return await asking();
    } finally {
      if (--this.paused === 0 && !this.over && this.left !== Infinity) this.run();
    }
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.left = Infinity;
  }
}

/** Larger than any private key OpenSSH writes (RSA 16384 is ~12 KiB). */
export const MAX_IDENTITY_BYTES = 1024 * 1024;

function fileKind(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isDirectory()) return 'a folder';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * Reads a private key file without ever blocking: opened non-blocking and checked to be a regular file of at most
 * MAX_IDENTITY_BYTES before reading (a synchronous read of a FIFO hangs Node, connect timeout and all).
 * Fails with a KnownGoodError naming the file and what is wrong with it.
 */
export async function readIdentityFile(file: string): Promise<Buffer> {
  let fh: FileHandle;
  try {
    fh = await open(file, fsConstants.O_RDONLY | (fsConstants.O_NONBLOCK ?? 0));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new KnownGoodError('not-found', `identity file ${file} does not exist`);
    if (code === 'EACCES' || code === 'EPERM')
      throw new KnownGoodError('permission-denied', `identity file ${file} cannot be read (permission denied)`);
    throw new KnownGoodError('settings', `identity file ${file} cannot be opened: ${messageOf(e)}`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile())
      throw new KnownGoodError('settings', `identity file ${file} is ${fileKind(st)}, not a private key file`);
    if (st.size > MAX_IDENTITY_BYTES)
      throw new KnownGoodError(
        'settings',
        `identity file ${file} is ${st.size} bytes: too large for a private key (at most ${MAX_IDENTITY_BYTES})`,
      );
    const buf = Buffer.alloc(MAX_IDENTITY_BYTES + 1);
    let n = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, n, buf.length - n, n);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > MAX_IDENTITY_BYTES)
        throw new KnownGoodError('settings', `identity file ${file} grew past ${MAX_IDENTITY_BYTES} bytes while read`);
    }
    return buf.subarray(0, n);
  } catch (e) {
    throw e instanceof KnownGoodError
      ? e
      : new KnownGoodError('settings', `identity file ${file} cannot be read: ${messageOf(e)}`);
  } finally {
    await fh.close();
  }
}

/** Channel-open refusals sshd sends when a session cannot start (MaxSessions reached, or one still tearing down). */
const OPEN_REFUSED = /open failed/i;

/** `p`, or its signal's reason as soon as the signal aborts. */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * One pooled SSH connection to one endpoint: opened lazily on first use, shared by every operation, re-opened on
 * the next use after it drops. Channels are limited and queued.
 */
export class SshConnection {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private readonly limit: ChannelLimit;
  /** Sessions of ours the server has open on the current connection, and when one last closed. */
  private sessions = { open: 0, lastClose: 0 };
  /** Connections made so far (for tests and the log). */
  connects = 0;
  /** Replaced in the pool: close as soon as no command of ours runs on it. */
  private retiring = false;

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
    const facts: AuthFacts = {
      user: e.user,
      where: `${e.host}:${e.port}`,
      attempts: [],
      agentSocket: undefined,
      agentSocketExists: false,
      defaultKeysMissing: [],
      serverMethods: undefined,
    };
    // The connect timeout, paused while a person is asked something (ssh2's own readyTimeout cannot pause).
    let deadline: PausableDeadline | undefined;
    const asking = <T>(ask: () => Promise<T>): Promise<T> => (deadline ? deadline.during(ask) : ask());
    const auth = this.authMethods(facts, asking);

    const client = new Client();
    const config: ConnectConfig = {
      host: e.host,
      port: e.port,
      username: e.user,
      readyTimeout: 0,
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
          failure = hostKeyChanged(
            knownHostsName(e.host, e.port),
            verdict.expected,
            verdict.line,
            opts.knownHostsFiles[0] ?? 'known_hosts',
            fp,
          );
          return verify(false);
        }
        asking(() =>
          opts.prompts.confirmHostKey({
            host: e.host,
            port: e.port,
            keyType: keyTypeOf(key),
            fingerprint: fp,
            otherTypes: verdict.otherTypes,
          }),
        )
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
      deadline = new PausableDeadline(opts.connectTimeoutMs, () => {
        if (isReady) return;
        reject(this.timedOut());
        client.destroy();
      });
      client.once('ready', () => {
        isReady = true;
        deadline?.clear();
        this.connects++;
        this.client = client;
        this.sessions = { open: 0, lastClose: 0 };
        log(`connected to ${this.name}${e.proxyJump ? ` via ${endpointName(e.proxyJump)}` : ''}`);
        resolve(client);
      });
      client.on('error', (err: Error & { level?: string; code?: string }) => {
        if (isReady) {
          log(`${this.name}: ${err.message}`);
          return;
        }
        deadline?.clear();
        reject(failure ?? this.describeConnectError(err, facts));
      });
      client.on('close', () => {
        if (this.client === client) {
          this.client = undefined;
          log(`connection to ${this.name} closed`);
        }
        if (!isReady) {
          deadline?.clear();
          reject(failure ?? new KnownGoodError('unreachable', `${this.name} closed the connection during set-up`));
        }
      });
      client.connect(config);
      // Nagle's algorithm costs ~85 ms per exec channel on small writes.
      client.setNoDelay(true);
    });
  }

  private timedOut(): KnownGoodError {
    return connectTimeout(this.endpoint.host, this.endpoint.port, Math.round(this.options.connectTimeoutMs / 1000));
  }

  private describeConnectError(err: Error & { level?: string; code?: string }, facts: AuthFacts): KnownGoodError {
    if (err.level === 'client-timeout') return this.timedOut();
    if (err.level === 'client-authentication') return authFailure(facts);
    return socketFailure(this.endpoint.host, this.endpoint.port, err.code, err.message);
  }

  /** The methods OpenSSH would try, in its order: agent, identity files, keyboard-interactive, password. */
  private authMethods(
    facts: AuthFacts,
    asking: <T>(ask: () => Promise<T>) => Promise<T>,
  ): (left: AuthenticationType[] | null) => Promise<unknown> {
    const e = this.endpoint;
    const opts = this.options;
    const log = opts.log ?? (() => undefined);
    const own = new Set(e.identityFiles);
    const agent = opts.agent ?? process.env['SSH_AUTH_SOCK'];
    const keyFiles = [...new Set([...e.identityFiles, ...(opts.defaultIdentityFiles ?? defaultIdentityFiles())])];
    type Step = () => Promise<unknown>;
    const steps: Array<{ type: AuthenticationType; run: Step }> = [];
    const attempts = facts.attempts;
    facts.agentSocket = agent || undefined;
    facts.agentSocketExists = !!agent && existsSync(agent);
    if (agent && facts.agentSocketExists) {
      steps.push({
        type: 'publickey',
        run: () => {
          const attempt = {
            kind: 'agent' as const,
            socket: agent,
            keys: undefined as number | undefined,
            refused: false,
          };
          attempts.push(attempt);
          // The agent's answer is counted: "the agent has no identities" is the usual story of a failed login.
          return Promise.resolve({
            type: 'agent',
            username: e.user,
            agent: new CountingAgent(agent, (n) => (attempt.keys = n)),
          });
        },
      });
    }
    for (const file of keyFiles) {
      steps.push({
        type: 'publickey',
        run: async () => {
          let data: Buffer;
          try {
            data = await readIdentityFile(file);
          } catch (err) {
            // A default key that is not there is normal; anything else is named (OpenSSH warns and goes on too).
            if (!own.has(file) && isKnownGoodError(err, 'not-found')) {
              facts.defaultKeysMissing.push(file);
              return undefined;
            }
            attempts.push({
              kind: 'key-unusable',
              file,
              why: messageOf(err).replace(`identity file ${file} `, ''),
            });
            log(`${this.name}: ${messageOf(err)}`);
            return undefined;
          }
          let parsed = utils.parseKey(data);
          let passphrase: string | undefined;
          for (
            let attempt = 1;
            parsed instanceof Error && /encrypt|passphrase/i.test(parsed.message) && attempt <= 3;
            attempt++
          ) {
            const n = attempt;
            passphrase = opts.prompts.passphrase ? await asking(() => opts.prompts.passphrase!(file, n)) : undefined;
            if (passphrase === undefined) {
              attempts.push({ kind: 'key-unusable', file, why: 'is encrypted and its passphrase was not given' });
              return undefined;
            }
            parsed = utils.parseKey(data, passphrase);
          }
          if (parsed instanceof Error) {
            attempts.push({ kind: 'key-unusable', file, why: `is not a usable key: ${parsed.message}` });
            return undefined;
          }
          attempts.push({ kind: 'key', file, own: own.has(file), refused: false });
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
      const ask = (q: { user: string; host: string; prompt: string }) => asking(() => opts.prompts.password!(q));
      steps.push({
        type: 'keyboard-interactive',
        run: () => {
          // Counted as tried only once the server asks something: one that does not take it refuses it at once,
          // and "tried: keyboard-interactive" would hide the real story (no key was offered).
          const attempt = { kind: 'keyboard-interactive' as const, refused: false };
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
              if (!attempts.includes(attempt)) attempts.push(attempt);
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
          attempts.push({ kind: 'password', refused: false });
          return { type: 'password', username: e.user, password };
        },
      });
    }
    let i = 0;
    return async (left) => {
      // Called again after a method was sent: the server refused it (ssh2 asks for the next one on
      // USERAUTH_FAILURE), and `left` is what it would still take.
      const last = attempts.at(-1);
      if (last && last.kind !== 'key-unusable' && i > 0) last.refused = true;
      if (left) facts.serverMethods = [...left];
      while (i < steps.length) {
        const step = steps[i++]!;
        if (left && !left.includes(step.type)) continue;
        const method = await step.run();
        if (method) return method;
      }
      return false;
    };
  }

  /**
   * Opens an exec channel, queued behind the channel limit. Aborting `signal` before the channel is open rejects at
   * once with its reason; a channel the server opens after that is stopped (see SpawnOptions.signal).
   */
  async open(argv: readonly string[], pty?: SpawnOptions['pty'], signal?: AbortSignal): Promise<ProcessHandle> {
    const client = await untilAborted(this.ready(), signal);
    const slot = await this.limit.acquire(signal);
    return abortableStart(this.openOnSlot(client, slot, argv, pty, signal), signal);
  }

  private async openOnSlot(
    client: Client,
    slot: Slot,
    argv: readonly string[],
    pty: SpawnOptions['pty'],
    signal: AbortSignal | undefined,
  ): Promise<ProcessHandle> {
    const log = this.options.log ?? (() => undefined);
    const sessions = this.sessions;
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
            sessions.open++;
            ch.once('close', (code?: number | null, sig?: string) => {
              sessions.open--;
              sessions.lastClose = Date.now();
              closed({ code, signal: sig, connected: !!this.client });
              if (this.retiring && sessions.open === 0) this.close();
            });
            resolve(ch);
          },
        ),
      );
    let channel: ClientChannel | undefined;
    for (let attempt = 0; !channel; attempt++) {
      try {
        channel = await openOnce();
      } catch (err) {
        if (this.client === client && OPEN_REFUSED.test(messageOf(err)) && !signal?.aborted) {
          const open = sessions.open;
          // sshd refuses a session when MaxSessions are open, and also for a moment after one closed here (it
          // counts a session until its process is reaped). A refusal with none of ours closing lately is the
          // limit: learn it and queue behind the sessions that are open.
          if (open > 0 && (attempt >= 3 || Date.now() - sessions.lastClose > 500)) {
            const known = this.limit.learned === open;
            const max = this.limit.learn(open);
            if (!known)
              log(`${this.name} refused a session with ${open} open (sshd MaxSessions?): at most ${max} at a time`);
            slot.release();
            slot = await this.limit.acquire(signal, slot.seq);
            attempt = -1;
            continue;
          }
          if (attempt < 8) {
            await sleep(25 * 2 ** attempt);
            continue;
          }
        }
        slot.release();
        throw new KnownGoodError('connection-lost', `could not open a channel on ${this.name}: ${messageOf(err)}`);
      }
    }
    const exited = closing.then(({ code, signal: sig, connected }) => {
      slot.release();
      if (code === undefined && !connected)
        throw new KnownGoodError('connection-lost', `the connection to ${this.name} dropped while a command ran`);
      return { exitCode: code ?? null, ...(sig ? { exitSignal: sig.replace(/^SIG/, '') } : {}) };
    });
    exited.catch(() => undefined);
    let pid: number | undefined;
    let pending: string | undefined;
    const signalGroup = (sig: string) => {
      if (pid === undefined) pending = sig;
      else this.sendSignal(client, sig, pid);
    };
    const ch = channel;
    const stderr: Readable = marker
      ? stripPidMarker(ch.stderr, marker, (p) => {
          pid = p;
          if (pending) signalGroup(pending);
        })
      : ch.stderr;
    return {
      stdin: ch,
      stdout: ch,
      stderr,
      exited,
      resize: ({ cols, rows }) => ch.setWindow(rows, cols, 0, 0),
      remoteGroup: () => pid,
      kill: (sig = 'TERM', killOptions) => {
        try {
          ch.signal(sig);
        } catch {
          /* channel gone */
        }
        if (marker) signalGroup(sig);
        if (sig === 'KILL') ch.close();
        else setTimeout(() => ch.close(), killOptions?.closeAfterMs ?? 1500).unref();
      },
    };
  }

  /**
   * Signals a remote process group from a channel of its own, outside the queue: stopping must not wait behind the
   * work it stops. A refused channel (MaxSessions) is tried again for a while; on a connection that does not answer
   * the request waits in it and runs once the server reads it. Without a connection nothing can be sent any more.
   */
  private sendSignal(client: Client, sig: string, pid: number, attempt = 0): void {
    const log = this.options.log ?? (() => undefined);
    const sessions = this.sessions;
    const failed = (why: string) =>
      log(`${this.name}: could not send SIG${sig} to remote process group ${pid} (${why}); it may still be running`);
    try {
      client.exec(signalCommand(sig, pid), (err, ch) => {
        if (err) {
          if (this.client === client && OPEN_REFUSED.test(err.message) && attempt < 40) {
            setTimeout(() => this.sendSignal(client, sig, pid, attempt + 1), Math.min(1000, 25 * 2 ** attempt));
          } else failed(err.message);
          return;
        }
        sessions.open++;
        ch.on('data', () => undefined);
        ch.stderr.on('data', () => undefined);
        ch.on('close', () => {
          sessions.open--;
          sessions.lastClose = Date.now();
        });
      });
    } catch (e) {
      failed(messageOf(e));
    }
  }

  close(): void {
    this.retiring = false;
    this.client?.end();
    this.client = undefined;
  }

  /** Replaced by a connection with other options: closes now if nothing runs on it, else when the last command ends. */
  closeWhenIdle(): void {
    if (this.sessions.open === 0 && !this.connecting) this.close();
    else this.retiring = true;
  }
}

/**
 * Runs argv on the pool's connection for one endpoint. The connection is looked up at every call, so a key file
 * fixed since the last call (same path, new contents) is used by the next one.
 */
export class SshTransport implements Transport {
  readonly id: string;
  constructor(
    private readonly pool: SshPool,
    private readonly endpoint: SshEndpoint,
    readonly label: string,
  ) {
    this.id = `ssh:${endpointName(endpoint)}`;
  }

  private get connection(): SshConnection {
    return this.pool.connection(this.endpoint);
  }

  async exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    // Connecting has its own timeout (paused while a person answers a prompt); the command's starts after it and
    // covers the wait for a channel too.
    const connection = this.connection;
    await connection.ready();
    const res = await collect(
      (signal) => connection.open(argv, undefined, signal),
      options,
      () => `${argv[0]} on ${this.label}`,
    );
    if (res.exitCode === 127 && /(command not found|not found|No such file)/.test(res.stderr) && res.stdout === '') {
      throw new KnownGoodError(
        'command-not-found',
        `${argv[0]} not found on ${this.label}: ${res.stderr.trim().split('\n').pop()}`,
      );
    }
    return res;
  }

  spawn(argv: readonly string[], options: SpawnOptions = {}): Promise<ProcessHandle> {
    return this.connection.open(argv, options.pty, options.signal);
  }

  dispose(): void {
    /* the pool owns the connection */
  }
}

/** What identifies a key file's contents without reading it (a FIFO named by mistake must not block here). */
function fileFingerprint(file: string): string {
  try {
    const st = statSync(file, { throwIfNoEntry: false });
    return st ? `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}` : 'absent';
  } catch (e) {
    return `unreadable ${(e as NodeJS.ErrnoException).code ?? ''}`;
  }
}

/** Every setting that decides how an endpoint connects, jump hosts included (stable: fixed field order). */
function endpointSettings(e: SshEndpoint): unknown {
  return [e.user, e.host, e.port, e.alias, e.identityFiles, e.proxyJump ? endpointSettings(e.proxyJump) : null];
}

function identityFilesOf(e: SshEndpoint): string[] {
  return [...e.identityFiles, ...(e.proxyJump ? identityFilesOf(e.proxyJump) : [])];
}

/**
 * One connection per set of connection options, shared by every transport and operation. The key is a digest of all
 * of them: user, host, port, alias, identity files (path and the file's identity, size and times, so a key file
 * replaced in place counts as a change), the jump chain, and the pool's default key files and agent. A changed option
 * therefore never reuses a connection (or a failed attempt) made with the old ones; the connection made with the old
 * contents of the same settings is replaced (closed once its running commands end).
 */
export class SshPool {
  private readonly connections = new Map<string, SshConnection>();
  /** For each endpoint's settings, the key of the connection made for them last. */
  private readonly latest = new Map<string, string>();
  constructor(private readonly options: SshOptions) {}

  private settingsKey(e: SshEndpoint): string {
    return JSON.stringify(endpointSettings(e));
  }

  /** The digest of everything a connection to `e` depends on. */
  private key(e: SshEndpoint): string {
    const o = this.options;
    const files = [...identityFilesOf(e), ...(o.defaultIdentityFiles ?? defaultIdentityFiles())];
    const agent = o.agent ?? process.env['SSH_AUTH_SOCK'] ?? '';
    const facts = [endpointSettings(e), files.map((f) => [f, fileFingerprint(f)]), agent];
    return createHash('sha256').update(JSON.stringify(facts)).digest('hex').slice(0, 32);
  }

  connection(e: SshEndpoint): SshConnection {
    const k = this.key(e);
    const settings = this.settingsKey(e);
    let c = this.connections.get(k);
    if (!c) {
      const before = this.latest.get(settings);
      if (before !== undefined) this.retire(before);
      c = new SshConnection(e, this.options, this);
      this.connections.set(k, c);
    }
    this.latest.set(settings, k);
    return c;
  }

  transport(e: SshEndpoint, label: string): SshTransport {
    return new SshTransport(this, e, label);
  }

  /** Connections in the pool now (for tests and the log). */
  get size(): number {
    return this.connections.size;
  }

  /** These settings are no longer used (a host was removed or changed in settings): close their connection. */
  release(e: SshEndpoint): void {
    const settings = this.settingsKey(e);
    const k = this.latest.get(settings);
    this.latest.delete(settings);
    if (k !== undefined) this.retire(k);
  }

  private retire(k: string): void {
    const c = this.connections.get(k);
    this.connections.delete(k);
    c?.closeWhenIdle();
  }

  /** Closes every connection to the endpoint's user@host:port, whatever the key it was made with. */
  disconnect(e: SshEndpoint): void {
    for (const c of this.connections.values()) if (c.name === endpointName(e)) c.close();
  }

  dispose(): void {
    for (const c of this.connections.values()) c.close();
    this.connections.clear();
    this.latest.clear();
  }
}
