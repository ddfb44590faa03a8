import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProgressiveRuns } from '../../src/core/dashboard/progressive';
import type { RunData } from '../../src/core/dashboard/protocol';
import { sourceOfRun } from '../../src/core/dashboard/sources';
import { metricsReduceProbe } from '../../src/core/metrics/metricsProbe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { listRunsProbe } from '../../src/core/runs/listRuns';
import { LocalTransport } from '../../src/core/transport/local';
import { whatChanged } from '../../src/core/whatChanged/gather';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';
import { buildPlotModel, changepointMarks, detectSeries, restartMarks } from '../../webview/src/data';
import { materializeRealRuns, realRunNames, type RealRunSet } from '../support/realRuns';

/*
 * Issue 32 item 6: the dashboard's marks are What Changed?'s. Every real run written on the GPU box
 * (test/fixtures/real/runs/ and regressions/) is read twice with the real probes, run locally: by What Changed? (the
 * report, as `known-good why` makes it) and by the dashboard (ProgressiveRuns, preview then exact, as the panel reads
 * it). On every plot the dashboard draws, the shift marks are the report's changepoints of that series and the restart
 * marks are the report's restarts, on the step axis and the time axis alike.
 */

interface Read {
  report: WhatChangedReport;
  data: RunData;
}

const shiftWords = (c: { at: number; before: number; after: number; ratio: number | null }) =>
  `${c.at}: ${c.before.toPrecision(6)} → ${c.after.toPrecision(6)} (${c.ratio?.toFixed(3)})`;

for (const set of ['runs', 'regressions'] as RealRunSet[]) {
  void describe(`the dashboard marks what the report says, on the real ${set}`, () => {
    let runner: ProbeRunner;
    let dir: string;
    const read = new Map<string, Read>();
    before(async () => {
      runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120_000 });
      dir = materializeRealRuns(set);
      for (const name of realRunNames(set)) {
        const run = join(dir, name);
        const report = await whatChanged({ id: 'local', label: 'local', probes: runner }, run, {
          timeoutMs: 120_000,
        });
        const root = (await runner.run(listRunsProbe([run], { depth: 3 }))).value.roots[0]!;
        const src = sourceOfRun('local', root, root.entry!);
        assert.ok(src, `${name}: the dashboard finds its log`);
        const runs = new ProgressiveRuns([src], {
          reduce: async (s, o) => (await runner.run(metricsReduceProbe({ path: s.logPath, ...o }))).value,
          hostLabel: () => 'local',
          // a preview first, as the panel reads a large log: its marks must not be what stays
          previewBytes: 4096,
          maxBuckets: 2000,
        });
        await runs.loadPreviews();
        await runs.completeExact({
          exact: () => undefined,
          failed: (_r, m) => assert.fail(`${name}: exact read failed: ${m}`),
        });
        read.set(name, { report, data: runs.runs[0]!.data });
      }
    });
    after(() => {
      runner?.dispose();
      if (dir) rmSync(dirname(dir), { recursive: true, force: true });
    });

    for (const name of realRunNames(set)) {
      void it(`${name}: every plot's shift marks are the report's changepoints, its restart marks the report's restarts`, (t) => {
        const { report, data } = read.get(name)!;
        const inPlot = new Set([data.run.id]);
        const reportRestarts = (report.restarts ?? []).map((r) => r.step);
        t.diagnostic(`restarts ${reportRestarts.join(', ') || '—'}`);
        const keys = detectSeries([data]);
        assert.ok(keys.length, 'the dashboard plots something');
        for (const key of keys) {
          // the plot exists for the key, and every mark on it is the report's
          assert.ok(buildPlotModel([data], key, 'step', 0).runs.length, key);
          const theirs = report.changepoints.series.find((s) => s.key === key)?.changepoints ?? [];
          const ours = changepointMarks([data], key, inPlot, 'step');
          t.diagnostic(`${key}: ${theirs.map(shiftWords).join('; ') || '—'}`);
          assert.deepEqual(
            ours.map((m) => m.x),
            theirs.map((c) => c.at),
            `${key}: the dashboard's shift marks`,
          );
          assert.deepEqual(
            (data.run.shifts ?? []).filter((s) => s.key === key).map(shiftWords),
            theirs.map(shiftWords),
            `${key}: the shifts sent with the run`,
          );
          assert.deepEqual(
            restartMarks([data], inPlot, 'step').map((m) => m.x),
            reportRestarts,
            `${key}: the restart marks`,
          );
          if (data.series.every((s) => s.t)) {
            assert.deepEqual(
              restartMarks([data], inPlot, 'time').map((m) => m.x),
              (report.restarts ?? []).map((r) => r.time),
              `${key}: the restart marks on the time axis`,
            );
            assert.equal(changepointMarks([data], key, inPlot, 'time').length, theirs.length, `${key} on time`);
          }
        }
      });
    }

    if (set === 'regressions')
      void it('plain-dataset-padded (data replaced at the restart: 0.38×): the drop is marked at the restart, and nothing later', () => {
        const { data } = read.get('plain-dataset-padded')!;
        const inPlot = new Set([data.run.id]);
        const marks = changepointMarks([data], 'tok_s', inPlot, 'step');
        assert.equal(marks.length, 1, JSON.stringify(marks));
        // the run measured 0.384× itself (truth.json)
        assert.match(marks[0]!.label, /^shift 2\d\d\.\dK → 9\d\.\dK \(0\.38×\)$/);
        const shift = data.run.shifts!.find((s) => s.key === 'tok_s')!;
        const [restart] = restartMarks([data], inPlot, 'step');
        assert.ok(restart, 'the restart is marked');
        assert.equal(shift.launch, restart.x, 'the drop came with the restart');
        assert.ok(shift.at < restart.x && shift.firstAfter >= restart.x);
      });
  });
}
