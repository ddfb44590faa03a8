import { z } from 'zod';
import { ARGS_SCHEME, fromArgsUri } from '../args/uri';
import { fromRemoteFileUri, REMOTE_FILE_SCHEME } from '../remote/readFile';
import type { RunsNode } from './model';

/*
 * What a command was invoked on, in one vocabulary: decoded once from whatever VS Code hands a command (a Remote
 * Runs node, a feature's node, a document URI, a palette call's plain object) into a CommandTarget. Every target
 * names its host; handlers switch on `kind`.
 */

const hostId = z.string().min(1);
export const commandTargetSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('host'), hostId }),
  /** A checkpoint root of a host (`knownGood.hosts[].roots`). */
  z.object({ kind: z.literal('root'), hostId, path: z.string() }),
  /** A run folder, or a folder inside one. */
  z.object({ kind: z.literal('run'), hostId, path: z.string() }),
  z.object({ kind: z.literal('checkpoint'), hostId, path: z.string(), label: z.string().optional() }),
  /** A file of a run: a metrics log, a stdout log, a config. */
  z.object({ kind: z.literal('log'), hostId, path: z.string(), label: z.string().optional() }),
  z.object({ kind: z.literal('baseline'), hostId, baselineId: z.string().min(1) }),
  z.object({ kind: z.literal('bench-result'), hostId, resultId: z.string().min(1) }),
  /** A Slurm job of a login node (a host with `slurm`): Fleet commands run on its nodes. */
  z.object({ kind: z.literal('slurm-job'), hostId, jobId: z.string().min(1) }),
  /** One node of a Slurm job (its latest Compare Nodes capture, if any, is the one a node command reads). */
  z.object({ kind: z.literal('slurm-node'), hostId, jobId: z.string().min(1), node: z.string().min(1) }),
]);
export type CommandTarget = z.infer<typeof commandTargetSchema>;
export type TargetKind = CommandTarget['kind'];
export type TargetOf<K extends TargetKind> = Extract<CommandTarget, { kind: K }>;

/** A node a feature adds to the tree (see src/shared/tree.ts) says what it stands for itself. */
const taggedNode = z.object({ target: commandTargetSchema });

/** The palette's and other extensions' plain objects (and tests'): `{ hostId }`, `{ hostId, baselineId }`, … */
const plainCall = z.union([
  z.object({ hostId, baselineId: z.string().min(1) }).transform((x) => ({ kind: 'baseline' as const, ...x })),
  z.object({ hostId, resultId: z.string().min(1) }).transform((x) => ({ kind: 'bench-result' as const, ...x })),
  z
    .object({ hostId, jobId: z.string().min(1), node: z.string().min(1) })
    .transform((x) => ({ kind: 'slurm-node' as const, ...x })),
  z.object({ hostId, jobId: z.string().min(1) }).transform((x) => ({ kind: 'slurm-job' as const, ...x })),
  z.object({ hostId, logPath: z.string().min(1), label: z.string().optional() }).transform((x) => ({
    kind: 'log' as const,
    hostId: x.hostId,
    path: x.logPath,
    ...(x.label ? { label: x.label } : {}),
  })),
  /** A checkpoint by path (the args commands' plain call: `{ hostId, path[, label] }`). */
  z.object({ hostId, path: z.string(), label: z.string().optional() }).transform((x) => ({
    kind: 'checkpoint' as const,
    hostId: x.hostId,
    path: x.path,
    ...(x.label ? { label: x.label } : {}),
  })),
  z.object({ hostId }).transform((x) => ({ kind: 'host' as const, hostId: x.hostId })),
]);

const RUNS_KINDS = new Set(['host', 'root', 'run', 'folder', 'checkpoint', 'file', 'message']);

/** The Remote Runs node an argument is, if it is one (handlers that need the listing behind it use it). */
export function runsNodeOf(arg: unknown): RunsNode | undefined {
  if (typeof arg !== 'object' || arg === null) return undefined;
  const n = arg as { kind?: unknown; id?: unknown };
  return typeof n.kind === 'string' && RUNS_KINDS.has(n.kind) && typeof n.id === 'string'
    ? (arg as RunsNode)
    : undefined;
}

function fromRunsNode(n: RunsNode): CommandTarget {
  switch (n.kind) {
    case 'host':
      return { kind: 'host', hostId: n.host.id };
    case 'message':
      return { kind: 'host', hostId: n.hostId };
    case 'root':
      return { kind: 'root', hostId: n.hostId, path: n.remotePath };
    case 'run':
    case 'folder':
      return { kind: 'run', hostId: n.hostId, path: n.remotePath };
    case 'checkpoint':
      return { kind: 'checkpoint', hostId: n.hostId, path: n.remotePath, label: n.label };
    case 'file':
      return { kind: 'log', hostId: n.hostId, path: n.remotePath, label: n.label };
  }
}

/** A URI given as its parts (a vscode.Uri has them): `knownGood:` args documents and `knownGood-remote:` files. */
function fromUri(arg: unknown): CommandTarget | undefined {
  const u = arg as { scheme?: unknown; path?: unknown; query?: unknown };
  if (typeof u.scheme !== 'string' || typeof u.path !== 'string' || typeof u.query !== 'string') return undefined;
  try {
    if (u.scheme === ARGS_SCHEME) {
      const spec = fromArgsUri({ scheme: u.scheme, query: u.query });
      return { kind: 'checkpoint', hostId: spec.hostId, path: spec.path, ...(spec.label ? { label: spec.label } : {}) };
    }
    if (u.scheme === REMOTE_FILE_SCHEME) {
      const ref = fromRemoteFileUri({ path: u.path, query: u.query });
      return { kind: 'log', hostId: ref.hostId, path: ref.path };
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** The one decoder of command arguments. Undefined when the argument names nothing Known Good knows. */
export function decodeTarget(arg: unknown): CommandTarget | undefined {
  if (typeof arg !== 'object' || arg === null) return undefined;
  const node = runsNodeOf(arg);
  if (node) return fromRunsNode(node);
  const tagged = taggedNode.safeParse(arg);
  if (tagged.success) return tagged.data.target;
  const uri = fromUri(arg);
  if (uri) return uri;
  const plain = plainCall.safeParse(arg);
  return plain.success ? plain.data : undefined;
}

/**
 * The target as a command that accepts `kinds` takes it: itself when its kind is accepted; its host when the command
 * takes hosts (every target names one); else undefined.
 */
export function narrowTarget<K extends TargetKind>(
  target: CommandTarget | undefined,
  kinds: readonly K[],
): TargetOf<K> | undefined {
  if (!target) return undefined;
  if ((kinds as readonly TargetKind[]).includes(target.kind)) return target as TargetOf<K>;
  if ((kinds as readonly TargetKind[]).includes('host')) return { kind: 'host', hostId: target.hostId } as TargetOf<K>;
  return undefined;
}
