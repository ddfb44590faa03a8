import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findChangepoints } from '../../src/core/whatChanged/changepoints';
import { tooLittleAfterRestart } from '../../src/core/whatChanged/youngRestart';
import { realLoop } from '../support/realLoop';

/** Deterministic noise (a small LCG, Box–Muller): the same series on every run. */
function noise(seed: number): () => number {
  let s = seed >>> 0;
  const u = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s + 0.5) / 2 ** 32;
  };
  return () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
}

function series(n: number, level: (i: number) => number, sd: number, seed = 1): { x: number[]; y: number[] } {
  const g = noise(seed);
  const x: number[] = [];
  const y: number[] = [];
  for (let i = 1; i <= n; i++) {
    x.push(i);
    y.push(level(i) + sd * g());
  }
  return { x, y };
}

void test('a step 12.8K → 4.3K tok/s at step 600 is found within one step, with its levels and ratio', () => {
  const { x, y } = series(1000, (i) => (i <= 600 ? 12800 : 4300), 400);
  const r = findChangepoints(x, y);
  assert.equal(r.method, 'binary-segmentation');
  assert.equal(r.changepoints.length, 1, JSON.stringify(r.changepoints));
  const cp = r.changepoints[0]!;
  assert.ok(Math.abs(cp.at - 600) <= 1, `at ${cp.at}`);
  assert.equal(cp.firstAfter, cp.at + 1);
  assert.ok(Math.abs(cp.before - 12800) < 100, `before ${cp.before}`);
  assert.ok(Math.abs(cp.after - 4300) < 100, `after ${cp.after}`);
  assert.ok(Math.abs(cp.ratio! - 4300 / 12800) < 0.01, `ratio ${cp.ratio}`);
  assert.ok(cp.sigmas > 10);
  // the first 1% of the points are the warm-up of the launch, left out
  assert.equal(r.warmup, 10);
  assert.deepEqual(cp.segmentBefore, [11, cp.at]);
  assert.deepEqual(cp.segmentAfter, [cp.firstAfter, 1000]);
});

void test('a small step (7% at 2σ noise) is still found; a 1% or a 3% one is not reported', () => {
  const five = series(2000, (i) => (i <= 1200 ? 100 : 93), 2, 7);
  const r5 = findChangepoints(five.x, five.y);
  assert.equal(r5.changepoints.length, 1);
  assert.ok(Math.abs(r5.changepoints[0]!.at - 1200) <= 20, `at ${r5.changepoints[0]!.at}`);
  const one = series(2000, (i) => (i <= 1200 ? 100 : 99), 0.2, 7);
  assert.equal(findChangepoints(one.x, one.y).changepoints.length, 0);
  const three = series(2000, (i) => (i <= 1200 ? 100 : 97), 0.2, 7);
  assert.equal(findChangepoints(three.x, three.y).changepoints.length, 0);
});

void test('a ramp is a slope, not a staircase: no changepoint', () => {
  const { x, y } = series(1000, (i) => 12800 - i * 8, 200, 3);
  const r = findChangepoints(x, y);
  assert.deepEqual(r.changepoints, []);
  // noiseless too
  const clean = series(1000, (i) => 5 + i * 0.01, 0);
  assert.deepEqual(findChangepoints(clean.x, clean.y).changepoints, []);
});

void test('a decaying loss curve reports no changepoint', () => {
  const { x, y } = series(3000, (i) => 2 + 8 * Math.exp(-i / 400), 0.05, 11);
  assert.deepEqual(findChangepoints(x, y).changepoints, []);
});

void test('pure noise: no changepoint, over many seeds', () => {
  for (let seed = 1; seed <= 30; seed++) {
    const { x, y } = series(1500, () => 12800, 600, seed);
    const r = findChangepoints(x, y);
    assert.deepEqual(r.changepoints, [], `seed ${seed}`);
    assert.ok(Math.abs(r.lastLevel! - 12800) < 100);
  }
});

