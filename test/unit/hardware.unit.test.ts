import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { GpuSample } from '../../src/core/hardware/gpuProbe';
import { analyzeGpuNow, analyzeGpuTimeline } from '../../src/core/hardware/timeline';
import { h200, header, proc, ranks as ranksOf, samples } from '../support/gpuTimeline';

/*
 * The hardware findings of core/hardware/timeline.ts on timelines WRITTEN by hand, not recorded: no GPU is lent here.
 * Their readings are test/fixtures/nvidia-smi/'s H200 rows, themselves written in the format NVIDIA documents for
 * `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` (field names, [N/A], Active/Not Active), as
 * python/kg_gpu_sampler.py would record them. Each finding is checked with the time it began.
 */

const RUN = 4242;
const ranks = (gpus: number[], root = RUN) => ranksOf(gpus, root);

void describe('GPU timeline findings', () => {
  void it('a thermal slowdown from sample 10 on is dated between samples 9 and 10; a power cap held all along is there from the start', () => {
    const s = samples(1000, 20, (k) => ({
      gpus: [
        h200(0, k >= 10 ? { reasons: ['hw_thermal_slowdown'], smClock: 1215, temp: 88 } : {}),
        h200(1, { reasons: ['sw_power_cap'], smClock: 1830 }),
      ],
      processes: ranks([0, 1]),
    }));
    const a = analyzeGpuTimeline({ headers: [header(999, RUN)], samples: s });
    assert.deepEqual(a.runGpus, [0, 1]);
    const thermal = a.findings.find((f) => f.title.includes('hw_thermal_slowdown'))!;
    assert.deepEqual([thermal.kind, thermal.gpus, thermal.onset], ['throttle', [0], { from: 1045, to: 1050 }]);
    assert.match(
      thermal.detail,
      /active in 100 % of the busy time from then on, 0 % before; median GPU 0 SM 1980 → 1215 MHz \(max 1980\)/,
    );
    // GPU 0 at 1215 against GPU 1's 1830: the straggler is told with its throttle, not again on its own
    assert.match(thermal.detail, /GPU 0 slower than the run's other GPUs \(SM 1215 MHz against their median 1830\)/);
    assert.ok(!a.findings.some((f) => f.kind === 'straggler'));
    const cap = a.findings.find((f) => f.title.includes('sw_power_cap'))!;
    assert.deepEqual([cap.gpus, cap.onset], [[1], { from: null, to: 1000 }]);
    assert.match(thermal.window!.before, /GPU 0: util 100 %, SM 1980\/1980 MHz/);
    assert.match(thermal.window!.after, /reasons hw_thermal_slowdown/);
  });

  void it('an idle GPU lowering its link and clocks is no finding; the same link under load is', () => {
    const idle = { util: 0, smClock: 345, pcieGen: 1, reasons: ['gpu_idle'] };
    const s = samples(1000, 12, (k) => ({
      gpus: [h200(0, k < 4 ? idle : k >= 8 ? { pcieGen: 3, pcieWidth: 8 } : {}), h200(1, k < 4 ? idle : {})],
      processes: k < 4 ? [] : ranks([0, 1]),
    }));
    const a = analyzeGpuTimeline({ headers: [header(999, RUN)], samples: s });
    assert.deepEqual(
      a.findings.map((f) => [f.kind, f.title, f.onset]),
      [['link', 'GPU 0 PCIe link at gen 3 x8 under load (of gen 5 x16)', { from: 1035, to: 1040 }]],
    );
  });

  void it("another user's process on the run's GPU is dated and named; the run's own children and other GPUs are not", () => {
    const s = samples(1000, 10, (k) => ({
      gpus: [h200(0), h200(1), h200(2)],
      processes: [
        ...ranks([0, 1]),
        proc(9001, 2, { user: 'carol' }), // on a GPU the run does not use
        ...(k >= 6 ? [proc(7001, 1, { user: 'bob', comm: 'python3', memMiB: 20480, ancestors: [6999, 1] })] : []),
      ],
    }));
    const a = analyzeGpuTimeline({ headers: [header(999, RUN, 3)], samples: s });
    const n = a.findings.filter((f) => f.kind === 'neighbour');
    assert.deepEqual(
      n.map((f) => [f.title, f.onset]),
      [["another process on GPU 1: bob's python3 (PID 7001, not this run)", { from: 1025, to: 1030 }]],
    );
    assert.match(n[0]!.detail, /holding up to 20480 MiB of GPU memory/);
  });

  void it("a process left from the run's earlier launch is told apart, and one that left has its end", () => {
    const first = samples(1000, 4, () => ({ gpus: [h200(0)], processes: ranks([0], 100) }));
    const second = samples(1100, 6, (k) => ({
      gpus: [h200(0)],
      processes: [...ranks([0], 200), ...(k < 3 ? [proc(150, 0, { ancestors: [100, 1] })] : [])],
    }));
    const a = analyzeGpuTimeline({
      headers: [header(999, 100, 1), header(1099, 200, 1)],
      samples: [...first, ...second],
    });
    const n = a.findings.find((f) => f.kind === 'neighbour')!;
    assert.match(n.title, /left from the run's earlier launch \(PID 100\)/);
    // first seen in the second launch's first sample: between the first launch's last sample and it
    assert.deepEqual([n.onset, n.until], [{ from: 1015, to: 1100 }, 1110]);
  });

  void it('memory errors appearing are dated; errors already there are there from the start', () => {
    const s = samples(1000, 8, (k) => ({
      gpus: [
        h200(0, k >= 5 ? { eccUncorrected: 2, remappedUncorrectable: 1, remappedPending: true } : {}),
        h200(1, { eccUncorrected: 1 }),
      ],
      processes: ranks([0, 1]),
    }));
    const a = analyzeGpuTimeline({ headers: [header(999, RUN)], samples: s });
    assert.deepEqual(
      a.findings.map((f) => [f.kind, f.title, f.onset]),
      [
        [
          'memory-errors',
          'GPU 0 memory errors: 2 uncorrected ECC errors, 1 rows remapped for uncorrectable errors, a row remap pending (takes effect at the next GPU reset)',
          { from: 1020, to: 1025 },
        ],
        ['memory-errors', 'GPU 1 memory errors: 1 uncorrected ECC error', { from: null, to: 1000 }],
      ],
    );
  });

  void it('one GPU of four slower with no reason given: its clock below the maximum, told with it being the straggler', () => {
    const s = samples(1000, 10, (k) => ({
      gpus: [0, 1, 2, 3].map((g) => h200(g, { smClock: g === 2 && k >= 4 ? 1400 : 1900 })),
      processes: ranks([0, 1, 2, 3]),
    }));
    const a = analyzeGpuTimeline({ headers: [header(999, RUN, 4)], samples: s });
    assert.deepEqual(
      a.findings.map((f) => [f.kind, f.gpus, f.onset]),
      [['clocks', [2], { from: 1015, to: 1020 }]],
    );
    assert.match(
      a.findings[0]!.detail,
      /GPU 2 slower than the run's other GPUs \(SM 1400 MHz against their median 1900\)/,
    );
  });

  void it('where the maximum clock is not known ([N/A]), a straggler is told on its own', () => {
    const s = samples(1000, 10, (k) => ({
      gpus: [0, 1].map((g) => h200(g, { smClockMax: null, smClock: g === 1 && k >= 3 ? 1700 : 1980 })),
      processes: ranks([0, 1]),
    }));
    const a = analyzeGpuTimeline({ headers: [header(999, RUN)], samples: s });
    assert.deepEqual(
      a.findings.map((f) => [f.kind, f.title, f.onset]),
      [
        [
          'straggler',
          "GPU 1 slower than the run's other GPUs (SM 1700 MHz against their median 1980)",
          { from: 1010, to: 1015 },
        ],
      ],
    );
  });

  void it('a brief flicker is no onset: a reason must hold most of the time from its onset on', () => {
    const s = samples(1000, 20, (k) => ({
      gpus: [h200(0, k === 7 || k === 15 ? { reasons: ['sw_power_cap'] } : {})],
      processes: ranks([0]),
    }));
    assert.deepEqual(analyzeGpuTimeline({ headers: [header(999, RUN, 1)], samples: s }).findings, []);
  });

  void it('a reading now has no onset, and without the live process no other process is judged', () => {
    const now: GpuSample = {
      t: 5000,
      gpus: [h200(0, { reasons: ['hw_slowdown'], smClock: 900 }), h200(1)],
      processes: [proc(4243, 0, { ancestors: [RUN] }), proc(7001, 0, { user: 'bob' })],
    };
    const withLive = analyzeGpuNow(now, RUN);
    assert.deepEqual(
      withLive.findings.map((f) => [f.kind, f.gpus, f.onset]),
      [
        ['throttle', [0], null],
        ['neighbour', [0], null],
      ],
    );
    const without = analyzeGpuNow(now, null);
    assert.ok(!without.findings.some((f) => f.kind === 'neighbour'));
    assert.ok(without.notes.some((n) => n.fact === 'which GPUs the run uses'));
  });

  void it('processes of another PID namespace are said to be unknown, not called neighbours', () => {
    const s = samples(1000, 4, () => ({
      gpus: [h200(0)],
      processes: [...ranks([0]), proc(77, 0, { seen: false, user: null, comm: null, ancestors: [] })],
    }));
    const a = analyzeGpuTimeline({ headers: [header(999, RUN, 1)], samples: s });
    assert.deepEqual(a.findings, []);
    assert.match(a.notes[0]!.why, /another PID namespace/);
  });
});
