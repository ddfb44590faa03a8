import { newNonce } from '../util/nonce';
import { KnownGoodError, isKnownGoodError, messageOf } from '../errors';
import { asciiJson, parsePythonJson } from '../json';
import type { ProcessHandle, Transport } from '../transport/types';
import { HELPER_LOADER, HELPER_MODULES, oneShotProgram, probeSource } from './sources';
import {
  interpreterSchema,
  type Interpreter,
  type ProbeCall,
  type ProbeOutcome,
  type ProbeRunnerLike,
  type ProbeRunOptions,
} from './probe';
import { z } from 'zod';
import { probeErrorCode } from './codes';
import { whyFailed } from '../transport/collect';
import { DEFAULT_HELPER_SPARES, helperSparesSchema } from '../settings';

/** What the probe's process took of the host (kg_common.footprint): peak RSS and CPU seconds. */
const footprintSchema = z.object({ maxRssKb: z.number(), cpuS: z.number() });

const ms = z.number();
const timingSchema = z.object({
  how: z.string(),
  direct: z.boolean().optional(),
  parse: ms,
  compile: ms,
  handoff: ms,
  exec: ms,
  setup: ms,
  run: ms,
  frame: ms,
  pipe: ms,
  total: ms,
  at: z.number().optional(),
});

const envelopeSchema = z.union([
  z.object({
    ok: z.literal(true),
    result: z.unknown(),
    python: interpreterSchema,
    footprint: footprintSchema.nullish(),
    timing: timingSchema.optional(),
  }),
  z.object({
    ok: z.literal(false),
    error: z.object({ message: z.string(), code: z.string() }),
    python: interpreterSchema.optional(),
    footprint: footprintSchema.nullish(),
  }),
]);

export interface RunOptions extends ProbeRunOptions {
  /** Ask the resident helper where the request's time went (`ProbeOutcome.timing`). */
  timing?: boolean;
}

/** The framed JSON document in a probe's stdout; whatever a login shell printed around it is ignored. */
export function extractFramed(stdout: string, nonce: string): string | undefined {
  const begin = `@@KNOWN-GOOD-BEGIN ${nonce}@@\n`;
  const end = `\n@@KNOWN-GOOD-END ${nonce}@@`;
  const b = stdout.indexOf(begin);
  if (b < 0) return undefined;
  const e = stdout.indexOf(end, b + begin.length);
  if (e < 0) return undefined;
  return stdout.slice(b + begin.length, e);
}

/** A probe's envelope → its validated result, or the error it reported (naming the probe and the host). */
export function probeOutcome<R>(call: ProbeCall<R>, raw: unknown, where: string): ProbeOutcome<R> {
  const env = envelopeSchema.safeParse(raw);
  if (!env.success) {
    throw new KnownGoodError('bad-output', `probe ${call.probe} on ${where} returned a malformed document`);
  }
  if (!env.data.ok) {
    const probeCode = probeErrorCode(env.data.error.code);
    // The helper stopped the request at its deadline or on cancel: the same codes as the client's own.
    const code = probeCode === 'timeout' || probeCode === 'cancelled' ? probeCode : 'probe-failed';
    throw new KnownGoodError(code, `${call.probe} on ${where}: ${env.data.error.message}`, {
      probe: call.probe,
      probeCode,
      ...(env.data.footprint ? { footprint: env.data.footprint } : {}),
    });
  }
  const footprint = env.data.footprint ?? undefined;
  const timing = env.data.timing;
  return {
    value: call.parse(env.data.result),
    python: env.data.python,
    ...(footprint ? { footprint } : {}),
    ...(timing ? { timing } : {}),
  };
}

export interface ProbeRunnerOptions {
  /** Interpreter on the remote (host setting `python`, default python3). */
  python: string;
  /** Default per-request timeout. */
  timeoutMs: number;
  /** Set false to run every probe one-shot (no resident helper). */
  resident?: boolean;
  /** Children the helper keeps forked ahead of need once idle (`knownGood.helper.spares`; 1-8, default 4). */
  spares?: number;
  /** Idle time after which the helper keeps one spare only (default a minute; tests pass less). */
  shrinkAfterMs?: number;
}

/** How long the resident helper keeps its spares once idle before it keeps one only (kg_pool.SHRINK_S). */
export const HELPER_SHRINK_AFTER_MS = 60_000;

/**
 * The resident helper's command line: the loader, then the pool's words (python/kg_pool.py pool_options). Numbers
 * only, validated here and there: a bad one is this program's mistake, refused before anything starts.
 */
