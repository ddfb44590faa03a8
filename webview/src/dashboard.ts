// The dashboard: holds what the host sent and what the user chose, and (re)draws from that. It posts messages
// through HostApi only and receives them already validated (see main.ts).
import {
  DASHBOARD_PROTOCOL_VERSION,
  dashboardStateSchema,
  type Checkpoint,
  type DashboardState,
  type DriftSummary,
  type GpuPlot,
  type HostMessage,
  type HostSide,
  type RangeDataMessage,
  type RunData,
  type RunDriftInfo,
  type SeriesData,
  type XAxis,
} from '../../src/core/dashboard/protocol';
import { badge, button, checkbox, dataGrid, divider, dropdown, slider } from './components';
import {
  buildPlotModel,
  changepointMarks,
  marksInWords,
  restartMarks,
  type CheckpointMark,
  checkpointMarks,
  detectSeries,
  formatValue,
  hasWallTime,
  mergeWindow,
  previewNote,
  previousCheckpoints,
  readableTime,
  runTimeOrigin,
  sideHosts,
  stepWindow,
  totalSkipped,
  upsertRun,
  xValues,
} from './data';
import { gpuMarks, gpuTitle, withGpu } from './gpu';
import { createBenchPlot, SeriesPlot } from './plots';
import { readTheme, watchTheme, type Theme } from './theme';
import type { HostApi } from './vscodeApi';

/** Shown by default when the user has not chosen: more than this many plots is a wall, not an overview. */
const DEFAULT_VISIBLE = 6;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

const seriesKey = (run: string, series: string): string => `${run}\u0000${series}`;

export class Dashboard {
  private runs: RunData[] = [];
  private checkpoints: Checkpoint[] = [];
  /** Baseline drift and benchmark history per host of the runs. */
  private hosts: HostSide[] = [];
  private sidePending = false;
  /** Each run's GPU timeline (by run id), when it has one: plotted under the throughput. */
  private gpu = new Map<string, GpuPlot>();
  private selected: string[] | undefined;
  /** The plots shown, as last told to the host (keys joined by NUL). */
  private shownPosted: string | undefined;
  private smoothing: number;
  private axis: XAxis;
  private follow: boolean;
  /** The zoomed x window in the current axis' units; undefined: everything. */
  private zoom: { min: number; max: number } | undefined;
  /** Finer buckets received for the zoom window, by run+series, already merged into the coarse ones. */
  private fine = new Map<string, SeriesData>();
  /** Outstanding requestRange windows (steps) by run+series; answers for other windows are stale. */
  private pending = new Map<string, { from: number; to: number }>();
  private plots = new Map<string, { card: HTMLElement; plot: SeriesPlot }>();
  private stopWatchingTheme: (() => void) | undefined;
  private disposeBench: (() => void)[] = [];
  private theme: Theme | undefined;
  private zoomTimer: ReturnType<typeof setTimeout> | undefined;

  private readonly els = {
    banner: h('div', 'kg-banner'),
    toolbar: h('div', 'kg-toolbar'),
    seriesChooser: h('div', 'kg-series-chooser'),
    legend: h('div', 'kg-legend'),
    preview: h('div', 'kg-preview'),
    plots: h('div', 'kg-plots'),
    runs: h('section', 'kg-section kg-runs'),
    checkpoints: h('section', 'kg-section kg-checkpoints'),
    drift: h('section', 'kg-section kg-drift'),
    bench: h('section', 'kg-section kg-bench'),
  };

  constructor(
    private readonly root: HTMLElement,
    private readonly host: HostApi,
  ) {
    const saved = dashboardStateSchema.safeParse(host.getState() ?? {});
    const state: DashboardState = saved.success ? saved.data : dashboardStateSchema.parse({});
    this.selected = state.selected;
    this.smoothing = state.smoothing;
    this.axis = state.xAxis;
    this.follow = state.follow;
  }

