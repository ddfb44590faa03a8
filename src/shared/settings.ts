import * as vscode from 'vscode';
import { parseSettings, type HostSettings, type KnownGoodSettings } from '../core/settings';
import { isWorkspaceTrusted, onDidGrantWorkspaceTrust } from '../window';

/** The `knownGood` section, as the container hands it over (getConfiguration is called only there). */
export type ConfigSection = () => Pick<vscode.WorkspaceConfiguration, 'get' | 'inspect' | 'update'>;

/** What features read and write of the settings: the parsed settings, their change event, and the few writes. */
export interface SettingsAccess {
  /** Parsed once per configuration change. */
  readonly current: KnownGoodSettings;
  readonly onDidChange: vscode.Event<KnownGoodSettings>;
  /** `knownGood.hosts` (user settings), changed by `change`. */
  updateHosts(change: (hosts: HostSettings[]) => HostSettings[]): Promise<void>;
  setLocalRoots(roots: string[]): Promise<void>;
  setLocalPython(path: string): Promise<void>;
}

/**
 * The one reader of `knownGood.*`: parses the section with the core's parseSettings when the extension starts and
 * again on each change that affects it, then tells its listeners (the container applies hosts and timeouts first).
 * It also reads workspace trust: in Restricted Mode the workspace's host entries lose their code-running fields
 * (VS Code withholds the workspace's values of the restricted settings itself), and when the person grants trust
 * the settings are read again (VS Code fires a configuration change only when a restricted value changes).
 */
export class SettingsService implements SettingsAccess, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<KnownGoodSettings>();
  readonly onDidChange = this.changed.event;
  private readonly subs: vscode.Disposable[];
  current: KnownGoodSettings;

  constructor(
    private readonly section: ConfigSection,
    private readonly reportProblems: (problems: readonly string[]) => void,
  ) {
    this.current = this.read();
    const reread = () => {
      this.current = this.read();
      this.changed.fire(this.current);
    };
    this.subs = [
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('knownGood')) reread();
      }),
      onDidGrantWorkspaceTrust(reread),
    ];
  }

  private read(): KnownGoodSettings {
    const cfg = this.section();
    const hosts = cfg.inspect<unknown>('hosts');
    const s = parseSettings((k) => cfg.get(k), {
      trusted: isWorkspaceTrusted(),
      hostsFromWorkspace: hosts?.workspaceValue !== undefined || hosts?.workspaceFolderValue !== undefined,
      userHosts: hosts?.globalValue,
    });
    this.reportProblems(s.problems);
    return s;
  }

  async updateHosts(change: (hosts: HostSettings[]) => HostSettings[]): Promise<void> {
    const cfg = this.section();
    const cur = cfg.inspect<unknown[]>('hosts')?.globalValue ?? [];
    await cfg.update('hosts', change(cur as HostSettings[]), vscode.ConfigurationTarget.Global);
  }

  async setLocalRoots(roots: string[]): Promise<void> {
    await this.section().update('localRoots', roots, vscode.ConfigurationTarget.Global);
  }

  async setLocalPython(path: string): Promise<void> {
    await this.section().update('localPython', path, vscode.ConfigurationTarget.Global);
  }

  dispose(): void {
    for (const sub of this.subs) sub.dispose();
    this.changed.dispose();
  }
}
