import { Commands, DASHBOARD_VIEW_TYPE } from '../constants';
import type { Container } from '../container';
import { registerWebviewPanelSerializer } from '../window';
import { DashboardManager } from './manager';

/** "Open Dashboard" on runs, metrics logs and hosts (and in the palette), and the serializer that restores it. */
export function registerDashboard(c: Container): DashboardManager {
  const manager = c.track(new DashboardManager(c));
  c.command(Commands.openDashboard, (node?: unknown, nodes?: unknown) => manager.command(node, nodes));
  c.track(registerWebviewPanelSerializer(DASHBOARD_VIEW_TYPE, manager.serializer));
  return manager;
}
