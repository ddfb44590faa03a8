import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { registerBaselines } from './baselines/register';
import { Commands, VIEW_REMOTE_RUNS } from './constants';
import { resolveHosts } from './core/hosts';
import { HostRegistry } from './core/registry';
import { parseSettings, type KnownGoodSettings } from './core/settings';
import { parseSshConfig } from './core/sshConfig';
import { defaultKnownHostsFile, type SshOptions } from './core/transport/ssh';
import { registerDashboard } from './dashboard/register';
import type { DashboardManager, DashboardTestApi } from './dashboard/manager';
import { vscodePrompts } from './hosts/prompts';
import { RemoteRunsProvider, type TreeNode } from './tree/provider';
import { registerRuns } from './runs/register';
import { AutoRefresh } from './tree/autoRefresh';
import { registerArgs } from './args/register';
import { registerTerminal } from './terminal/register';
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

function readSshConfig(): string | undefined {
  try {
    return readFileSync(join(homedir(), '.ssh', 'config'), 'utf8');
  } catch {
    return undefined;
  }
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
  private current: KnownGoodSettings;
  /** Shared by reference with the SSH pool: settings changes apply to the next connection. */
  private readonly sshOptions: SshOptions;

  constructor(readonly context: vscode.ExtensionContext) {
    this.log = this.track(vscode.window.createOutputChannel('Known Good', { log: true }));
    this.current = this.readSettings();
    this.sshOptions = {
      knownHostsFiles: [this.current.knownHostsFile ?? defaultKnownHostsFile()],
      connectTimeoutMs: this.current.connectTimeoutMs,
      prompts: vscodePrompts(context.secrets),
      log: (line) => this.log.info(line),
    };
    this.registry = new HostRegistry({ commandTimeoutMs: this.current.commandTimeoutMs, ssh: this.sshOptions });
    this.track({ dispose: () => this.registry.dispose() });
    this.applyHosts();

    const cfg = () => getConfiguration('knownGood');
    this.tree = this.track(
      new RemoteRunsProvider(this.registry, () => this.current.problems, {
        newestFirst: () => cfg().get<string>('sortSteps') !== 'oldestFirst',
        depth: () => 3,
        maxEntries: () => cfg().get<number>('maxEntries') ?? 5000,
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
      new AutoRefresh(this.treeView, this.tree, this.registry, () => cfg().get<number>('autoRefreshSeconds') ?? 0),
    );

    this.track(
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (!e.affectsConfiguration('knownGood')) return;
        this.current = this.readSettings();
        this.registry.setCommandTimeout(this.current.commandTimeoutMs);
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
    return { registry: this.registry, settings: () => this.current, tree: this.tree, dashboard: this.dashboard };
  }

  private readSettings(): KnownGoodSettings {
    const cfg = getConfiguration('knownGood');
    const s = parseSettings((k) => cfg.get(k));
    for (const p of s.problems) {
      this.log?.warn(p);
    }
    if (s.problems.length)
      void showError(
        `Known Good settings: ${s.problems[0]}${s.problems.length > 1 ? ` (+${s.problems.length - 1} more)` : ''}`,
      );
    return s;
  }

  private applyHosts(): void {
    if (this.sshOptions) {
      this.sshOptions.knownHostsFiles = [this.current.knownHostsFile ?? defaultKnownHostsFile()];
      this.sshOptions.connectTimeoutMs = this.current.connectTimeoutMs;
    }
    const cfg = getConfiguration('knownGood');
    const local = cfg.get<unknown>('localRoots');
    const localRoots =
      Array.isArray(local) && local.length && local.every((x) => typeof x === 'string') ? local : undefined;
    const localPython = cfg.get<unknown>('localPython');
    const ssh = parseSshConfig(this.current.includeSshConfigHosts ? readSshConfig() : undefined);
    const hosts = resolveHosts(this.current, ssh, localRoots);
    if (typeof localPython === 'string' && localPython.trim()) hosts[0] = { ...hosts[0]!, python: localPython.trim() };
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