void test('two shifts (a drop, then a partial recovery) are both found, in order', () => {
  const { x, y } = series(1200, (i) => (i <= 300 ? 10000 : i <= 800 ? 5000 : 8000), 300, 5);
  const r = findChangepoints(x, y);
  assert.equal(r.changepoints.length, 2, JSON.stringify(r.changepoints));
  const [a, b] = r.changepoints;
  assert.ok(Math.abs(a!.at - 300) <= 2 && Math.abs(b!.at - 800) <= 2, `${a!.at} ${b!.at}`);
  assert.equal(a!.ratio!.toFixed(1), '0.5');
  assert.equal(b!.ratio!.toFixed(1), '1.6');
  assert.deepEqual(b!.segmentBefore, [a!.firstAfter, b!.at]);
});

void test('a NaN run is left out: the step across it is found and no shift is made up at its edges', () => {
  const { x, y } = series(1000, (i) => (i <= 600 ? 12800 : 4300), 300, 9);
  for (let i = 400; i < 500; i++) y[i] = NaN;
  y[700] = Infinity;
  const r = findChangepoints(x, y);
  assert.equal(r.nonFinite, 101);
  assert.equal(r.points, 899);
  assert.equal(r.changepoints.length, 1);
  assert.ok(Math.abs(r.changepoints[0]!.at - 600) <= 1);
  const flat = series(1000, () => 7, 0.5, 2);
  for (let i = 300; i < 700; i++) flat.y[i] = NaN;
  assert.deepEqual(findChangepoints(flat.x, flat.y).changepoints, []);
  assert.deepEqual(findChangepoints([1, 2, 3], [NaN, NaN, NaN]).changepoints, []);
  assert.equal(findChangepoints([], []).lastLevel, null);
});

void test('1,000,000 points: the step found within 0.1% of the steps', (t) => {
  const { x, y } = series(1_000_000, (i) => (i <= 612_345 ? 12800 : 4300), 2000, 13);
  const t0 = performance.now();
  const r = findChangepoints(Float64Array.from(x), Float64Array.from(y));
  const ms = performance.now() - t0;
  assert.equal(r.buckets, 2000);
  assert.equal(r.changepoints.length, 1);
  assert.ok(Math.abs(r.changepoints[0]!.at - 612_345) <= 1000, `at ${r.changepoints[0]!.at}`);
  // How fast is npm run bench's to say; a timed assert here would only measure the machine.
  t.diagnostic(`1,000,000 points in ${ms.toFixed(0)} ms`);
});

// ------------------------------------------------------------------------------------------------ real loops (issue 22)

void test('a steady real loop (saves every 100 steps, evals every 250, warm-up at each launch, heavy tails): no changepoint, over 40 seeds', () => {
  for (let seed = 1; seed <= 40; seed++) {
    const log = realLoop({ steps: 2000, speed: () => 30, launches: [600], seed });
    const r = findChangepoints(log.step, log.stepsPerSec, { launches: [601] });
    assert.deepEqual(r.changepoints, [], `seed ${seed} (steps/s)`);
    assert.ok(r.stalls >= 15, `seed ${seed}: ${r.stalls} stalls left out`);
    assert.ok(Math.abs(r.lastLevel! - 30) < 1.5, `level ${r.lastLevel}`);
    // the same run read as seconds per step: the stalls are spikes, not dips
    const t = findChangepoints(log.step, log.stepTime, { launches: [601] });
    assert.deepEqual(t.changepoints, [], `seed ${seed} (step time)`);
  }
});

void test('a steady loop is steady without knowing its launches too (the restart warm-up is a stall)', () => {
  for (let seed = 1; seed <= 20; seed++) {
    const log = realLoop({ steps: 1000, speed: () => 500_000, launches: [600], seed });
    assert.deepEqual(findChangepoints(log.step, log.stepsPerSec).changepoints, [], `seed ${seed}`);
  }
});

void test('a 10% drop lasting 5% of the run is found within one logging window, saves and evals around it', () => {
  for (let seed = 1; seed <= 20; seed++) {
    const log = realLoop({ steps: 2000, speed: (s) => (s > 1900 ? 27 : 30), seed });
    const r = findChangepoints(log.step, log.stepsPerSec);
    assert.equal(r.changepoints.length, 1, `seed ${seed}: ${JSON.stringify(r.changepoints)}`);
    const cp = r.changepoints[0]!;
    // the first slow window ends at step 1910: the change lies between at and firstAfter, at most one window late
    assert.ok(
      cp.at <= 1910 && cp.firstAfter >= 1910 && cp.firstAfter <= 1920,
      `seed ${seed}: ${cp.at}–${cp.firstAfter}`,
    );
    assert.ok(Math.abs(cp.ratio! - 0.9) < 0.03, `seed ${seed}: ratio ${cp.ratio}`);
  }
});

