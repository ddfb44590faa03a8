import { posix } from 'node:path';
import * as vscode from 'vscode';
import {
  parseHostMessage,
  parseWebviewMessage,
  type HostMessage,
  type HostMessageInput,
  type GpuPlot,
  type HostSide,
  type InitMessage,
  type RunData,
  type WebviewMessage,
} from '../core/dashboard/protocol';
import { seriesFromReduction } from '../core/dashboard/fromReduction';
import { FROM_WALL_TIME, withDerivedSpeed } from '../core/metrics/speedFromTime';
import { ProgressiveRuns, sideByHost, type LoadedRun } from '../core/dashboard/progressive';
import {
  runCheckpoints,
  runId,
  runSpanOf,
  type CheckpointSource,
  type RunSource,
  type RunSpan,
} from '../core/dashboard/sources';
import { messageOf } from '../core/errors';
import { lastStep, liveRestartMark } from '../core/dashboard/liveRestarts';
import { remotePathOf } from '../core/runs/model';
import { readGpuPlot } from '../core/hardware/gpuPlot';
import { newNonce } from '../core/util/nonce';
import { metricsReduceProbe } from '../core/metrics/metricsProbe';
import { DASHBOARD_SCRIPT, DASHBOARD_STYLES, dashboardHtml } from '../../webview/src/html';
import type { DashboardOpenOptions, PanelProbe } from '../api';
import type { DashboardServices } from './services';

/** Buckets per series kept while following (what the first reduction returns by default). */
const MAX_BUCKETS = 2000;
const FOLLOW_INTERVAL_MS = 2000;

export interface PanelOptions extends DashboardOpenOptions {
  /** Turn following on once the page is ready (a restored panel that was following). */
  follow?: boolean;
  /** Keep a PanelRecorder (`probe`) for the extension-host tests. */
  record?: boolean;
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

/**
 * The panel's record for the extension-host tests: only kept when the extension runs its tests
 * (`DashboardDeps.recordForTests`, ExtensionMode.Test); a panel in use records nothing.
 */
export class PanelRecorder implements PanelProbe {
  readonly received: string[] = [];
  dropped = 0;
  readonly posted: string[] = [];
  lastPosted: HostMessage | undefined;
  lastInit: InitMessage | undefined;
  firstDataMs: number | undefined;
  exactDataMs: number | undefined;
  firstData: readonly RunData[] | undefined;
  firstInit: InitMessage | undefined;
  lastRunData: (HostMessage & { type: 'runData' }) | undefined;
  pollsDone = 0;

  constructor(
    private readonly panel: { readonly title: string; readonly runs: readonly string[] },
    private readonly deliver: (raw: unknown) => void,
  ) {}

  get title(): string {
    return this.panel.title;
  }

  get runs(): readonly string[] {
    return this.panel.runs;
  }

  simulate(raw: unknown): void {
    this.deliver(raw);
  }

  /** A message that went out to the webview (validated). */
  sent(message: HostMessage): void {
    this.posted.push(message.type);
    this.lastPosted = message;
    if (message.type === 'init') {
      this.lastInit = message;
      this.firstInit ??= message;
    }
    if (message.type === 'runData') this.lastRunData = message;
  }
}

/**
 * One dashboard tab: owns its webview, answers the webview's messages (each validated, invalid ones dropped), reads
 * the runs' logs through each host's resident helper, and follows them while asked to. Posts nothing before `ready`.
 */
export class DashboardPanel implements vscode.Disposable {
  private readonly disposables: vscode.Disposable[] = [];
  private readonly loader: ProgressiveRuns;
  private checkpoints: CheckpointSource[] = [];
  /** Per host of the runs; undefined while it is being read (the first init does not wait for it). */
  private side: HostSide[] | undefined;
  /** Each run's recorded GPU timeline (by run id), posted after every init. */
  private gpuPlots = new Map<string, GpuPlot>();
  private sideReading: Promise<void> | undefined;
  private sideAgain = false;
  private loading: Promise<void> | undefined;
  /** Exact reads that failed before the page was ready: said with the init. */
  private readonly exactErrors: string[] = [];
  private isReady = false;
  private following = false;
  private followTimer: ReturnType<typeof setTimeout> | undefined;
  private polling = false;
  /** When the last follow poll began (ms since the epoch): restarts seen since are marked by the next. */
  private lastPollAt = Date.now();
  private disposed = false;
  private readonly openedAt = performance.now();
  /** Per host: when the snapshots its drift may compare were captured (Unix seconds), as of the last side read. */
  private readonly snapshotTimes = new Map<string, number[]>();
  /** The series the page shows (its last selectSeries); undefined until it says. */
  private shown: ReadonlySet<string> | undefined;
  /** `ready`s received: a restored panel turns following on at the first. */
  private readies = 0;
  /** The first init went out: later data goes as its own messages. */
  private initPosted = false;
  private pendingZoom: { from: number; to: number; series?: string } | undefined;
  /** For the log: ms from opening to the first plot data, and to exact data for every run. */
  private firstDataMs: number | undefined;
  private exactDataMs: number | undefined;
  /** What the tests read; undefined unless the extension runs its tests. */
  readonly probe: PanelRecorder | undefined;
  private readonly restoreFollow: boolean;
  private readonly beforeExact: (() => Promise<void>) | undefined;

