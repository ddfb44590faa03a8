import assert from 'node:assert/strict';
import { test } from 'node:test';
import { comparisonChoice } from '../../src/core/bench/compare';

const ref = (id: string, at: string) => ({ label: id, result: { id, at } });

void test('compare throughput: no result or only one is information with the way forward, not an error', () => {
  const none = comparisonChoice([], 'gpu-box');
  assert.equal(none.kind, 'info');
  assert.equal(none.kind === 'info' && none.code, 'no-results');
  assert.match(none.kind === 'info' ? none.message : '', /Run Throughput Benchmark/);

  const one = comparisonChoice([ref('a', '2026-01-01T00:00:00Z')], 'gpu-box');
  assert.equal(one.kind, 'info');
  assert.equal(one.kind === 'info' && one.code, 'only-one');
  assert.match(
    one.kind === 'info' ? one.message : '',
    /^Only one benchmark result for gpu-box so far: run "Known Good/,
  );
});

void test('compare throughput: the newest is compared with the others', () => {
  const all = [
    ref('old', '2026-01-01T00:00:00Z'),
    ref('new', '2026-02-01T00:00:00Z'),
    ref('mid', '2026-01-15T00:00:00Z'),
  ];
  const c = comparisonChoice(all, 'h');
  assert.equal(c.kind, 'choose');
  if (c.kind !== 'choose') return;
  assert.equal(c.newest.label, 'new');
  assert.deepEqual(
    c.others.map((r) => r.label),
    ['old', 'mid'],
  );
});