export function helperArgv(python: string, spares = DEFAULT_HELPER_SPARES, shrinkAfterMs = HELPER_SHRINK_AFTER_MS) {
  const n = helperSparesSchema.safeParse(spares);
  if (!n.success || !Number.isInteger(shrinkAfterMs) || shrinkAfterMs < 0 || shrinkAfterMs > 999_999_999) {
    throw new KnownGoodError(
      'internal',
      `the helper's spares must be an integer from 1 to 8 and its shrink time whole milliseconds (got ${spares}, ${shrinkAfterMs})`,
    );
  }
  return [python, '-u', '-c', HELPER_LOADER, '--spares', String(n.data), '--shrink-after-ms', String(shrinkAfterMs)];
}

/** The helper's pool of spares as its "status" op tells it (kg_pool.SparePool.pool_status). */
export const helperStatusSchema = z.object({
  spares: z.array(z.number().int()),
  asked: z.number().int(),
  target: z.number().int(),
  max: z.number().int(),
  shrinkAfterS: z.number(),
  idleS: z.number(),
  running: z.number().int(),
  /** The helper's own process id on the host. */
  pid: z.number().int(),
  zygote: z.number().int().nullable(),
  atRest: z.boolean(),
});
export type HelperStatus = z.infer<typeof helperStatusSchema>;

/**
 * Runs the Python probes of one host. Probes go through a resident helper (one long-lived interpreter per
 * connection that answers JSON-line requests) so that, once it is up, a request costs one round trip plus the
 * work. `runOnce` pipes the probe's source to a fresh interpreter, as the terminal and the CLI do.
 */
export class ProbeRunner implements ProbeRunnerLike {
  private helper: ResidentHelper | undefined;

  private readonly options: ProbeRunnerOptions;

  constructor(
    private readonly transport: Transport,
    options: ProbeRunnerOptions,
  ) {
    this.options = { ...options };
  }

  get python(): string {
    return this.options.python;
  }

  /** The per-request default; a settings change applies to the next request, helper kept. */
  get timeoutMs(): number {
    return this.options.timeoutMs;
  }

  set timeoutMs(ms: number) {
    this.options.timeoutMs = ms;
  }

  async run<R>(call: ProbeCall<R>, options: RunOptions = {}): Promise<ProbeOutcome<R>> {
    if (this.options.resident === false || options.fresh === true) return this.runOnce(call, options);
    const helper = this.residentHelper();
    const raw = await helper.request(
      call,
      options.timeoutMs ?? this.options.timeoutMs,
      options.signal,
      options.timing === true,
    );
    return probeOutcome(call, raw, this.transport.label);
  }

