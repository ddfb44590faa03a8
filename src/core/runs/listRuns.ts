import { z } from 'zod';
import { defineProbe } from '../probes/probe';

/** What python/list_runs.py recognised an entry as (see the probe's docstring). */
export const entryRoles = [
  'checkpoint',
  'weights',
  'train-log',
  'metrics',
  'stdout',
  'log',
  'config',
  'link',
  'dir',
  'other',
] as const;
export type EntryRole = (typeof entryRoles)[number];

export const rootStatuses = ['ok', 'missing', 'denied', 'not-a-directory', 'empty', 'no-checkpoints', 'error'] as const;
export type RootStatus = (typeof rootStatuses)[number];

/** One file, folder or link below a root; `path` is relative to the root, '/'-joined ('' for the root itself). */
export interface RunEntry {
  name: string;
  path: string;
  /** `special`: a FIFO, socket or device (which one in `special`); never read, never a log or a checkpoint. */
  kind: 'dir' | 'file' | 'symlink' | 'special';
  /** Bytes; a folder's is the total of what was seen below it (complete unless `sizeComplete` is false). */
  size: number;
  /** Epoch seconds on the remote's clock. */
  mtime: number | null;
  role: EntryRole;
  step?: number | undefined;
  epoch?: number | undefined;
  /**
   * Checkpoint layout: step, hf, deepspeed, megatron, dcp, lightning, accelerate, peft, torch, safetensors, bin,
   * weights. Metrics log format: jsonl, csv, hf-trainer-state, tensorboard.
   */
  format?: string | undefined;
  /** A folder a training stack made: `lightning-version` (Lightning's version_N, with checkpoints/ and its logs). */
  layout?: string | undefined;
  /** The step is a save counter (accelerate's checkpoint_N), not a training step: it orders, nothing more. */
  stepIsIndex?: boolean | undefined;
  children?: RunEntry[] | undefined;
  /** Entries of this folder cut by --max-entries. */
  omitted?: number | undefined;
  /** Reading this folder stopped at the probe's item limit: there may be more entries than `omitted` counts. */
  scanStopped?: boolean | undefined;
  /** false: a folder past --depth, not listed (list it as a root of its own to expand it). */
  listed?: boolean | undefined;
  sizeComplete?: boolean | undefined;
  /** Why this entry could not be read (`permission denied`). */
  error?: string | undefined;
  /** The path holds bytes that are not UTF-8: `name`/`path` show U+FFFD, the B64 fields hold the exact bytes. */
  escaped?: boolean | undefined;
  nameB64?: string | undefined;
  pathB64?: string | undefined;
  target?: string | undefined;
  targetKind?: 'dir' | 'file' | 'missing' | undefined;
  special?: 'fifo' | 'socket' | 'char-device' | 'block-device' | 'other' | undefined;
}

const KINDS: ReadonlySet<string> = new Set(['dir', 'file', 'symlink', 'special']);
const ROLES: ReadonlySet<string> = new Set(entryRoles);
const TARGET_KINDS: ReadonlySet<string> = new Set(['dir', 'file', 'missing']);
const OPTIONAL: Record<string, 'string' | 'number' | 'boolean'> = {
  step: 'number',
  epoch: 'number',
  format: 'string',
  layout: 'string',
  stepIsIndex: 'boolean',
  omitted: 'number',
  scanStopped: 'boolean',
  listed: 'boolean',
  sizeComplete: 'boolean',
  error: 'string',
  escaped: 'boolean',
  nameB64: 'string',
  pathB64: 'string',
  target: 'string',
  special: 'string',
};

/**
 * Why `value` is not a RunEntry tree, or undefined. Checked by hand rather than with a recursive zod schema: a listing
 * of 1,000 checkpoints has thousands of entries, and zod took 100-300 ms on the first (cold) parse of one; this loop
 * takes a few.
 */
export function entryProblem(value: unknown, where = 'entry'): string | undefined {
  const stack: [unknown, string][] = [[value, where]];
  while (stack.length) {
    const [v, at] = stack.pop()!;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return `${at}: expected an object`;
    const e = v as Record<string, unknown>;
    if (typeof e['name'] !== 'string') return `${at}.name: expected a string`;
    if (typeof e['path'] !== 'string') return `${at}.path: expected a string`;
    if (typeof e['kind'] !== 'string' || !KINDS.has(e['kind'])) return `${at}.kind: unknown kind`;
    if (typeof e['size'] !== 'number') return `${at}.size: expected a number`;
    if (e['mtime'] !== null && typeof e['mtime'] !== 'number') return `${at}.mtime: expected a number or null`;
    if (typeof e['role'] !== 'string' || !ROLES.has(e['role'])) return `${at}.role: unknown role`;
    for (const key in OPTIONAL) {
      const x = e[key];
      if (x !== undefined && typeof x !== OPTIONAL[key]) return `${at}.${key}: expected a ${OPTIONAL[key]}`;
    }
    const tk = e['targetKind'];
    if (tk !== undefined && (typeof tk !== 'string' || !TARGET_KINDS.has(tk))) return `${at}.targetKind: unknown`;
    const children = e['children'];
    if (children !== undefined) {
      if (!Array.isArray(children)) return `${at}.children: expected an array`;
      for (let i = children.length - 1; i >= 0; i--) stack.push([children[i], `${at}.children.${i}`]);
    }
  }
  return undefined;
}

export const runEntrySchema = z.custom<RunEntry>().superRefine((value, ctx) => {
  const why = entryProblem(value);
  if (why) ctx.addIssue({ code: 'custom', message: why });
});

export const rootListingSchema = z.object({
  /** The root as configured (`~/ckpts`). */
  root: z.string(),
  /** Absolute path on the remote. */
  path: z.string(),
  status: z.enum(rootStatuses),
  message: z.string(),
  /** Cheap change marker: entry count and newest mtime of the root and its direct folders. */
  signature: z.string().nullable(),
  entry: runEntrySchema.nullable(),
  counts: z.object({ checkpoints: z.number(), files: z.number(), dirs: z.number(), omitted: z.number() }).optional(),
  escaped: z.boolean().optional(),
  pathB64: z.string().optional(),
});
export type RootListing = z.infer<typeof rootListingSchema>;

export const runsListingSchema = z.object({
  roots: z.array(rootListingSchema),
  depth: z.number(),
  maxEntries: z.number(),
  /** Epoch seconds on the remote's clock when it listed: ages are relative to this clock. */
  now: z.number(),
  user: z.string().nullable(),
  elapsedMs: z.number(),
});
export type RunsListing = z.infer<typeof runsListingSchema>;

export interface ListRunsOptions {
  /** Folder levels listed below each root (default 3: root → run → checkpoint → files). */
  depth?: number;
  /** Entries kept per folder; the rest are counted in `omitted` (default 5000). */
  maxEntries?: number;
  /** Only each root's status and signature, for polling. */
  signatureOnly?: boolean;
}

/** `python/list_runs.py ROOT…`: every root's tree in one call. */
export const listRunsProbe = defineProbe(
  'list_runs',
  runsListingSchema,
  (roots: readonly string[], options: ListRunsOptions = {}) => {
    const args: string[] = [];
    if (options.depth !== undefined) args.push('--depth', String(options.depth));
    if (options.maxEntries !== undefined) args.push('--max-entries', String(options.maxEntries));
    if (options.signatureOnly) args.push('--signature-only');
    // Roots after `--`, so one named `-x` is a root, not an option.
    return [...args, '--', ...roots];
  },
);
