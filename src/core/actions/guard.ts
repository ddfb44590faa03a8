import { deflateSync } from 'node:zlib';
import { z } from 'zod';
import { KnownGoodError } from '../errors';
import { probeSource } from '../probes/sources';
import { displayWord, TERMINAL_LOADER, type TerminalCommand } from '../terminal/command';
import { checkedEnvMap, isEmptyEnv, type EnvMap } from './envMap';

/*
 * Every action Known Good starts on a host (a bisect's benchmark runs, a restore's script, `known-good exec`, a
 * replay) runs under python/kg_guard.py, which owns it THERE: its own process group, the time limit (TERM, then
 * KILL after a grace), the output cap, the environment map, and the stop when the caller goes (its channel closed:
 * the CLI killed, the connection dropped) — none of which a client can do once it is gone. The guard travels in one
 * argv word, as a probe does in a terminal (core/terminal/command.ts).
 */

/** Seconds a stopped command has between TERM and KILL, unless the action says otherwise. */
export const DEFAULT_GRACE_MS = 5_000;
/** Output passed on whole, per stream; past it only the tail is kept (on the host and here). */
export const DEFAULT_CAP_BYTES = 8 * 1024 * 1024;
export const DEFAULT_TAIL_BYTES = 64 * 1024;

export interface GuardOptions {
  /** The command is stopped after this long (TERM, then KILL after the grace). 0 or absent: no limit. */
  readonly timeoutMs?: number;
  readonly graceMs?: number;
  /** Bytes of each stream passed on; past them only the last `tailBytes` are. 0: the command writes to the guard's
   * own stdout and stderr (byte-exact: `known-good exec`, terminals). */
  readonly capBytes?: number;
  readonly tailBytes?: number;
  /** Applied to the environment the command inherits. */
  readonly env?: EnvMap;
  /** The command's working folder (absolute). */
  readonly cwd?: string;
  /** A nonce: the guard's report is written on stderr between its frame lines at the end. */
  readonly report?: string;
}

let packed: string | undefined;

function packedGuard(): string {
  packed ??= deflateSync(Buffer.from(probeSource('kg_guard').source, 'utf8'), { level: 9 }).toString('base64');
  return packed;
}

const seconds = (ms: number) => String(Math.round(ms) / 1000);

/** The guard's own words before `--`, from the options (each value checked here and again by the guard). */
export function guardArgs(o: GuardOptions): string[] {
  const a: string[] = [];
  if (o.timeoutMs) a.push('--timeout', seconds(o.timeoutMs));
  a.push('--grace', seconds(o.graceMs ?? DEFAULT_GRACE_MS));
  if (o.capBytes) a.push('--cap', String(Math.floor(o.capBytes)), '--tail', String(o.tailBytes ?? DEFAULT_TAIL_BYTES));
  if (o.env && !isEmptyEnv(o.env)) a.push('--env', JSON.stringify(checkedEnvMap(o.env)));
  if (o.cwd !== undefined) {
    if (!o.cwd.startsWith('/')) throw new KnownGoodError('usage', `the working folder ${o.cwd} is not absolute`);
    a.push('--cwd', o.cwd);
  }
  if (o.report !== undefined) a.push('--report', o.report);
  return a;
}

/** A limit in words: `60 s limit, TERM then KILL after 5 s`. */
export function guardText(o: GuardOptions): string {
  const grace = `TERM then KILL after ${seconds(o.graceMs ?? DEFAULT_GRACE_MS)} s`;
  return o.timeoutMs ? `${seconds(o.timeoutMs)} s limit, ${grace}` : `no time limit, stopped with ${grace}`;
}

/** argv that runs `argv` under the guard with `python` on the host, and the line a person reads for it. */
export function guardedCommand(python: string, argv: readonly string[], o: GuardOptions): TerminalCommand {
  if (argv.length === 0) throw new KnownGoodError('internal', 'empty command');
  const words = guardArgs(o);
  const full = [python, '-c', TERMINAL_LOADER, packedGuard(), ...words, '--', ...argv];
  const env = o.env && !isEmptyEnv(o.env) ? envDisplay(o.env) : '';
  const display = `${env}${argv.map(displayWord).join(' ')}  # under Known Good's guard: ${guardText(o)}`;
  return { argv: full, display };
}

function envDisplay(env: EnvMap): string {
  const unset = env.unset.map((n) => `-u ${n} `).join('');
  const set = Object.entries(env.set)
    .map(([n, v]) => `${n}=${displayWord(v)} `)
    .join('');
  return unset || set ? `env ${unset}${set}` : '';
}

export const guardReportSchema = z.union([
  z.object({
    ok: z.literal(true),
    ended: z.enum(['exited', 'timeout', 'stopped', 'caller-gone']),
    exitCode: z.number().int().nullable(),
    signal: z.string().nullable(),
    stops: z.array(z.object({ signal: z.string(), atS: z.number() })),
    graceS: z.number(),
    timeoutS: z.number().nullable(),
    durationS: z.number(),
    leftover: z.number().int(),
    bytes: z.object({ stdout: z.number(), stderr: z.number() }).optional(),
    leftOut: z.object({ stdout: z.number(), stderr: z.number() }).optional(),
  }),
  z.object({ ok: z.literal(false), error: z.object({ code: z.string(), message: z.string() }) }),
]);
export type GuardReport = z.infer<typeof guardReportSchema>;
export type GuardEnded = Extract<GuardReport, { ok: true }>;

/**
 * How it ended, in words: `stopped at its 10 s limit: SIGTERM, then SIGKILL 5 s later (it ignored TERM)`,
 * `ended with exit code 3`, `killed by SIGSEGV`.
 */
export function guardEndText(r: GuardEnded): string {
  const sent = r.stops.map((s) => s.signal);
  const killed = sent.includes('KILL');
  const stop = killed
    ? `SIGTERM, then SIGKILL ${r.graceS} s later (it was still running)`
    : sent.length
      ? `SIG${sent[0]}; it ended within the ${r.graceS} s grace`
      : '';
  const how = r.exitCode !== null ? `exit code ${r.exitCode}` : r.signal ? `SIG${r.signal}` : 'no exit status';
  const left = r.leftover ? `; ${r.leftover} process(es) it left running were stopped` : '';
  switch (r.ended) {
    case 'timeout':
      return `stopped at its ${r.timeoutS ?? '?'} s limit: ${stop}${left}`;
    case 'stopped':
      return `stopped on request: ${stop || 'signalled'}${left}`;
    case 'caller-gone':
      return `stopped because its caller went away: ${stop}${left}`;
    default:
      return `ended with ${how} after ${r.durationS} s${left}`;
  }
}
