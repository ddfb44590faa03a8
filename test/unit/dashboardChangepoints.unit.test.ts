import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildPlotModel, changepointMarks, type PlotModel } from '../../webview/src/data';
import type { RunData } from '../../src/core/dashboard/protocol';

/** A plotted line: 12.8K tok/s until step 600, 4.3K after, with a little noise (deterministic). */
function story(): PlotModel {
  const x: number[] = [];
  const line: (number | null)[] = [];
  for (let i = 0; i < 1000; i++) {
    x.push(i + 1);
    const noise = Math.sin(i * 12.9898) * 150;
    line.push(i === 300 ? null : (i + 1 <= 600 ? 12_800 : 4_300) + noise);
  }
  return { key: 'tok_s', x, runs: [{ runId: 'r1', label: 'run-a', colorIndex: 0, line, min: line, max: line }] };
}

void describe('dashboard: level shifts marked on the plots', () => {
  it('marks the step where tok/s fell, labelled with before, after and the ratio', () => {
    const marks = changepointMarks(story());
    assert.equal(marks.length, 1, JSON.stringify(marks));
    const [m] = marks;
    assert.ok(Math.abs(m!.x - 600) <= 10, `marked at ${m!.x}`);
    assert.equal(m!.run, 'r1');
    assert.match(m!.label, /^shift 12\.8K → 4\.3K \(0\.34×\)$/);
  });

  it('marks nothing on a steady line or a smooth ramp', () => {
    const steady = story();
    steady.runs[0]!.line = steady.x.map((x) => 1000 + Math.sin(x * 7.1) * 20);
    assert.deepEqual(changepointMarks(steady), []);
    const ramp = story();
    ramp.runs[0]!.line = ramp.x.map((x) => 5 - x / 250);
    assert.deepEqual(changepointMarks(ramp), []);
  });
});

/**
 * A run that logs its wall time: 326 tok/s for its first 50 s (2 steps a second, 10 steps a point) while it settles,
 * 258 after, and (when `dropAt` is given) a real fall to 150 from that point on.
 */
function settlingRun(withTimes: boolean, dropAt?: number): RunData {
  const x: number[] = [];
  const last: number[] = [];
  const t: number[] = [];
  for (let i = 0; i < 1000; i++) {
    x.push((i + 1) * 10);
    const level = dropAt !== undefined && i >= dropAt ? 150 : i < 100 ? 326 : 258;
    last.push(level + Math.sin(i * 12.9898) * 3);
    t.push(1_700_000_000 + i * 0.5);
  }
  return {
    run: {
      id: 'r1',
      label: 'run-a',
      host: 'h',
      path: '/p',
      lines: 1000,
      skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
    },
    series: [{ key: 'tok_s', x, min: last, max: last, last, ...(withTimes ? { t } : {}) }],
  };
}

void describe('dashboard: the marks are What Changed?’s changepoints', () => {
  it('a launch settling in its first minute is warm-up where the log has wall times, as in the report', () => {
    const marksOf = (run: RunData) => changepointMarks(buildPlotModel([run], 'tok_s', 'step', 0.6), [run]);
    // without times nothing says the first 50 s are the launch settling: a shift
    assert.equal(marksOf(settlingRun(false)).length, 1);
    assert.deepEqual(marksOf(settlingRun(true)), []);
    const drop = marksOf(settlingRun(true, 700));
    assert.equal(drop.length, 1, JSON.stringify(drop));
    assert.equal(drop[0]!.x, 7000);
    assert.match(drop[0]!.label, /^shift 258 → 150 \(0\.58×\)$/);
  });

  it("a Lightning log without wall times settles on its launch clock (ThroughputMonitor's train/time), as in the report", () => {
    const run = settlingRun(false);
    const s = run.series[0]!;
    const clock = { key: 'train/time', x: s.x, min: [], max: [], last: s.x.map((_, i) => 2.7 + i * 0.5) };
    const withClock: RunData = { ...run, series: [s, { ...clock, min: clock.last, max: clock.last }] };
    const marksOf = (r: RunData) => changepointMarks(buildPlotModel([r], 'tok_s', 'step', 0.6), [r]);
    assert.equal(marksOf(run).length, 1);
    assert.deepEqual(marksOf(withClock), []);
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