  /** A fresh interpreter for this one probe: `<python> - args…` with the program on stdin. */
  async runOnce<R>(call: ProbeCall<R>, options: RunOptions = {}): Promise<ProbeOutcome<R>> {
    const nonce = newNonce();
    const argv = [this.options.python, '-', ...call.args];
    let res;
    try {
      res = await this.transport.exec(argv, {
        stdin: oneShotProgram(call, nonce),
        timeoutMs: options.timeoutMs ?? this.options.timeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (e) {
      if (isKnownGoodError(e, 'command-not-found')) throw pythonNotFound(this.options.python, this.transport.label);
      throw e;
    }
    const framed = extractFramed(res.stdout, nonce);
    if (framed === undefined) {
      if (res.exitCode === 127) throw pythonNotFound(this.options.python, this.transport.label);
      throw new KnownGoodError(
        'probe-failed',
        `${call.probe} on ${this.transport.label} printed no result: ${whyFailed(res)}`,
      );
    }
    return probeOutcome(call, parsePythonJson(framed), this.transport.label);
  }

  /** The interpreter the resident helper runs (starting it if needed). */
  async interpreter(options: RunOptions = {}): Promise<Interpreter> {
    return this.residentHelper().ready(options.timeoutMs ?? this.options.timeoutMs);
  }

  /** `knownGood.helper.spares` changed: the next helper started (a reconnect) keeps that many. */
  set spares(n: number) {
    this.options.spares = n;
  }

  /** The resident helper's pool of spares (starting it if needed): what runs on the host besides requests. */
  async helperStatus(options: RunOptions = {}): Promise<HelperStatus> {
    const timeoutMs = options.timeoutMs ?? this.options.timeoutMs;
    const doc = await this.residentHelper().ask(timeoutMs, 'the helper status', options.signal, () => ({
      op: 'status',
    }));
    const status = z.object({ ok: z.literal(true), result: helperStatusSchema }).safeParse(doc);
    if (!status.success) {
      throw new KnownGoodError('bad-output', `the Known Good helper on ${this.transport.label} gave no status`);
    }
    return status.data.result;
  }

  private residentHelper(): ResidentHelper {
    if (!this.helper || this.helper.dead) {
      const argv = helperArgv(this.options.python, this.options.spares, this.options.shrinkAfterMs);
      this.helper = new ResidentHelper(this.transport, this.options.python, argv);
    }
    return this.helper;
  }

  dispose(): void {
    this.helper?.close();
    this.helper = undefined;
  }
}

export function pythonNotFound(python: string, label: string): KnownGoodError {
  return new KnownGoodError(
    'python-not-found',
    `${python} not found on ${label}: set knownGood.hosts[].python (or run "Known Good: Select Remote Python")`,
  );
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
  timer?: NodeJS.Timeout;
  cleanup(): void;
}

/**
 * How long the resident helper may take to start before it is stopped: far longer than any one request's timeout,
 * since every request on the host waits for the same start (a host under load, a slow file system, a login banner).
 */
const START_LIMIT_MS = 120_000;

/** One long-lived interpreter on the remote, speaking JSON lines on one channel. */
class ResidentHelper {
  dead = false;
  private readonly started: Promise<{ handle: ProcessHandle; python: Interpreter }>;
  /** The helper's process, its modules written: requests go behind them at once, answered after the ready line. */
  private readonly spawned: Promise<ProcessHandle>;
  private spawnedNow!: (handle: ProcessHandle) => void;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly sent = new Set<string>();
  private stderrTail = '';
  private startLimitHit = false;

  constructor(
    private readonly transport: Transport,
    private readonly python: string,
    private readonly argv: string[],
  ) {
    this.spawned = new Promise((resolve) => (this.spawnedNow = resolve));
    this.started = this.start();
    this.started.catch(() => {
      this.dead = true;
    });
    // a helper that never got its process: its requests fail as the start did
    this.spawned = Promise.race([this.spawned, this.started.then(({ handle }) => handle)]);
    this.spawned.catch(() => undefined);
  }

  async ready(timeoutMs: number): Promise<Interpreter> {
    return (await withTimeout(this.started, timeoutMs, () => this.startTimeout(timeoutMs))).python;
  }

  /**
   * A request whose own time ran out while the helper was still starting fails alone: the start goes on for the
   * requests beside it and after it (under load, a reload's first short request used to kill the helper that every
   * other request was waiting for, and the next start again). A start that never finishes ends at START_LIMIT_MS.
   */
  private startTimeout(timeoutMs: number): KnownGoodError {
    return new KnownGoodError(
      'timeout',
      `${this.python} on ${this.transport.label} did not start within ${Math.round(timeoutMs / 1000)} s`,
    );
  }

  private async start(): Promise<{ handle: ProcessHandle; python: Interpreter }> {
    const nonce = newNonce();
    let handle: ProcessHandle;
    try {
      handle = await this.transport.spawn(this.argv);
    } catch (e) {
      if (isKnownGoodError(e, 'command-not-found')) throw pythonNotFound(this.python, this.transport.label);
      throw e;
    }
    handle.stdin.on('error', () => {
      /* reported through exited */
    });
    handle.stderr.on('data', (c: Buffer) => {
      this.stderrTail = (this.stderrTail + c.toString('utf8')).slice(-2000);
    });
    const modules = HELPER_MODULES.map((name) => [name, probeSource(name).source]);
    handle.stdin.write(asciiJson({ modules, nonce }) + '\n');
    this.spawnedNow(handle);

    return new Promise((resolve, reject) => {
      let isReady = false;
      const limit = setTimeout(() => {
        if (isReady) return;
        this.startLimitHit = true;
        handle.stdin.end();
        handle.kill('TERM');
      }, START_LIMIT_MS);
      limit.unref?.();
      const lines = new LineSplitter((line) => {
        if (isReady) {
          this.onLine(line);
          return;
        }
        // Lines before the ready line are login banners and the like.
        if (!line.includes(nonce)) return;
        try {
          const doc = JSON.parse(line) as { ready?: string; python?: unknown };
          const py = interpreterSchema.safeParse(doc.python);
          if (doc.ready === nonce && py.success) {
            isReady = true;
            clearTimeout(limit);
            resolve({ handle, python: py.data });
          }
        } catch {
          /* not ours */
        }
      });
      handle.stdout.on('data', (chunk: Buffer | string) => lines.push(chunk));
      const onExit = (exitCode: number | null) => {
        this.dead = true;
        clearTimeout(limit);
        const why = this.stderrTail.trim().split('\n').slice(-2).join(' | ');
        const err =
          exitCode === 127
            ? pythonNotFound(this.python, this.transport.label)
            : this.startLimitHit
              ? new KnownGoodError(
                  'timeout',
                  `${this.python} on ${this.transport.label} did not start within ${START_LIMIT_MS / 1000} s${
                    why ? `: ${why}` : ''
                  }`,
                )
              : new KnownGoodError(
                  'connection-lost',
                  `the Known Good helper (${this.python}) on ${this.transport.label} stopped${
                    exitCode !== null ? ` with exit code ${exitCode}` : ''
                  }${why ? `: ${why}` : ''}`,
                );
        if (!isReady) reject(err);
        for (const p of this.pending.values()) p.reject(err);
        this.pending.clear();
      };
      handle.exited.then(
        ({ exitCode }) => onExit(exitCode),
        () => onExit(null),
      );
    });
  }

  private onLine(line: string): void {
    let doc: unknown;
    try {
      doc = parsePythonJson(line);
    } catch {
      return;
    }
    if (typeof doc !== 'object' || doc === null) return;
    const id = (doc as { id?: unknown }).id;
    if (typeof id !== 'number') return;
    const p = this.pending.get(id);
    if (!p) return; // timed out or cancelled earlier
    this.pending.delete(id);
    p.cleanup();
    p.resolve(doc);
  }

  async request<R>(call: ProbeCall<R>, timeoutMs: number, signal?: AbortSignal, timing = false): Promise<unknown> {
    if (signal?.aborted) throw new KnownGoodError('cancelled', `${call.probe} was cancelled`);
    const src = probeSource(call.probe);
    // kg_common came with the helper; the others travel by hash like the probe's own source.
    const modules = call.modules.filter((m) => m !== 'kg_common').map(probeSource);
    // The helper kills the request at timeoutMs itself (and on cancel), so nothing of it keeps running.
    const send = (withSource: boolean): Promise<unknown> =>
      this.ask(timeoutMs, call.probe, signal, () => {
        const req: Record<string, unknown> = {
          op: 'probe',
          name: call.probe,
          hash: src.hash,
          args: call.args,
          timeoutMs,
        };
        if (withSource || !this.sent.has(src.hash)) req['src'] = src.source;
        if (timing) req['timing'] = true;
        if (modules.length) {
          req['modules'] = modules.map((m) =>
            withSource || !this.sent.has(m.hash) ? [m.name, m.hash, m.source] : [m.name, m.hash],
          );
        }
        this.sent.add(src.hash);
        for (const m of modules) this.sent.add(m.hash);
        return req;
      });
    let doc = (await send(false)) as { ok?: boolean; error?: { code?: string } };
    if (doc.ok === false && doc.error?.code !== undefined && probeErrorCode(doc.error.code) === 'need-source')
      doc = (await send(true)) as typeof doc;
    return doc;
  }

  /**
   * One exchange with the helper: the line `build` makes (called then, so that what it says of the sources sent is
   * true when it is written) with a new id, answered by the line of that id, cancelled on abort and at `timeoutMs`.
   * A request made while the helper starts is written right behind its modules, not after its ready line: on first
   * contact the start and the first requests are one round trip (the helper answers them once ready).
   */
  async ask(
    timeoutMs: number,
    what: string,
    signal: AbortSignal | undefined,
    build: () => Record<string, unknown>,
  ): Promise<unknown> {
    const handle = await withTimeout(this.spawned, timeoutMs, () => this.startTimeout(timeoutMs));
    const id = this.nextId++;
    const cancel = () => {
      if (!this.dead) handle.stdin.write(asciiJson({ op: 'cancel', id }) + '\n');
    };
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = () => {
        this.pending.get(id)?.cleanup();
        this.pending.delete(id);
        cancel();
        reject(new KnownGoodError('cancelled', `${what} on ${this.transport.label} was cancelled`));
      };
      const p: Pending = {
        resolve,
        reject,
        cleanup: () => {
          if (p.timer) clearTimeout(p.timer);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      p.timer = setTimeout(() => {
        this.pending.delete(id);
        p.cleanup();
        cancel();
        reject(
          new KnownGoodError(
            'timeout',
            `${what} on ${this.transport.label} timed out after ${Math.round(timeoutMs / 100) / 10} s`,
          ),
        );
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, p);
      handle.stdin.write(asciiJson({ id, ...build() }) + '\n');
    });
  }

  close(): void {
    this.dead = true;
    void this.started.then(
      ({ handle }) => {
        handle.stdin.end();
        handle.kill('TERM');
      },
      () => undefined,
    );
  }
}

/**
 * Splits a byte stream into lines in time linear in its length: each chunk is scanned once for newlines and a
 * line's pieces are joined once (a 68 MB answer arrives in thousands of chunks).
 */
export class LineSplitter {
  private parts: Buffer[] = [];

  constructor(private readonly onLine: (line: string) => void) {}

  push(data: Buffer | string): void {
    const chunk = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let start = 0;
    let nl: number;
    while ((nl = chunk.indexOf(10, start)) >= 0) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      const line = this.parts.length ? Buffer.concat([...this.parts, piece]) : piece;
      this.parts = [];
      this.onLine(line.toString('utf8'));
    }
    if (start < chunk.length) this.parts.push(chunk.subarray(start));
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(onTimeout()), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new KnownGoodError('internal', messageOf(e)));
      },
    );
  });
}
