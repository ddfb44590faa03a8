import * as vscode from 'vscode';
import { Commands } from '../constants';
import { KnownGoodError } from '../core/errors';
import { ArgsReader } from '../core/args/reader';
import { argsDiffTitle } from '../core/args/render';
import { checkpointOf, checkpointRefOf, previousCheckpoint, type CheckpointRef } from '../core/args/target';
import { ARGS_SCHEME, sameRef } from '../core/args/uri';
import type { CommandTarget } from '../core/runs/targets';
import type { ResolvedTarget } from '../core/runs/listings';
import { executeCommand, showError, showInfo, showTextDocument, showWarning } from '../window';
import type { CommandCall, RegisterCommand } from '../shared/commands';
import { registerReadonlyDocuments } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import { ArgsDocuments, argsUri } from './documents';

/** What the args feature needs from the extension. */
export interface ArgsDeps {
  command: RegisterCommand;
  track<T extends vscode.Disposable>(d: T): T;
  hosts: Pick<Hosts, 'session'>;
  settings: SettingsAccess;
  log: Pick<vscode.LogOutputChannel, 'error'>;
  /** Marks the checkpoint selected for compare where it is shown (Remote Runs), or clears the mark. */
  markSelected?(ref: { hostId: string; path: string } | undefined): void;
  /** Where the Select for Compare choice is kept across reloads (workspaceState, core/runs/viewState.ts). */
  keptSelection?: { get(): CheckpointRef | undefined; set(ref: CheckpointRef | undefined): void };
}

/** What other features may ask of args (the dashboard's checkpoint buttons). */
export interface ArgsApi {
  /** Opens a checkpoint's args document. */
  open(ref: CheckpointRef): Promise<vscode.Uri>;
  /** Opens the diff of two checkpoints' args, `a` on the left. */
  openDiff(a: CheckpointRef, b: CheckpointRef): Promise<{ left: vscode.Uri; right: vscode.Uri }>;
}

const HAS_SELECTION = 'knownGood.args.hasSelection';

/** The checkpoint a command was invoked on: its decoded target, resolved in the listing when it was a row. */
function need(target: CommandTarget | undefined, call: Pick<CommandCall, 'resolved'>): CheckpointRef {
  const ref = checkpointRefOf(target, call.resolved);
  if (!ref) throw new KnownGoodError('usage', 'Pick a checkpoint in Remote Runs first');
  return ref;
}

/**
 * The two checkpoints of a multi-selection, the lower step on the left (rows of Remote Runs have their steps; plain
 * refs keep the selection's order).
 */
function pairOf(
  call: Pick<CommandCall, 'selection' | 'resolvedSelection'>,
): [CheckpointRef, CheckpointRef] | undefined {
  if (call.selection.length !== 2) return undefined;
  const [a, b] = [0, 1].map((i) => checkpointRefOf(call.selection[i], call.resolvedSelection[i]));
  if (!a || !b) return undefined;
  const [sx, sy] = call.resolvedSelection.map((r) => r?.entry.step);
  return sx !== undefined && sy !== undefined && sy < sx ? [b, a] : [a, b];
}

/**
 * Checkpoint args: "Open Args" (also the tree's click on a checkpoint), "Select for Compare" / "Compare with Selected",
 * "Compare Args" on two selected checkpoints, "Compare with Previous Step" and "Show Changed Args Only". Across runs
 * and hosts: a side is a host id and a path.
 */
