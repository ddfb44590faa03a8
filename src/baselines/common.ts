import * as vscode from 'vscode';
import type { BaselineStore } from '../core/baselines/store';
import type { HostSpec } from '../core/hosts';
import type { KeptStorage } from '../core/util/keptDocs';
import type { RegisterCommand } from '../shared/commands';
import type { Documents } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import type { TreeSection } from '../shared/treeSection';
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
  /** Plans and reports open as read-only documents kept with the workspace (back after a reload). */
  documents: Pick<Documents, 'show' | 'showReplacing'>;
  /**
   * The workspace's storage: which restore a plan document's Run runs, and the captures of "now" (so their compares
   * come back after a reload).
   */
  kept: KeptStorage;
}

/** What the baselines commands share: the deps and what registerBaselines built once. */
export interface BaselinesFeature extends BaselinesDeps {
  section: BaselinesSection;
  content: EnvContentProvider;
}
