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
  d.command(Commands.openDashboard, null, (_t, { args: [node, nodes] }) => manager.command(node, nodes));
  d.track(registerWebviewPanelSerializer(DASHBOARD_VIEW_TYPE, manager.serializer));
  return manager;
}
