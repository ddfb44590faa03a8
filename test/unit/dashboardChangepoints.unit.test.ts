import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runDataFromParts, runDataFromReduction } from '../../src/core/dashboard/fromReduction';
import { ProgressiveRuns, type Reduce } from '../../src/core/dashboard/progressive';
import type { RunData } from '../../src/core/dashboard/protocol';
import { metricsReduceArgs, metricsReductionSchema, type MetricsReduction } from '../../src/core/metrics/metricsProbe';

const REPO = join(__dirname, '..', '..');
import { changepointMarks, marksInWords, restartMarks } from '../../webview/src/data';

/*
 * The dashboard's shift marks are What Changed?'s changepoints: the host computes them with the report's function
 * (logShifts, through runDataFromParts) and sends them with the run; the webview only places them on its x axis.
 */

/** A reduction as python/metrics_reduce.py returns it for these series (one bucket a point). */
function reductionOf(series: { key: string; x: number[]; last: number[]; t?: number[] }[]): MetricsReduction {
  return metricsReductionSchema.parse({
    path: '/runs/a/train_log.jsonl',
    size: 1000,
    offset: 0,
    requestedOffset: 0,
    reset: false,
    nextOffset: 1000,
    lines: series[0]!.x.length,
    blank: 0,
    skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
    x: 'step',
    xKeys: ['step'],
    xRange: [series[0]!.x[0], series[0]!.x.at(-1)],
    keys: series.map((s) => s.key),
    buckets: 2000,
    bucketWidth: 1,
    window: null,
    series: series.map((s) => ({
      ...s,
      min: s.last,
      max: s.last,
      count: s.x.length,
      lastX: s.x.at(-1)!,
      lastValue: s.last.at(-1)!,
    })),
    seriesTruncated: false,
    fastLines: series[0]!.x.length,
    shapes: 1,
    elapsedMs: 1,
  });
}

const runOf = (r: MetricsReduction): RunData => runDataFromReduction({ id: 'r1', label: 'run-a', host: 'h' }, r);
const inPlot = new Set(['r1']);

/** 12.8K tok/s until step 600, 4.3K after, with a little noise (deterministic); `t`: one point a second. */
function story(withTimes = false) {
  const x: number[] = [];
  const last: number[] = [];
  const t: number[] = [];
  for (let i = 0; i < 1000; i++) {
    x.push(i + 1);
    last.push((i + 1 <= 600 ? 12_800 : 4_300) + Math.sin(i * 12.9898) * 150);
    t.push(1_700_000_000 + i * 60);
  }
  return { key: 'tok_s', x, last, ...(withTimes ? { t } : {}) };
}

void describe('dashboard: level shifts marked on the plots', () => {
  it('marks the step where tok/s fell, labelled with before, after and the ratio', () => {
    const run = runOf(reductionOf([story()]));
    const marks = changepointMarks([run], 'tok_s', inPlot, 'step');
    assert.equal(marks.length, 1, JSON.stringify(marks));
    const [m] = marks;
    assert.equal(m!.x, 600);
    assert.equal(m!.run, 'r1');
    assert.equal(m!.kind, 'shift');
    assert.match(m!.label, /^shift 12\.8K → 4\.3K \(0\.34×\)$/);
    // only on its own series' plot
    assert.deepEqual(changepointMarks([run], 'loss', inPlot, 'step'), []);
  });

  it('marks nothing on a steady line or a smooth ramp', () => {
    const s = story();
    const steady = runOf(reductionOf([{ ...s, last: s.x.map((x) => 1000 + Math.sin(x * 7.1) * 20) }]));
    assert.deepEqual(changepointMarks([steady], 'tok_s', inPlot, 'step'), []);
    const ramp = runOf(reductionOf([{ ...s, last: s.x.map((x) => 5 - x / 250) }]));
    assert.deepEqual(changepointMarks([ramp], 'tok_s', inPlot, 'step'), []);
  });

  it('on the time axes the same shift sits at the wall time of its step (not found again on the plotted line)', () => {
    const run = runOf(reductionOf([story(true)]));
    const [time] = changepointMarks([run], 'tok_s', inPlot, 'time');
    assert.equal(time!.x, 1_700_000_000 + 599 * 60);
    const [hours] = changepointMarks([run], 'tok_s', inPlot, 'relative');
    assert.equal(hours!.x, (599 * 60) / 3600);
    assert.equal(time!.label, changepointMarks([run], 'tok_s', inPlot, 'step')[0]!.label);
  });

  it('a preview carries no shifts: the report never reads a sample', () => {
    const r = reductionOf([story()]);
    const run = runOf({ ...r, sample: { bytes: 10, windows: 2, of: 100 } });
    assert.equal(run.run.shifts, undefined);
    assert.deepEqual(changepointMarks([run], 'tok_s', inPlot, 'step'), []);
  });
});