  /** Builds the empty frame and announces itself; nothing is drawn before `init`. */
  start(): void {
    this.root.replaceChildren();
    this.root.classList.remove('kg-loading');
    const main = h('main', 'kg-main');
    const aside = h('aside', 'kg-aside');
    this.els.banner.hidden = true;
    // A polite live region: screen readers hear that the plots are a preview, and when the exact data replaced it.
    this.els.preview.setAttribute('role', 'status');
    this.els.preview.setAttribute('aria-live', 'polite');
    this.els.preview.hidden = true;
    main.append(
      this.els.banner,
      this.els.toolbar,
      this.els.seriesChooser,
      this.els.legend,
      this.els.preview,
      this.els.plots,
    );
    aside.append(this.els.runs, this.els.checkpoints, this.els.drift, this.els.bench);
    const waiting = h('p', 'kg-empty', 'Waiting for data…');
    this.els.plots.append(waiting);
    this.root.append(main, aside);
    this.stopWatchingTheme = watchTheme(() => this.redrawAll());
    this.host.post({ type: 'ready', version: DASHBOARD_PROTOCOL_VERSION });
  }

  handle(message: HostMessage): void {
    switch (message.type) {
      case 'init':
        this.runs = message.runs;
        this.checkpoints = message.checkpoints;
        this.hosts = sideHosts(message);
        this.sidePending = message.sidePending;
        this.follow = message.follow;
        if (message.selected) this.selected = message.selected;
        this.zoom = undefined;
        this.fine.clear();
        this.pending.clear();
        this.gpu.clear();
        this.renderAll();
        break;
      case 'gpu':
        this.gpu.set(message.run, message.plot);
        this.renderControls();
        this.renderPlots();
        break;
      case 'runData':
        this.runs = upsertRun(this.runs, message.data);
        for (const k of [...this.fine.keys()]) if (k.startsWith(`${message.data.run.id}\u0000`)) this.fine.delete(k);
        this.renderControls();
        this.renderRuns();
        this.renderPlots();
        if (this.zoom) this.requestRanges([message.data.run.id]);
        break;
      case 'rangeData':
        this.acceptRange(message);
        break;
      case 'side':
        this.hosts = message.hosts;
        this.sidePending = false;
        this.renderDrift();
        this.renderBench();
        break;
      case 'follow':
        this.follow = message.on;
        this.renderControls();
        this.saveState();
        break;
      case 'error':
        this.els.banner.textContent = message.message;
        this.els.banner.hidden = false;
        break;
      case 'zoom': {
        // a window in steps: on the step axis (switched to it if needed), as if the user had dragged it
        const series = message.series;
        const show =
          series !== undefined && this.allSeries().includes(series) && !this.visibleSeries().includes(series);
        if (show) this.selected = [series, ...this.visibleSeries()];
        if (this.axis !== 'step' || show) {
          this.axis = 'step';
          this.renderControls();
          this.renderPlots();
          if (show) this.saveState();
        }
        this.zoom = { min: message.from, max: message.to };
        this.showZoom();
        for (const { plot } of this.plots.values()) plot.setWindow(message.from, message.to);
        this.requestRanges();
        // the plot of the series the link names comes into view (not the first plot, which is often the loss)
        if (series !== undefined) this.plots.get(series)?.card.scrollIntoView({ block: 'start' });
        break;
      }
    }
  }

  private allSeries(): string[] {
    return detectSeries(withGpu(this.runs, this.gpu));
  }

  private visibleSeries(): string[] {
    const all = this.allSeries();
    const chosen = (this.selected ?? []).filter((k) => all.includes(k));
    if (this.selected === undefined) return all.slice(0, DEFAULT_VISIBLE);
    return all.filter((k) => chosen.includes(k));
  }

  private saveState(): void {
    const state: DashboardState = {
      runs: this.runs.map((r) => ({ id: r.run.id, host: r.run.host, path: r.run.path, label: r.run.label })),
      selected: this.selected,
      smoothing: this.smoothing,
      xAxis: this.axis,
      follow: this.follow,
    };
    this.host.setState(state);
  }

