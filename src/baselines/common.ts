import * as vscode from 'vscode';
import type { BaselineStore } from '../core/baselines/store';
import { isKnownGoodError } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import type { RegisterCommand } from '../shared/commands';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import type { TreeSection } from '../shared/treeSection';
import { withProgress } from '../window';
import type { EnvContentProvider } from './content';
import type { BaselinesSection } from './section';

/** What the baselines feature needs from the extension (built once by the container). */
export interface BaselinesDeps {
  command: RegisterCommand;
  track(d: vscode.Disposable): void;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'warn' | 'error'>;
  settings: SettingsAccess;
  store: BaselineStore;
  /** The store's key for a host (its transport id, the same whichever name the host has in settings). */
  storeKeyOf(host: HostSpec): string;
  /** Places the Baselines node under each host of Remote Runs. */
  registerSection(section: TreeSection): vscode.Disposable;
  /** Re-renders a node of Remote Runs (no remote call); the whole tree without one. */
  refresh(node?: unknown): void;
}

/** What the baselines commands share: the deps and what registerBaselines built once. */
export interface BaselinesFeature extends BaselinesDeps {
  section: BaselinesSection;
  content: EnvContentProvider;
}

export type Report = (message: string, fraction?: number) => void;

/**
 * A notification with Cancel: the token becomes an AbortSignal for the remote work. A cancel resolves to
 * undefined (nothing to report); other failures propagate to the command's error handling.
 */
export async function withCancellableProgress<R>(
  title: string,
  task: (signal: AbortSignal, report: Report) => Promise<R>,
): Promise<R | undefined> {
  return withProgress(
    { location: vscode.ProgressLocation.Notification, title, cancellable: true },
    async (progress, token) => {
      const ac = new AbortController();
      const sub = token.onCancellationRequested(() => ac.abort());
      let done = 0;
      const report: Report = (message, fraction) => {
        if (fraction === undefined || fraction <= done) {
          progress.report({ message });
          return;
        }
        progress.report({ message, increment: (fraction - done) * 100 });
        done = fraction;
      };
      try {
        return await task(ac.signal, report);
      } catch (e) {
        if (ac.signal.aborted || isKnownGoodError(e, 'cancelled')) return undefined;
        throw e;
      } finally {
        sub.dispose();
      }
    },
  );
}
