import { join } from 'node:path';
import * as vscode from 'vscode';
import type { KnownGoodApi, KnownGoodTestApi, ReplayRunOutcome } from './api';
import { registerArgs } from './args/register';
import { registerBaselines } from './baselines/register';
import { registerBench } from './bench/register';
import {
  BaselineCommands,
  BenchCommands,
  BisectCommands,
  Commands,
  ReplayCommands,
  VIEW_REMOTE_RUNS,
} from './constants';
import { BaselineStore } from './core/baselines/store';
import { LiveWatch } from './core/whatChanged/liveWatch';
import { WhatChangedStore } from './core/whatChanged/store';
import { LOCAL_HOST_ID, resolveHosts, type HostSpec } from './core/hosts';
import { HostRegistry } from './core/registry';
import { Listings } from './core/runs/listings';
import { RemoteRunsViewState } from './core/runs/viewState';
import { parseSshConfig, readUserSshConfig } from './core/sshConfig';
import { defaultKnownHostsFile, type SshOptions } from './core/transport/ssh';
import { isHostSettingsFailure } from './core/transport/sshErrors';
import { KnownGoodError, messageOf } from './core/errors';
import { registerDashboard } from './dashboard/register';
import { fleetBaselinesDir, registerFleet } from './fleet/register';
import { vscodePrompts } from './hosts/prompts';
import { registerProbes } from './probes/register';
import { registerRuns } from './runs/register';
import { commandRegistrar, showHostFailure, type RegisterCommand } from './shared/commands';
import { registerDocuments } from './shared/documents';
import { hostsOf, type Hosts } from './shared/hosts';
import { SettingsService } from './shared/settings';
import { AgeTicker, AutoRefresh } from './tree/autoRefresh';
import { RemoteRunsProvider } from './tree/provider';
import { KeepViewState } from './tree/viewState';
import type { TreeNode } from './shared/treeSection';
import { registerWalkthrough, setHasRemoteHost } from './walkthrough/register';
import { registerWhatChanged } from './whatChanged/register';
import { registerBisect } from './bisect/register';
import { registerReplay } from './replay/register';
import { executeCommand, getConfiguration, showError } from './window';

/**
 * The composition root: every shared service is built once here (settings, hosts and the host picker, the baseline
 * store and its key, the tree, command registration) and each feature gets the narrow …Deps it declares, plus the
 * capabilities of other features it needs (args.openDiff, baselines.save), never their modules. Everything is
 * disposed through `dispose()`, which VS Code calls because the container itself is in context.subscriptions.
 */