  private renderAll(): void {
    this.theme = readTheme();
    if (this.axis !== 'step' && !hasWallTime(this.runs)) this.axis = 'step';
    this.renderControls();
    this.renderRuns();
    this.renderPlots(true);
    this.renderSide();
    this.saveState();
  }

  /** Theme change: canvases hold resolved colours, so they are drawn anew. */
  private redrawAll(): void {
    if (this.runs.length === 0 && this.hosts.every((x) => x.bench.length === 0)) return;
    this.theme = readTheme();
    this.renderRuns();
    this.renderPlots(true);
    // The checkpoint list's swatches carry the runs' colours too.
    this.renderCheckpoints();
    this.renderBench();
  }

  private renderControls(): void {
    const wall = hasWallTime(this.runs);
    const axis = dropdown(
      [
        { value: 'step', label: 'x: step' },
        { value: 'time', label: 'x: wall time', disabled: !wall },
        { value: 'relative', label: 'x: hours since start', disabled: !wall },
      ],
      this.axis,
      (v) => {
        this.axis = v === 'time' || v === 'relative' ? v : 'step';
        this.zoom = undefined;
        this.fine.clear();
        this.pending.clear();
        this.renderPlots(true);
        this.saveState();
      },
      'x axis',
    );
    const smooth = slider(
      'Smoothing',
      this.smoothing,
      { min: 0, max: 0.99, step: 0.01 },
      (v) => {
        this.smoothing = v;
        this.renderPlots();
        this.saveState();
      },
      (v) => v.toFixed(2),
    );
    smooth.dataset.control = 'smoothing';
    const follow = checkbox('Follow', this.follow, (on) => this.host.post({ type: 'toggleFollow', on }));
    follow.dataset.control = 'follow';
    const reset = button('Reset zoom', () => this.resetZoom(), {
      action: 'reset-zoom',
      title: 'Show the whole run (or double-click a plot)',
    });
    axis.dataset.control = 'axis';
    this.showZoom();
    this.els.toolbar.replaceChildren(axis, smooth, follow, reset, this.zoomNote);

    const visible = new Set(this.visibleSeries());
    const boxes = this.allSeries().map((key) =>
      checkbox(
        key,
        visible.has(key),
        (on) => {
          const now = new Set(this.visibleSeries());
          if (on) now.add(key);
          else now.delete(key);
          this.selected = this.allSeries().filter((k) => now.has(k));
          this.renderPlots();
          this.saveState();
        },
        key,
      ),
    );
    const label = h('span', 'kg-label', 'Series');
    this.els.seriesChooser.replaceChildren(label, ...boxes);
  }

  private runColor(index: number): string {
    const colors = this.theme?.runColors ?? [];
    return colors[index % Math.max(1, colors.length)] ?? 'currentColor';
  }

  /** The run legend (colour, name, skipped lines) and the runs table in the side panel. */
  private renderRuns(): void {
    const items = this.runs.map((r, i) => {
      const item = h('span', 'kg-legend-item');
      item.dataset.run = r.run.id;
      const swatch = h('span', 'kg-swatch');
      swatch.style.backgroundColor = this.runColor(i);
      const name = h('span', 'kg-run-label', r.run.label);
      name.title = `${r.run.host}:${r.run.path}`;
      item.append(swatch, name);
      if (r.run.sample) {
        item.append(
          badge(r.run.sample.failed ? 'sampled' : 'preview', 'These plots are drawn from a sample of the log'),
        );
      }
      const skipped = totalSkipped(r.run.skipped);
      if (skipped > 0) {
        item.append(
          badge(
            `${skipped} skipped`,
            `${r.run.skipped.malformed} malformed, ${r.run.skipped.nonNumeric} non-numeric, ${r.run.skipped.nonFinite} NaN/Infinity, ${r.run.skipped.noX} without a step: lines skipped`,
          ),
        );
      }
      return item;
    });
    this.els.legend.replaceChildren(...items);
    this.renderPreviewNotes();

    const heading = h('h2', undefined, 'Runs');
    const grid = dataGrid(
      [
        { key: 'run', title: 'Run', width: '2fr' },
        { key: 'lines', title: 'Lines', width: '1.3fr' },
        { key: 'malformed', title: 'Bad', width: '0.8fr' },
        { key: 'nonNumeric', title: 'Text', width: '0.8fr' },
        { key: 'nonFinite', title: 'NaN', width: '0.8fr' },
      ],
      this.runs.map((r) => ({
        run: r.run.label,
        lines: r.run.lines.toLocaleString('en-US'),
        malformed: String(r.run.skipped.malformed),
        nonNumeric: String(r.run.skipped.nonNumeric),
        nonFinite: String(r.run.skipped.nonFinite),
      })),
    );
    grid.classList.add('kg-runs-grid');
    const note = h(
      'p',
      'kg-muted kg-note',
      'Skipped lines: Bad = not JSON, Text = non-numeric value, NaN = NaN/Infinity.',
    );
    this.els.runs.replaceChildren(heading, grid, note);
  }

