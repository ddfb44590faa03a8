// The dashboard's runs, read in two steps so the first plot comes quickly even for a log of a million lines: a
// preview (the probe samples evenly spaced windows of a large log; a small one it reads whole), then, for the runs
// whose preview was sampled, the exact read that replaces it. Following reads from an exact read's nextOffset only.
// Pure (the probe is a function passed in), so it is tested in Node; src/dashboard/panel.ts adapts it.
import { KnownGoodError, messageOf } from '../errors';
import type { HistoryPart } from '../metrics/history';
import type { MetricsReduceOptions, MetricsReduction } from '../metrics/metricsProbe';
import { STEPS_PER_SEC_KEY, TOKENS_PER_SEC_KEY } from '../metrics/speedFromTime';
import { throughputRank } from '../whatChanged/categories';
import { appendReduction, runDataFromParts } from './fromReduction';
import type { HostSide, RestartMark, RunData } from './protocol';
import { runId, type RunSource } from './sources';

/** Reads one run's log with metrics_reduce (through its host's resident helper, in the panel). */
export type Reduce = (src: RunSource, options: Omit<MetricsReduceOptions, 'path'>) => Promise<MetricsReduction>;

export interface LoadedRun {
  readonly src: RunSource;
  readonly id: string;
  data: RunData;
  /** The reductions of the files of its history (one file: one), the newest grown by following: what `data` is of. */
  parts: HistoryPart[];
  /** Restarts the follow poll saw (new training processes), kept across every rebuild of `data`. */
  live: RestartMark[];
  /** The series whose shifts are of `data` as it is ('all', or those kept current while following). */
  shiftsOf: ReadonlySet<string> | 'all';
  /** Where following reads next: an exact read's nextOffset; undefined while the data is a preview. */
  nextOffset: number | undefined;
  /** `pending`: the data is a preview and the exact read is yet to land; `failed`: it did not, the preview stays. */
  exact: 'done' | 'pending' | 'failed';
}

export interface ProgressiveOptions {
  reduce: Reduce;
  hostLabel(hostId: string): string;
  /** The preview's read budget in bytes; undefined: the probe's default. */
  previewBytes?: number | undefined;
  /** Buckets per series kept while following. */
  maxBuckets: number;
  log?: (line: string) => void;
  /**
   * The series the page shows (undefined: not said yet). Following, only their shifts (and the speed's) are found
   * again; the others keep theirs until shown (`refreshShifts`).
   */
  shown?: () => ReadonlySet<string> | undefined;
}

export interface ExactEvents {
  /** A run's preview was replaced by the exact data. */
  exact(run: LoadedRun): void;
  /** A run's exact read failed: its data is still the preview, now marked `failed`. */
  failed(run: LoadedRun, message: string): void;
}

export interface FollowEvents {
  /** New lines were read and added to the run's data. */
  grew(run: LoadedRun): void;
  failed(run: LoadedRun, message: string): void;
}

const X = 'step';
/** The probe's preview budget when none is given (python/metrics_reduce.py PREVIEW_BYTES). */
const PREVIEW_BYTES = 8 << 20;

export class ProgressiveRuns {
  private runsV: LoadedRun[] = [];
  /** One line per run that could not be read at all. */
  readonly errors: string[] = [];

  constructor(
    private readonly sources: readonly RunSource[],
    private readonly o: ProgressiveOptions,
  ) {}

  get runs(): readonly LoadedRun[] {
    return this.runsV;
  }

  /** Every run's data is exact (and there is at least one run). */
  get allExact(): boolean {
    return this.runsV.length > 0 && this.runsV.every((r) => r.exact === 'done');
  }

  get anyPending(): boolean {
    return this.runsV.some((r) => r.exact === 'pending');
  }