export class Container implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private readonly log: vscode.LogOutputChannel;
  private readonly registry: HostRegistry;
  private readonly settings: SettingsService;
  private readonly hosts: Hosts;
  private readonly tree: RemoteRunsProvider;
  /** Shared by reference with the SSH pool: settings changes apply to the next connection. */
  private readonly sshOptions: SshOptions;
  /** What activate() returns. */
  readonly api: KnownGoodApi;

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
    this.registry = new HostRegistry({
      commandTimeoutMs: current.commandTimeoutMs,
      helperSpares: current.helperSpares,
      ssh: this.sshOptions,
    });
    this.track({ dispose: () => this.registry.dispose() });
    this.applyHosts();
    this.hosts = hostsOf(this.registry);

    const settings = () => this.settings.current;
    // One listing per host, shared by Remote Runs, the dashboard, the runs commands and auto-refresh.
    const listings = new Listings({
      find: (hostId) => this.registry.find(hostId),
      session: (host) => this.registry.session(host),
      depth: () => 3,
      maxEntries: () => settings().maxEntries,
      log: (line) => this.log.info(line),
      failed: (host, e) => {
        const line = `${host.name}: ${messageOf(e)}`;
        if (e instanceof KnownGoodError && isHostSettingsFailure(e.code))
          showHostFailure(this.log, line, e, host.id, () => listings.reload(host.id));
        else this.log.error(line);
      },
    });
    // One baseline store, one key per host: baselines, benchmark results and the dashboard all use these.
    const store = new BaselineStore(join(context.globalStorageUri.fsPath, 'baselines'));
    const storeKeyOf = (host: HostSpec) => this.registry.session(host).transport.id;
    // The training processes the polls see (the tree's auto-refresh, the dashboard's follow), each launch kept for
    // What Changed?; one watch, so a restart seen by either is known to both.
    const live = new LiveWatch(new WhatChangedStore(store));
    // Expanded rows, the selection and the compare choice, as the person left them before a reload.
    const viewState = new RemoteRunsViewState(context.workspaceState);
    this.tree = this.track(
      new RemoteRunsProvider(this.registry, listings, () => settings().problems, {
        newestFirst: () => settings().newestFirst,
        unconfigured: () => this.registry.hosts().every((h) => !h.ssh) && settings().localRoots === undefined,
        expansionOf: (id) => viewState.expansionOf(id),
        live: (hostId, run) => live.state(hostId, run),
      }),
    );
    const treeView = this.track(
      vscode.window.createTreeView<TreeNode>(VIEW_REMOTE_RUNS, {
        treeDataProvider: this.tree,
        showCollapseAll: true,
        canSelectMany: true,
      }),
    );
    this.track(
      new AutoRefresh(
        treeView,
        this.tree,
        this.registry,
        () => settings().autoRefreshSeconds,
        this.settings.onDidChange,
        {
          watch: live,
          storeKeyOf: (hostId) => {
            const spec = this.registry.find(hostId);
            return spec ? storeKeyOf(spec) : hostId;
          },
          redraw: () => this.tree.refresh(),
        },
      ),
    );
    this.track(new AgeTicker(treeView, () => this.tree.refresh()));
    this.track(
      new KeepViewState(
        treeView,
        this.tree,
        viewState,
        (h) => listings.ensure(h),
        (line) => this.log.info(line),
      ),
    );
    this.track(
      this.settings.onDidChange((s) => {
        this.registry.setCommandTimeout(s.commandTimeoutMs);
        this.registry.setHelperSpares(s.helperSpares);
        const before = this.hostKeys();
        this.applyHosts();
        // Only the hosts whose settings changed are listed again: the others keep their listing and their expanded
        // rows (a tree rebuilt from scratch collapses everything the person opened).
        const after = this.hostKeys();
        for (const [id, key] of before) if (after.get(id) !== key) listings.reload(id);
        this.tree.refresh();
      }),
    );

    const command: RegisterCommand = commandRegistrar({
      hosts: this.hosts,
      resolve: (t) => listings.resolve(t),
      log: this.log,
      track: (d) => this.track(d),
      restrictedMode: () => this.settings.current.restrictedMode,
    });
    command(Commands.showLog, null, () => this.log.show());

    const track = <T extends vscode.Disposable>(d: T) => this.track(d);
    // Text Known Good writes for people (evidence, plans, reports): read-only, kept with the workspace for a reload.
    const documents = this.track(registerDocuments(context.workspaceState, this.log));
    const common = { command, track, hosts: this.hosts, log: this.log, settings: this.settings };

    // Feature registrations: each feature lives in its own folder (src/<feature>/register.ts) and sees only its deps.
    registerRuns({
      ...common,
      registry: this.registry,
      tree: {
        reload: (h) => listings.reload(h),
        relist: (h) => listings.relist(h),
        ensureListing: (h) => listings.ensure(h),
        resolvePath: (h, ids) => this.tree.resolvePath(h, ids),
      },
      reveal: (node) => treeView.reveal(node as TreeNode, { select: true, focus: true, expand: true }),
    });
    const baselines = registerBaselines({
      ...common,
      documents,
      kept: context.workspaceState,
      store,
      storeKeyOf,
      registerSection: (s) => this.tree.registerSection(s),
      refresh: (node) => this.tree.refresh(node as TreeNode | undefined),
    });
    const args = registerArgs({
      ...common,
      markSelected: (ref) => this.tree.markSelected(ref),
      keptSelection: { get: () => viewState.compare(), set: (ref) => viewState.setCompare(ref) },
    });
    const underTest = context.extensionMode === vscode.ExtensionMode.Test;
    const dashboard = registerDashboard({
      ...common,
      recordForTests: underTest,
      extensionUri: context.extensionUri,
      ensureListing: (hostId) => listings.ensure(hostId),
      resolve: (t) => listings.resolve(t),
      store,
      storeKeyOf,
      args,
      live,
    });
    registerProbes({ ...common, baselines });
    registerBench({
      ...common,
      documents,
      store,
      storeKeyOf,
      view: treeView,
      resolve: (t) => listings.resolve(t),
    });
    registerBisect({ ...common, documents, store, storeKeyOf });
    registerReplay({ ...common, documents, store, storeKeyOf, kept: context.workspaceState });
    registerWhatChanged({
      ...common,
      store,
      storeKeyOf,
      kept: context.workspaceState,
      documents,
      // each kind of evidence opens in the view that owns it
      evidence: {
        openArgsDiff: (a, b) => args.openDiff(a, b),
        compareBaseline: (hostId, baselineId, run) =>
          executeCommand(BaselineCommands.compare, { hostId, baselineId }, run !== null ? { run } : {}),
        bisect: (hostId, baselineId, packages) =>
          executeCommand(packages ? BisectCommands.packages : BisectCommands.environment, { hostId, baselineId }),
        compareBench: (hostId, referenceId) =>
          executeCommand(BenchCommands.compare, { hostId }, referenceId !== null ? { reference: referenceId } : {}),
        replay: (hostId, run, subject, title) =>
          executeCommand<ReplayRunOutcome | undefined>(
            subject ? ReplayCommands.prove : ReplayCommands.all,
            { target: { kind: 'run', hostId, path: run } },
            subject ? { subject, title } : {},
          ),
        openDashboard: (hostId, logPath, window, series) =>
          window
            ? dashboard.openZoomed({ hostId, logPath }, window, series)
            : executeCommand(Commands.openDashboard, { hostId, logPath }),
      },
    });
    registerFleet({
      ...common,
      kept: context.workspaceState,
      baselinesDir: fleetBaselinesDir(context.globalStorageUri.fsPath),
      storeKeyOf,
      registerSection: (s) => this.tree.registerSection(s),
      refresh: (node) => this.tree.refresh(node as TreeNode | undefined),
      diffSnapshots: (left, right, title) => baselines.diffSnapshots(left, right, title),
    });

    registerWalkthrough({
      command,
      extensionId: context.extension.id,
      kept: context.globalState,
      // Someone who set hosts or roots up already (an update from a version without the walkthrough) is no newcomer.
      openOnFirstRun:
        context.extensionMode === vscode.ExtensionMode.Production &&
        getConfiguration('workbench').get<boolean>('welcomePage.walkthroughs.openOnInstall', true) &&
        settings().hosts.length === 0 &&
        settings().localRoots === undefined,
    });

    const test: KnownGoodTestApi = {
      registry: this.registry,
      settings: () => this.settings.current,
      tree: this.tree,
      dashboard,
    };
    // The hooks the extension-host tests drive are handed out only when VS Code runs the extension's tests.
    this.api = underTest ? test : {};
  }

  private reportProblems(problems: readonly string[]): void {
    for (const p of problems) this.log?.warn(p);
    if (problems.length)
      void showError(
        `Known Good settings: ${problems[0]}${problems.length > 1 ? ` (+${problems.length - 1} more)` : ''}`,
      );
  }

  /** Per host, what its connection and listing depend on (a changed known_hosts file or timeout changes them all). */
  private hostKeys(): Map<string, string> {
    const o = this.sshOptions;
    const common = JSON.stringify([o.knownHostsFiles, o.connectTimeoutMs, this.settings.current.maxEntries]);
    return new Map(this.registry.hosts().map((h) => [h.id, `${common}${JSON.stringify(h)}`]));
  }

  private applyHosts(): void {
    const current = this.settings.current;
    this.sshOptions.knownHostsFiles = [current.knownHostsFile ?? defaultKnownHostsFile()];
    this.sshOptions.connectTimeoutMs = current.connectTimeoutMs;
    // Aliases in settings entries resolve through ~/.ssh/config as in ssh; includeSshConfigHosts only decides whether
    // the config's own hosts are listed too (resolveHosts).
    const ssh = parseSshConfig(readUserSshConfig());
    const hosts = resolveHosts(current, ssh, current.localRoots);
    for (const r of current.restrictedHosts)
      this.log.info(
        `Restricted Mode: host "${r.name}" of the folder's settings is used without its ${r.ignored.join(', ')}`,
      );
    if (current.localPython) hosts[0] = { ...hosts[0]!, python: current.localPython };
    this.registry.setHosts(hosts);
    setHasRemoteHost(hosts.some((h) => h.id !== LOCAL_HOST_ID));
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