/**
 * A run that logs its wall time: 326 tok/s for its first 50 s (2 steps a second, 10 steps a point) while it settles,
 * 258 after, and (when `dropAt` is given) a real fall to 150 from that point on.
 */
function settlingRun(withTimes: boolean, dropAt?: number) {
  const x: number[] = [];
  const last: number[] = [];
  const t: number[] = [];
  for (let i = 0; i < 1000; i++) {
    x.push((i + 1) * 10);
    const level = dropAt !== undefined && i >= dropAt ? 150 : i < 100 ? 326 : 258;
    last.push(level + Math.sin(i * 12.9898) * 3);
    t.push(1_700_000_000 + i * 0.5);
  }
  return { key: 'tok_s', x, last, ...(withTimes ? { t } : {}) };
}

void describe('dashboard: the marks are What Changed?’s changepoints', () => {
  it('a launch settling in its first minute is warm-up where the log has wall times, as in the report', () => {
    const marksOf = (s: ReturnType<typeof settlingRun>) =>
      changepointMarks([runOf(reductionOf([s]))], 'tok_s', inPlot, 'step');
    // without times nothing says the first 50 s are the launch settling: a shift
    assert.equal(marksOf(settlingRun(false)).length, 1);
    assert.deepEqual(marksOf(settlingRun(true)), []);
    const drop = marksOf(settlingRun(true, 700));
    assert.equal(drop.length, 1, JSON.stringify(drop));
    assert.equal(drop[0]!.x, 7000);
    assert.match(drop[0]!.label, /^shift 258 → 150 \(0\.58×\)$/);
  });

  it("a Lightning log without wall times settles on its launch clock (ThroughputMonitor's train/time), as in the report", () => {
    const s = settlingRun(false);
    const clock = { key: 'train/time', x: s.x, last: s.x.map((_, i) => 2.7 + i * 0.5) };
    const marksOf = (series: { key: string; x: number[]; last: number[] }[]) =>
      changepointMarks([runOf(reductionOf(series))], 'tok_s', inPlot, 'step');
    assert.equal(marksOf([s]).length, 1);
    assert.deepEqual(marksOf([s, clock]), []);
  });

  it('a restart the log shows (its clock stops for minutes) is marked on every plot, and the drop at it', () => {
    const s = story(true);
    // the run stopped after step 600 and came back two hours later, slower
    const t = s.t!.map((v, i) => (i >= 600 ? v + 7200 : v));
    const run = runOf(
      reductionOf([
        { ...s, t },
        { key: 'loss', x: s.x, last: s.x.map((x) => 5 - x / 1000), t },
      ]),
    );
    assert.deepEqual(
      run.run.restarts?.map((r) => [r.step, r.label]),
      [[601, 'restart (time-gap)']],
    );
    const marks = [...changepointMarks([run], 'tok_s', inPlot, 'step'), ...restartMarks([run], inPlot, 'step')].sort(
      (a, b) => a.x - b.x,
    );
    assert.deepEqual(
      marksInWords(marks, 'step', () => 'run-a'),
      ['shift 12.8K → 4.3K (0.34×) at step 600', 'restart (time-gap) at step 601'],
    );
    assert.deepEqual(
      marksInWords(restartMarks([run], inPlot, 'step'), 'step', () => 'run-a'),
      ['restart (time-gap) at step 601'],
    );
  });
});

