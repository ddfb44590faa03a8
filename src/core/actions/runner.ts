import { StringDecoder } from 'node:string_decoder';
import { KnownGoodError, messageOf } from '../errors';
import { extractFramed } from '../probes/runner';
import { FrameFilter } from '../terminal/frame';
import type { ProcessHandle, Transport } from '../transport/types';
import { newNonce } from '../util/nonce';
import {
  DEFAULT_CAP_BYTES,
  DEFAULT_GRACE_MS,
  DEFAULT_TAIL_BYTES,
  guardedCommand,
  guardEndText,
  guardReportSchema,
  type GuardEnded,
} from './guard';
import type { EnvMap } from './envMap';

/*
 * The one runner for actions (bisect and benchmark runs, restore, replay): the command runs under python/kg_guard.py
 * on the host (core/actions/guard.ts), so its limit, its stop and its output cap hold there whatever happens here;
 * this side streams its output, keeps only a tail of it (a benchmark that prints 600 MB costs the caller its tail,
 * not 600 MB), asks for a stop on cancel, and reads the guard's report of how it ended.
 */

export interface ActionSpec {
  readonly argv: readonly string[];
  readonly env?: EnvMap;
  readonly cwd?: string;
  /** Every action is bounded: TERM at this limit, KILL after the grace. */
  readonly timeoutMs: number;
  readonly graceMs?: number;
  /** Bytes of each stream passed on whole (default 8 MiB). */
  readonly capBytes?: number;
  /** Bytes of each stream's end kept for the result (default 64 KiB). */
  readonly tailBytes?: number;
}

export interface ActionOptions {
  /** The host's interpreter that runs the guard. */
  readonly python: string;
  readonly signal?: AbortSignal;
  /** Output as it comes (the guard's report left out). */
  readonly onOutput?: (text: string, stream: 'stdout' | 'stderr') => void;
}

export type ActionEnd = GuardEnded['ended'] | 'cancelled' | 'lost';

export interface ActionResult {
  readonly ended: ActionEnd;
  readonly exitCode: number | null;
  readonly exitSignal?: string;
  /** The end of what it printed (at most tailBytes of each, as text). */
  readonly stdout: string;
  readonly stderr: string;
  /** The guard's report (absent when none arrived: the connection went, or the guard could not start). */
  readonly report?: GuardEnded;
  /** How it ended, in words. */
  readonly message: string;
}

/** A string that keeps only its last `max` characters. */
class Tail {
  private text = '';
  constructor(private readonly max: number) {}
  push(s: string): void {
    this.text += s;
    if (this.text.length > 2 * this.max) this.text = this.text.slice(this.text.length - this.max);
  }
  get value(): string {
    return this.text.length > this.max ? this.text.slice(this.text.length - this.max) : this.text;
  }
}

/** How long past its own limit and grace the host has to report before this side gives up on it. */
const BACKSTOP_MS = 30_000;

