import { z } from 'zod';
import { defineProbe } from './probe';

export const hostInfoSchema = z.object({
  hostname: z.string(),
  user: z.string(),
  home: z.string(),
  cwd: z.string(),
  platform: z.string(),
  python: z.object({ executable: z.string(), version: z.string() }),
  pid: z.number(),
});
export type HostInfo = z.infer<typeof hostInfoSchema>;

/** The connection check of a host: who and where, and which interpreter answers. */
export const hostInfoProbe = defineProbe('host_info', hostInfoSchema, () => []);

export const pythonCandidateSchema = z.object({
  path: z.string(),
  executable: z.string(),
  version: z.string().nullable(),
  prefix: z.string().nullable(),
  venv: z.boolean(),
  torch: z.string().nullable(),
  error: z.string().nullable(),
});
export type PythonCandidate = z.infer<typeof pythonCandidateSchema>;

/** Candidate interpreters (PATH, /usr/bin/python3, venvs, conda envs) with versions and torch, for "Select Remote Python". */
export const findPythonsProbe = defineProbe(
  'find_pythons',
  z.object({
    current: z.object({ executable: z.string(), version: z.string() }),
    candidates: z.array(pythonCandidateSchema),
  }),
  (extra: string[] = []) => extra,
);

/**
 * "Select Remote Python" lists interpreters with torch first (what Known Good's probes need), then working ones
 * without, then broken ones; in each group, venvs before system interpreters, otherwise in the probe's order.
 */
export function pythonPickOrder(candidates: readonly PythonCandidate[]): PythonCandidate[] {
  const rank = (c: PythonCandidate) => (c.error || !c.version ? 4 : c.torch ? 0 : 2) + (c.venv ? 0 : 1);
  return candidates
    .map((c, i) => ({ c, i }))
    .sort((a, b) => rank(a.c) - rank(b.c) || a.i - b.i)
    .map((x) => x.c);
}
