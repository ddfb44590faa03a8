import * as vscode from 'vscode';
import { DASHBOARD_VIEW_TYPE } from '../constants';
import { parseDashboardState } from '../core/dashboard/protocol';
import {
  isMetricsLog,
  parseRunId,
  runsWithLogs,
  sourceOfLog,
  sourceOfPath,
  sourceOfRun,
  type RunSource,
} from '../core/dashboard/sources';
import { KnownGoodError } from '../core/errors';
import type { ResolvedTarget } from '../core/runs/listings';
import type { CommandTarget, TargetOf } from '../core/runs/targets';
import type { CommandCall } from '../shared/commands';
import { createWebviewPanel, showQuickPick } from '../window';
import type { DashboardOpenOptions, DashboardTarget, DashboardTestApi, PanelProbe } from '../api';
import { DashboardPanel, webviewOptions, type PanelOptions } from './panel';
import { ContainerServices, type DashboardDeps } from './services';

const basename = (p: string) => p.slice(p.lastIndexOf('/') + 1) || p;
/** The targets Open Dashboard takes (any other becomes its host). */
type OpenKind = 'host' | 'root' | 'run' | 'log';

const usage = () => new KnownGoodError('usage', 'Open Dashboard: pick a run, a metrics log or a host');

/** What the dashboard reads, for messages that say none was found. */
const LOG_KINDS = '*.jsonl, metrics.csv, trainer_state.json or events.out.tfevents.*';

/**
 * Opens dashboards (one per set of runs: opening the same runs again reveals the tab) and restores them after a
 * reload through the webview panel serializer.
 */
export class DashboardManager implements vscode.Disposable, DashboardTestApi {
  private readonly open_: DashboardPanel[] = [];
  private readonly services: ContainerServices;
  private readonly storeChanges: { dispose(): void };

  constructor(private readonly d: DashboardDeps) {
    this.services = new ContainerServices(d);
    // A baseline captured, compared, renamed or deleted, a result kept or marked: every open panel showing that host
    // reads its side data again (and a compare's snapshot becomes its "now").
    this.storeChanges = d.store.onDidChange((change) => {
      const hosts = this.services.noteStoreChange(change);
      for (const p of this.open_) if (hosts.some((h) => p.showsHost(h))) void p.refreshSide();
    });
  }

  /** The open panels' records: empty unless the extension runs its tests (DashboardDeps.recordForTests). */
  panels(): readonly PanelProbe[] {
    return this.open_.flatMap((p) => (p.probe ? [p.probe] : []));
  }

  async open(targets: readonly DashboardTarget[], options: DashboardOpenOptions = {}): Promise<PanelProbe> {
    const sources = await Promise.all(targets.map((t) => this.fromTarget(t)));
    const panel = this.show(sources, undefined, {
      previewBytes: options.previewBytes,
      beforeExact: options.beforeExact,
    });
    if (!panel.probe) throw new KnownGoodError('internal', 'dashboards keep a record only under test');
    return panel.probe;
  }

  /**
   * What Changed?'s plot evidence: the dashboard of one log zoomed to steps [from, to] on the plot of `series`. An open
   * dashboard that plots the log (alone, beside other runs, or as a file of a stitched history) is reused.
   */
  async openZoomed(target: DashboardTarget, window: { from: number; to: number }, series?: string): Promise<void> {
    const open = this.open_.find((p) => p.holdsLog(target.hostId, target.logPath));
    if (open) open.panel.reveal();
    const panel = open ?? this.show([await this.fromTarget(target)]);
    panel.zoomTo(window, series);
  }

  /**
   * The command: a target (a row of Remote Runs, `{ hostId, logPath }`, …) or the tree's multi-selection, each as
   * its listing has it; nothing: the quick picks.
   */
  async command(
    target: TargetOf<OpenKind> | undefined,
    call: Pick<CommandCall, 'resolved' | 'selection' | 'resolvedSelection'>,
  ): Promise<void> {
    const picked: { t: CommandTarget; r: ResolvedTarget | undefined }[] =
      call.selection.length > 1
        ? call.selection.map((t, i) => ({ t, r: call.resolvedSelection[i] }))
        : target
          ? [{ t: target, r: target.kind === 'host' ? undefined : call.resolved }]
          : [];
    let sources: RunSource[];
    if (picked.length === 0) {
      const s = await this.pick();
      if (!s) return;
      sources = [s];
    } else {
      sources = [];
      for (const { t, r } of picked) sources.push(await this.sourceOf(t, r));
    }
    const seen = new Set<string>();
    sources = sources.filter((s) => {
      const k = `${s.hostId}\u0000${s.logPath}`;
      return seen.has(k) ? false : (seen.add(k), true);
    });
    this.show(sources);
  }

