import type { LiveRestart } from '../whatChanged/liveWatch';
import type { RestartMark, RunData } from './protocol';

/** The last step a run's data reaches (undefined: no point yet). */
export function lastStep(data: RunData): number | undefined {
  let top: number | undefined;
  for (const s of data.series) {
    const x = s.x[s.x.length - 1];
    if (x !== undefined && (top === undefined || x > top)) top = x;
  }
  return top;
}

/**
 * A restart the follow poll saw (a new training process after the one before ended: core/whatChanged/liveWatch.ts),
 * to be marked on the run's plots where the old process's points end, like the restarts its history shows
 * (ProgressiveRuns.addLiveRestart keeps it, once per new PID). Undefined while the run has no point to mark it at.
 */
export function liveRestartMark(restart: LiveRestart, step: number | undefined): RestartMark | undefined {
  if (step === undefined) return undefined;
  const label = `restart (new process, PID ${restart.before.pid ?? '?'} → ${restart.after.pid ?? '?'})`;
  return { step, time: restart.after.time, label };
}