  /** One line per run whose data is still a preview; hidden once every run is exact. */
  private renderPreviewNotes(): void {
    const named = this.runs.length > 1;
    const notes = this.runs.flatMap((r) => {
      const text = previewNote(r.run, named);
      if (!text) return [];
      const p = h('p', r.run.sample?.failed ? 'kg-preview-note kg-preview-failed' : 'kg-preview-note', text);
      p.dataset.run = r.run.id;
      return [p];
    });
    this.els.preview.replaceChildren(...notes);
    this.els.preview.hidden = notes.length === 0;
  }

  private override = (runId: string, key: string): SeriesData | undefined => this.fine.get(seriesKey(runId, key));

  /** Adds, updates and removes plot cards to match the chosen series. `recreate` draws every canvas anew. */
  private renderPlots(recreate = false): void {
    const theme = (this.theme ??= readTheme());
    const keys = this.visibleSeries();
    // the host keeps the shifts of the plots shown current (while following it finds only theirs again)
    if (keys.join('\u0000') !== this.shownPosted) {
      this.shownPosted = keys.join('\u0000');
      this.host.post({ type: 'selectSeries', keys });
    }
    if (recreate) {
      for (const { card, plot } of this.plots.values()) {
        plot.destroy();
        card.remove();
      }
      this.plots.clear();
    }
    for (const [key, { card, plot }] of this.plots) {
      if (!keys.includes(key)) {
        plot.destroy();
        card.remove();
        this.plots.delete(key);
      }
    }
    if (keys.length === 0) {
      const msg = this.runs.length === 0 ? 'No runs.' : 'No series chosen (or no numeric series in the log).';
      this.els.plots.replaceChildren(h('p', 'kg-empty', msg));
      return;
    }
    this.els.plots.querySelector('.kg-empty')?.remove();
    const plotted = withGpu(this.runs, this.gpu);
    for (const key of keys) {
      const model = buildPlotModel(plotted, key, this.axis, this.smoothing, this.override);
      const inPlot = new Set(model.runs.map((r) => r.runId));
      const marks = [
        ...checkpointMarks(
          this.checkpoints.filter((c) => c.run === undefined || inPlot.has(c.run)),
          this.runs,
          this.axis,
        ),
        // the report's level shifts of this series and the runs' restarts, as the host computed them
        ...changepointMarks(this.runs, key, inPlot, this.axis),
        ...restartMarks(this.runs, inPlot, this.axis),
        ...gpuMarks(this.runs, this.gpu, inPlot, this.axis),
      ].sort((a, b) => a.x - b.x);
      const existing = this.plots.get(key);
      if (existing) {
        existing.plot.setMarks(marks);
        existing.plot.update(model, this.zoom);
        this.renderMarkList(existing.card, marks);
        this.els.plots.append(existing.card);
        continue;
      }
      const card = h('div', 'kg-plot');
      card.dataset.series = key;
      const title = h('h3', 'kg-plot-title', gpuTitle(key, [...this.gpu.values()]));
      const canvasHost = h('div', 'kg-plot-canvas');
      card.append(title, canvasHost);
      this.renderMarkList(card, marks);
      this.els.plots.append(card);
      const plot = new SeriesPlot(
        canvasHost,
        model,
        this.axis,
        theme,
        {
          onZoom: (min, max) => this.onUserZoom(key, min, max),
          onReset: () => this.resetZoom(),
        },
        undefined,
        marks,
      );
      if (this.zoom) plot.setWindow(this.zoom.min, this.zoom.max);
      this.plots.set(key, { card, plot });
    }
  }

