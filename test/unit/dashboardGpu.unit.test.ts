import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseHostMessage, type RunData } from '../../src/core/dashboard/protocol';
import { GPU_SERIES } from '../../src/core/hardware/gpuKeys';
import { gpuPlotOf } from '../../src/core/hardware/gpuPlot';
import { detectSeries } from '../../webview/src/data';
import { gpuMarks, gpuTitle, withGpu } from '../../webview/src/gpu';
import { dashboardLogRun as logRun, dashboardTimeline as timeline } from '../support/gpuTimeline';

/*
 * Issue 34 item 2: a run's GPU timeline on the dashboard, under the throughput, on the same x axis. The timeline is
 * WRITTEN, not recorded (no GPU is lent): H200 readings of test/fixtures/nvidia-smi/, written in the format NVIDIA
 * documents for `nvidia-smi --query-gpu=… --format=csv,noheader,nounits`, 5 s apart from t = 1000 s. The log logs a
 * step every second from t = 1000 (step 10 at t = 1000, step 11 at 1001, …).
 */

void test('the plot of a timeline: the slowest GPU as the line, every GPU as the band, throttle periods and the neighbour marked', () => {
  const p = gpuPlotOf(timeline())!;
  assert.deepEqual([p.gpus, p.slowest, p.t.length, p.thinned], [[0, 1], 1, 40, 0]);
  const sm = p.series.find((s) => s.key === GPU_SERIES.sm)!;
  assert.deepEqual([sm.min[0], sm.max[0], sm.last[0]], [1900, 1980, 1900]);
  assert.deepEqual([sm.min[12], sm.last[12]], [1500, 1500]);
  assert.deepEqual(p.marks, [
    { kind: 'throttle', label: 'sw_power_cap on GPU 1', from: 1050, to: 1095 },
    { kind: 'neighbour', label: "bob's python3 on GPU 0", from: 1120, to: null },
  ]);
  // what the panel posts passes the protocol both sides check
  const parsed = parseHostMessage({ type: 'gpu', run: 'h:/r/train_log.jsonl', plot: p });
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
});

void test('on the dashboard the GPU series sit right under the throughput, placed on the log steps through its wall times', () => {
  const gpu = new Map([['h:/r/train_log.jsonl', gpuPlotOf(timeline())!]]);
  const [run] = withGpu([logRun()], gpu);
  assert.deepEqual(detectSeries([run!]), ['tok_s', GPU_SERIES.sm, GPU_SERIES.util, GPU_SERIES.power, 'loss']);
  const sm = run!.series.find((s) => s.key === GPU_SERIES.sm)!;
  // sample k at t = 1000 + 5k is step 10 + 5k; the samples past the log's last time (t = 1179) are left out
  assert.deepEqual(sm.x.slice(0, 3), [10, 15, 20]);
  assert.deepEqual(sm.t!.slice(0, 3), [1000, 1005, 1010]);
  assert.equal(sm.x.at(-1), 185);
  assert.equal(sm.x.length, 36);
  // the marks: where the power cap began and ended, and where the neighbour came (step 130, where tok/s halved)
  const inPlot = new Set(['h:/r/train_log.jsonl']);
  assert.deepEqual(
    gpuMarks([run!], gpu, inPlot, 'step').map((m) => [m.x, m.label]),
    [
      [60, 'sw_power_cap on GPU 1'],
      [105, 'throttle ends'],
      [130, "bob's python3 on GPU 0"],
    ],
  );
  assert.deepEqual(
    gpuMarks([run!], gpu, inPlot, 'time').map((m) => m.x),
    [1050, 1095, 1120],
  );
  assert.equal(
    gpuTitle(GPU_SERIES.sm, [...gpu.values()]),
    'gpu: SM clock MHz (line: GPU 1, the slowest; band: GPUs 0, 1)',
  );
});

void test('a log without wall times cannot place the GPU samples: the run is shown as it was', () => {
  const r = logRun();
  const plain: RunData = { ...r, series: r.series.map(({ t: _t, ...s }) => s) };
  const [out] = withGpu([plain], new Map([['h:/r/train_log.jsonl', gpuPlotOf(timeline())!]]));
  assert.deepEqual(detectSeries([out!]), ['tok_s', 'loss']);
});
