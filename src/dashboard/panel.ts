import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import {
  parseHostMessage,
  parseWebviewMessage,
  type HostMessage,
  type HostMessageInput,
  type InitMessage,
  type RunData,
  type WebviewMessage,
} from '../core/dashboard/protocol';
import { appendReduction, runDataFromReduction, seriesFromReduction } from '../core/dashboard/fromReduction';
import { runCheckpoints, runId, type CheckpointSource, type RunSource } from '../core/dashboard/sources';
import { messageOf } from '../core/errors';
import { metricsReduceProbe } from '../core/metrics/metricsProbe';
import { DASHBOARD_SCRIPT, DASHBOARD_STYLES, dashboardHtml } from '../../webview/src/html';
import type { DashboardServices } from './services';

/** Buckets per series kept while following (what the first reduction returns by default). */
const MAX_BUCKETS = 2000;
const FOLLOW_INTERVAL_MS = 2000;

interface LoadedRun {
  src: RunSource;
  id: string;
  data: RunData;
  /** Where following reads next (the reduction's nextOffset). */
  nextOffset: number;
}

/** A fresh nonce per page: 24 random bytes as base64 (32 characters). */
export function newNonce(): string {
  return randomBytes(24).toString('base64');
}

export function webviewOptions(extensionUri: vscode.Uri): vscode.WebviewOptions & vscode.WebviewPanelOptions {
  return {
    enableScripts: true,
    // The built webview and media/ only: the page can load nothing else, and it has no network (CSP default-src 'none').
    localResourceRoots: [
      vscode.Uri.joinPath(extensionUri, 'dist', 'webview'),
      vscode.Uri.joinPath(extensionUri, 'media'),
    ],
  };
}

/** What the extension-host tests read: the handshake and every message that crossed. */
export interface PanelProbe {
  readonly title: string;
  readonly runs: readonly string[];
  /** Types of the valid messages received from the webview, oldest first. */
  readonly received: readonly string[];
  /** Messages that failed validation and were dropped. */
  readonly dropped: number;
  readonly posted: readonly string[];
  readonly lastPosted: HostMessage | undefined;
  readonly lastInit: InitMessage | undefined;
  /** ms from opening to the first init posted with plot data. */
  readonly firstDataMs: number | undefined;
  /** Handles `raw` as if the webview had posted it (validation included). */
  simulate(raw: unknown): void;
}

/**
 * One dashboard tab: owns its webview, answers the webview's messages (each validated, invalid ones dropped), reads
 * the runs' logs through each host's resident helper, and follows them while asked to. Posts nothing before `ready`.
 */
export class DashboardPanel implements vscode.Disposable, PanelProbe {
  private readonly disposables: vscode.Disposable[] = [];
  private runsV: LoadedRun[] = [];
  private checkpoints: CheckpointSource[] = [];
  private side: Pick<InitMessage, 'drift' | 'bench'> = { drift: null, bench: [] };
  private loading: Promise<void> | undefined;
  private loadErrors: string[] = [];
  private isReady = false;
  private following = false;
  private followTimer: ReturnType<typeof setTimeout> | undefined;
  private polling = false;
  private disposed = false;
  private readonly openedAt = performance.now();
  readonly received: string[] = [];
  readonly posted: string[] = [];
  dropped = 0;
  lastPosted: HostMessage | undefined;
  lastInit: InitMessage | undefined;
  firstDataMs: number | undefined;

