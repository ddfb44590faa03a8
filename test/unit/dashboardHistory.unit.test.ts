import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProgressiveRuns, type Reduce } from '../../src/core/dashboard/progressive';
import { runsListingSchema } from '../../src/core/runs/listRuns';
import { sourceOfLog, sourceOfRun } from '../../src/core/dashboard/sources';
import { metricsReduceArgs, metricsReductionSchema } from '../../src/core/metrics/metricsProbe';
import { detectSeries, restartMarks } from '../../webview/src/data';
import { realLoop } from '../support/realLoop';
import { writeHfRun, writeLightningRun } from '../support/runHistory';

/*
 * The dashboard plots a restarted run as one run (issue 22): both halves of an HF Trainer run (one event file per
 * launch) and of a Lightning run (version_0, version_1), stitched, its restart marked, its speed plotted first. Real
 * list_runs.py and metrics_reduce.py, run locally in place of the host's helper.
 */

const reduce: Reduce = (src, options) => {
  const out = execFileSync(
    'python3',
    ['python/metrics_reduce.py', ...metricsReduceArgs({ ...options, path: src.logPath })],
    {
      encoding: 'utf8',
    },
  );
  return Promise.resolve(metricsReductionSchema.parse(JSON.parse(out)));
};

function listing(dir: string) {
  const out = execFileSync('python3', ['python/list_runs.py', dir], { encoding: 'utf8' });
  return runsListingSchema.parse(JSON.parse(out)).roots[0]!;
}

void test('an HF run restarted at step 600: the dashboard shows both halves as one run, the restart marked, speed first', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-dash-hf-'));
  try {
    const a = realLoop({ steps: 640, speed: () => 32, seed: 1 });
    const b = realLoop({ steps: 1200, speed: (s) => (s > 600 ? 7.6 : 32), launches: [600], seed: 1 });
    writeHfRun(dir, a, b, 600, 640);
    const root = listing(dir);
    const src = sourceOfRun('h', root, root.entry!)!;
    assert.equal(src.history?.length, 2);
    assert.match(src.logPath, /Dec01_10-40-00_vm/, 'the newest file is the one that grows');
    const runs = new ProgressiveRuns([src], { reduce, hostLabel: () => 'gpu', maxBuckets: 2000 });
    await runs.loadPreviews();
    assert.deepEqual(runs.errors, []);
    const data = runs.runs[0]!.data;
    const loss = data.series.find((s) => s.key === 'train/loss')!;
    assert.equal(loss.x[0], 10);
    assert.equal(loss.x.at(-1), 1200);
    assert.equal(loss.x.length, 120);
    assert.deepEqual(
      data.run.restarts?.map((r) => r.step),
      [610],
    );
    assert.equal(detectSeries([data])[0], 'steps/s (from wall time)');
    // HF's end-of-run train_samples_per_second (one point a launch) is a summary: it never goes first
    const base = data.series[0]!;
    const two = Object.fromEntries(
      Object.entries(base).map(([k, v]) => [k, Array.isArray(v) ? (v as unknown[]).slice(0, 2) : v]),
    ) as typeof base;
    const withSummary = { ...data, series: [...data.series, { ...two, key: 'train/train_samples_per_second' }] };
    const order = detectSeries([withSummary]);
    assert.equal(order[0], 'steps/s (from wall time)');
    assert.equal(order.at(-1), 'train/train_samples_per_second');
    assert.deepEqual(
      restartMarks([data], new Set([data.run.id]), 'step').map((m) => m.x),
      [610],
    );
    // the same history when the older file is the one opened
    const first = root
      .entry!.children!.find((c) => c.name === 'runs')!
      .children!.find((c) => c.name.startsWith('Dec01_10-00'))!.children![0]!;
    assert.equal(sourceOfLog('h', root, first).history?.length, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('a Lightning run resumed into version_1: one run of both versions, following reads only the newest file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-dash-pl-'));
  try {
    const a = realLoop({ steps: 620, speed: () => 149, seed: 2 });
    const b = realLoop({ steps: 1000, speed: (s) => (s > 600 ? 57 : 149), launches: [600], seed: 2 });
    writeLightningRun(dir, a, b, 600, 620);
    const root = listing(dir);
    const src = sourceOfRun('h', root, root.entry!)!;
    assert.deepEqual(
      src.history?.map((p) => p.split('/').slice(-2).join('/')),
      ['version_0/metrics.csv', 'version_1/metrics.csv'],
    );
    const calls: string[] = [];
    const counting: Reduce = (s, o) => {
      calls.push(`${s.logPath.split('/').slice(-2).join('/')}${o.offset !== undefined ? ' follow' : ''}`);
      return reduce(s, o);
    };
    const runs = new ProgressiveRuns([src], { reduce: counting, hostLabel: () => 'gpu', maxBuckets: 2000 });
    await runs.loadPreviews();
    const sps = runs.runs[0]!.data.series.find((s) => s.key === 'samples_per_sec')!;
    assert.equal(sps.x[0], 10);
    assert.equal(sps.x.at(-1), 1000);
    await runs.follow({ grew: () => undefined, failed: (_r, m) => assert.fail(m) });
    assert.deepEqual(calls.sort(), ['version_0/metrics.csv', 'version_1/metrics.csv', 'version_1/metrics.csv follow']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
