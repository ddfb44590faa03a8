import { z } from 'zod';
import { KnownGoodError } from '../errors';
import { describeIssues } from '../util/zod';

/** Which Python produced a result: every result names it. */
export const interpreterSchema = z.object({ executable: z.string(), version: z.string() });
export type Interpreter = z.infer<typeof interpreterSchema>;

/**
 * One call of one Python probe (python/<probe>.py): its argv and the parser of its result. Build these with the
 * one function per probe that `defineProbe` returns, never by hand.
 */
export interface ProbeCall<R> {
  readonly probe: string;
  /** The python/ modules the probe imports besides kg_common (they travel with it: `ProbeProgram`). */
  readonly modules: readonly string[];
  readonly args: readonly string[];
  parse(raw: unknown): R;
}

/** What must travel for a probe to run on a host: its own source and the modules it declared. */
export type ProbeProgram = Pick<ProbeCall<unknown>, 'probe' | 'modules'>;

export interface ProbeOptions {
  /**
   * The python/ modules the probe imports besides kg_common, its own imports' imports included (a unit test keeps
   * this equal to what the sources import).
   */
  modules?: readonly string[];
}

const declared: { probe: string; modules: readonly string[] }[] = [];

/** Every probe definition so far, with the modules it declared (for the test that keeps declarations true). */
export function declaredProbes(): readonly { probe: string; modules: readonly string[] }[] {
  return declared;
}

/** What a probe's process took of the host it ran on (peak resident memory, CPU time). */
export interface Footprint {
  maxRssKb: number;
  cpuS: number;
}

/**
 * Where one request's time went in the resident helper (ms), when asked for (`RunOptions.timing`; the bench does):
 * parsing it, compiling sources that came with it, handing it to its child, executing the probe's module, limits
 * and state, `main` and its JSON, framing the answer, and the pipe back. `how`: `prepared` (a child forked ahead had
 * executed the probe's module already), `spare` (forked ahead for another probe) or `fork` (forked for it).
 */
export interface HelperTiming {
  how: string;
  /** The child wrote the answer on the channel itself (no hop through the helper: `pipe` is 0). */
  direct?: boolean;
  parse: number;
  compile: number;
  handoff: number;
  exec: number;
  setup: number;
  run: number;
  frame: number;
  pipe: number;
  total: number;
  /** When the helper read the request (CLOCK_MONOTONIC seconds, the clock of `process.hrtime`): on one host, where
   * the client's round trip splits into the way in and the way out. */
  at?: number;
}

export interface ProbeOutcome<R> {
  value: R;
  python: Interpreter;
  /** Absent when the host could not tell (no `resource` module). */
  footprint?: Footprint;
  /** Only when asked for, through the resident helper. */
  timing?: HelperTiming;
}

/** What every probe run may be given. */
export interface ProbeRunOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  /**
   * Run it in a new interpreter started by a new login (one exec channel), not in the resident helper: the helper's
   * environment, interpreter and sys.path are those of the connection's start, while this probe must see what a
   * process started now gets (its variables, a package installed since, a new user site folder). Costs the login
   * and the interpreter's start (a few hundred ms): for the environment snapshot, not for a listing.
   */
  fresh?: boolean;
}

/** Runs probes on one host (one-shot, or through the resident helper). */
export interface ProbeRunnerLike {
  run<R>(call: ProbeCall<R>, options?: ProbeRunOptions): Promise<ProbeOutcome<R>>;
}

export function defineProbe<A extends unknown[], S extends z.ZodType>(
  probe: string,
  schema: S,
  buildArgs: (...a: A) => string[],
  options: ProbeOptions = {},
): (...a: A) => ProbeCall<z.infer<S>> {
  const modules = [...(options.modules ?? [])].sort();
  declared.push({ probe, modules });
  return (...a: A) => ({
    probe,
    modules,
    args: buildArgs(...a),
    parse(raw: unknown): z.infer<S> {
      const r = schema.safeParse(raw);
      if (!r.success) {
        throw new KnownGoodError('bad-output', `probe ${probe} returned unexpected output: ${describeIssues(r.error)}`);
      }
      return r.data;
    },
  });
}