  /** The restarts and shifts a plot marks, in words under it (nothing when it marks none). */
  private renderMarkList(card: HTMLElement, marks: readonly CheckpointMark[]): void {
    const shown = marks.filter((m) => m.kind === 'restart' || m.kind === 'shift');
    const words = marksInWords(shown, this.axis, (id) => this.runs.find((r) => r.run.id === id)?.run.label);
    let list = card.querySelector<HTMLElement>('.kg-plot-marks');
    if (!words.length) {
      list?.remove();
      return;
    }
    if (!list) {
      list = h('ul', 'kg-plot-marks');
      card.append(list);
    }
    list.replaceChildren(
      ...words.map((w, i) => {
        const li = h('li', 'kg-plot-mark', w);
        li.dataset.kind = shown[i]!.kind!;
        return li;
      }),
    );
  }

  /** The zoom window in words beside Reset zoom (`steps 500–701`), empty when the whole run shows. */
  private readonly zoomNote = h('span', 'kg-zoom-note');

  private showZoom(): void {
    const z = this.zoom;
    const fmt = (v: number) => (this.axis === 'time' ? readableTime(v) : formatValue(v));
    const unit = this.axis === 'step' ? 'steps ' : this.axis === 'relative' ? 'hours ' : '';
    this.zoomNote.textContent = z ? `${unit}${fmt(z.min)}–${fmt(z.max)}` : '';
  }

  private onUserZoom(source: string, min: number, max: number): void {
    this.zoom = { min, max };
    this.showZoom();
    for (const [key, { plot }] of this.plots) if (key !== source) plot.setWindow(min, max);
    // Dragging fires scale changes in bursts; ask the host once the window settles.
    clearTimeout(this.zoomTimer);
    this.zoomTimer = setTimeout(() => this.requestRanges(), 120);
  }

  /** Asks the host for finer buckets of every shown series in the zoom window, converted to steps. */
  private requestRanges(onlyRuns?: string[]): void {
    const zoom = this.zoom;
    if (!zoom) return;
    for (const key of this.visibleSeries()) {
      for (const run of this.runs) {
        if (onlyRuns && !onlyRuns.includes(run.run.id)) continue;
        const series = run.series.find((s) => s.key === key);
        if (!series || series.x.length === 0) continue;
        const axisX = xValues(series, this.axis, runTimeOrigin(run));
        if (!axisX) continue;
        const win = stepWindow(series, axisX, zoom.min, zoom.max);
        if (!win) continue;
        this.pending.set(seriesKey(run.run.id, key), win);
        this.host.post({ type: 'requestRange', run: run.run.id, series: key, from: win.from, to: win.to });
      }
    }
  }

  private acceptRange(m: RangeDataMessage): void {
    const k = seriesKey(m.run, m.series);
    const want = this.pending.get(k);
    if (!this.zoom || !want || want.from !== m.from || want.to !== m.to) return;
    const coarse = this.runs.find((r) => r.run.id === m.run)?.series.find((s) => s.key === m.series);
    if (!coarse) return;
    this.pending.delete(k);
    this.fine.set(k, mergeWindow(coarse, { ...m.data, key: m.series }, m.from, m.to));
    const entry = this.plots.get(m.series);
    entry?.plot.update(buildPlotModel(this.runs, m.series, this.axis, this.smoothing, this.override), this.zoom);
  }

  private resetZoom(): void {
    clearTimeout(this.zoomTimer);
    const hadFine = this.fine.size > 0;
    this.zoom = undefined;
    this.showZoom();
    this.fine.clear();
    this.pending.clear();
    if (hadFine) this.renderPlots();
    for (const { plot } of this.plots.values()) plot.setWindow(undefined, undefined);
  }

