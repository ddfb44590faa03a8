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