  /** The exact reads of the older files of each run's history, read once: only the newest file grows. */
  private older = new Map<RunSource, Promise<HistoryPart[]>>();
  /**
   * One read of a run: of its log, or, for a run with several files (its history), of every file with `options` (a
   * preview samples each; the older files' exact reads are kept, they do not change), to be stitched into one
   * history (core/metrics/history.ts). The result is a preview when any file's part is.
   */
  private async read(src: RunSource, options: Omit<MetricsReduceOptions, 'path'>): Promise<HistoryPart[]> {
    const files = src.history;
    if (!files || files.length < 2) return [{ path: src.logPath, reduction: await this.o.reduce(src, options) }];
    const preview = options.preview === true || options.previewBytes !== undefined;
    const exact = !preview && options.offset === undefined;
    // a preview of the history reads what a preview of one file would: the budget is shared by its files
    if (preview) {
      const { preview: _p, ...rest } = options;
      options = {
        ...rest,
        previewBytes: Math.max(64 * 1024, Math.floor((options.previewBytes ?? PREVIEW_BYTES) / files.length)),
      };
    }
    const readOlder = (o: Omit<MetricsReduceOptions, 'path'>) =>
      Promise.all(
        files
          .slice(0, -1)
          .map(async (path) => ({ path, reduction: await this.o.reduce({ ...src, logPath: path }, o) })),
      );
    let older = this.older.get(src);
    if (!older && exact) {
      older = readOlder({ x: X });
      this.older.set(src, older);
      older.catch(() => this.older.delete(src));
    }
    const newest = files[files.length - 1]!;
    const [parts, last] = await Promise.all([
      older ?? readOlder(options),
      this.o.reduce({ ...src, logPath: newest }, options),
    ]);
    return [...parts, { path: newest, reduction: last }];
  }

  /** The newest file of a run's history (what grows), or its one log. */
  private growing(src: RunSource): RunSource {
    const files = src.history;
    return files && files.length > 1 ? { ...src, logPath: files[files.length - 1]! } : src;
  }

  private loaded(src: RunSource, parts: HistoryPart[]): LoadedRun {
    const id = runId(src.hostId, src.logPath);
    const data = runDataFromParts({ id, label: src.label, host: this.o.hostLabel(src.hostId) }, parts);
    const sampled = parts.some((p) => p.reduction.sample !== null);
    const newest = parts[parts.length - 1]!.reduction;
    // A preview's nextOffset is where it started: following from it would read the whole log again as "appended".
    return {
      src,
      id,
      data,
      parts,
      live: [],
      shiftsOf: 'all',
      nextOffset: sampled ? undefined : newest.nextOffset,
      exact: sampled ? 'pending' : 'done',
    };
  }

  /**
   * The run's data again from its parts and live restarts: after an exact read with every shift ('all'), after
   * following or a restart seen with those of the series shown and the speed ('shown').
   */
  private rebuild(run: LoadedRun, scope: 'all' | 'shown'): void {
    const shown = scope === 'shown' ? this.o.shown?.() : undefined;
    if (!shown) {
      run.data = runDataFromParts(run.data.run, run.parts, run.live);
      run.shiftsOf = 'all';
      return;
    }
    const keys = [STEPS_PER_SEC_KEY, TOKENS_PER_SEC_KEY, ...run.parts.flatMap((p) => p.reduction.keys)];
    const only = new Set([...shown, ...keys.filter((k) => throughputRank(k) > 0)]);
    run.data = runDataFromParts(run.data.run, run.parts, run.live, { only, previous: run.data.run.shifts ?? [] });
    run.shiftsOf = only;
  }

  /**
   * The shown series changed: the runs whose shifts of a shown series are older than their data get them found
   * again. Returns those runs (their data to be posted).
   */
  refreshShifts(): LoadedRun[] {
    const shown = this.o.shown?.();
    if (!shown) return [];
    const stale = this.runsV.filter((r) => {
      const of = r.shiftsOf;
      if (r.exact !== 'done' || of === 'all') return false;
      return [...shown].some((k) => !of.has(k) && r.data.series.some((s) => s.key === k));
    });
    for (const r of stale) this.rebuild(r, 'shown');
    return stale;
  }

  /**
   * Marks a restart the follow poll saw (a new training process) on the run's plots, kept through every later read.
   * False when it is marked already (the same label).
   */
  addLiveRestart(run: LoadedRun, mark: RestartMark): boolean {
    if (run.live.some((m) => m.label === mark.label)) return false;
    run.live = [...run.live, mark];
    this.rebuild(run, 'shown');
    return true;
  }

