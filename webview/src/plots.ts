// Plots are uPlot (https://github.com/leeoniya/uPlot). Why it over Chart.js/Plotly/ECharts: ~45 KB minified, draws
// on one canvas, and was made for long time series: it stays interactive at 100k+ points where SVG and DOM-per-point
// libraries stall. It needs no eval and sets styles only through the CSSOM, so it runs under the dashboard's CSP.
import uPlot from 'uplot';
import {
  benchTimeRange,
  benchValueRange,
  formatValue,
  withAlpha,
  yExtent,
  type CheckpointMark,
  type PlotModel,
} from './data';
import type { BenchPoint, XAxis } from '../../src/core/dashboard/protocol';
import type { Theme } from './theme';

const AXIS_LABEL: Record<XAxis, string> = { step: 'step', time: 'time', relative: 'hours' };

function axisStyle(theme: Theme): uPlot.Axis {
  return {
    stroke: theme.axis,
    font: theme.font,
    labelFont: theme.font,
    grid: { stroke: theme.grid, width: 1 },
    ticks: { stroke: theme.grid, width: 1 },
  };
}

function colorOf(theme: Theme, index: number): string {
  return theme.runColors[index % theme.runColors.length] ?? theme.foreground;
}

/** First and last x index inside the x scale, for drawing and ranging only what is visible. */
function visibleIdx(u: uPlot): [number, number] {
  const xs = u.data[0];
  const min = u.scales.x?.min ?? -Infinity;
  const max = u.scales.x?.max ?? Infinity;
  let i0 = 0;
  while (i0 < xs.length - 1 && (xs[i0] ?? 0) < min) i0++;
  let i1 = xs.length - 1;
  while (i1 > 0 && (xs[i1] ?? 0) > max) i1--;
  return [Math.max(0, i0 - 1), Math.min(xs.length - 1, i1 + 1)];
}

/**
 * The value of series `si` nearest to index `idx`. Runs share one x array with gaps (see alignRuns), so at the
 * cursor's index usually only one run has a point; the legend shows each run's closest one instead of a dash.
 */
function nearest(u: uPlot, si: number, idx: number | null): number | null {
  const col = u.data[si];
  if (!col || idx === null) return null;
  for (let d = 1; d < 64; d++) {
    const before = col[idx - d];
    if (before != null) return before;
    const after = col[idx + d];
    if (after != null) return after;
  }
  return null;
}

export interface SeriesPlotEvents {
  /** The user selected an x window (axis units). */
  onZoom(min: number, max: number): void;
  /** The user went back to the whole range (double click). */
  onReset(): void;
}

/** One metric: a line per run (smoothed last), its bucket min/max band behind it, and uPlot's legend. */
export class SeriesPlot {
  private plot: uPlot | undefined;
  private model: PlotModel;
  /** Scale changes we make ourselves (data updates, syncing another plot's zoom) are not user zooms. */
  private quiet = false;
  private readonly resize: ResizeObserver;

  constructor(
    private readonly host: HTMLElement,
    model: PlotModel,
    private readonly axis: XAxis,
    private readonly theme: Theme,
    private readonly events: SeriesPlotEvents,
    private readonly height = 220,
    /** Checkpoints on this plot's x axis: a dashed vertical line each, behind the lines. */
    private marks: readonly CheckpointMark[] = [],
  ) {
    this.model = model;
    this.create();
    this.resize = new ResizeObserver(() => {
      const width = this.width();
      if (this.plot && width !== this.plot.width) this.plot.setSize({ width, height: this.height });
    });
    this.resize.observe(host);
  }

  private width(): number {
    return Math.max(200, Math.floor(this.host.clientWidth));
  }

  private data(): uPlot.AlignedData {
    return [this.model.x, ...this.model.runs.map((r) => r.line)] as uPlot.AlignedData;
  }

