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
  readonly args: readonly string[];
  parse(raw: unknown): R;
}

/** What a probe's process took of the host it ran on (peak resident memory, CPU time). */
export interface Footprint {
  maxRssKb: number;
  cpuS: number;
}

export interface ProbeOutcome<R> {
  value: R;
  python: Interpreter;
  /** Absent when the host could not tell (no `resource` module). */
  footprint?: Footprint;
}

/** Runs probes on one host (one-shot, or through the resident helper). */
export interface ProbeRunnerLike {
  run<R>(call: ProbeCall<R>, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<ProbeOutcome<R>>;
}

export function defineProbe<A extends unknown[], S extends z.ZodType>(
  probe: string,
  schema: S,
  buildArgs: (...a: A) => string[],
): (...a: A) => ProbeCall<z.infer<S>> {
  return (...a: A) => ({
    probe,
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
