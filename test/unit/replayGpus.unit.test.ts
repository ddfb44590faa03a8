import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bisect, type BisectChange, type Measure } from '../../src/core/bisect/engine';
import { isKnownGoodError } from '../../src/core/errors';
import {
  freeGpus,
  gpuListOf,
  gpuListSchema,
  parseGpuChoice,
  planGpus,
  withGpu,
  type GpuList,
  type GpuListDoc,
} from '../../src/core/replay/gpus';

/*
 * Which GPUs a replay runs on (issue 33 item 4, issue 37), on FAKE GPU lists: the documents python/gpu_status.py
 * --slots writes from nvidia-smi's CSV (test/python/test_small_probes.py reads a fake nvidia-smi for them). No GPU.
 */

const gpu = (index: number, util: number, memMiB: number) => ({
  index,
  uuid: `GPU-${index}aaa-bbbb`,
  name: 'NVIDIA H200',
  utilizationPct: util,
  memoryUsedMiB: memMiB,
  memoryTotalMiB: 143771,
});

/** Four H200s: 0 idle, 1 with a process on it, 2 idle (a display server's 300 MiB), 3 at 95 %. */
const FOUR: GpuListDoc = gpuListSchema.parse({
  source: 'nvidia-smi',
  gpus: [gpu(0, 0, 1), gpu(1, 0, 40_000), gpu(2, 3, 300), gpu(3, 95, 900)],
  processes: [{ gpu: 1, uuid: 'GPU-1aaa-bbbb', pid: 4242, memoryMiB: 40_000 }],
});

const listOf = (doc: unknown): GpuList => gpuListOf(gpuListSchema.parse(doc));

