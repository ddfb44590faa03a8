import { throughputRank } from '../whatChanged/categories';
import type { ReducedSeries } from './metricsProbe';
import { restartsFromTimes } from './restarts';

/*
 * Speed from time: a run that logs no throughput (HF Trainer logs loss, grad_norm and learning_rate per logging step,
 * and one train_tokens_per_second at the very end) still has wall times on its points (TensorBoard events, a jsonl
 * `time`/`timestamp` column). Steps per second between consecutive points is its speed, and tokens per second when it
 * logs a running token count (HF `num_input_tokens_seen`). The gaps at restarts are left out: a relaunch is not a
 * slow window. Derived series are labelled as such, so nobody takes them for the run's own measure.
 */

export const FROM_WALL_TIME = ' (from wall time)';
export const STEPS_PER_SEC_KEY = `steps/s${FROM_WALL_TIME}`;
export const TOKENS_PER_SEC_KEY = `tokens/s${FROM_WALL_TIME}`;

/** Fewer points than this is an end-of-run summary (train_tokens_per_second), not a series. */
export const MIN_SERIES_POINTS = 3;

/** A running count of tokens (HF include_num_input_tokens_seen, Megatron consumed tokens). */
const TOKEN_COUNT = /(^|[/._])(num_input_tokens_seen|tokens_seen|consumed_tokens|num_tokens|total_tokens)$/i;

/** Whether the series is the run's own throughput (enough points to be a series, not a summary). */
export function isThroughputSeries(s: ReducedSeries): boolean {
  return throughputRank(s.key) > 0 && s.x.length >= MIN_SERIES_POINTS;
}

function rates(x: readonly number[], t: readonly number[], y: readonly number[] | null, skip: Set<number>) {
  const out: { x: number[]; v: number[]; t: number[] } = { x: [], v: [], t: [] };
  for (let i = 1; i < x.length; i++) {
    if (skip.has(i)) continue;
    const dt = t[i]! - t[i - 1]!;
    const d = y ? y[i]! - y[i - 1]! : x[i]! - x[i - 1]!;
    if (!(dt > 0) || !(x[i]! > x[i - 1]!) || !(d >= 0)) continue;
    out.x.push(x[i]!);
    out.v.push(d / dt);
    out.t.push(t[i]!);
  }
  return out;
}

function seriesOf(key: string, r: { x: number[]; v: number[]; t: number[] }): ReducedSeries {
  return {
    key,
    x: r.x,
    min: r.v,
    max: r.v,
    last: r.v,
    t: r.t,
    count: r.x.length,
    lastX: r.x[r.x.length - 1]!,
    lastValue: r.v[r.v.length - 1]!,
  };
}

/**
 * The speed series to add to a run's series when it logs none of its own: `steps/s (from wall time)` from the series
 * with wall times and the most points, and `tokens/s (from wall time)` from a running token count. `launches`: steps
 * where a restart began (the pair across one is left out, like a gap the clock shows).
 */
export function derivedSpeed(series: readonly ReducedSeries[], launches: readonly number[] = []): ReducedSeries[] {
  if (series.some(isThroughputSeries)) return [];
  const timed = series.filter((s) => s.t && s.t.length === s.x.length && s.x.length >= MIN_SERIES_POINTS);
  if (!timed.length) return [];
  const out: ReducedSeries[] = [];
  const skipOf = (s: ReducedSeries) => {
    const skip = new Set<number>();
    for (const r of restartsFromTimes(s.x, s.t)) skip.add(s.x.indexOf(r.step));
    for (const l of launches) {
      const i = s.x.findIndex((v) => v >= l);
      if (i > 0) skip.add(i);
    }
    return skip;
  };
  const clock = [...timed].sort((a, b) => b.x.length - a.x.length)[0]!;
  const steps = rates(clock.x, clock.t!, null, skipOf(clock));
  if (steps.x.length >= MIN_SERIES_POINTS) out.push(seriesOf(STEPS_PER_SEC_KEY, steps));
  const tokens = timed.find((s) => TOKEN_COUNT.test(s.key));
  if (tokens) {
    const r = rates(tokens.x, tokens.t!, tokens.last, skipOf(tokens));
    if (r.x.length >= MIN_SERIES_POINTS) out.push(seriesOf(TOKENS_PER_SEC_KEY, r));
  }
  return out;
}

/** The series with the derived speed added (the one place that decides; dashboard and What Changed? call it). */
export function withDerivedSpeed(series: readonly ReducedSeries[], launches: readonly number[] = []): ReducedSeries[] {
  const add = derivedSpeed(series, launches);
  return add.length ? [...add, ...series] : [...series];
}

/**
 * A clock the log keeps itself: seconds since its launch began (Lightning's ThroughputMonitor logs it as `train/time`
 * in `metrics.csv`, which has no wall-time column).
 */
const LAUNCH_CLOCK = /^(train[/_.])?(time|elapsed(_time)?)$/i;

/**
 * The time of each point of `s` (seconds, growing): its own wall times, else those of a launch clock of the same log
 * at the same step (the clock restarts at every launch: each launch is carried on from where the one before stopped,
 * so only the times inside a launch mean anything). Undefined when the log has neither. The changepoints read it to
 * know a launch's settling time.
 */
type Timed = Pick<ReducedSeries, 'key' | 'x' | 'last' | 't'>;

export function pointTimes(s: Timed, all: readonly Timed[]): readonly number[] | undefined {
  if (s.t && s.t.length === s.x.length) return s.t;
  const clock = all.find((c) => c !== s && LAUNCH_CLOCK.test(c.key) && c.x.length >= MIN_SERIES_POINTS);
  if (!clock || !s.x.length) return undefined;
  const cx: number[] = [];
  const ct: number[] = [];
  let offset = 0;
  let prev = -Infinity;
  for (let i = 0; i < clock.x.length; i++) {
    const v = clock.last[i]!;
    if (!Number.isFinite(v) || (cx.length && clock.x[i]! <= cx[cx.length - 1]!)) continue;
    if (v < prev) offset += prev;
    prev = v;
    cx.push(clock.x[i]!);
    ct.push(v + offset);
  }
  if (cx.length < MIN_SERIES_POINTS) return undefined;
  // each point takes the clock of the last step at or before it (the first clock point before the clock began)
  const out: number[] = [];
  let j = 0;
  for (const x of s.x) {
    while (j + 1 < cx.length && cx[j + 1]! <= x) j++;
    out.push(ct[j]!);
  }
  return out;
}
