import { Commands, DASHBOARD_VIEW_TYPE } from '../constants';
import type { RegisterCommand } from '../shared/commands';
import { registerWebviewPanelSerializer } from '../window';
import { DashboardManager } from './manager';
import type { DashboardDeps } from './services';

export type { DashboardDeps } from './services';

/** "Open Dashboard" on runs, metrics logs and hosts (and in the palette), and the serializer that restores it. */
export function registerDashboard(
  d: DashboardDeps & { command: RegisterCommand; track<T extends { dispose(): unknown }>(x: T): T },
): DashboardManager {
  const manager = d.track(new DashboardManager(d));
  // another kind of target (a checkpoint, a baseline) opens its host's newest run, as the host row does
  d.command(Commands.openDashboard, { kinds: ['host', 'root', 'run', 'log'] }, (t, call) => manager.command(t, call));
  d.track(registerWebviewPanelSerializer(DASHBOARD_VIEW_TYPE, manager.serializer));
  return manager;
}
