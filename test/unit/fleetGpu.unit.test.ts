import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareGpuHealth, renderGpuText } from '../../src/core/fleet/gpu';
import type { GpuHealth, GpuReading } from '../../src/core/hardware/gpuProbe';
import { h200, proc } from '../support/gpuTimeline';

/*
 * Issue 34 item 4: GPU health on every node, the odd node named. Each node's reading is WRITTEN, not recorded (no GPU
 * is lent): the H200 rows of test/fixtures/nvidia-smi/, in the format NVIDIA documents for
 * `nvidia-smi --query-gpu=… --format=csv,noheader,nounits`, changed where a test says.
 */

function node(over: (g: number) => Partial<GpuReading> = () => ({}), users = ['alice']): GpuHealth {
  const gpus = Array.from({ length: 8 }, (_, g) => h200(g, { name: 'NVIDIA H200', ...over(g) }));
  const processes = users.flatMap((u, i) => [proc(1000 + i, i, { user: u })]);
  return {
    nvidiaSmi: '/usr/bin/nvidia-smi',
    said: null,
    now: { t: 1, gpus, processes, fields: {} },
    nowError: null,
    timeline: null,
  };
}

void test('a node with a GPU throttled for heat is the odd node, named with its reason; a foreign user on a node is named too', () => {
  const g = compareGpuHealth(
    new Map([
      ['n1', node()],
      ['n2', node()],
      ['n10', node(() => ({}), ['alice', 'bob'])],
      ['n3', node((i) => (i === 5 ? { reasons: ['hw_thermal_slowdown'], smClock: 1215, temp: 89 } : {}))],
      ['n4', { nvidiaSmi: null, said: 'no nvidia-smi on this host', now: null, nowError: null, timeline: null }],
    ]),
    [{ node: 'n5', message: 'the node stopped answering' }],
  );
  assert.deepEqual(
    g.rows.map((r) => r.node),
    ['n1', 'n2', 'n3', 'n10'],
  );
  assert.equal(g.medianSmMHz, 1980);
  assert.equal(g.oddest, 'n3');
  assert.deepEqual(g.odd, ['n3', 'n10']);
  const n3 = g.rows.find((r) => r.node === 'n3')!;
  assert.match(n3.odd[0]!, /^GPU 5 throttling: hw_thermal_slowdown \(hardware thermal slowdown: the GPU is too hot\)/);
  assert.equal(n3.odd.length, 1, n3.odd.join('; '));
  assert.deepEqual(g.rows.find((r) => r.node === 'n10')!.odd, [
    "bob's python3 on its GPUs, a user most nodes do not have",
  ]);
  assert.deepEqual(g.unread, [{ node: 'n4', message: 'no nvidia-smi on this host' }]);
  const text = renderGpuText(g, 'job 4242 on login1');
  assert.match(text, /^# the odd node: n3 \(GPU 5 throttling: hw_thermal_slowdown .*\); also n10$/m);
  assert.match(
    text,
    /^n3 {4}8 × NVIDIA H200 {5}1980 {7}100% {2}alice python3\n {6}! GPU 5 throttling: hw_thermal_slowdown/m,
  );
  assert.match(text, /^n4 {4}not read: no nvidia-smi on this host$/m);
  assert.match(text, /^n5 {4}failed: the node stopped answering$/m);
});

void test("a node whose GPUs all run at lower clocks than the fleet's is odd by its clocks; other GPUs than most are named", () => {
  const g = compareGpuHealth(
    new Map([
      ['a', node()],
      ['b', node()],
      ['c', node(() => ({ smClock: 1600, smClockMax: 1600 }))],
      ['d', node(() => ({ name: 'NVIDIA H100 80GB HBM3' }))],
    ]),
  );
  assert.deepEqual(g.odd, ['c', 'd']);
  assert.deepEqual(g.rows.find((r) => r.node === 'c')!.odd, ["SM clock 1600 MHz, 81 % of the fleet's median"]);
  assert.deepEqual(g.rows.find((r) => r.node === 'd')!.odd, [
    '8 × NVIDIA H100 80GB HBM3 where most nodes have 8 × NVIDIA H200',
  ]);
});

void test('an even fleet: no odd node, and a power cap every node has is listed once, setting none apart', () => {
  const capped = () => node((i) => (i === 3 ? { reasons: ['sw_power_cap'], smClock: 1830 } : {}));
  const g = compareGpuHealth(new Map(['n1', 'n2', 'n3'].map((n) => [n, capped()])));
  assert.equal(g.oddest, null);
  const text = renderGpuText(g, 'job 1 on x');
  assert.match(text, /^# no node stands out$/m);
  assert.match(text, /^# on most nodes: GPU 3 throttling: sw_power_cap/m);
});
