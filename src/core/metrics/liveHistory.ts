import type { ProbeRunnerLike } from '../probes/probe';
import { EVAL_KEY, throughputRank } from '../whatChanged/categories';
import { stitchReductions, type HistoryPart } from './history';
import { RECENT_LEVEL, type LogPoll } from './logTail';
import { metricsReduceProbe, type ReducedSeries } from './metricsProbe';
import { isThroughputSeries, withDerivedSpeed } from './speedFromTime';

/*
 * Live numbers of a run whose log is no jsonl (Lightning's metrics.csv, TensorBoard events, HF trainer_state.json):
 * log_tail reads lines, and these formats are no lines. Each poll reduces the run's history instead (the files of
 * metricsLogsOf, stitched: the dashboard's and What Changed?'s one history), with the speed from wall times where the
 * run logs none, and takes the level as the median of the last RECENT_LEVEL values of its speed. The older launches'
 * files no longer grow: each is reduced once; only the newest is read again.
 */

/** Points per file: every logging window of a run of a few thousand, the level still a median of single points. */
const BUCKETS = 2000;

/** The series the status bar shows: the run's own speed by rank (tokens first), else the one from wall time. */
export function liveSpeedSeries(series: readonly ReducedSeries[]): ReducedSeries | undefined {
  return series
    .filter(isThroughputSeries)
    .sort((a, b) => throughputRank(b.key) - throughputRank(a.key) || b.x.length - a.x.length)[0];
}

/** The median of the last RECENT_LEVEL values of a series, or null when it has none. */
export function recentLevel(s: ReducedSeries | undefined): number | null {
  if (!s?.last.length) return null;
  const v = s.last.slice(-RECENT_LEVEL).sort((a, b) => a - b);
  const m = v.length >> 1;
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}

/** Follows a run's stitched history on one host; `poll` answers what IncrementalLogReader's poll answers. */
export class HistoryLevelReader {
  private readonly older = new Map<string, HistoryPart>();
  private lastSize = 0;

  constructor(
    private readonly runner: ProbeRunnerLike,
    /** The history's files, oldest launch first; the last one grows. */
    readonly files: readonly string[],
    private readonly options: { timeoutMs?: number } = {},
  ) {}

  async poll(signal?: AbortSignal): Promise<LogPoll> {
    const call = async (path: string): Promise<HistoryPart> => {
      const { value } = await this.runner.run(metricsReduceProbe({ path, x: 'step', buckets: BUCKETS }), {
        ...(this.options.timeoutMs !== undefined ? { timeoutMs: this.options.timeoutMs } : {}),
        ...(signal ? { signal } : {}),
      });
      return { path, reduction: value };
    };
    const newest = this.files[this.files.length - 1]!;
    const parts: HistoryPart[] = [];
    for (const path of this.files.slice(0, -1)) {
      let part = this.older.get(path);
      if (!part) this.older.set(path, (part = await call(path)));
      parts.push(part);
    }
    parts.push(await call(newest));
    const h = stitchReductions(parts);
    const series = withDerivedSpeed(
      h.series,
      h.restarts.map((r) => r.step),
    );
    const speed = liveSpeedSeries(series);
    const training = series.filter((s) => !EVAL_KEY.test(s.key) && s.x.length);
    const step = training.length ? Math.max(...training.map((s) => s.lastX)) : null;
    const size = parts[parts.length - 1]!.reduction.size ?? 0;
    const bytes = Math.max(0, size - this.lastSize);
    this.lastSize = size;
    return {
      lines: [],
      latest:
        step === null && !speed
          ? null
          : {
              step,
              stepKey: step === null ? null : 'step',
              tokensPerSec: speed ? speed.lastValue : null,
              tokensPerSecKey: speed?.key ?? null,
            },
      level: recentLevel(speed),
      reset: false,
      exists: true,
      bytes,
      malformed: 0,
    };
  }
}
