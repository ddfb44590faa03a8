/*
 * `node --import tsx scripts/changepoint-quality.ts`: how the changepoints behave on real-loop logs (saves, evals,
 * warm-ups, heavy tails; test/support/realLoop.ts): false changepoints per steady run, and the detection delay (steps
 * from the first slow window to the changepoint's firstAfter) of a 10% and a 2.6× shift. The figures in
 * docs/what-changed.md come from here.
 */
import { findChangepoints } from '../src/core/whatChanged/changepoints';
import { realLoop } from '../test/support/realLoop';

const SEEDS = 200;
let falseCps = 0;
let falseRuns = 0;
for (let seed = 1; seed <= SEEDS; seed++) {
  for (const launches of [[], [600]]) {
    const log = realLoop({ steps: 2000, speed: () => 30, launches, seed });
    const n = findChangepoints(log.step, log.stepsPerSec, { launches: launches.map((l) => l + 1) }).changepoints.length;
    falseCps += n;
    falseRuns += n ? 1 : 0;
  }
}
console.log(
  `steady runs: ${(falseCps / (2 * SEEDS)).toFixed(3)} false changepoints per run (${falseRuns} of ${2 * SEEDS} runs with any)`,
);

/** `first`: the step the first window at the new speed ends at; a hit is a changepoint within 3 windows of it. */
function delays(label: string, speed: (s: number) => number, first: number, launches: number[]): void {
  const d: number[] = [];
  let extra = 0;
  let onLaunch = 0;
  let near = 0;
  for (let seed = 1; seed <= SEEDS; seed++) {
    const log = realLoop({ steps: 2000, speed, launches, seed });
    const cps = findChangepoints(log.step, log.stepsPerSec, { launches: launches.map((l) => l + 1) }).changepoints;
    // the true boundary lies between first − 10 and first: found when the reported interval holds it
    const hit = cps.find((c) => c.at <= first && c.firstAfter >= first - 10 && c.at >= first - 60);
    if (cps.some((c) => Math.abs(c.at - (first - 10)) <= 30)) near++;
    if (hit) d.push(Math.max(0, hit.at - (first - 10)));
    if (hit?.launch !== undefined) onLaunch++;
    extra += cps.length - (hit ? 1 : 0);
  }
  d.sort((a, b) => a - b);
  const late = d.filter((v) => v > 0).length;
  console.log(
    `${label}: ${near}/${SEEDS} found within 3 logging windows, ${d.length} of them bracketing the true step (${late} one window late), ${onLaunch} placed on the restart; ${(extra / SEEDS).toFixed(3)} other changepoints per run`,
  );
}
delays('10% drop for the last 5% (after step 1900, no restart)', (s) => (s > 1900 ? 27 : 30), 1910, []);
delays('10% drop after step 1000 (no restart)', (s) => (s > 1000 ? 27 : 30), 1010, []);
delays('2.6× slowdown at a restart (step 600)', (s) => (s > 600 ? 30 / 2.6 : 30), 610, [600]);
delays('10% drop at a restart (step 600)', (s) => (s > 600 ? 27 : 30), 610, [600]);