  private create(): void {
    const theme = this.theme;
    const opts: uPlot.Options = {
      width: this.width(),
      height: this.height,
      scales: {
        x: { time: this.axis === 'time' },
        y: {
          range: (u, dmin, dmax) => {
            const [i0, i1] = visibleIdx(u);
            const [lo, hi] = yExtent(this.model, i0, i1) ?? [dmin, dmax];
            const pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.05 || 1;
            return [lo - pad, hi + pad];
          },
        },
      },
      series: [
        {
          label: AXIS_LABEL[this.axis],
          value: (_u, v) => (this.axis === 'time' ? new Date(v * 1000).toLocaleString() : formatValue(v)),
        },
        ...this.model.runs.map((r) => ({
          label: r.label,
          stroke: colorOf(theme, r.colorIndex),
          width: 1.5,
          spanGaps: true,
          points: { show: false },
          value: (u: uPlot, v: number | null, si: number, idx: number | null) => formatValue(v ?? nearest(u, si, idx)),
        })),
      ],
      axes: [
        { ...axisStyle(theme), space: 60 },
        { ...axisStyle(theme), size: 64, values: (_u, splits) => splits.map((v) => formatValue(v)) },
      ],
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false, setScale: true }, sync: { key: 'known-good' } },
      hooks: {
        drawAxes: [
          (u) => {
            this.drawCheckpoints(u);
            this.drawBands(u);
          },
        ],
        setScale: [
          (u, key) => {
            if (key !== 'x' || this.quiet) return;
            const xs = u.data[0];
            const min = u.scales.x?.min;
            const max = u.scales.x?.max;
            if (min === undefined || max === undefined || xs.length === 0) return;
            const full = (xs[0] ?? 0) >= min && (xs[xs.length - 1] ?? 0) <= max;
            if (full) this.events.onReset();
            else this.events.onZoom(min, max);
          },
        ],
      },
    };
    this.quiet = true;
    try {
      this.plot = new uPlot(opts, this.data(), this.host);
    } finally {
      this.quiet = false;
    }
  }

  /** Checkpoints as thin dashed vertical lines (labelled when there is room), under the bands and lines. */
  private drawCheckpoints(u: uPlot): void {
    if (this.marks.length === 0) return;
    const ctx = u.ctx;
    const dpr = devicePixelRatio || 1;
    const min = u.scales.x?.min ?? -Infinity;
    const max = u.scales.x?.max ?? Infinity;
    const shown = this.marks.filter((m) => m.x >= min && m.x <= max);
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    ctx.strokeStyle = withAlpha(this.theme.axis, 0.7);
    ctx.fillStyle = this.theme.axis;
    ctx.lineWidth = dpr;
    ctx.setLineDash([3 * dpr, 3 * dpr]);
    ctx.font = this.theme.font.replace(/^(\d+)px/, (_m, px: string) => `${Number(px) * 0.85 * dpr}px`);
    ctx.textBaseline = 'top';
    ctx.textAlign = 'left';
    let lastLabelEnd = -Infinity;
    for (const m of shown) {
      const x = Math.round(u.valToPos(m.x, 'x', true)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      const width = ctx.measureText(m.label).width;
      if (x + 3 * dpr > lastLabelEnd && x + width < u.bbox.left + u.bbox.width) {
        ctx.fillText(m.label, x + 3 * dpr, u.bbox.top + 2 * dpr);
        lastLabelEnd = x + 3 * dpr + width + 6 * dpr;
      }
    }
    ctx.restore();
  }

  /** New checkpoint marks (the checkpoints list or the axis changed). */
  setMarks(marks: readonly CheckpointMark[]): void {
    this.marks = marks;
    this.plot?.redraw(false);
  }

  /** The min/max band of each run, under the lines: drawn in drawAxes, which runs before the series. */
  private drawBands(u: uPlot): void {
    const ctx = u.ctx;
    const [i0, i1] = visibleIdx(u);
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    this.model.runs.forEach((r, ri) => {
      if (u.series[ri + 1]?.show === false) return;
      const idx: number[] = [];
      for (let i = i0; i <= i1; i++) if (r.min[i] != null && r.max[i] != null) idx.push(i);
      if (idx.length < 2) return;
      ctx.beginPath();
      const xs = u.data[0];
      idx.forEach((i, k) => {
        const px = u.valToPos(xs[i] ?? 0, 'x', true);
        const py = u.valToPos(r.max[i] ?? 0, 'y', true);
        if (k === 0) ctx.moveTo(px, py);
        else ctx.lineTo(px, py);
      });
      for (let k = idx.length - 1; k >= 0; k--) {
        const i = idx[k] ?? 0;
        ctx.lineTo(u.valToPos(xs[i] ?? 0, 'x', true), u.valToPos(r.min[i] ?? 0, 'y', true));
      }
      ctx.closePath();
      ctx.fillStyle = withAlpha(colorOf(this.theme, r.colorIndex), this.theme.kind === 'high-contrast' ? 0.35 : 0.2);
      ctx.fill();
    });
    ctx.restore();
  }

  /** New data (smoothing, follow, finer zoom data). Keeps the x window when one is given. */
  update(model: PlotModel, window?: { min: number; max: number }): void {
    const sameRuns =
      model.runs.length === this.model.runs.length && model.runs.every((r, i) => r.runId === this.model.runs[i]?.runId);
    this.model = model;
    if (!sameRuns) {
      this.plot?.destroy();
      this.create();
    } else {
      this.quiet = true;
      try {
        this.plot?.setData(this.data(), window === undefined);
      } finally {
        this.quiet = false;
      }
    }
    if (window) this.setWindow(window.min, window.max);
  }

  /** Shows [min, max] of the x axis without reporting it as a user zoom; undefined: the whole range. */
  setWindow(min: number | undefined, max: number | undefined): void {
    const u = this.plot;
    if (!u) return;
    const xs = u.data[0];
    this.quiet = true;
    try {
      u.setScale('x', { min: min ?? xs[0] ?? 0, max: max ?? xs[xs.length - 1] ?? 1 });
    } finally {
      this.quiet = false;
    }
  }

  destroy(): void {
    this.resize.disconnect();
    this.plot?.destroy();
    this.plot = undefined;
  }
}