export async function runAction(transport: Transport, spec: ActionSpec, opts: ActionOptions): Promise<ActionResult> {
  const nonce = newNonce();
  const grace = spec.graceMs ?? DEFAULT_GRACE_MS;
  const tailBytes = spec.tailBytes ?? DEFAULT_TAIL_BYTES;
  const cmd = guardedCommand(opts.python, spec.argv, {
    timeoutMs: spec.timeoutMs,
    graceMs: grace,
    capBytes: spec.capBytes ?? DEFAULT_CAP_BYTES,
    tailBytes,
    report: nonce,
    ...(spec.env ? { env: spec.env } : {}),
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
  });
  const signal = opts.signal;
  if (signal?.aborted) throw new KnownGoodError('cancelled', `${spec.argv[0]} was cancelled before it started`);
  let handle: ProcessHandle;
  try {
    handle = await transport.spawn(cmd.argv, signal ? { signal } : {});
  } catch (e) {
    if (signal?.aborted) throw new KnownGoodError('cancelled', `${spec.argv[0]} was cancelled before it started`);
    throw e;
  }
  const out = new Tail(tailBytes);
  // The report comes last on stderr: room for it beside the tail.
  const err = new Tail(tailBytes + 16 * 1024);
  const outDec = new StringDecoder('utf8');
  const errDec = new StringDecoder('utf8');
  const shown = new FrameFilter(nonce, false);
  const onOut = (t: string) => {
    if (!t) return;
    out.push(t);
    opts.onOutput?.(t, 'stdout');
  };
  const onErr = (t: string) => {
    if (!t) return;
    err.push(t);
    const visible = shown.push(t);
    if (visible) opts.onOutput?.(visible, 'stderr');
  };
  handle.stdout.on('data', (c: Buffer) => onOut(outDec.write(c)));
  handle.stderr.on('data', (c: Buffer) => onErr(errDec.write(c)));
  handle.stdin.on('error', () => undefined);
  handle.stdin.end();

  let cancelled = false;
  let backstop: NodeJS.Timeout | undefined;
  const giveUp = (after: number) => {
    clearTimeout(backstop);
    backstop = setTimeout(() => {
      handle.kill('KILL');
    }, after);
  };
  // The guard enforces the limit on the host; this only ends a connection that stopped answering.
  giveUp(spec.timeoutMs + grace + BACKSTOP_MS);
  const onAbort = () => {
    cancelled = true;
    // TERM reaches the guard (the group sshd's shell made it lead), which stops the command: TERM, then KILL after
    // the grace. The channel stays open for its report.
    handle.kill('TERM', { closeAfterMs: grace + BACKSTOP_MS });
    giveUp(grace + BACKSTOP_MS);
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  let exit: { exitCode: number | null; exitSignal?: string } | { error: unknown };
  try {
    exit = await handle.exited.catch((e: unknown) => ({ error: e }));
  } finally {
    clearTimeout(backstop);
    signal?.removeEventListener('abort', onAbort);
  }
  await new Promise((r) => setImmediate(r));
  onOut(outDec.end());
  onErr(errDec.end());
  const rest = shown.flush();
  if (rest) opts.onOutput?.(rest, 'stderr');
  const rawErr = err.value;
  const framed = extractFramed(rawErr, nonce);
  const stderr = framed === undefined ? rawErr : rawErr.slice(0, rawErr.lastIndexOf(`\n@@KNOWN-GOOD-BEGIN ${nonce}@@`));
  let report: GuardEnded | undefined;
  if (framed !== undefined) {
    let doc: unknown;
    try {
      doc = JSON.parse(framed);
    } catch {
      doc = undefined;
    }
    const parsed = guardReportSchema.safeParse(doc);
    if (parsed.success) {
      if (!parsed.data.ok) throw new KnownGoodError('usage', `the action was refused: ${parsed.data.error.message}`);
      report = parsed.data;
    }
  }
  const base = { stdout: out.value, stderr };
  if (report) {
    const ended: ActionEnd = cancelled && report.ended === 'stopped' ? 'cancelled' : report.ended;
    return {
      ...base,
      ended,
      exitCode: report.exitCode,
      ...(report.signal ? { exitSignal: report.signal } : {}),
      report,
      message: guardEndText(report),
    };
  }
  if ('error' in exit) {
    const group = handle.remoteGroup?.();
    return {
      ...base,
      ended: 'lost',
      exitCode: null,
      message:
        `${messageOf(exit.error)}; the guard on the host stops the command when it sees its channel closed` +
        (group !== undefined ? ` (its process group there: ${group})` : ''),
    };
  }
  // No report: the guard itself could not run (no such interpreter), or it was killed before it wrote one.
  const why = stderr.trim().split('\n').slice(-3).join(' | ');
  return {
    ...base,
    ended: cancelled ? 'cancelled' : 'lost',
    exitCode: exit.exitCode,
    ...(exit.exitSignal ? { exitSignal: exit.exitSignal } : {}),
    message: `the guard (${opts.python}) gave no report (exit ${exit.exitCode ?? exit.exitSignal ?? '?'})${why ? `: ${why}` : ''}`,
  };
}

/**
 * The result as the error a caller throws when the action did not succeed, or undefined when it exited 0:
 * `cancelled`, `timeout` (with the stop in words), else `probe-failed` with the last lines it printed.
 */
export function actionFailure(r: ActionResult, what: string, host: string): KnownGoodError | undefined {
  if (r.ended === 'exited' && r.exitCode === 0) return undefined;
  if (r.ended === 'cancelled') return new KnownGoodError('cancelled', `${what} on ${host} was cancelled: ${r.message}`);
  if (r.ended === 'timeout') return new KnownGoodError('timeout', `${what} on ${host} ${r.message}`);
  if (r.ended === 'lost') return new KnownGoodError('connection-lost', `${what} on ${host}: ${r.message}`);
  const tail = (r.stderr || r.stdout).trim().split('\n').slice(-5).join('\n');
  return new KnownGoodError('probe-failed', `${what} failed on ${host} (${r.message})${tail ? `: ${tail}` : ''}`);
}