  /**
   * First data for every run, all runs at once: a preview, or the exact result when the log is small (or the
   * helper had it cached). A run whose preview fails is read exactly instead (a helper without preview support,
   * say); a run that cannot be read at all is left out and named in `errors`.
   */
  async loadPreviews(): Promise<void> {
    const preview: Omit<MetricsReduceOptions, 'path'> =
      this.o.previewBytes !== undefined ? { x: X, previewBytes: this.o.previewBytes } : { x: X, preview: true };
    const t0 = performance.now();
    const loaded = await Promise.all(
      this.sources.map(async (src) => {
        let parts: HistoryPart[];
        try {
          parts = await this.read(src, preview);
        } catch (first) {
          this.o.log?.(`dashboard: ${src.logPath}: preview failed (${messageOf(first)}), reading it whole`);
          try {
            parts = await this.read(src, { x: X });
          } catch (e) {
            this.errors.push(`${src.label}: ${messageOf(e)}`);
            return undefined;
          }
        }
        const r = parts[parts.length - 1]!.reduction;
        const what = r.sample
          ? `preview of ${Math.round(r.sample.bytes / 1024)} KiB of ${Math.round(r.sample.of / 1024)} KiB (${r.sample.windows} windows)`
          : `exact (${r.source})`;
        this.o.log?.(
          `dashboard: ${src.logPath}: ${what}: ${r.lines} lines, ${r.series.length} series in ${Math.round(performance.now() - t0)} ms (probe ${Math.round(r.elapsedMs)} ms)`,
        );
        return this.loaded(src, parts);
      }),
    );
    this.runsV = loaded.filter((r): r is LoadedRun => r !== undefined);
  }

  /** The exact reads of the runs whose data is a preview, all at once; events as each lands. */
  async completeExact(on: ExactEvents): Promise<void> {
    await Promise.all(
      this.runsV
        .filter((r) => r.exact === 'pending')
        .map(async (run) => {
          const t0 = performance.now();
          try {
            const parts = await this.read(run.src, { x: X });
            // An exact read never carries a sample; if the helper sent one anyway, following from it would be wrong.
            if (parts.some((p) => p.reduction.sample !== null))
              throw new KnownGoodError('bad-output', 'the exact read came back sampled');
            const r = parts[parts.length - 1]!.reduction;
            run.parts = parts;
            this.rebuild(run, 'all');
            run.nextOffset = r.nextOffset;
            run.exact = 'done';
            this.o.log?.(
              `dashboard: ${run.src.logPath}: exact: ${r.lines} lines in ${Math.round(performance.now() - t0)} ms (probe ${Math.round(r.elapsedMs)} ms, ${r.source})`,
            );
            on.exact(run);
          } catch (e) {
            run.exact = 'failed';
            const sample = run.data.run.sample;
            if (sample) run.data = { ...run.data, run: { ...run.data.run, sample: { ...sample, failed: true } } };
            on.failed(run, messageOf(e));
          }
        }),
    );
  }

  /**
   * One follow step: reads what was appended to each run's log since its exact read, one run after another.
   * Runs whose data is a preview are skipped (their exact read is pending, or it failed).
   */
  async follow(on: FollowEvents): Promise<void> {
    for (const run of this.runsV) {
      const from = run.nextOffset;
      if (run.exact !== 'done' || from === undefined) continue;
      try {
        // only the newest file of a history grows; the older ones are done
        const value = await this.o.reduce(this.growing(run.src), { x: X, offset: from });
        run.nextOffset = value.nextOffset;
        if (value.lines === 0 && !value.reset) continue;
        const newest = run.parts.length - 1;
        run.parts = run.parts.map((p, i) =>
          i === newest ? { path: p.path, reduction: appendReduction(p.reduction, value, this.o.maxBuckets) } : p,
        );
        this.rebuild(run, 'shown');
        on.grew(run);
      } catch (e) {
        on.failed(run, messageOf(e));
      }
    }
  }
}

/** The distinct hosts of the runs, in the order their first run appears. */
export function hostsOf(sources: readonly Pick<RunSource, 'hostId'>[]): string[] {
  return [...new Set(sources.map((s) => s.hostId))];
}

/**
 * The side data of every host of the runs, read at once, in run order: its benchmark history and the drift during
 * each of its runs. A host whose baselines or benchmarks cannot be read shows as having none (and `warn` says why): the
 * other hosts' data still shows.
 */
export async function sideByHost(
  sources: readonly Pick<RunSource, 'hostId'>[],
  hostLabel: (hostId: string) => string,
  read: (hostId: string) => Promise<Pick<HostSide, 'bench' | 'runs'>>,
  warn?: (line: string) => void,
): Promise<HostSide[]> {
  return Promise.all(
    hostsOf(sources).map(async (host) => {
      const label = hostLabel(host);
      try {
        const { bench, runs } = await read(host);
        return { host, label, drift: null, bench, runs };
      } catch (e) {
        warn?.(`dashboard: baseline/benchmark history of ${label}: ${messageOf(e)}`);
        return { host, label, drift: null, bench: [], runs: [] };
      }
    }),
  );
}