/** Benchmark history: tokens/s per benchmark over time, the known-good value as a dashed line and a ringed point. */
export function createBenchPlot(host: HTMLElement, points: readonly BenchPoint[], theme: Theme): () => void {
  const sorted = points.slice().sort((a, b) => a.time - b.time);
  const base = sorted.find((p) => p.baseline);
  const line = colorOf(theme, 0);
  const opts: uPlot.Options = {
    width: Math.max(200, host.clientWidth),
    height: 160,
    scales: {
      // From the data, not uPlot's min/max: for one point uPlot passes min + 86400/ms, which with seconds (ms 1e-3)
      // is 2.7 years, not a day.
      x: {
        time: true,
        range: (u) => {
          const xs = u.data[0];
          return benchTimeRange(xs[0], xs[xs.length - 1]);
        },
      },
      y: { range: (_u, min, max) => benchValueRange(min, max) },
    },
    series: [
      {},
      {
        label: 'tok/s',
        stroke: line,
        width: 1.5,
        points: { show: true, size: 6, fill: line },
        value: (_u, v) => formatValue(v),
      },
    ],
    axes: [
      { ...axisStyle(theme), space: 50 },
      { ...axisStyle(theme), size: 56, values: (_u, splits) => splits.map((v) => formatValue(v)) },
    ],
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    hooks: {
      draw: [
        (u) => {
          if (!base) return;
          const ctx = u.ctx;
          const y = u.valToPos(base.tokPerS, 'y', true);
          const x = u.valToPos(base.time, 'x', true);
          const dpr = devicePixelRatio || 1;
          ctx.save();
          ctx.strokeStyle = theme.baseline;
          ctx.fillStyle = theme.baseline;
          ctx.lineWidth = 1.5 * dpr;
          ctx.setLineDash([6 * dpr, 4 * dpr]);
          ctx.beginPath();
          ctx.moveTo(u.bbox.left, y);
          ctx.lineTo(u.bbox.left + u.bbox.width, y);
          ctx.stroke();
          ctx.setLineDash([]);
          ctx.beginPath();
          ctx.arc(x, y, 6 * dpr, 0, Math.PI * 2);
          ctx.lineWidth = 2 * dpr;
          ctx.stroke();
          ctx.font = theme.font.replace(/^(\d+)px/, (_m, px: string) => `${Number(px) * dpr}px`);
          ctx.textBaseline = 'bottom';
          ctx.fillText('known-good', Math.min(x + 8 * dpr, u.bbox.left + u.bbox.width - 70 * dpr), y - 4 * dpr);
          ctx.restore();
        },
      ],
    },
  };
  const plot = new uPlot(opts, [sorted.map((p) => p.time), sorted.map((p) => p.tokPerS)], host);
  const resize = new ResizeObserver(() => {
    const width = Math.max(200, host.clientWidth);
    if (width !== plot.width) plot.setSize({ width, height: 160 });
  });
  resize.observe(host);
  return () => {
    resize.disconnect();
    plot.destroy();
  };
}