  dispose(): void {
    this.stopWatchingTheme?.();
    for (const d of this.disposeBench.splice(0)) d();
    for (const { plot } of this.plots.values()) plot.destroy();
    this.plots.clear();
  }

  private renderSide(): void {
    this.renderCheckpoints();
    this.renderDrift();
    this.renderBench();
  }

  private renderCheckpoints(): void {
    const heading = h('h2', undefined, 'Checkpoints');
    if (this.checkpoints.length === 0) {
      this.els.checkpoints.replaceChildren(heading, h('p', 'kg-empty', 'No checkpoints found for these runs.'));
      return;
    }
    const prev = previousCheckpoints(this.checkpoints);
    const list = h('ul', 'kg-checkpoint-list');
    const runIndex = new Map(this.runs.map((r, i) => [r.run.id, i]));
    for (const c of this.checkpoints) {
      const li = h('li', 'kg-checkpoint');
      li.dataset.path = c.path;
      const idx = c.run !== undefined ? runIndex.get(c.run) : undefined;
      const swatch = h('span', 'kg-swatch');
      if (idx !== undefined) swatch.style.backgroundColor = this.runColor(idx);
      const name = h('span', 'kg-checkpoint-label', c.label);
      name.title = c.path;
      const meta = h(
        'span',
        'kg-muted',
        c.step != null ? `step ${formatValue(c.step)}` : c.mtime != null ? readableTime(c.mtime) : '',
      );
      const before = prev.get(c.path);
      const open = button('Open Args', () => this.host.post({ type: 'openArgs', path: c.path }), {
        action: 'open-args',
        disabled: !c.hasArgs,
        title: c.hasArgs ? `Open the training args of ${c.path}` : 'This checkpoint has no args',
      });
      const diff = button(
        'Diff with previous',
        () => before && this.host.post({ type: 'diffArgs', a: before.path, b: c.path }),
        {
          action: 'diff-args',
          disabled: !before || !c.hasArgs || !before.hasArgs,
          title: before ? `Diff args against ${before.label}` : 'No earlier checkpoint of this run',
        },
      );
      const actions = h('span', 'kg-actions');
      actions.append(open, diff);
      const head = h('span', 'kg-checkpoint-head');
      head.append(swatch, name, meta);
      li.append(head, actions);
      list.append(li);
    }
    this.els.checkpoints.replaceChildren(heading, list);
  }

  /** With runs from several hosts, each host's part is headed by its name; with one, it looks as it always did. */
  private hostHeading(x: HostSide): HTMLElement | undefined {
    if (this.hosts.length < 2) return undefined;
    const title = h('h3', 'kg-host', x.label || x.host);
    title.dataset.host = x.host;
    return title;
  }

  private renderDrift(): void {
    const heading = h('h2', undefined, 'Baseline drift');
    if (this.sidePending) {
      this.els.drift.replaceChildren(heading, h('p', 'kg-empty', 'Reading the baselines…'));
      return;
    }
    const parts = this.hosts.flatMap((x) => {
      const group = h('div', 'kg-host-part');
      group.dataset.host = x.host;
      const title = this.hostHeading(x);
      if (title) group.append(title);
      // each run's drift is limited to its own time (older hosts sent the host's newest drift instead)
      if (x.runs.length) {
        for (const r of x.runs) group.append(this.runDrift(r, x.runs.length > 1 || this.runs.length > 1));
        return [group];
      }
      const d = x.drift;
      if (!d) {
        group.append(h('p', 'kg-empty', 'No baseline recorded for this host.'));
        return [group];
      }
      group.append(...this.driftBlock(d));
      return [group];
    });
    if (parts.length === 0) parts.push(h('p', 'kg-empty', 'No baseline recorded for this host.'));
    this.els.drift.replaceChildren(heading, ...parts);
  }