  /**
   * What a target plots. `row`: the target resolved as the Remote Runs row it was (a log row must be a metrics log;
   * a plain `{ hostId, logPath }` opens as named). A root or run named without a row is looked up in the listing.
   */
  private async sourceOf(t: CommandTarget, row: ResolvedTarget | undefined): Promise<RunSource> {
    switch (t.kind) {
      case 'host': {
        const listing = await this.d.ensureListing(t.hostId);
        const label = this.d.hosts.find(t.hostId)?.name ?? t.hostId;
        if (!listing) throw new KnownGoodError('not-found', `Could not list ${label}`);
        const newest = runsWithLogs(t.hostId, listing)[0];
        if (!newest) throw new KnownGoodError('not-found', `No run with a metrics log (${LOG_KINDS}) on ${label}`);
        return newest;
      }
      case 'root':
      case 'run': {
        if (!row) await this.d.ensureListing(t.hostId).catch(() => undefined);
        const r = row ?? this.d.resolve(t);
        const s = r ? sourceOfRun(t.hostId, r.root, r.entry) : undefined;
        const where = t.kind === 'root' ? 'directly in ' : 'in ';
        if (!s) throw new KnownGoodError('not-found', `No metrics log (${LOG_KINDS}) ${where}${t.path}`);
        return s;
      }
      case 'log':
        if (!row) return this.fromTarget({ hostId: t.hostId, logPath: t.path, ...(t.label ? { label: t.label } : {}) });
        if (!isMetricsLog(row.entry))
          throw new KnownGoodError('usage', `${row.entry.name} is not a metrics log the dashboard reads`);
        return sourceOfLog(t.hostId, row.root, row.entry);
      default:
        throw usage();
    }
  }

  private async fromTarget(t: DashboardTarget): Promise<RunSource> {
    if (!this.d.hosts.find(t.hostId)) throw new KnownGoodError('not-found', `unknown host ${t.hostId}`);
    const listing = await this.d.ensureListing(t.hostId).catch(() => undefined);
    return sourceOfPath(t.hostId, listing, t.logPath, t.label);
  }

  /** Palette: a host, then one of its runs with a metrics log (newest first). */
  private async pick(): Promise<RunSource | undefined> {
    const host = await this.d.hosts.pick('Open Dashboard: which host?');
    if (!host) return undefined;
    const runs = showQuickPick(
      this.d.ensureListing(host.id).then((listing) =>
        (listing ? runsWithLogs(host.id, listing) : []).map((s) => ({
          label: s.label,
          description: s.log?.mtime ? new Date(s.log.mtime * 1000).toLocaleString() : '',
          detail: s.logPath,
          source: s,
        })),
      ),
      {
        title: `Open Dashboard: run on ${host.name}`,
        placeHolder: 'Runs with a metrics log, newest first',
        matchOnDetail: true,
      },
    );
    return (await runs)?.source;
  }

  private show(sources: RunSource[], panel?: vscode.WebviewPanel, options: PanelOptions = {}): DashboardPanel {
    if (!panel) {
      const existing = this.open_.find((p) => p.shows(sources));
      if (existing) {
        existing.panel.reveal();
        return existing;
      }
    }
    const title = sources.length === 1 ? `Dashboard: ${sources[0]!.label}` : `Dashboard: ${sources.length} runs`;
    const p =
      panel ??
      createWebviewPanel(DASHBOARD_VIEW_TYPE, title, vscode.ViewColumn.Active, webviewOptions(this.d.extensionUri));
    if (panel) panel.title = title;
    const d = new DashboardPanel(p, this.services, sources, (x) => this.forget(x), {
      ...options,
      record: this.d.recordForTests,
    });
    this.open_.push(d);
    return d;
  }

  private forget(p: DashboardPanel): void {
    const i = this.open_.indexOf(p);
    if (i >= 0) this.open_.splice(i, 1);
  }

  /** After a reload: the webview's saved state names the runs; their data is read again. */
  readonly serializer: vscode.WebviewPanelSerializer = {
    deserializeWebviewPanel: async (panel: vscode.WebviewPanel, raw: unknown) => {
      const state = parseDashboardState(raw);
      const targets: DashboardTarget[] = [];
      for (const r of state?.runs ?? []) {
        const byId = parseRunId(r.id);
        const hostId = byId?.hostId ?? this.d.hosts.all().find((h) => h.name === r.host)?.id;
        if (hostId && this.d.hosts.find(hostId))
          targets.push({ hostId, logPath: byId?.logPath ?? r.path, label: r.label });
      }
      if (!targets.length) {
        const why = state
          ? `its ${state.runs.length} run(s) are on hosts no longer set up`
          : raw == null
            ? 'it kept no state'
            : `its state is not one: ${JSON.stringify(raw).slice(0, 300)}`;
        this.d.log.info(`dashboard: a panel from before the reload was not restored (${why})`);
        panel.dispose();
        return;
      }
      const sources = await Promise.all(
        targets.map((t) => this.fromTarget(t).catch(() => ({ ...t, label: t.label ?? basename(t.logPath) }))),
      );
      this.show(sources, panel, { follow: state?.follow ?? false });
    },
  };

  dispose(): void {
    this.storeChanges.dispose();
    for (const p of this.open_.splice(0)) p.dispose();
  }
}