  constructor(
    readonly panel: vscode.WebviewPanel,
    private readonly services: DashboardServices,
    private readonly sources: RunSource[],
    private readonly onDisposed: (p: DashboardPanel) => void,
    options: PanelOptions = {},
  ) {
    this.probe = options.record ? new PanelRecorder(this, (raw) => this.onMessage(raw)) : undefined;
    this.restoreFollow = options.follow ?? false;
    this.beforeExact = options.beforeExact;
    const log = services.log;
    this.loader = new ProgressiveRuns(sources, {
      reduce: async (src, o) =>
        (await services.probes(src.hostId).run(metricsReduceProbe({ path: src.logPath, ...o }))).value,
      hostLabel: (id) => services.hostLabel(id),
      previewBytes: options.previewBytes,
      maxBuckets: MAX_BUCKETS,
      log: (line) => log.info(line),
      shown: () => this.shown,
    });
    const webview = panel.webview;
    webview.options = webviewOptions(services.extensionUri);
    const dist = vscode.Uri.joinPath(services.extensionUri, 'dist', 'webview');
    webview.html = dashboardHtml({
      cspSource: webview.cspSource,
      // A fresh nonce per page: 24 random bytes (32 characters).
      nonce: newNonce(24),
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
  /** Whether one of its runs is of this log (its file, or one file of its stitched history). */
  holdsLog(hostId: string, logPath: string): boolean {
    return this.sources.some((s) => s.hostId === hostId && (s.logPath === logPath || !!s.history?.includes(logPath)));
  }

  shows(sources: readonly RunSource[]): boolean {
    const mine = new Set(this.runs);
    return sources.length === mine.size && sources.every((s) => mine.has(runId(s.hostId, s.logPath)));
  }

  private onMessage(raw: unknown): void {
    const parsed = parseWebviewMessage(raw);
    if (!parsed.ok) {
      if (this.probe) this.probe.dropped++;
      this.services.log.warn(`dashboard: dropped a message from the webview: ${parsed.error}`);
      return;
    }
    if (parsed.message.type === 'ready') this.readies++;
    this.probe?.received.push(parsed.message.type);
    void this.handle(parsed.message).catch((e: unknown) => {
      this.services.log.error(`dashboard: ${parsed.message.type}: ${messageOf(e)}`);
      this.post({ type: 'error', message: messageOf(e) });
    });
  }

  private async handle(m: WebviewMessage): Promise<void> {
    switch (m.type) {
      case 'ready':
        this.isReady = true;
        if (this.readies === 1)
          this.services.log.info(
            `dashboard: page ready ${Math.round(performance.now() - this.openedAt)} ms after opening`,
          );
        await this.loading;
        this.postInit();
        if (this.restoreFollow && !this.following && this.readies === 1) {
          this.setFollow(true);
        }
        return;
      case 'requestRange':
        return this.answerRange(m.run, m.series, m.from, m.to);
      case 'toggleFollow':
        this.setFollow(m.on);
        return;
      case 'selectSeries':
        this.shown = new Set(m.keys);
        // a series shown now whose shifts were not kept current while following: found again, and sent
        for (const run of this.loader.refreshShifts()) this.post({ type: 'runData', data: run.data });
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
      case 'markReference': {
        await this.services.markReference(m.host, m.result);
        // The store's change event asks too; this one holds where no event comes (one read: they are coalesced).
        await this.refreshSide();
        return;
      }
    }
  }

  /** Whether any run of this panel is on the host (its settings id). */
  showsHost(hostId: string): boolean {
    return this.sources.some((s) => s.hostId === hostId);
  }

  /**
   * Reads the hosts' side data (drift, benchmarks) again and posts it: at opening, and whenever the store says a
   * host of the runs changed. One read at a time; asked during one, one more read follows it, so the last post is
   * never older than the last change. Before the first init the side data just rides along with it.
   */
  refreshSide(): Promise<void> {
    if (this.disposed) return Promise.resolve();
    if (this.sideReading) {
      this.sideAgain = true;
      return this.sideReading;
    }
    // each run's drift is limited to its time: read once the runs' data (a preview at least) says when they ran
    const reading = (this.loading ?? Promise.resolve())
      .then(() =>
        sideByHost(
          this.sources,
          (id) => this.services.hostLabel(id),
          async (id) => {
            const runs = this.runsV
              .filter((r) => r.src.hostId === id)
              .map((r) => ({ id: r.id, label: r.src.label, span: runSpanOf(r.data) }));
            const side = await this.services.sideData(id, runs);
            this.snapshotTimes.set(id, side.snapshotTimes);
            return side;
          },
          (line) => this.services.log.warn(line),
        ),
      )
      .then((hosts) => {
        if (this.disposed) return;
        this.side = hosts;
        if (this.initPosted) this.post({ type: 'side', hosts });
      })
      .finally(() => {
        this.sideReading = undefined;
        if (this.sideAgain) {
          this.sideAgain = false;
          return this.refreshSide();
        }
        return undefined;
      });
    this.sideReading = reading;
    return reading;
  }

  private checkpoint(path: string): CheckpointSource {
    const c = this.checkpoints.find((x) => x.checkpoint.path === path);
    if (!c) throw new Error(`not a checkpoint of this dashboard: ${path}`);
    return c;
  }

  private get runsV(): readonly LoadedRun[] {
    return this.loader.runs;
  }

  /**
   * Resolves once every run has its first data (a preview for a large log): the first init waits for this only.
   * The exact reads of sampled runs and the hosts' side data go on behind it and are posted as they land.
   */
  private async load(): Promise<void> {
    await this.loader.loadPreviews();
    void this.refreshSide();
    void this.readGpu();
    if (this.probe) this.probe.firstData = this.runsV.map((r) => r.data);
    this.checkpoints = this.runsV.flatMap((r) => runCheckpoints(r.src, r.id));
    if (this.loader.anyPending) {
      const gate = this.beforeExact?.() ?? Promise.resolve();
      void gate.then(() =>
        this.loader.completeExact({
          exact: (run) => {
            this.post({ type: 'runData', data: run.data });
            this.noteExact();
          },
          failed: (run, message) => {
            this.services.log.error(`dashboard: reading all of ${run.src.logPath}: ${message}`);
            const text = `Could not read all of ${run.src.label} (the plots show a sample of it): ${message}`;
            if (!this.initPosted) {
              this.exactErrors.push(text);
              return;
            }
            this.post({ type: 'runData', data: run.data });
            this.post({ type: 'error', message: text });
          },
        }),
      );
    }
  }

  /** Each run's GPU timeline (.known-good/gpu-timeline.jsonl of its folder, kg_record's sampler), when it has one. */
  private async readGpu(): Promise<void> {
    await Promise.all(
      this.runsV.map(async (r) => {
        try {
          const plot = await readGpuPlot(this.services.probes(r.src.hostId), runFolderOf(r));
          if (!plot || this.disposed) return;
          this.gpuPlots.set(r.id, plot);
          if (this.initPosted) this.post({ type: 'gpu', run: r.id, plot });
        } catch (e) {
          this.services.log.warn(`dashboard: ${r.src.logPath}: no GPU timeline read: ${messageOf(e)}`);
        }
      }),
    );
  }

  /** Records exactDataMs the first time the webview has exact data for every run. */
  private noteExact(): void {
    if (this.exactDataMs !== undefined || !this.isReady || this.disposed || !this.loader.allExact) return;
    if (!this.initPosted) return;
    this.exactDataMs = performance.now() - this.openedAt;
    if (this.probe) this.probe.exactDataMs = this.exactDataMs;
    this.services.log.info(
      `dashboard: exact data for every run posted ${Math.round(this.exactDataMs)} ms after opening`,
    );
  }

  private postInit(): void {
    if (!this.isReady || this.disposed) return;
    this.post({
      type: 'init',
      runs: this.runsV.map((r) => r.data),
      checkpoints: this.checkpoints.map((c) => c.checkpoint),
      hosts: this.side ?? [],
      sidePending: this.side === undefined,
      follow: this.following,
    });
    for (const [run, plot] of this.gpuPlots) this.post({ type: 'gpu', run, plot });
    if (this.firstDataMs === undefined && this.runsV.length) {
      this.firstDataMs = performance.now() - this.openedAt;
      if (this.probe) this.probe.firstDataMs = this.firstDataMs;
      const previews = this.runsV.filter((r) => r.exact !== 'done').length;
      this.services.log.info(
        `dashboard: first plot data posted ${Math.round(this.firstDataMs)} ms after opening` +
          (previews ? ` (${previews} of ${this.runsV.length} runs sampled; reading them whole)` : ' (exact)'),
      );
    }
    this.noteExact();
    const errors = this.loader.errors;
    if (errors.length) this.post({ type: 'error', message: `Could not read ${errors.join('; ')}` });
    for (const text of this.exactErrors) this.post({ type: 'error', message: text });
  }

  private async answerRange(run: string, series: string, from: number, to: number): Promise<void> {
    // Window reads are exact whether the run's data is still a preview or not.
    const r = this.runsV.find((x) => x.id === run);
    if (!r) return;
    // a speed derived from wall times is not in the log: its window comes from the log's series with times
    const derived = series.endsWith(FROM_WALL_TIME);
    const { value } = await this.services.probes(r.src.hostId).run(
      metricsReduceProbe({
        path: r.src.logPath,
        x: 'step',
        window: { from, to },
        ...(derived ? {} : { series: [series] }),
      }),
    );
    const s = (derived ? withDerivedSpeed(value.series) : value.series).find((x) => x.key === series);
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

  /**
   * Reads what was appended to each followed log since its exact read; posts runData for those that grew. Runs still
   * showing a preview are left for a later poll (their exact read brings the data up to date).
   */
  async pollOnce(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      await this.loading;
      const stepBefore = new Map(this.loader.runs.map((r) => [r, lastStep(r.data)]));
      const since = this.lastPollAt;
      this.lastPollAt = Date.now();
      const spansBefore = new Map(this.loader.runs.map((r) => [r, runSpanOf(r.data)]));
      const grown: LoadedRun[] = [];
      await this.loader.follow({
        grew: (r) => {
          grown.push(r);
          this.post({ type: 'runData', data: r.data });
        },
        failed: (r, message) => this.post({ type: 'error', message: `Following ${r.src.label}: ${message}` }),
      });
      await this.markRestarts(grown, stepBefore, since);
      if (grown.some((r) => this.spanTookSnapshot(r, spansBefore.get(r)))) void this.refreshSide();
    } finally {
      this.polling = false;
      if (this.probe) this.probe.pollsDone++;
    }
  }

  /**
   * Whether a run's time now holds a snapshot of its host it did not hold before (its log grew past the capture, or
   * was rewritten): its drift compares other snapshots now.
   */
  private spanTookSnapshot(run: LoadedRun, before: RunSpan | undefined): boolean {
    const now = runSpanOf(run.data);
    if (!now) return false;
    const inside = (t: number, s: RunSpan | undefined) => s !== undefined && t >= s.from && t <= s.to;
    return (this.snapshotTimes.get(run.src.hostId) ?? []).some((t) => inside(t, now) !== inside(t, before));
  }

  /**
   * The runs whose log grew: their training process looked for (one request a host, through the polls' shared
   * LiveWatch); a new process after the one before ended is marked as a restart where the old one's points end.
   */
  private async markRestarts(
    grown: LoadedRun[],
    stepBefore: Map<LoadedRun, number | undefined>,
    since: number,
  ): Promise<void> {
    if (!this.services.live || !grown.length) return;
    const runOf = runFolderOf;
    for (const hostId of new Set(grown.map((r) => r.src.hostId))) {
      const mine = grown.filter((r) => r.src.hostId === hostId);
      const states = await this.services.live(
        hostId,
        mine.map((r) => ({ run: runOf(r), log: r.src.logPath })),
      );
      for (const s of states) {
        // a restart seen since the last poll (by this one or Remote Runs' tick): one seen before this panel
        // followed has no place on its plots
        const restart = s.restarts[s.restarts.length - 1];
        if (!restart || restart.seenAt < since) continue;
        for (const r of mine.filter((m) => runOf(m) === s.run)) {
          const mark = liveRestartMark(restart, stepBefore.get(r));
          if (!mark || !this.loader.addLiveRestart(r, mark)) continue;
          this.services.log.info(`dashboard: ${r.src.logPath}: ${mark.label} at step ${mark.step}`);
          this.post({ type: 'runData', data: r.data });
        }
      }
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
    if (parsed.message.type === 'init') this.initPosted = true;
    this.probe?.sent(parsed.message);
    void this.panel.webview.postMessage(parsed.message);
    if (parsed.message.type === 'init' && this.pendingZoom) {
      const z = this.pendingZoom;
      this.pendingZoom = undefined;
      this.post({ type: 'zoom', from: z.from, to: z.to, ...(z.series !== undefined ? { series: z.series } : {}) });
    }
  }

  /**
   * Zooms every plot to steps [from, to], the plot of `series` shown and brought into view: now if the page has its
   * data, else right after it gets it.
   */
  zoomTo(window: { from: number; to: number }, series?: string): void {
    const z = { from: window.from, to: window.to, ...(series !== undefined ? { series } : {}) };
    if (this.initPosted) this.post({ type: 'zoom', ...z });
    else this.pendingZoom = z;
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

/** The run folder of a loaded run on its host: its listing's, else the folder holding its log. */
function runFolderOf(r: LoadedRun): string {
  return r.src.root && r.src.run ? remotePathOf(r.src.root, r.src.run).remotePath : posix.dirname(r.src.logPath);
}
