/*
 * Restarts of a run, as facts: where a new launch of the training process took over the log. A restart is the likeliest
 * place for a change (new code, new args, a new node), and its first window is a warm-up, not a level: the changepoints
 * treat both (src/core/whatChanged/changepoints.ts `launches`).
 */

export type RestartSignal = 'step-back' | 'new-source' | 'time-gap';

export interface Restart {
  /** The first step the new launch logged. */
  step: number;
  /** Its wall time (Unix seconds), when the log has one. */
  time: number | null;
  /** The last step before it (the launch resumed from about here). */
  prevStep: number | null;
  /** Seconds between the last point before and the first after (a stop, a queue wait, a reload). */
  gapSeconds: number | null;
  /** What told it: the step went back, another file (version_N, event file, rotated log) began, or the clock jumped. */
  signals: RestartSignal[];
  /** The file the launch wrote, when stitched from several. */
  source?: string;
}

/**
 * A pause longer than this many median intervals (and at least MIN_GAP_S: a relaunch costs an interpreter, CUDA and
 * the data loader, seconds at least; the real plain loop's took 9 s) is a stop, not a slow window.
 */
const GAP_FACTOR = 20;
const MIN_GAP_S = 5;

/**
 * The restarts one series' x (steps) and t (wall times) show: a step that goes back, or a wall-time gap far beyond the
 * usual interval (a checkpoint save or an eval is a few windows long; a relaunch is minutes).
 */
export function restartsFromTimes(x: ArrayLike<number>, t: ArrayLike<number> | undefined): Restart[] {
  const out: Restart[] = [];
  const n = x.length;
  let gapLimit = Infinity;
  if (t && t.length === n && n > 2) {
    const d: number[] = [];
    for (let i = 1; i < n; i++) {
      const dt = t[i]! - t[i - 1]!;
      const dx = x[i]! - x[i - 1]!;
      if (Number.isFinite(dt) && dt >= 0 && dx > 0) d.push(dt / dx);
    }
    d.sort((a, b) => a - b);
    const perStep = d.length ? d[d.length >> 1]! : NaN;
    if (Number.isFinite(perStep)) gapLimit = perStep;
  }
  for (let i = 1; i < n; i++) {
    const signals: RestartSignal[] = [];
    const dx = x[i]! - x[i - 1]!;
    if (dx <= 0) signals.push('step-back');
    let gap: number | null = null;
    if (t && t.length === n) {
      gap = t[i]! - t[i - 1]!;
      const expected = gapLimit * Math.max(1, dx);
      if (Number.isFinite(gap) && gap > Math.max(MIN_GAP_S, GAP_FACTOR * expected)) signals.push('time-gap');
    }
    if (signals.length)
      out.push({
        step: x[i]!,
        time: t && t.length === n ? t[i]! : null,
        prevStep: x[i - 1]!,
        gapSeconds: gap,
        signals,
      });
  }
  return out;
}
