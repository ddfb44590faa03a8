/*
 * A training loop's logged speed as real loops log it (issue 22), for tests of changepoints and verdicts: a logging
 * window every `logEvery` steps; a checkpoint save every `saveEvery` steps (that window at ⅓ speed), an eval pass every
 * `evalEvery` (that window at 0.4×); a warm-up after each launch (the first window at 0.3×, the second at 0.7×);
 * heavy-tailed noise (Student t, 3 degrees of freedom) and a slow wander, not smooth Gaussian noise. Deterministic:
 * the same seed gives the same run.
 */

export interface LoopOptions {
  steps: number;
  logEvery?: number;
  /** The run's true speed (steps/s) at a step. */
  speed: (step: number) => number;
  saveEvery?: number;
  evalEvery?: number;
  /** The steps a launch resumed from (restarts), after the first launch at step 0. */
  launches?: readonly number[];
  /** Scale of the t noise and amplitude of the wander, as fractions of the speed. */
  noise?: number;
  wander?: number;
  seed?: number;
}

export interface LoopLog {
  /** The step each window ended at. */
  step: number[];
  /** Steps per second over each window, as the loop measures it. */
  stepsPerSec: number[];
  /** Seconds per step over each window. */
  stepTime: number[];
  /** Wall time (s) at the end of each window; a restart adds a gap of `restartGap` seconds. */
  time: number[];
}

function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s + 0.5) / 2 ** 32;
  };
}

export function realLoop(o: LoopOptions): LoopLog {
  const u = rng(o.seed ?? 1);
  const gauss = () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
  // Student t with 3 degrees of freedom, scaled to unit MAD-ish spread
  const t3 = () => gauss() / Math.sqrt((gauss() ** 2 + gauss() ** 2 + gauss() ** 2) / 3);
  const logEvery = o.logEvery ?? 10;
  const saveEvery = o.saveEvery ?? 100;
  const evalEvery = o.evalEvery ?? 250;
  const noise = o.noise ?? 0.02;
  const wanderAmp = o.wander ?? 0.01;
  const launches = [0, ...(o.launches ?? [])];
  const out: LoopLog = { step: [], stepsPerSec: [], stepTime: [], time: [] };
  let wall = 1_700_000_000;
  let wander = 0;
  let sinceLaunch = 0;
  for (let end = logEvery; end <= o.steps; end += logEvery) {
    const start = end - logEvery;
    if (launches.some((l) => l >= start && l < end) && start > 0) {
      wall += 600;
      sinceLaunch = 0;
    }
    wander = 0.95 * wander + 0.05 * gauss() * wanderAmp * 4;
    const speed = o.speed(end) * (1 + wander);
    let seconds = logEvery / speed;
    if (sinceLaunch === 0) seconds /= 0.3;
    else if (sinceLaunch === 1) seconds /= 0.7;
    if (Math.floor(end / saveEvery) > Math.floor(start / saveEvery)) seconds *= 3;
    if (Math.floor(end / evalEvery) > Math.floor(start / evalEvery)) seconds *= 2.5;
    seconds *= Math.max(0.5, 1 + noise * t3());
    sinceLaunch++;
    wall += seconds;
    out.step.push(end);
    out.stepsPerSec.push(logEvery / seconds);
    out.stepTime.push(seconds / logEvery);
    out.time.push(wall);
  }
  return out;
}