  constructor(
    readonly panel: vscode.WebviewPanel,
    private readonly services: DashboardServices,
    private readonly sources: RunSource[],
    private readonly onDisposed: (p: DashboardPanel) => void,
    private readonly restoreFollow = false,
  ) {
    const webview = panel.webview;
    webview.options = webviewOptions(services.extensionUri);
    const dist = vscode.Uri.joinPath(services.extensionUri, 'dist', 'webview');
    webview.html = dashboardHtml({
      cspSource: webview.cspSource,
      nonce: newNonce(),
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, DASHBOARD_SCRIPT)).toString(),
      cssUris: DASHBOARD_STYLES.map((f) => webview.asWebviewUri(vscode.Uri.joinPath(dist, f)).toString()),
      title: panel.title,
    });
    panel.iconPath = vscode.Uri.joinPath(services.extensionUri, 'media', 'known-good.svg');
    this.disposables.push(
      webview.onDidReceiveMessage((raw: unknown) => this.onMessage(raw)),
      panel.onDidDispose(() => this.dispose()),
    );
    // Start reading right away: the data is usually ready by the time the page has loaded and said ready.
    this.loading = this.load();
  }

  get title(): string {
    return this.panel.title;
  }

  get runs(): readonly string[] {
    return this.sources.map((s) => runId(s.hostId, s.logPath));
  }

  /** Same runs (in any order): the command reveals this panel instead of opening another. */
  shows(sources: readonly RunSource[]): boolean {
    const mine = new Set(this.runs);
    return sources.length === mine.size && sources.every((s) => mine.has(runId(s.hostId, s.logPath)));
  }

  simulate(raw: unknown): void {
    this.onMessage(raw);
  }

  private onMessage(raw: unknown): void {
    const parsed = parseWebviewMessage(raw);
    if (!parsed.ok) {
      this.dropped++;
      this.services.log.warn(`dashboard: dropped a message from the webview: ${parsed.error}`);
      return;
    }
    this.received.push(parsed.message.type);
    void this.handle(parsed.message).catch((e: unknown) => {
      this.services.log.error(`dashboard: ${parsed.message.type}: ${messageOf(e)}`);
      this.post({ type: 'error', message: messageOf(e) });
    });
  }

  private async handle(m: WebviewMessage): Promise<void> {
    switch (m.type) {
      case 'ready':
        this.isReady = true;
        await this.loading;
        this.postInit();
        if (this.restoreFollow && !this.following && this.received.filter((t) => t === 'ready').length === 1) {
          this.setFollow(true);
        }
        return;
      case 'requestRange':
        return this.answerRange(m.run, m.series, m.from, m.to);
      case 'toggleFollow':
        this.setFollow(m.on);
        return;
      case 'selectSeries':
        return;
      case 'openArgs': {
        const c = this.checkpoint(m.path);
        await this.services.openArgs(c.hostId, c.root, c.entry);
        return;
      }
      case 'diffArgs':
        await this.services.diffArgs(
          [this.checkpoint(m.a), this.checkpoint(m.b)].map((c) => ({ hostId: c.hostId, root: c.root, entry: c.entry })),
        );
        return;
    }
  }

  private checkpoint(path: string): CheckpointSource {
    const c = this.checkpoints.find((x) => x.checkpoint.path === path);
    if (!c) throw new Error(`not a checkpoint of this dashboard: ${path}`);
    return c;
  }

  private async load(): Promise<void> {
    const t0 = performance.now();
    const side = this.services.sideData(this.sources[0]?.hostId);
    const loaded = await Promise.all(
      this.sources.map(async (src) => {
        const id = runId(src.hostId, src.logPath);
        try {
          const r = await this.services.probes(src.hostId).run(metricsReduceProbe({ path: src.logPath, x: 'step' }));
          const data = runDataFromReduction(
            { id, label: src.label, host: this.services.hostLabel(src.hostId) },
            r.value,
          );
          this.services.log.info(
            `dashboard: ${src.logPath}: ${r.value.lines} lines, ${r.value.series.length} series in ${Math.round(performance.now() - t0)} ms (probe ${Math.round(r.value.elapsedMs)} ms)`,
          );
          return { src, id, data, nextOffset: r.value.nextOffset } satisfies LoadedRun;
        } catch (e) {
          this.loadErrors.push(`${src.label}: ${messageOf(e)}`);
          return undefined;
        }
      }),
    );
    this.runsV = loaded.filter((r): r is LoadedRun => r !== undefined);
    this.checkpoints = this.runsV.flatMap((r) => runCheckpoints(r.src, r.id));
    try {
      this.side = await side;
    } catch (e) {
      this.services.log.warn(`dashboard: baseline/benchmark history: ${messageOf(e)}`);
    }
  }

  private postInit(): void {
    if (!this.isReady || this.disposed) return;
    this.post({
      type: 'init',
      runs: this.runsV.map((r) => r.data),
      checkpoints: this.checkpoints.map((c) => c.checkpoint),
      drift: this.side.drift,
      bench: this.side.bench,
      follow: this.following,
    });
    if (this.firstDataMs === undefined && this.runsV.length) {
      this.firstDataMs = performance.now() - this.openedAt;
      this.services.log.info(`dashboard: first plot data posted ${Math.round(this.firstDataMs)} ms after opening`);
    }
    if (this.loadErrors.length) this.post({ type: 'error', message: `Could not read ${this.loadErrors.join('; ')}` });
  }

  private async answerRange(run: string, series: string, from: number, to: number): Promise<void> {
    const r = this.runsV.find((x) => x.id === run);
    if (!r) return;
    const { value } = await this.services
      .probes(r.src.hostId)
      .run(metricsReduceProbe({ path: r.src.logPath, x: 'step', window: { from, to }, series: [series] }));
    const s = value.series.find((x) => x.key === series);
    const data = s ? seriesFromReduction(s) : { key: series, x: [], min: [], max: [], last: [] };
    // from/to echoed exactly: the webview drops answers for a window it no longer waits for.
    this.post({ type: 'rangeData', run, series, from, to, data });
  }

  private setFollow(on: boolean): void {
    this.following = on;
    clearTimeout(this.followTimer);
    this.followTimer = undefined;
    if (on) this.scheduleFollow(0);
    this.post({ type: 'follow', on });
  }

  private scheduleFollow(ms: number): void {
    if (!this.following || this.disposed) return;
    this.followTimer = setTimeout(() => {
      void this.pollOnce().finally(() => this.scheduleFollow(FOLLOW_INTERVAL_MS));
    }, ms);
  }

  /** Reads what was appended to each followed log since the last read; posts runData for those that grew. */
  async pollOnce(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      await this.loading;
      for (const r of this.runsV) {
        try {
          const { value } = await this.services
            .probes(r.src.hostId)
            .run(metricsReduceProbe({ path: r.src.logPath, x: 'step', offset: r.nextOffset }));
          r.nextOffset = value.nextOffset;
          if (value.lines === 0 && !value.reset) continue;
          r.data = appendReduction(r.data, value, MAX_BUCKETS);
          this.post({ type: 'runData', data: r.data });
        } catch (e) {
          this.post({ type: 'error', message: `Following ${r.src.label}: ${messageOf(e)}` });
        }
      }
    } finally {
      this.polling = false;
    }
  }

  private post(message: HostMessageInput): void {
    if (!this.isReady || this.disposed) return;
    // What goes out is checked against the same protocol as what comes in: a bug here shows in the log, not as a
    // dashboard that silently ignores the message.
    const parsed = parseHostMessage(message);
    if (!parsed.ok) {
      this.services.log.error(`dashboard: not posting an invalid ${message.type} message: ${parsed.error}`);
      return;
    }
    this.posted.push(parsed.message.type);
    this.lastPosted = parsed.message;
    if (parsed.message.type === 'init') this.lastInit = parsed.message;
    void this.panel.webview.postMessage(parsed.message);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.following = false;
    clearTimeout(this.followTimer);
    for (const d of this.disposables.splice(0)) d.dispose();
    this.onDisposed(this);
    this.panel.dispose();
  }
}
