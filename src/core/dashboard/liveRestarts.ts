import type { LiveRestart } from '../whatChanged/liveWatch';
import type { RunData } from './protocol';

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
 * A restart the follow poll saw (a new training process after the one before ended: core/whatChanged/liveWatch.ts)
 * marked on the run's plots where the old process's points end, like the restarts its history already shows. A
 * restart already marked (the same new PID) is not marked twice.
 */
export function withLiveRestart(data: RunData, restart: LiveRestart, step: number | undefined): RunData {
  if (step === undefined) return data;
  const label = `restart (new process, PID ${restart.before.pid ?? '?'} → ${restart.after.pid ?? '?'})`;
  const restarts = data.run.restarts ?? [];
  if (restarts.some((r) => r.label === label)) return data;
  const mark = { step, time: restart.after.time, label };
  return { ...data, run: { ...data.run, restarts: [...restarts, mark].sort((a, b) => a.step - b.step) } };
}
