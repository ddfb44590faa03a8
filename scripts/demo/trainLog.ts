/**
 * The demo's training story as metrics lines: loss falls, then rises a little after step 690 when lr was halved
 * (`changedAfter`); tokens/s drops with it. Deterministic (seeded), so screenshots and tests see the same plots.
 */
export interface TrainLogPoint {
  step: number;
  time: number;
  loss: number;
  lr: number;
  tokPerS: number;
}

export function trainLogPoints(options: { steps: number; seed: number; changedAfter?: number }): TrainLogPoint[] {
  let seed = options.seed;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const out: TrainLogPoint[] = [];
  let time = Date.UTC(2026, 0, 15, 9, 0, 0) / 1000;
  for (let step = 1; step <= options.steps; step++) {
    const changed = options.changedAfter !== undefined && step > options.changedAfter;
    const peak = changed ? 1.5e-4 : 3e-4;
    const lr =
      step < 100 ? (peak * step) / 100 : peak * (0.1 + 0.9 * 0.5 * (1 + Math.cos((Math.PI * step) / options.steps)));
    const loss =
      2.1 +
      8.8 * Math.exp(-step / 250) +
      (changed ? 0.25 * (1 - Math.exp(-(step - options.changedAfter!) / 80)) : 0) +
      (rand() - 0.5) * 0.12;
    const tokPerS = (changed ? 35_500 : 41_800) + (rand() - 0.5) * 1500;
    time += (32 * 1024) / tokPerS;
    out.push({ step, time, loss, lr, tokPerS });
  }
  return out;
}

/** One `train_log.jsonl` line, as a training script writes it. */
export function trainLogLine(p: TrainLogPoint): string {
  return JSON.stringify({
    step: p.step,
    time: Number(p.time.toFixed(3)),
    loss: Number(p.loss.toFixed(4)),
    lr: Number(p.lr.toExponential(4)),
    tok_per_s: Math.round(p.tokPerS),
  });
}
