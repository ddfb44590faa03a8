import * as vscode from 'vscode';
import { registerBaselines } from './baselines/register';
import { Commands, VIEW_REMOTE_RUNS } from './constants';
import { resolveHosts } from './core/hosts';
import { HostRegistry } from './core/registry';
import type { KnownGoodSettings } from './core/settings';
import { SettingsService } from './shared/settings';
import { parseSshConfig, readUserSshConfig } from './core/sshConfig';
import { defaultKnownHostsFile, type SshOptions } from './core/transport/ssh';
import { registerDashboard } from './dashboard/register';
import type { DashboardManager, DashboardTestApi } from './dashboard/manager';
import { vscodePrompts } from './hosts/prompts';
import { RemoteRunsProvider, type TreeNode } from './tree/provider';
import { registerRuns } from './runs/register';
import { AutoRefresh } from './tree/autoRefresh';
import { registerArgs } from './args/register';
import { registerTerminal } from './probes/register';
import { registerBench } from './bench/register';
import { getConfiguration, showError } from './window';

/** What activate() returns: used by the extension-host tests and by other extensions. */
export interface KnownGoodApi {
  readonly registry: HostRegistry;
  settings(): KnownGoodSettings;
  readonly tree: RemoteRunsProvider;
  /** The open dashboards (what they received and posted), for the extension-host tests. */
  readonly dashboard: DashboardTestApi;
}

/**
 * The composition root: every service is built once here and disposed through `dispose()`, which VS Code calls
 * because the container itself is in context.subscriptions.
 */
export class Container implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  readonly log: vscode.LogOutputChannel;
  readonly registry: HostRegistry;
  readonly tree: RemoteRunsProvider;
  readonly dashboard: DashboardManager;
  readonly treeView: vscode.TreeView<TreeNode>;
  readonly settings: SettingsService;
  /** Shared by reference with the SSH pool: settings changes apply to the next connection. */
  private readonly sshOptions: SshOptions;

  constructor(readonly context: vscode.ExtensionContext) {
    this.log = this.track(vscode.window.createOutputChannel('Known Good', { log: true }));
    this.settings = this.track(
      new SettingsService(
        () => getConfiguration('knownGood'),
        (p) => this.reportProblems(p),
      ),
    );
    const current = this.settings.current;
    this.sshOptions = {
      knownHostsFiles: [current.knownHostsFile ?? defaultKnownHostsFile()],
      connectTimeoutMs: current.connectTimeoutMs,
      prompts: vscodePrompts(context.secrets),
      log: (line) => this.log.info(line),
    };
    this.registry = new HostRegistry({ commandTimeoutMs: current.commandTimeoutMs, ssh: this.sshOptions });
    this.track({ dispose: () => this.registry.dispose() });
    this.applyHosts();

    const settings = () => this.settings.current;
    this.tree = this.track(
      new RemoteRunsProvider(this.registry, () => settings().problems, {
        newestFirst: () => settings().newestFirst,
        depth: () => 3,
        maxEntries: () => settings().maxEntries,
        log: (line) => this.log.info(line),
      }),
    );
    this.treeView = this.track(
      vscode.window.createTreeView(VIEW_REMOTE_RUNS, {
        treeDataProvider: this.tree,
        showCollapseAll: true,
        canSelectMany: true,
      }),
    );
    this.track(
      new AutoRefresh(
        this.treeView,
        this.tree,
        this.registry,
        () => settings().autoRefreshSeconds,
        this.settings.onDidChange,
      ),
    );

    this.track(
      this.settings.onDidChange((s) => {
        this.registry.setCommandTimeout(s.commandTimeoutMs);
        this.applyHosts();
        this.tree.reload();
      }),
    );
    this.command(Commands.showLog, () => this.log.show());

    // Feature registrations: one line each; each feature lives in its own folder (src/<feature>/register.ts).
    registerRuns(this);
    registerBaselines(this);
    this.dashboard = registerDashboard(this);
    registerArgs(this);
    registerTerminal(this);
    registerBench(this);
  }

  get api(): KnownGoodApi {
    return {
      registry: this.registry,
      settings: () => this.settings.current,
      tree: this.tree,
      dashboard: this.dashboard,
    };
  }

  private reportProblems(problems: readonly string[]): void {
    for (const p of problems) this.log?.warn(p);
    if (problems.length)
      void showError(
        `Known Good settings: ${problems[0]}${problems.length > 1 ? ` (+${problems.length - 1} more)` : ''}`,
      );
  }

  private applyHosts(): void {
    const current = this.settings.current;
    this.sshOptions.knownHostsFiles = [current.knownHostsFile ?? defaultKnownHostsFile()];
    this.sshOptions.connectTimeoutMs = current.connectTimeoutMs;
    const ssh = parseSshConfig(current.includeSshConfigHosts ? readUserSshConfig() : undefined);
    const hosts = resolveHosts(current, ssh, current.localRoots);
    if (current.localPython) hosts[0] = { ...hosts[0]!, python: current.localPython };
    this.registry.setHosts(hosts);
  }

  /** Registers a command whose failures are logged and shown; arguments come from VS Code (tree nodes, URIs). */
  command<A extends unknown[]>(id: string, run: (...args: A) => unknown): void {
    this.track(
      vscode.commands.registerCommand(id, async (...args: unknown[]) => {
        try {
          return await run(...(args as A));
        } catch (e) {
          this.log.error(`${id}: ${e instanceof Error ? e.message : String(e)}`);
          void showError(e instanceof Error ? e.message : String(e));
          return undefined;
        }
      }),
    );
  }

  track<T extends vscode.Disposable>(d: T): T {
    this.disposables.push(d);
    return d;
  }

  dispose(): void {
    for (const d of this.disposables.splice(0).reverse()) {
      try {
        d.dispose();
      } catch {
        /* keep disposing the rest */
      }
    }
  }
}
