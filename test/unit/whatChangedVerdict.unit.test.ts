import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { analyze } from '../../src/core/whatChanged/analyze';
import { speedDirection, throughputRank } from '../../src/core/whatChanged/categories';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';
import { realLoop } from '../support/realLoop';
import { NO_OTHER_FACTS, reducedSeries } from '../support/facts';

/*
 * The verdict on real-loop logs (issue 22): steady on a steady run with saves and evals; a regression only for a
 * slowdown (throughput down, step time up), never for a rise; the headline numbers are segment levels.
 */

const T0 = 1_760_000_000;

function reductionOf(key: string, x: number[], y: number[], t?: number[]): MetricsReduction {
  return { series: [reducedSeries(key, x, y, t)] } as unknown as MetricsReduction;
}

function facts(reduction: MetricsReduction): WhatChangedFacts {
  const checkpoints = [];
  const args = [];
  for (let step = 100; step <= 2000; step += 100) {
    checkpoints.push({
      label: `step_${step}`,
      path: `/r/step_${step}`,
      argsPath: `/r/step_${step}/a.pt`,
      step,
      mtime: T0 + step,
    });
    args.push({ label: `step_${step}`, step, args: { lr: 3e-4, batch_size: step <= 600 ? 32 : 16 } });
  }
  return {
    host: { id: 'h', label: 'gpu' },
    run: '/r',
    remoteNow: T0 + 5000,
    checkpoints,
    args,
    log: { path: '/r/train_log.jsonl', reduction },
    ...NO_OTHER_FACTS,
  };
}

void test('step time is a speed where lower is faster; tok/s and samples/s higher', () => {
  assert.equal(speedDirection('train/step_time'), -1);
  assert.equal(speedDirection('time_per_step'), -1);
  assert.equal(speedDirection('tokens_per_sec'), 1);
  assert.equal(speedDirection('train/samples_per_sec'), 1);
  assert.equal(speedDirection('loss'), 0);
  assert.equal(speedDirection('epoch'), 0);
  assert.ok(throughputRank('tok_s') > throughputRank('step_time'));
});

void test('a steady real loop (saves, evals, a restart, heavy tails) is steady, exit-0 kind, over 20 seeds', () => {
  for (let seed = 1; seed <= 20; seed++) {
    const l = realLoop({ steps: 2000, speed: () => 30, launches: [600], seed });
    const r = analyze(
      facts(
        reductionOf(
          'tokens_per_sec',
          l.step,
          l.stepsPerSec.map((v) => v * 2048),
          l.time,
        ),
      ),
    );
    assert.equal(r.verdict, 'steady', `seed ${seed}: ${r.headline}`);
    assert.deepEqual(r.suspects, []);
    assert.match(r.headline, /^No throughput drop and no changepoint in train_log\.jsonl/);
  }
});

void test('a 2.6× slowdown: a regression whose headline gives the segment levels, not a stall or the last point', () => {
  const l = realLoop({ steps: 2000, speed: (s) => (s > 600 ? 57 : 149), launches: [600], seed: 3 });
  const r = analyze(facts(reductionOf('samples_per_sec', l.step, l.stepsPerSec, l.time)));
  assert.equal(r.verdict, 'regression', r.headline);
  // the last point is a save plus an eval (a stall): the level is still ~57
  assert.ok(l.stepsPerSec[l.stepsPerSec.length - 1]! < 20);
  const t = r.throughput.log!;
  assert.ok(Math.abs(t.now - 57) < 3 && Math.abs(t.reference - 149) < 6, `${t.reference} → ${t.now}`);
  assert.match(
    r.headline,
    /^5[5-9](\.\d)? samples_per_sec now vs 1(4[5-9]|5[0-3])(\.\d)? at step_600 \(0\.3[0-9]×\); changed at step 600: batch_size/,
  );
});

void test('a rise in throughput is no regression; the headline says what rose', () => {
  const l = realLoop({ steps: 2000, speed: (s) => (s > 600 ? 40 : 30), launches: [600], seed: 5 });
  const r = analyze(
    facts(
      reductionOf(
        'tokens_per_sec',
        l.step,
        l.stepsPerSec.map((v) => v * 1000),
        l.time,
      ),
    ),
  );
  assert.equal(r.verdict, 'steady', r.headline);
  assert.deepEqual(r.suspects, []);
  assert.match(
    r.headline,
    /^No throughput drop \(tokens_per_sec (29|30)\.\dK → (39|40)\.\dK at step 600, not slower\) and no slowdown in/,
  );
});

void test('step time up is a regression; step time down is not', () => {
  const slow = realLoop({ steps: 2000, speed: (s) => (s > 600 ? 20 : 30), launches: [600], seed: 7 });
  const up = analyze(facts(reductionOf('step_time', slow.step, slow.stepTime, slow.time)));
  assert.equal(up.verdict, 'regression', up.headline);
  assert.match(up.headline, /step_time now vs .* at step_600 \(1\.[45]\d×\)/);
  const fast = realLoop({ steps: 2000, speed: (s) => (s > 600 ? 40 : 30), launches: [600], seed: 7 });
  const down = analyze(facts(reductionOf('step_time', fast.step, fast.stepTime, fast.time)));
  assert.equal(down.verdict, 'steady', down.headline);
});

void test('a shift of the loss alone is no throughput regression', () => {
  const x = Array.from({ length: 200 }, (_, i) => (i + 1) * 10);
  const y = x.map((s, i) => (s > 1000 ? 3.2 : 2.1) + 0.01 * Math.sin(i * 12.9898));
  const r = analyze(facts(reductionOf('loss', x, y)));
  assert.equal(r.verdict, 'steady', r.headline);
  assert.equal(r.changepoints.series[0]!.changepoints.length, 1);
});
