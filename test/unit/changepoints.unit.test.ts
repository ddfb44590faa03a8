import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findChangepoints } from '../../src/core/whatChanged/changepoints';

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
  assert.equal(cp.ratio!.toFixed(2), '0.34');
  assert.ok(cp.sigmas > 10);
  assert.deepEqual(cp.segmentBefore, [1, cp.at]);
  assert.deepEqual(cp.segmentAfter, [cp.firstAfter, 1000]);
});

void test('a small step (5% at 2σ noise) is still found; a 1% one is not reported', () => {
  const five = series(2000, (i) => (i <= 1200 ? 100 : 95), 2, 7);
  const r5 = findChangepoints(five.x, five.y);
  assert.equal(r5.changepoints.length, 1);
  assert.ok(Math.abs(r5.changepoints[0]!.at - 1200) <= 20, `at ${r5.changepoints[0]!.at}`);
  const one = series(2000, (i) => (i <= 1200 ? 100 : 99), 0.2, 7);
  assert.equal(findChangepoints(one.x, one.y).changepoints.length, 0);
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
