import { z } from 'zod';
import { defineProbe } from '../probes/probe';

/* python/replay_prep.py: what a replay needs of the launch's checkout, and the code folders of its states. */

const str = z.string().nullable().default(null);

export const replayInspectSchema = z.looseObject({
  repo: str,
  cwdRel: str,
  head: str,
  good: str,
  files: z.array(z.object({ path: z.string(), how: z.enum(['committed', 'uncommitted', 'both']) })).default([]),
  filters: z.array(z.string()).default([]),
  tracked: z.number().nullable().default(null),
  trackedBytes: z.number().nullable().default(null),
  paths: z
    .array(
      z.object({
        path: z.string(),
        exists: z.boolean(),
        kind: z.enum(['file', 'dir']).nullable(),
        tracked: z.boolean().default(false),
      }),
    )
    .default([]),
  error: str,
});
export type ReplayInspect = z.infer<typeof replayInspectSchema>;

export const replayInspectProbe = defineProbe(
  'replay_prep',
  replayInspectSchema,
  (o: { cwd: string; good?: string | null; paths?: readonly string[] }) => [
    'inspect',
    `--cwd=${o.cwd}`,
    ...(o.good ? [`--good=${o.good}`] : []),
    ...(o.paths ?? []).map((p) => `--path=${p}`),
  ],
  { modules: ['kg_git'] },
);

export const replayStateSchema = z.looseObject({
  dir: z.string(),
  reused: z.boolean(),
  files: z.number().nullable(),
  bytes: z.number().nullable(),
});

export const replayStateProbe = defineProbe(
  'replay_prep',
  replayStateSchema,
  (o: { replay: string; name: string; repo: string; good?: string | null; goodFiles: readonly string[] }) => [
    'state',
    `--replay=${o.replay}`,
    `--name=${o.name}`,
    `--repo=${o.repo}`,
    ...(o.good ? [`--good=${o.good}`] : []),
    ...o.goodFiles.map((f) => `--good-file=${f}`),
  ],
  { modules: ['kg_git'] },
);

/** `<replay>/runs/<run>/cwd`, made empty: where a run starts when the launch's folder is no git checkout. */
export const replayRunDirProbe = defineProbe(
  'replay_prep',
  z.looseObject({ dir: z.string() }),
  (o: { replay: string; run: number }) => ['rundir', `--replay=${o.replay}`, `--run=${o.run}`],
  { modules: ['kg_git'] },
);

export const replayCleanProbe = defineProbe(
  'replay_prep',
  z.looseObject({ removed: z.number(), kept: z.number(), freed: z.number() }),
  (o: { replay: string }) => ['clean', `--replay=${o.replay}`],
  { modules: ['kg_git'] },
);