  /** One drift: what it compares (and when), a badge with the count, the text. */
  private driftBlock(d: DriftSummary): HTMLElement[] {
    const sub = h('p', 'kg-muted', `${d.baseline}${d.capturedAt ? ` · ${readableTime(d.capturedAt)}` : ''}`);
    sub.append(' ', badge(d.changes === 0 ? 'no drift' : `${d.changes} changed`));
    return [sub, h('pre', 'kg-drift-text', d.text)];
  }

  /** A run's part of the drift panel: its time, then the drift between the snapshots taken in it, or why there is none. */
  private runDrift(r: RunDriftInfo, named: boolean): HTMLElement {
    const part = h('div', 'kg-run-drift');
    part.dataset.run = r.run;
    if (named) part.append(h('h3', 'kg-run-drift-title', r.label));
    if (r.span)
      part.append(h('p', 'kg-muted kg-run-span', `run: ${readableTime(r.span.from)} – ${readableTime(r.span.to)}`));
    if (r.drift) part.append(...this.driftBlock(r.drift));
    else part.append(h('p', 'kg-empty', r.note));
    return part;
  }

  /** The newest results of a host, each with the button that marks it as the known-good reference (or unmarks it). */
  private benchList(x: HostSide): HTMLElement {
    const list = h('ul', 'kg-bench-list');
    const newest = x.bench
      .filter((b) => b.id !== undefined)
      .slice()
      .sort((a, b) => b.time - a.time)
      .slice(0, 6);
    for (const b of newest) {
      const li = h('li', 'kg-bench-item');
      li.dataset.result = b.id;
      const text = h(
        'span',
        'kg-bench-label',
        `${formatValue(b.tokPerS)} tok/s · ${readableTime(b.time)}${b.label ? ` · ${b.label}` : ''}`,
      );
      text.title = b.label ?? '';
      const mark = b.baseline
        ? button('Unmark', () => this.host.post({ type: 'markReference', host: x.host, result: null }), {
            action: 'unmark-reference',
            title: 'This result is the known-good reference; unmark it',
          })
        : button('Mark known-good', () => this.host.post({ type: 'markReference', host: x.host, result: b.id! }), {
            action: 'mark-reference',
            title: 'Use this result as the known-good reference the others are compared with',
          });
      if (b.baseline) li.append(badge('known-good'));
      li.append(text, mark);
      list.append(li);
    }
    return list;
  }

  private renderBench(): void {
    for (const d of this.disposeBench.splice(0)) d();
    const heading = h('h2', undefined, 'Benchmark history');
    if (this.sidePending) {
      this.els.bench.replaceChildren(heading, h('p', 'kg-empty', 'Reading the benchmark history…'));
      return;
    }
    const parts: HTMLElement[] = [];
    const draw: { host: HTMLElement; x: HostSide }[] = [];
    for (const x of this.hosts) {
      const group = h('div', 'kg-host-part');
      group.dataset.host = x.host;
      const title = this.hostHeading(x);
      if (title) group.append(title);
      parts.push(group);
      if (x.bench.length === 0) {
        group.append(h('p', 'kg-empty', 'No benchmarks yet.'));
        continue;
      }
      const base = x.bench.find((b) => b.baseline);
      const sub = h(
        'p',
        'kg-muted',
        base
          ? `tokens/s; known-good ${formatValue(base.tokPerS)} (${base.label ?? readableTime(base.time)})`
          : x.bench.some((b) => b.id !== undefined)
            ? 'tokens/s; no known-good result marked: mark one below'
            : 'tokens/s; no known-good result marked',
      );
      const canvasHost = h('div', 'kg-bench-canvas');
      group.append(sub, canvasHost, this.benchList(x), divider());
      draw.push({ host: canvasHost, x });
    }
    if (parts.length === 0) parts.push(h('p', 'kg-empty', 'No benchmarks yet.'));
    this.els.bench.replaceChildren(heading, ...parts);
    // Drawn once in the page: uPlot sizes the canvas from its host's width.
    const theme = this.theme ?? readTheme();
    for (const d of draw) this.disposeBench.push(createBenchPlot(d.host, d.x.bench, theme));
  }
}