void test('a 2.6× slowdown at a restart is found at the restart; its levels are the segments’, not a stall', () => {
  for (let seed = 1; seed <= 20; seed++) {
    const log = realLoop({ steps: 1200, speed: (s) => (s > 600 ? 57 : 149), launches: [600], seed });
    const r = findChangepoints(log.step, log.stepsPerSec, { launches: [601] });
    assert.equal(r.changepoints.length, 1, `seed ${seed}: ${JSON.stringify(r.changepoints)}`);
    const cp = r.changepoints[0]!;
    // the restart lies between the last point at the old level and the first at the new one
    assert.ok(cp.at <= 600 && cp.firstAfter > 600, `seed ${seed}: ${cp.at}–${cp.firstAfter}`);
    assert.ok(Math.abs(cp.before - 149) < 5 && Math.abs(cp.after - 57) < 3, `${cp.before} → ${cp.after}`);
  }
});

void test('a level held only while the run settles after it started (under half its first launch, within 1.5× of the level after, never past its first minute) is warm-up; a shift later, larger, or right after a restart, is kept', () => {
  // 100 windows of 10 steps, 0.5 s each: the first 20 (10 s) run 25% faster, as the steady real plain loop did
  const { x, y } = series(100, (i) => (i < 20 ? 125 : 100), 2, 7);
  const t = x.map((_, i) => i * 0.5);
  assert.equal(findChangepoints(x, y).changepoints.length, 1, 'without wall times it is a shift');
  const settled = findChangepoints(x, y, { times: t });
  assert.deepEqual(settled.changepoints, []);
  assert.ok(settled.warmup >= 19, `warm-up ${settled.warmup}`);
  // the same shift 2 minutes into the run: past the settling time, a real shift
  const late = t.map((v) => v * 12);
  assert.deepEqual(
    findChangepoints(x, y, { times: late }).changepoints.map((c) => [c.at, c.firstAfter]),
    [[19, 20]],
  );
  // 3× as fast for the first half of a 30 s run (a CPU run relaunched with 4× the work per step, the restart in no
  // file and no clock of its log): no settling moves a run that far, so it is the change (issue 32)
  const half = series(60, (i) => (i <= 30 ? 21_000 : 7_000), 400, 8);
  assert.deepEqual(
    findChangepoints(half.x, half.y, { times: half.x.map((_, i) => i * 0.5) }).changepoints.map((c) => [
      c.at,
      c.firstAfter,
    ]),
    [[30, 31]],
  );
  // a restart 10 s into the run that is slower from there on: the restart's change, never the run settling
  const r = series(100, (i) => (i < 21 ? 100 : 70), 2, 9);
  const cps = findChangepoints(r.x, r.y, { times: t, launches: [r.x[20]!] }).changepoints;
  assert.ok(
    cps.some((c) => c.launch === r.x[20]),
    JSON.stringify(cps.map((c) => [c.at, c.ratio])),
  );
});

void test('a level that wanders back is no shift: 10% lower for 12% of the run, then back (the real steady plain loop)', () => {
  // 100 windows, as plain-no-change logged them: ~1.0M tok/s, 0.93M for windows 33–45, then ~1.07M
  const level = (i: number) => (i < 33 ? 1.02e6 : i < 46 ? 0.93e6 : i < 60 ? 1.08e6 : i < 72 ? 0.95e6 : 1.05e6);
  const { x, y } = series(100, level, 20e3, 11);
  assert.deepEqual(findChangepoints(x, y).changepoints, []);
  // the same dip that never comes back is a shift
  const kept = series(100, (i) => (i < 33 ? 1.02e6 : 0.93e6), 20e3, 11);
  assert.deepEqual(
    findChangepoints(kept.x, kept.y).changepoints.map((c) => c.at),
    [32],
  );
  // a drop at a restart that mostly comes back 25 windows later (plain-host-sync: 0.77× for 140 steps after its
  // restart, then 1.31×): the restart's, kept; the same series without the restart is a wander
  const back = series(100, (i) => (i < 61 ? 1e6 : i < 85 ? 0.78e6 : 0.98e6), 20e3, 12);
  const cps = findChangepoints(back.x, back.y, { launches: [61] }).changepoints;
  assert.ok(
    cps.some((c) => c.launch === 61 && c.ratio! < 0.85),
    JSON.stringify(cps),
  );
  assert.deepEqual(findChangepoints(back.x, back.y).changepoints, []);
});

