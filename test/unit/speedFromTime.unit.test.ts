import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricsReduction, ReducedSeries } from '../../src/core/metrics/metricsProbe';
import {
  derivedSpeed,
  isThroughputSeries,
  pointTimes,
  STEPS_PER_SEC_KEY,
  TOKENS_PER_SEC_KEY,
  withDerivedSpeed,
} from '../../src/core/metrics/speedFromTime';
import { medianOf } from '../../src/core/whatChanged/seriesStats';
import { analyze } from '../../src/core/whatChanged/analyze';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';
import { realLoop, type LoopLog } from '../support/realLoop';
import { NO_OTHER_FACTS, reducedSeries } from '../support/facts';

/*
 * Speed from time (issue 22): an HF Trainer run logs loss, grad_norm and learning_rate per logging step with wall
 * times (TensorBoard), no speed series, and one train_tokens_per_second at the end. Its speed comes from the times.
 */

const series = reducedSeries;

/** What an HF run's TensorBoard events reduce to. */
function hfSeries(l: LoopLog, tokensPerStep?: number): ReducedSeries[] {
  const out = [
    series(
      'train/loss',
      l.step,
      l.step.map((s) => 2 + 1 / s),
      l.time,
    ),
    series(
      'train/learning_rate',
      l.step,
      l.step.map(() => 5e-5),
      l.time,
    ),
    series('train/train_tokens_per_second', [l.step.at(-1)!], [123456], [l.time.at(-1)!]),
  ];
  if (tokensPerStep)
    out.push(
      series(
        'train/num_input_tokens_seen',
        l.step,
        l.step.map((s) => s * tokensPerStep),
        l.time,
      ),
    );
  return out;
}

void test('steps/s from the wall times of an HF-style log, within 5% of the speed the loop measured, restart gap out', () => {
  const l = realLoop({ steps: 1200, speed: () => 32, launches: [600], seed: 4 });
  const s = hfSeries(l);
  assert.equal(s.filter(isThroughputSeries).length, 0, 'a one-point summary is not a series');
  const [d] = derivedSpeed(s);
  assert.equal(d?.key, STEPS_PER_SEC_KEY);
  assert.equal(d.x.length, l.step.length - 2, 'every pair but the first and the one across the restart');
  assert.ok(!d.x.includes(610), 'the pair across the restart (a 600 s gap) is left out');
  const derived = medianOf(d.last);
  const measured = medianOf(l.stepsPerSec);
  assert.ok(Math.abs(derived / measured - 1) < 0.05, `derived ${derived} vs measured ${measured}`);
});

void test('tokens/s from a running token count; nothing is derived when the run logs its own speed', () => {
  const l = realLoop({ steps: 1000, speed: () => 20, seed: 2 });
  const d = derivedSpeed(hfSeries(l, 4096));
  const tok = d.find((x) => x.key === TOKENS_PER_SEC_KEY)!;
  const steps = d.find((x) => x.key === STEPS_PER_SEC_KEY)!;
  assert.ok(Math.abs(medianOf(tok.last) / medianOf(steps.last) - 4096) < 1e-6 * 4096);
  const own = [...hfSeries(l), series('tok_s', l.step, l.stepsPerSec, l.time)];
  assert.deepEqual(derivedSpeed(own), []);
  assert.equal(withDerivedSpeed(own).length, own.length);
  // no wall times (a Lightning CSV without a time column): nothing to derive from
  assert.deepEqual(derivedSpeed([series('loss', l.step, l.stepsPerSec)]), []);
});

void test('What Changed? on an HF-style run slowed 4.2× at its restart: a regression on steps/s (from wall time)', () => {
  const l = realLoop({ steps: 1200, speed: (s) => (s > 600 ? 32 / 4.2 : 32), launches: [600], seed: 9 });
  const checkpoints = [200, 400, 600, 800, 1000, 1200].map((step) => ({
    label: `checkpoint-${step}`,
    path: `/r/checkpoint-${step}`,
    argsPath: `/r/checkpoint-${step}/training_args.bin`,
    step,
    mtime: l.time[l.step.indexOf(step)]!,
  }));
  const facts: WhatChangedFacts = {
    host: { id: 'h', label: 'gpu' },
    run: '/r',
    remoteNow: l.time.at(-1)! + 10,
    checkpoints,
    args: checkpoints.map((c) => ({ label: c.label, step: c.step, args: { gradient_checkpointing: c.step > 600 } })),
    log: { path: '/r/runs/x/events.out.tfevents.1', reduction: { series: hfSeries(l) } as unknown as MetricsReduction },
    ...NO_OTHER_FACTS,
  };
  const r = analyze(facts);
  assert.equal(r.verdict, 'regression', r.headline);
  assert.equal(r.throughput.log?.key, STEPS_PER_SEC_KEY);
  assert.match(
    r.headline,
    /^7\.\d+ steps\/s \(from wall time\) now vs 3[0-3]\.\d at checkpoint-600 \(0\.2[2-5]×\); changed at step 600: gradient_checkpointing/,
  );
});

void test("a log without wall times takes its points' times from its launch clock (Lightning's train/time), carried on across a restart", () => {
  const s = (key: string, x: number[], v: number[]) => ({ key, x, last: v });
  // train/time: seconds since each launch began, reset at the restart (step 609)
  const clock = s('train/time', [9, 19, 29, 39, 609, 619, 629], [2.7, 2.9, 3.0, 3.2, 2.5, 2.7, 2.9]);
  const speed = s('train/device/samples_per_sec', [19, 39, 619, 629], [1, 2, 3, 4]);
  const t = pointTimes(speed, [clock, speed])!;
  assert.deepEqual(t.slice(0, 2), [2.9, 3.2]);
  // after the reset the clock goes on from where the first launch stopped
  assert.ok(t[2]! > t[1]! && t[3]! > t[2]!, JSON.stringify(t));
  assert.ok(Math.abs(t[3]! - t[2]! - 0.2) < 1e-9);
  // its own wall times win; no clock, no times
  assert.deepEqual(pointTimes({ ...speed, t: [1, 2, 3, 4] }, [clock]), [1, 2, 3, 4]);
  assert.equal(pointTimes(speed, [speed]), undefined);
});
