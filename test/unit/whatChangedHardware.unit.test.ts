import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GpuReading, GpuSample } from '../../src/core/hardware/gpuProbe';
import type { MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { restartsFromTimes } from '../../src/core/metrics/restarts';
import { analyze } from '../../src/core/whatChanged/analyze';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { NO_OTHER_FACTS, reducedSeries } from '../support/facts';
import { h200, header, healthOf, proc, ranks } from '../support/gpuTimeline';
import { realLoop } from '../support/realLoop';

/*
 * Issue 34 item 3: What Changed? with the machine's facts. The GPU timelines here are WRITTEN, not recorded (no GPU is
 * lent): readings of test/fixtures/nvidia-smi/'s H200 rows, written in the format NVIDIA documents for
 * `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` and `--query-compute-apps`, sampled at the times of a
 * real-loop log (saves, evals, warm-up, heavy tails) whose tok/s halves after step 600 (a GPU time-sliced with a neighbour).
 */

const RUN = 4242;

/** The log, and a GPU sample just before every third logged window (the sampler's clock is the log's: one host). */
function slowedRun(
  gpusAt: (t: number, afterShift: boolean, late: boolean) => Partial<Record<number, Partial<GpuReading>>>,
  neighbourFrom: number | null,
) {
  const l = realLoop({ steps: 1200, speed: (s) => (s > 600 ? 15 : 30), seed: 5 });
  const y = l.stepsPerSec.map((v) => v * 4096);
  const reduction = { series: [reducedSeries('tok_s', l.step, y, l.time)] } as unknown as MetricsReduction;
  const at600 = l.time[l.step.indexOf(600)]!;
  const at900 = l.time[l.step.indexOf(900)]!;
  const s: GpuSample[] = [];
  for (let i = 0; i < l.time.length; i += 3) {
    const t = l.time[i]! - 0.01;
    const over = gpusAt(t, t > at600, t > at900);
    s.push({
      t,
      gpus: [0, 1].map((g) => h200(g, over[g] ?? {})),
      processes: [
        ...ranks([0, 1], RUN),
        ...(neighbourFrom !== null && t > at600 + neighbourFrom
          ? [proc(7001, 0, { user: 'bob', comm: 'python3', memMiB: 20480, ancestors: [6999, 1] })]
          : []),
      ],
    });
  }
  const facts: WhatChangedFacts = {
    host: { id: 'h', label: 'gpu-box' },
    run: '/r',
    remoteNow: l.time.at(-1)! + 10,
    checkpoints: [],
    args: [],
    log: { path: '/r/train_log.jsonl', reduction, restarts: restartsFromTimes(l.step, l.time) },
    ...NO_OTHER_FACTS,
    gpu: healthOf('/r', [header(l.time[0]! - 30, RUN)], s),
  };
  return facts;
}

void test("another user's process appearing on the run's GPU at the slowdown leads, named with its user; a power cap held from the start and a throttle after the shift are ruled out by timing", () => {
  const r = analyze(
    slowedRun(
      (_t, _after, late) => ({
        1: { reasons: ['sw_power_cap'], smClock: 1830 },
        ...(late ? { 0: { reasons: ['hw_thermal_slowdown'], smClock: 1215 } } : {}),
      }),
      0,
    ),
  );
  assert.equal(r.verdict, 'regression', r.headline);
  const top = r.suspects[0]!;
  assert.equal(top.source, 'gpu', r.suspects.map((s) => s.title).join('; '));
  assert.match(top.title, /^another process on GPU 0: bob's python3 \(PID 7001, not this run\) since 20\d\d-/);
  assert.ok(top.coincides, JSON.stringify(top.reasons));
  assert.equal(top.category, 'hardware');
  assert.match(r.headline, /; changed at step \d+: another process on GPU 0: bob's python3 \(PID 7001, not this run\)/);
  // its evidence: the samples either side of its onset, the neighbour in the second only
  const pair = top.evidence.find((e) => e.kind === 'text-diff');
  assert.ok(pair?.kind === 'text-diff');
  assert.doesNotMatch(pair.a.text, /PID 7001/);
  assert.match(pair.b.text, /PID 7001 on GPU 0 \(bob python3, 20480 MiB\)/);
  assert.ok(top.evidence.some((e) => e.kind === 'file' && e.path === '/r/.known-good/gpu-timeline.jsonl'));

  const cap = r.suspects.find((s) => s.title.includes('sw_power_cap'))!;
  assert.ok(cap.ruledOut, JSON.stringify(cap.reasons));
  assert.match(cap.reasons.at(-1)!.why, /changed before the shift and the level held/);
  const hot = r.suspects.find((s) => s.title.includes('hw_thermal_slowdown'))!;
  assert.ok(hot.ruledOut, JSON.stringify(hot.reasons));
  assert.match(hot.reasons.at(-1)!.why, /changed after the shift/);
  assert.match(renderWhatChangedMarkdown(r), /another process on GPU 0: bob's python3/);
});

void test('a thermal slowdown beginning at the shift leads with its reason and the clocks it cost', () => {
  const r = analyze(
    slowedRun((_t, after) => (after ? { 0: { reasons: ['hw_thermal_slowdown'], smClock: 1215, temp: 88 } } : {}), null),
  );
  const top = r.suspects[0]!;
  assert.equal(top.source, 'gpu', r.headline);
  assert.match(
    top.title,
    /^GPU 0 throttling: hw_thermal_slowdown \(hardware thermal slowdown: the GPU is too hot\) since /,
  );
  assert.ok(top.coincides, JSON.stringify(top.reasons));
  assert.match(top.detail, /median GPU 0 SM 1980 → 1215 MHz \(max 1980\)/);
  assert.match(top.when.text, /^between .* \(steps \d+–\d+\)$/);
});

void test('a neighbour that came long after the shift is ruled out; nothing else recorded differs', () => {
  const f = slowedRun(() => ({}), 0);
  // the neighbour arrives 300 steps after the shift
  const late = f.log!.reduction.series[0]!;
  const t900 = late.t![late.x.indexOf(900)]!;
  for (const s of f.gpu!.timeline!.samples) if (s.t < t900) s.processes = s.processes.filter((p) => p.pid !== 7001);
  const r = analyze(f);
  const n = r.suspects.find((s) => s.source === 'gpu')!;
  assert.ok(n.ruledOut, JSON.stringify(n.reasons));
  assert.match(r.headline, /no recorded change at the shift explains it/);
});

void test('no timeline: what the GPUs show now is a suspect without a time, and the missing timeline is said', () => {
  const f = slowedRun(() => ({}), null);
  const now: GpuSample = {
    t: f.remoteNow,
    gpus: [h200(0, { reasons: ['sw_thermal_slowdown'], smClock: 1400 }), h200(1)],
    processes: [],
  };
  const r = analyze({ ...f, gpu: healthOf('/r', [], [], now) });
  const s = r.suspects.find((x) => x.source === 'gpu')!;
  assert.match(s.title, /^GPU 0 throttling: sw_thermal_slowdown .* \(seen now\)$/);
  assert.ok(!s.coincides && !s.ruledOut);
  assert.equal(s.when.text, 'seen now; since when is not recorded (no GPU timeline)');
  assert.ok(r.unknown.some((u) => u.fact === 'GPU timeline of this run' && /kg_record\.py/.test(u.why)));
});

void test('no nvidia-smi on the host: said once among the unknowns, nothing invented', () => {
  const f = slowedRun(() => ({}), null);
  const r = analyze({
    ...f,
    gpu: { nvidiaSmi: null, said: 'no nvidia-smi on this host', now: null, nowError: null, timeline: null },
  });
  assert.ok(!r.suspects.some((s) => s.source === 'gpu'));
  assert.deepEqual(
    r.unknown.filter((u) => /GPU/.test(u.fact)).map((u) => u.why),
    ['no nvidia-smi on this host'],
  );
});
