import { LEVEL_POINTS, RESTART_POINTS_TO_JUDGE, WARMUP_POINTS } from './changepoints';

/*
 * A restart too young to judge (issue 32 item 8): a user looks right after relaunching, when the new launch has only
 * its warm-up logged. The report says so (verdict `unknown`), never "steady".
 */

/** The latest restart of a series, when too little is logged after it to judge its launch's level. */
export interface YoungRestart {
  /** The restart's first step (a launch of `launches`). */
  step: number;
  /** Points the series logged from it on. */
  points: number;
  /** RESTART_POINTS_TO_JUDGE: warm-up and one level. */
  needed: number;
}

/**
 * The latest restart (of `launches`, the steps where a launch after the first began) when fewer than
 * RESTART_POINTS_TO_JUDGE points of `xs` lie at or after it: its launch's warm-up takes the first, and a level at least
 * LEVEL_POINTS more, so no shift at it, and no level after it, can be told yet. Undefined when there is no restart
 * inside the series or enough after the latest one.
 */
export function tooLittleAfterRestart(xs: ArrayLike<number>, launches: readonly number[]): YoungRestart | undefined {
  if (!xs.length) return undefined;
  const latest = Math.max(...launches.filter((l) => l > xs[0]!));
  if (!Number.isFinite(latest)) return undefined;
  let points = 0;
  for (let i = 0; i < xs.length; i++) if (xs[i]! >= latest) points++;
  return points < RESTART_POINTS_TO_JUDGE ? { step: latest, points, needed: RESTART_POINTS_TO_JUDGE } : undefined;
}

/**
 * A report's headline for a run whose latest launch is too young to judge, instead of "steady": what it has, and what
 * a judgement takes. `listed`: the differences listed, not ranked, since `reference`.
 */
export function tooLittleHeadline(y: YoungRestart, listed: number, reference: string): string {
  const pts = `${y.points} point${y.points === 1 ? '' : 's'}`;
  const more = listed ? `; ${listed} difference${listed === 1 ? '' : 's'} since ${reference} listed, not ranked` : '';
  return (
    `Too little logged after the restart at step ${y.step} to judge (${pts}; a level takes ${y.needed}: ` +
    `${WARMUP_POINTS} of warm-up, then ${LEVEL_POINTS})${more}`
  );
}