void describe('dashboard: the zoom message (What Changed?’s plot evidence)', () => {
  it('is a host message with a finite step window; anything else is refused', async () => {
    const { parseHostMessage } = await import('../../src/core/dashboard/protocol');
    const ok = parseHostMessage({ type: 'zoom', from: 500, to: 701 });
    assert.ok(ok.ok && ok.message.type === 'zoom' && ok.message.from === 500 && ok.message.to === 701);
    assert.equal(parseHostMessage({ type: 'zoom', from: '500', to: 701 }).ok, false);
    assert.equal(parseHostMessage({ type: 'zoom', from: 500 }).ok, false);
    // What Changed? names the series that shifted: its plot is the one brought into view
    const named = parseHostMessage({ type: 'zoom', from: 500, to: 701, series: 'train/samples_per_sec' });
    assert.ok(named.ok && named.message.type === 'zoom' && named.message.series === 'train/samples_per_sec');
    assert.equal(parseHostMessage({ type: 'zoom', from: 500, to: 701, series: '' }).ok, false);
  });
});

void describe('dashboard: following, the shifts of the plots shown are kept current', () => {
  /** A jsonl line a step: tok/s steady, loss up from 2 to 3 at step 700, grad_norm up from 1 to 5 at step 800. */
  const line = (step: number) =>
    JSON.stringify({
      step,
      time: 1_700_000_000 + step * 10,
      tok_s: 12_800 + Math.sin(step * 12.9898) * 150,
      loss: (step <= 700 ? 2 : 3) + Math.sin(step * 78.233) * 0.05,
      grad_norm: (step <= 800 ? 1 : 5) + Math.sin(step * 37.719) * 0.05,
    }) + '\n';
  const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => line(from + i)).join('');

  it('follow finds again the shifts of the series shown (and the speed); a series shown later gets its own then', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-dash-follow-'));
    try {
      const log = join(dir, 'train_log.jsonl');
      writeFileSync(log, lines(1, 500));
      // the real probe, one-shot, as the helper runs it
      const reduce: Reduce = (s, o) =>
        Promise.resolve(
          metricsReductionSchema.parse(
            JSON.parse(
              execFileSync(
                'python3',
                [join(REPO, 'python', 'metrics_reduce.py'), ...metricsReduceArgs({ ...o, path: s.logPath })],
                {
                  encoding: 'utf8',
                },
              ),
            ),
          ),
        );
      let shown: Set<string> | undefined = new Set(['loss']);
      const runs = new ProgressiveRuns([{ hostId: 'local', logPath: log, label: 'run-a' }], {
        reduce,
        hostLabel: () => 'local',
        maxBuckets: 2000,
        shown: () => shown,
      });
      await runs.loadPreviews();
      await runs.completeExact({ exact: () => undefined, failed: (_r, m) => assert.fail(m) });
      const run = runs.runs[0]!;
      assert.deepEqual(run.data.run.shifts ?? [], [], 'no shift in the first 500 steps');

      appendFileSync(log, lines(501, 1000));
      await runs.follow({ grew: () => undefined, failed: (_r, m) => assert.fail(m) });
      /** What the report's function says of the parts as they are now: every series searched. */
      const full = () => runDataFromParts(run.data.run, run.parts).run.shifts ?? [];
      const at = (key: string, shifts: readonly { key: string; at: number }[]) =>
        shifts.filter((s) => s.key === key).map((s) => s.at);
      assert.deepEqual(at('loss', full()).length, 1, JSON.stringify(full()));
      assert.deepEqual(at('grad_norm', full()).length, 1, JSON.stringify(full()));
      // the one shown and the speed: as the report says; grad_norm, not shown, keeps what it had
      assert.deepEqual(at('loss', run.data.run.shifts ?? []), at('loss', full()));
      assert.deepEqual(at('tok_s', run.data.run.shifts ?? []), at('tok_s', full()));
      assert.deepEqual(at('grad_norm', run.data.run.shifts ?? []), []);
      assert.deepEqual(runs.refreshShifts(), [], 'nothing shown is stale');

      // grad_norm shown now: its shift found, and the run's shifts are the report's again
      shown = new Set(['loss', 'grad_norm']);
      assert.deepEqual(runs.refreshShifts(), [run]);
      assert.deepEqual(
        [...(run.data.run.shifts ?? [])].sort((a, b) => a.key.localeCompare(b.key) || a.at - b.at),
        [...full()].sort((a, b) => a.key.localeCompare(b.key) || a.at - b.at),
      );
      assert.deepEqual(runs.refreshShifts(), [], 'found once');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
