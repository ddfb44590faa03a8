import * as vscode from 'vscode';
import { KnownGoodError, messageOf, presentationOf } from '../core/errors';
import { codeRunningSettingOf, refuseInRestrictedMode, restrictedRefusalOf } from '../core/settings';
import { EDIT_HOST, isHostSettingsFailure } from '../core/transport/sshErrors';
import type { ResolvedTarget } from '../core/runs/listings';
import {
  decodeTarget,
  narrowTarget,
  runsNodeOf,
  type CommandTarget,
  type TargetKind,
  type TargetOf,
} from '../core/runs/targets';
import { Commands, MANAGE_WORKSPACE_TRUST } from '../constants';
import { executeCommand, showError, showInfo } from '../window';
import type { Hosts } from './hosts';

/** What a handler gets besides its target: the raw call, for the few that need more than the target. */
export interface CommandCall {
  /** Every argument VS Code (or a caller of executeCommand) passed. */
  readonly args: readonly unknown[];
  /**
   * When the first argument is a Remote Runs row: its target as the host's listing has it (Listings.resolve: entry,
   * root, step, format, metrics log). Handlers read this, never the row. A plain call (palette, URI, another
   * command, tests) is taken as named: undefined.
   */
  readonly resolved: ResolvedTarget | undefined;
  /** The tree's multi-selection (its second argument) decoded, in selection order; empty otherwise. */
  readonly selection: readonly CommandTarget[];
  /** `selection` resolved the same way (parallel to it). */
  readonly resolvedSelection: readonly (ResolvedTarget | undefined)[];
  /** The second argument when it is not a selection: options from tests and other commands (`{ label }`, …). */
  readonly extra: unknown;
}

export interface Accepts<K extends TargetKind> {
  /** The target kinds the command acts on; a target of another kind becomes its host when `host` is accepted. */
  kinds: readonly K[];
  /** Without a target: ask for a host with this placeholder (the one host picker), and cancel quietly on Escape. */
  pick?: string;
  /**
   * The command runs code a run names on its host (a replay of the training script), in words: it refuses in
   * Restricted Mode (refuseInRestrictedMode) before anything else, with Manage Workspace Trust.
   */
  runsCode?: string;
}

export type CommandRunner<K extends TargetKind> = (target: TargetOf<K> | undefined, call: CommandCall) => unknown;
export type PickedRunner<K extends TargetKind> = (target: TargetOf<K | 'host'>, call: CommandCall) => unknown;

/** How features register commands: `command(id, accepts, run)`; the container decodes, picks and presents failures. */
export interface RegisterCommand {
  <K extends TargetKind>(id: string, accepts: Accepts<K> & { pick: string }, run: PickedRunner<K>): void;
  <K extends TargetKind>(id: string, accepts: Accepts<K> | null, run: CommandRunner<K>): void;
}

export interface CommandHostDeps {
  hosts: Hosts;
  /** Listings.resolve: a target in its host's listing as it is now. */
  resolve(target: CommandTarget): ResolvedTarget | undefined;
  log: Pick<vscode.LogOutputChannel, 'info' | 'warn' | 'error' | 'show'>;
  track(d: vscode.Disposable): void;
  /** The workspace is not trusted: a missing code-running setting may be the workspace's, withheld. */
  restrictedMode(): boolean;
}

/** Decodes a call's arguments into a CommandCall (exported for the unit tests of the decoding). */
export function callOf(
  args: readonly unknown[],
  resolve: CommandHostDeps['resolve'] = () => undefined,
): { target: CommandTarget | undefined; call: CommandCall } {
  const [first, second] = args;
  const resolveRow = (arg: unknown, t: CommandTarget | undefined) => (t && runsNodeOf(arg) ? resolve(t) : undefined);
  const selected = (Array.isArray(second) ? second : []).flatMap((arg: unknown) => {
    const t = decodeTarget(arg);
    return t ? [{ t, resolved: resolveRow(arg, t) }] : [];
  });
  const target = decodeTarget(first);
  return {
    target,
    call: {
      args,
      resolved: resolveRow(first, target),
      selection: selected.map((x) => x.t),
      resolvedSelection: selected.map((x) => x.resolved),
      extra: Array.isArray(second) ? undefined : second,
    },
  };
}

