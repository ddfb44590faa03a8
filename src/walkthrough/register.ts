import { HAS_REMOTE_HOST_CONTEXT, WALKTHROUGH_ID, WalkthroughCommands } from '../constants';
import type { KeptStore } from '../core/runs/viewState';
import { firstTime } from '../core/util/firstTime';
import type { RegisterCommand } from '../shared/commands';
import { executeCommand } from '../window';

/** What the walkthrough needs from the extension. */
export interface WalkthroughDeps {
  command: RegisterCommand;
  /** The extension's id (`publisher.name`): VS Code names a walkthrough `<extension id>#<walkthrough id>`. */
  extensionId: string;
  /** globalState: whether the walkthrough was opened once already on this machine. */
  kept: KeptStore;
  /**
   * Whether a first run may open it: an installed extension (not one under development or test, whose every fresh
   * window would open it over what the session is doing) where VS Code's own `openOnInstall` setting is on, for
   * someone with nothing set up yet.
   */
  openOnFirstRun: boolean;
}

export const WALKTHROUGH_OPENED_KEY = 'knownGood.walkthrough.opened';

/** Says whether a host besides This machine is configured (called whenever the hosts are set). */
export function setHasRemoteHost(has: boolean): void {
  void executeCommand('setContext', HAS_REMOTE_HOST_CONTEXT, has);
}

/**
 * Known Good: Get Started (package.json contributes.walkthroughs): opened by its command, from Remote Runs' welcome,
 * and once by itself after the install (the extension activates on startup for it: VS Code opens it only when the
 * install happened in that window). VS Code checks a step off when its command runs (completionEvents), the first
 * when a host exists.
 */
export function registerWalkthrough(d: WalkthroughDeps): void {
  const open = () => executeCommand('workbench.action.openWalkthrough', `${d.extensionId}#${WALKTHROUGH_ID}`, false);
  d.command(WalkthroughCommands.getStarted, null, () => open());
  if (d.openOnFirstRun && firstTime(d.kept, WALKTHROUGH_OPENED_KEY)) void open();
}