export function registerArgs(c: ArgsDeps): ArgsApi {
  const hostLabel = (hostId: string) => c.hosts.session(hostId).label;
  const reader = new ArgsReader({
    host: (hostId) => {
      const s = c.hosts.session(hostId);
      return { label: s.label, probes: s.probes };
    },
    allowTorchLoad: () => c.settings.current.allowTorchLoad,
    confirmUnsafeLoad: async (host, path, why) => {
      const yes = 'Load with weights_only=False';
      const pick = await showWarning(
        `Load ${path} on ${host} with torch.load(weights_only=False)?`,
        {
          modal: true,
          detail: `The safe reader could not decode it and ${why}\n\nweights_only=False runs any code inside the file, as the user on ${host}. Only do this for a file you trust.`,
        },
        yes,
      );
      return pick === yes;
    },
  });
  const docs = c.track(
    new ArgsDocuments(reader, hostLabel, (m) => {
      c.log.error(`args: ${m}`);
      void showError(m);
    }),
  );
  // a read-only file system, so VS Code restores the args editors and diffs after a reload (their URIs say it all)
  c.track(registerReadonlyDocuments(ARGS_SCHEME, (uri) => docs.provideTextDocumentContent(uri), docs.onDidChange));

  let selected: CheckpointRef | undefined;
  const setSelected = (ref: CheckpointRef | undefined) => {
    selected = ref;
    c.markSelected?.(ref);
    c.keptSelection?.set(ref);
    void executeCommand('setContext', HAS_SELECTION, ref !== undefined);
  };

  const open = async (ref: CheckpointRef): Promise<vscode.Uri> => {
    const uri = argsUri({ hostId: ref.hostId, path: ref.path, label: ref.label, view: 'args' });
    docs.reload(uri);
    await showTextDocument(uri, { preview: true });
    return uri;
  };

  const diff = async (a: CheckpointRef, b: CheckpointRef): Promise<{ left: vscode.Uri; right: vscode.Uri }> => {
    if (sameRef(a, b)) throw new KnownGoodError('usage', `${a.label}: pick another checkpoint to compare with`);
    // diff sides, not the plain args documents: their shared header keeps the diff to args only
    const left = argsUri({ ...a, view: 'left', other: b });
    const right = argsUri({ ...b, view: 'right', other: a });
    docs.reload(left);
    docs.reload(right);
    const title = argsDiffTitle({ host: hostLabel(a.hostId), ...a }, { host: hostLabel(b.hostId), ...b });
    await executeCommand('vscode.diff', left, right, title, { preview: true });
    return { left, right };
  };

  const changed = async (a: CheckpointRef, b: CheckpointRef): Promise<vscode.Uri> => {
    if (sameRef(a, b)) throw new KnownGoodError('usage', `${a.label}: pick another checkpoint to compare with`);
    const uri = argsUri({ ...b, view: 'changed', other: a });
    docs.reload(uri);
    // a tab of its own: a preview tab would replace the diff it was asked from
    await showTextDocument(uri, { preview: false });
    return uri;
  };

  const previousOf = (r: ResolvedTarget | undefined): CheckpointRef | undefined =>
    r?.kind === 'checkpoint' && !r.inCheckpoint ? previousCheckpoint(r) : undefined;

  // A checkpoint node, a root that is one, a `knownGood:` URI or `{ hostId, path }`: decoded as a CommandTarget;
  // checkpointRefOf (core/args/target.ts) picks the file of a checkpoint folder that holds the args.
  const { command } = c;
  const onCheckpoint = { kinds: ['checkpoint', 'root'] } as const;
  command(Commands.argsOpen, onCheckpoint, (t, call) => open(need(t, call)));

  command(Commands.argsSelectForCompare, onCheckpoint, (t, call) => {
    const ref = need(t, call);
    setSelected(ref);
    return ref;
  });

  command(Commands.argsCompareWithSelected, onCheckpoint, (t, call) => {
    if (!selected)
      throw new KnownGoodError('usage', 'Select a checkpoint for compare first (right-click → Select for Compare)');
    return diff(selected, need(t, call));
  });

  command(Commands.argsCompare, onCheckpoint, (_t, call) => {
    const pair = pairOf(call);
    if (!pair)
      throw new KnownGoodError('usage', 'Compare Args: select two checkpoints (Ctrl/Cmd+click), then right-click one');
    return diff(pair[0], pair[1]);
  });

  command(Commands.argsCompareWithPrevious, onCheckpoint, async (t, call) => {
    const ref = need(t, call);
    const prev = previousOf(call.resolved);
    if (!prev) {
      void showInfo(`${ref.label} is the first checkpoint of its run: no previous step to compare with`);
      return undefined;
    }
    return diff(prev, ref);
  });

  command(Commands.argsShowChanged, onCheckpoint, async (t, call) => {
    const pair = pairOf(call);
    if (pair) return changed(pair[0], pair[1]);
    // from a diff editor's title: its two sides
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    if (call.args[0] instanceof vscode.Uri && input instanceof vscode.TabInputTextDiff) {
      const a = checkpointOf(input.original);
      const b = checkpointOf(input.modified);
      if (a && b) return changed(a, b);
    }
    // On a checkpoint: what changed since the step before it in its run (as Compare with Previous Step), whatever
    // is still selected for compare; the selection only serves a run's first checkpoint.
    const ref = need(t, call);
    const prev = previousOf(call.resolved);
    if (prev) return changed(prev, ref);
    if (selected && !sameRef(selected, ref)) return changed(selected, ref);
    throw new KnownGoodError(
      'usage',
      `Show Changed Args Only: ${ref.label} is the first checkpoint of its run; select another for compare first`,
    );
  });

  // The choice made before a reload: Compare with Selected works on as before, and the row says so again.
  const kept = c.keptSelection?.get();
  if (kept) setSelected(kept);
  else void executeCommand('setContext', HAS_SELECTION, false);
  return { open, openDiff: diff };
}