/**
 * The container's `command`: registers `id`, decodes its arguments once into a typed target, falls back to the host
 * picker where the command asks for it, and presents failures by their error code (src/core/errors.ts): usage
 * mistakes as information, cancels silently, lost connections and timeouts as errors with Retry and Show Log, a
 * failure the host's settings fix (a key, a port, a host key, a container) with Edit Host… as well.
 */
export function commandRegistrar(deps: CommandHostDeps): RegisterCommand {
  const register = <K extends TargetKind>(
    id: string,
    accepts: Accepts<K> | null,
    run: (target: TargetOf<K> | TargetOf<'host'> | undefined, call: CommandCall) => unknown,
  ): void => {
    const invoke = async (...args: unknown[]): Promise<unknown> => {
      let hostId: string | undefined;
      try {
        if (accepts?.runsCode) refuseInRestrictedMode(deps.restrictedMode(), accepts.runsCode);
        const { target, call } = callOf(args, (t) => deps.resolve(t));
        let t: TargetOf<K> | TargetOf<'host'> | undefined = accepts ? narrowTarget(target, accepts.kinds) : undefined;
        if (!t && accepts?.pick) {
          const host = await deps.hosts.pick(accepts.pick);
          if (!host) return undefined;
          t = { kind: 'host', hostId: host.id };
        }
        hostId = t?.hostId;
        return await run(t, call);
      } catch (e) {
        present(id, e, () => void invoke(...args), hostId);
        return undefined;
      }
    };
    deps.track(vscode.commands.registerCommand(id, invoke));
  };

  const present = (id: string, e: unknown, retry: () => void, hostId: string | undefined): void => {
    const message = messageOf(e);
    const how = presentationOf(e);
    if (hostId && e instanceof KnownGoodError && isHostSettingsFailure(e.code)) {
      showHostFailure(deps.log, `${id}: ${message}`, e, hostId, retry);
      return;
    }
    const setting = e instanceof KnownGoodError ? codeRunningSettingOf(e.detail) : undefined;
    if (setting && deps.restrictedMode()) {
      showRestrictedMode(deps.log, `${id}: ${message}`, setting);
      return;
    }
    if (e instanceof KnownGoodError && restrictedRefusalOf(e.detail) !== undefined) {
      deps.log.info(`${id}: ${message}`);
      offerTrust(message);
      return;
    }
    if (how === 'silent') {
      deps.log.info(`${id}: ${message}`);
      return;
    }
    if (how === 'information') {
      deps.log.info(`${id}: ${message}`);
      void showInfo(message);
      return;
    }
    deps.log.error(`${id}: ${message}`);
    if (how === 'connection') {
      void showError(message, 'Retry', 'Show Log').then((choice) => {
        if (choice === 'Retry') retry();
        else if (choice === 'Show Log') deps.log.show();
      });
      return;
    }
    void showError(message);
  };

  return register as RegisterCommand;
}

/**
 * A command needs a code-running setting that is not set, in Restricted Mode: the folder's own value of it (if it has
 * one) is withheld, and only trusting the folder, or setting it in the user's own settings, changes that.
 */
function showRestrictedMode(log: Pick<vscode.LogOutputChannel, 'error'>, logLine: string, setting: string): void {
  log.error(`${logLine} (Restricted Mode)`);
  offerTrust(
    `This folder is in Restricted Mode: Known Good does not take ${setting} from the folder's settings, and your ` +
      `user settings do not set it. Trust the folder to use its value, or set your own.`,
  );
}

/** `message` with Manage Workspace Trust (VS Code's trust editor). */
function offerTrust(message: string): void {
  const manage = 'Manage Workspace Trust';
  void showError(message, manage).then((choice) => {
    if (choice === manage) void executeCommand(MANAGE_WORKSPACE_TRUST);
  });
}

/**
 * A host's connection failed in a way its settings fix (a key, a port, a host key, a container): logged as an error
 * and shown whole, with Edit Host… (the host's wizard) and Show Log.
 */
export function showHostFailure(
  log: Pick<vscode.LogOutputChannel, 'error' | 'show'>,
  logLine: string,
  e: KnownGoodError,
  hostId: string,
  retry?: () => void,
): void {
  log.error(logLine);
  const buttons = [EDIT_HOST, 'Show Log', ...(retry ? ['Retry'] : [])];
  void showError(e.message, ...buttons).then((choice) => {
    if (choice === EDIT_HOST) void vscode.commands.executeCommand(Commands.editHost, { hostId });
    else if (choice === 'Show Log') log.show();
    else if (choice === 'Retry') retry?.();
  });
}