void describe('replay GPUs: only free ones, side by side, rotated', () => {
  it('free: no process on it, low use, little memory taken; the others with why', () => {
    const { free, busy } = freeGpus(gpuListOf(FOUR));
    assert.deepEqual(
      free.map((g) => g.index),
      [0, 2],
    );
    assert.deepEqual(
      busy.map((b) => [b.gpu.index, b.why]),
      [
        [1, 'a process is on it (pid 4242)'],
        [3, '95 % used (free: at most 10 %)'],
      ],
    );
    // the limits are the caller's
    assert.deepEqual(
      freeGpus(gpuListOf(FOUR), { maxUtil: 99 }).free.map((g) => g.index),
      [0, 2, 3],
    );
    assert.deepEqual(
      freeGpus(gpuListOf(FOUR), { maxMemMiB: 100 }).busy.map((b) => b.why),
      [
        'a process is on it (pid 4242)',
        '300 MiB of its memory taken (free: at most 100 MiB)',
        '95 % used (free: at most 10 %)',
      ],
    );
  });

  it('processes that could not be listed, or a use not reported, make no GPU free', () => {
    const noApps = listOf({ ...FOUR, processes: [], processesError: 'nvidia-smi failed: nope' });
    assert.deepEqual(freeGpus(noApps).free, []);
    assert.match(freeGpus(noApps).busy[0]!.why, /could not be listed/);
    const na = listOf({ source: 'nvidia-smi', gpus: [{ ...gpu(0, 0, 1), utilizationPct: null }] });
    assert.deepEqual(freeGpus(na).busy[0]!.why, 'its use is not reported');
  });

  it('auto: the free GPUs are the slots, the plan says which and why the others are not used', () => {
    const p = planGpus(gpuListOf(FOUR), 'auto', 'gpu-box');
    assert.deepEqual(
      p.slots.map((s) => [s.index, s.uuid]),
      [
        [0, 'GPU-0aaa-bbbb'],
        [2, 'GPU-2aaa-bbbb'],
      ],
    );
    assert.equal(p.needsWord, false);
    assert.match(p.text, /^GPUs: 2 free of 4 on gpu-box: GPU 0, GPU 2: 2 states side by side/);
    assert.match(p.text, /not used \(busy\): GPU 1 \(a process is on it \(pid 4242\)\), GPU 3 \(95 % used/);
  });

  it('every GPU busy: the plan says so and waits for the word; the least used is offered', () => {
    const doc = { ...FOUR, gpus: [gpu(0, 80, 9000), gpu(1, 0, 40_000), gpu(2, 30, 2000), gpu(3, 95, 900)] };
    const p = planGpus(listOf(doc), 'auto', 'gpu-box');
    assert.equal(p.needsWord, true);
    assert.deepEqual(
      p.slots.map((s) => s.index),
      [2],
    );
    assert.match(p.text, /every GPU on gpu-box is busy: GPU 0 \(80 % used.*GPU 1 \(a process/);
    assert.match(p.text, /waits for your word: run anyway, one run at a time on GPU 2 \(the least used/);
  });

  it('named GPUs are used even when busy (naming them is the word), the plan says which are busy', () => {
    const p = planGpus(gpuListOf(FOUR), [3, 0], 'gpu-box');
    assert.deepEqual(
      p.slots.map((s) => s.index),
      [3, 0],
    );
    assert.equal(p.needsWord, false);
    assert.match(p.text, /GPU 3, GPU 0 as named/);
    assert.match(p.text, /busy, used because they were named: GPU 3 \(95 % used/);
    assert.throws(
      () => planGpus(gpuListOf(FOUR), [0, 7], 'gpu-box'),
      (e) => isKnownGoodError(e, 'usage') && /has no GPU 7 \(its GPUs: 0, 1, 2, 3\)/.test(e.message),
    );
  });

  it('no nvidia-smi: slots = 1 and the plan says so once; a named GPU there is refused; none is none', () => {
    const none = listOf({ source: 'none' });
    const p = planGpus(none, 'auto', 'cpu-box');
    assert.deepEqual(p.slots, []);
    assert.equal(p.needsWord, false);
    assert.equal(
      p.text,
      'GPUs: no nvidia-smi on cpu-box (CPU only): the runs go one at a time (slots = 1), CUDA_VISIBLE_DEVICES as the launch had it',
    );
    assert.throws(
      () => planGpus(none, [0], 'cpu-box'),
      (e) => isKnownGoodError(e, 'usage'),
    );
    const failed = planGpus(listOf({ source: 'failed', error: 'nvidia-smi failed: driver gone' }), 'auto', 'b');
    assert.match(failed.text, /nvidia-smi failed on b \(nvidia-smi failed: driver gone\)/);
    assert.deepEqual(planGpus(gpuListOf(FOUR), 'none', 'gpu-box').slots, []);
  });

  it('--gpus: auto, none, or indexes', () => {
    assert.equal(parseGpuChoice('auto'), 'auto');
    assert.equal(parseGpuChoice('none'), 'none');
    assert.deepEqual(parseGpuChoice('0,1,3'), [0, 1, 3]);
    assert.deepEqual(parseGpuChoice(' 2, 2 '), [2]);
    for (const bad of ['', 'all', '0,,1', '-1', '0;rm', 'GPU-abc'])
      assert.throws(
        () => parseGpuChoice(bad),
        (e) => isKnownGoodError(e, 'usage'),
        bad,
      );
  });

  it("a run's environment: its GPU by UUID as the only one it sees, over what the state sets or unsets", () => {
    const slot = planGpus(gpuListOf(FOUR), 'auto', 'h').slots[1]!;
    assert.deepEqual(withGpu({ set: { A: '1', CUDA_VISIBLE_DEVICES: '0,1' }, unset: ['B'] }, slot), {
      set: { A: '1', CUDA_VISIBLE_DEVICES: 'GPU-2aaa-bbbb' },
      unset: ['B'],
    });
    assert.deepEqual(withGpu({ set: {}, unset: ['CUDA_VISIBLE_DEVICES'] }, slot).unset, []);
    assert.deepEqual(withGpu({ set: { A: '1' }, unset: [] }, undefined), { set: { A: '1' }, unset: [] });
    assert.equal(
      withGpu({ set: {}, unset: [] }, { index: 5, uuid: null, name: null }).set['CUDA_VISIBLE_DEVICES'],
      '5',
    );
  });

  it('a bisect on the free GPUs of a fake list, one of them 30 % slow: every state on every GPU, the true culprit', async () => {
    // eight GPUs, 5 busy; the three free ones are the slots, GPU 6 runs 30 % slow (a throttled card)
    const doc = {
      source: 'nvidia-smi',
      gpus: [0, 1, 2, 3, 4, 5, 6, 7].map((i) => gpu(i, [0, 2, 6].includes(i) ? 0 : 90, 10)),
    };
    const plan = planGpus(listOf(doc), 'auto', 'h200x8');
    assert.deepEqual(
      plan.slots.map((s) => s.index),
      [0, 2, 6],
    );
    const changes: BisectChange[] = Array.from({ length: 6 }, (_, i) => ({ id: `c${i}`, label: `c${i}` }));
    const seen: { applied: string; gpu: string }[] = [];
    const measure: Measure = (applied, _signal, slot) => {
      const env = withGpu({ set: {}, unset: [] }, plan.slots[slot!]);
      const visible = env.set['CUDA_VISIBLE_DEVICES']!;
      seen.push({ applied: [...applied].sort().join(','), gpu: visible });
      const slow = visible === 'GPU-6aaa-bbbb' ? 0.7 : 1;
      return Promise.resolve(1000 * slow * (applied.has('c4') ? 0.5 : 1) * (1 + (seen.length % 5) / 500));
    };
    const r = await bisect(changes, measure, { slots: plan.slots.length });
    assert.equal(r.verdict.kind, 'culprit', r.verdict.why);
    assert.deepEqual(r.verdict.ids, ['c4']);
    assert.equal(r.confirmation?.confirmed, true);
    // only the free GPUs were used, and every state of every round met each of them
    assert.deepEqual([...new Set(seen.map((s) => s.gpu))].sort(), ['GPU-0aaa-bbbb', 'GPU-2aaa-bbbb', 'GPU-6aaa-bbbb']);
    for (const round of r.rounds)
      for (const st of round.states)
        assert.deepEqual([...new Set(st.slots)].sort(), [0, 1, 2], `${round.index} ${st.name}`);
  });
});
