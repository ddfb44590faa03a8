import { KnownGoodError } from '../errors';
import type { ResolvedTarget } from '../runs/listings';
import type { RootListing, RunEntry } from '../runs/listRuns';
import { displayName, lightningCheckpoints, lightningRunOf, remotePathOf } from '../runs/model';
import { decodeTarget, type CommandTarget } from '../runs/targets';
import { checkpointLabel } from './render';
import type { ArgsRef } from './uri';

/*
 * From the Remote Runs listing to what the args reader reads: which file of a checkpoint folder holds the args,
 * the checkpoint's name for titles, and the previous step of the same run.
 */

/** A checkpoint to read: where, and the name people know it by (the tree's label: `step_600`). */
export interface CheckpointRef extends ArgsRef {
  label: string;
}

/** Folders the reader understands as a whole (Hugging Face Trainer, torch.distributed.checkpoint, peft adapters). */
const WHOLE_FOLDER = new Set(['training_args.bin', 'trainer_state.json', '.metadata', 'adapter_config.json']);
/** accelerate's save_state: the objects registered for checkpointing (the run's own args) are pickled here. */
const ACCELERATE_CUSTOM = /^custom_checkpoint_(\d+)\.pkl$/;
const TORCH_FILE = /\.(pt|pth|ckpt|bin|pkl)$/i;
/** Names of the file that holds the training state (args, step) rather than only the weights. */
const STATE_FILE = /^(checkpoint|ckpt|training_state|train_state|trainer_state|state|last)\b/i;

/**
 * The path whose args to read for a checkpoint entry. A folder of an HF Trainer or DCP checkpoint is read as a whole;
 * a folder with torch files (`step_600/checkpoint.pt`, `model.pt`) is read through the file that holds the training
 * state, else the smallest torch file (the args sit with the optimizer state, not in the weights).
 */
export function argsPathOf(entry: RunEntry, remotePath: string): string {
  if (entry.kind !== 'dir' || !entry.children?.length) return remotePath;
  const kids = entry.children;
  if (kids.some((c) => WHOLE_FOLDER.has(c.name))) return remotePath;
  const files = kids.filter((c) => c.kind !== 'dir' && TORCH_FILE.test(c.name) && !c.pathB64);
  if (files.length === 0) return remotePath;
  const custom = files
    .filter((c) => ACCELERATE_CUSTOM.test(c.name))
    .sort((a, b) => Number(ACCELERATE_CUSTOM.exec(a.name)![1]) - Number(ACCELERATE_CUSTOM.exec(b.name)![1]));
  const best =
    custom[0] ??
    files.find((c) => STATE_FILE.test(c.name)) ??
    [...files].sort((a, b) => a.size - b.size || (a.name < b.name ? -1 : 1))[0]!;
  return `${remotePath.replace(/\/+$/, '')}/${best.name}`;
}

function notUtf8(): KnownGoodError {
  return new KnownGoodError(
    'settings',
    'this checkpoint path holds bytes that are not UTF-8: Known Good cannot read its args yet (rename it, or use the CLI with a link)',
  );
}

/**
 * A checkpoint entry of a listing as the args reader reads it: the file of a folder that holds the args (argsPathOf),
 * named as the tree names it (a file without its extension: `args: step_600 ↔ step_690`).
 */
export function checkpointOfEntry(hostId: string, root: RootListing, entry: RunEntry, label?: string): CheckpointRef {
  const { remotePath, remotePathB64 } = remotePathOf(root, entry);
  if (remotePathB64) throw notUtf8();
  const name = label ?? displayName(entry);
  return {
    hostId,
    path: argsPathOf(entry, remotePath),
    label: entry.kind === 'dir' ? name : checkpointLabel(name),
  };
}

/**
 * The checkpoint whose args a command reads, from its decoded target (src/core/runs/targets.ts) and, when it was
 * invoked on a Remote Runs row, that target resolved in the listing (Listings.resolve: which file of a folder holds
 * the args, see argsPathOf). A checkpoint target from a URI or a plain `{ hostId, path[, label] }` is read as named;
 * a root that is itself a checkpoint counts as one. Undefined for any other target.
 */
export function checkpointRefOf(
  target: CommandTarget | undefined,
  resolved: ResolvedTarget | undefined,
): CheckpointRef | undefined {
  if (target?.kind === 'checkpoint') {
    if (resolved?.kind === 'checkpoint' && resolved.entry.role === 'checkpoint' && !resolved.inCheckpoint)
      return checkpointOfEntry(target.hostId, resolved.root, resolved.entry, target.label);
    return { hostId: target.hostId, path: target.path, label: target.label ?? checkpointLabel(target.path) };
  }
  if (target?.kind === 'root' && resolved?.kind === 'root' && resolved.entry.role === 'checkpoint') {
    if (resolved.pathB64) throw notUtf8();
    return {
      hostId: target.hostId,
      path: argsPathOf(resolved.entry, target.path),
      label: checkpointLabel(target.path),
    };
  }
  return undefined;
}

/**
 * What a URI or a plain `{hostId, path[, label]}` (tests, other extensions, a diff editor's sides) names as "a
 * checkpoint", read as named. Undefined for anything else.
 */
export function checkpointOf(value: unknown): CheckpointRef | undefined {
  return checkpointRefOf(decodeTarget(value), undefined);
}

/** The entries from the root entry down to (not including) `target`, or undefined if it is not below `root`. */
function parentOf(root: RunEntry, target: RunEntry): RunEntry | undefined {
  const stack: RunEntry[] = [root];
  while (stack.length) {
    const e = stack.pop()!;
    for (const c of e.children ?? []) {
      if (c === target || (c.path === target.path && c.name === target.name)) return e;
      if (c.kind === 'dir' && c.role !== 'checkpoint') stack.push(c);
    }
  }
  return undefined;
}

/**
 * "Compare with Previous Step": the checkpoint of the same run (same folder; a Lightning run's versions together) with the
 * highest step below this one's;
 * without step numbers, the newest one written before it. Undefined for the first checkpoint.
 */
export function previousCheckpoint(r: ResolvedTarget): CheckpointRef | undefined {
  const rootEntry = r.root.entry;
  if (!rootEntry) return undefined;
  // A Lightning run's versions are one run: the preceding checkpoint in its one order, whichever version wrote it.
  const run = lightningRunOf(rootEntry, r.entry);
  const order = run ? lightningCheckpoints(run) : undefined;
  if (order) {
    const at = order.findIndex((c) => c.entry.path === r.entry.path);
    const prev = at > 0 ? order[at - 1] : undefined;
    return prev ? checkpointOfEntry(r.hostId, r.root, prev.entry, prev.label) : undefined;
  }
  const parent = parentOf(rootEntry, r.entry);
  if (!parent) return undefined;
  const me = r.entry;
  const siblings = (parent.children ?? []).filter((c) => c.role === 'checkpoint' && c.path !== me.path);
  let best: RunEntry | undefined;
  for (const c of siblings) {
    if (me.step !== undefined) {
      if (c.step === undefined || c.step >= me.step) continue;
      if (!best || c.step > best.step! || (c.step === best.step && (c.mtime ?? 0) > (best.mtime ?? 0))) best = c;
    } else {
      if (c.mtime === null || me.mtime === null || c.mtime >= me.mtime) continue;
      if (!best || c.mtime > (best.mtime ?? 0)) best = c;
    }
  }
  return best ? checkpointOfEntry(r.hostId, r.root, best) : undefined;
}