void test('a drop at a restart is found when the largest split of the run is its first launch settling (a slope)', () => {
  // plain-launch-blocking: ~290K tok/s sloping down to 210K over the first launch's first 300 steps, 210K to the
  // restart at window 61, 160K after it (0.75×, as the run measured)
  const level = (i: number) => (i < 12 ? 250e3 + i * 5e3 : i < 28 ? 310e3 - (i - 12) * 6e3 : i < 61 ? 210e3 : 160e3);
  const { x, y } = series(100, level, 6e3, 13);
  const cps = findChangepoints(x, y, { launches: [61] }).changepoints;
  const hit = cps.find((c) => c.launch === 61);
  assert.ok(hit && hit.ratio! > 0.7 && hit.ratio! < 0.8, JSON.stringify(cps));
});

void test('a restart with fewer points after it than its warm-up and a level take is said to be too young to judge', () => {
  const xs = Array.from({ length: 32 }, (_, i) => (i + 1) * 10);
  // 2 points from the restart at step 310 on: too few (7 take its warm-up and a level)
  assert.deepEqual(tooLittleAfterRestart(xs, [310]), { step: 310, points: 2, needed: 7 });
  // the latest restart is the one judged; 7 points after it are enough
  assert.deepEqual(tooLittleAfterRestart(xs, [110, 260]), undefined);
  assert.deepEqual(tooLittleAfterRestart(xs.slice(0, 31), [110, 260]), { step: 260, points: 6, needed: 7 });
  // no restart inside the series (none, or one at its very start): nothing to say
  assert.equal(tooLittleAfterRestart(xs, []), undefined);
  assert.equal(tooLittleAfterRestart(xs, [10]), undefined);
  assert.equal(tooLittleAfterRestart([], [310]), undefined);
});

void test('a dip of a few windows just before a large drop is not the run settling (it would leave the drop a stub)', () => {
  // tok/s of a short CPU run (test/support/shortRun, restarted at step 300 with --work 8 → 32, the restart in no file
  // and no clock), its last 8 windows before the restart slowed by up to 10%, as a busy machine slows them
  const y = [
    6432, 6957, 8028, 6222, 6019, 5859, 5840, 5834, 6133, 6016, 5751, 5688, 5904, 6209, 5793, 5685, 5796, 6137, 6082,
    6223, 5515, 5902, 5893, 6135, 6071, 5646, 5664, 5457, 5503, 5163, 1864, 1994, 1956, 2082, 2114, 1976, 2110, 2134,
    2002, 2066, 2107, 2040, 1917, 2139, 2182, 2156, 2020, 2148, 2136, 2184, 2089, 2105, 2088, 2162, 2044, 2112, 2076,
    2120, 2169, 2281,
  ];
  const x = y.map((_, i) => (i + 1) * 10);
  // 7.5 s to the restart, 24 s after it: all inside the first minute
  const times = x.map((s) => (s <= 300 ? s * 0.025 : 7.5 + (s - 300) * 0.08));
  // The 0.93× dip's level lasts 5 windows, its old one 25: no level the run settled to. Taken for settling, the points
  // before it were left out and the drop kept only the dip's sloping 5 points before it: "a slope", nothing found.
  const cps = findChangepoints(x, y, { times }).changepoints;
  assert.ok(
    cps.some((c) => c.at <= 300 && c.firstAfter === 310 && c.ratio! < 0.4),
    JSON.stringify(cps.map((c) => [c.at, c.firstAfter, c.ratio])),
  );
});
