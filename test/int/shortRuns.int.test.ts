import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { whatChanged } from '../../src/core/whatChanged/gather';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';
import { requireTorch } from '../support/require';
import { writeShortRun } from '../support/shortRun';

/*
 * Issue 32, item 8: short runs are blind. Real CPU runs written now (test/support/shortRun/train.py, Debian's
 * python3-torch), restarted halfway with each step about 4× as costly (`--work 8 → 32`), 20, 60 and 80 log points in a
 * few seconds. Their relaunch took a checkpoint load, so no file and no clock in the log shows the restart: before,
 * the first minute of a run was its "settling", the first half of these runs was left out as warm-up, and each was
 * called "No throughput drop … steady". And a restart the log does show, with 2 points after it so far: said to be too
 * young to judge, not "steady".
 */

const series = (r: WhatChangedReport) =>
  r.changepoints.series
    .map((s) => `${s.key}: ${s.changepoints.map((c) => `${c.at}→${c.firstAfter} ${c.ratio?.toFixed(2)}`).join(', ')}`)
    .join('; ');

/** The run's tok/s as logged (`step:tok/s`), for a failure's message. */
const logged = (run: string) =>
  readFileSync(join(run, 'train_log.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { step: number; tok_s: number })
    .map((p) => `${p.step}:${Math.round(p.tok_s)}`)
    .join(' ');

void describe('What changed? on short real CPU runs (issue 32, item 8)', () => {
  let dir: string;
  let runner: ProbeRunner;
  const host = () => ({ id: 'local', label: 'local', probes: runner });

  before(() => {
    requireTorch();
    dir = mkdtempSync(join(tmpdir(), 'kg-short-'));
    runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120_000 });
  });
  after(() => {
    runner?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const restartAt of [100, 300, 400]) {
    void it(`restarted at step ${restartAt} of ${2 * restartAt} with --work 8 → 32 (${restartAt / 5} log points): the drop at the restart, named`, async (t) => {
      const run = join(dir, `restart-${restartAt}`);
      await writeShortRun(run, { restartAt, steps: 2 * restartAt, workBefore: 8, workAfter: 32, restart: 'unseen' });
      const report = await whatChanged(host(), run);
      const diag = `${report.headline}\n${series(report)}\n${logged(run)}`;
      // how the log showed the restart (a pause no clock tells from a slow window: usually not at all)
      t.diagnostic(`restarts seen: ${JSON.stringify(report.restarts?.map((r) => r.step) ?? [])}; ${diag}`);

      assert.equal(report.verdict, 'regression', diag);
      const tok = report.changepoints.series.find((s) => s.key === 'tok_s');
      const cp = tok?.changepoints.find((c) => c.at <= restartAt && c.firstAfter > restartAt);
      assert.ok(cp, `no changepoint at step ${restartAt}: ${diag}`);
      // found within one logging window of the restart; a window or two just before it that a busy machine slowed
      // may be left out as stalls, so the old level may end a little earlier, never a checkpoint before
      assert.ok(cp.firstAfter <= restartAt + 10 && cp.at > restartAt - 50, diag);
      // a clear shift: beyond any settling (SETTLE_RATIO, 1.5×)
      assert.ok(cp.ratio !== null && cp.ratio < 2 / 3, diag);
      // the reference is the checkpoint at the old level's end, and the headline names the change at the restart
      assert.equal(report.reference.label, `step_${Math.floor(cp.at / 50) * 50}.pt`, diag);
      assert.match(report.headline, new RegExp(`; changed at step ${cp.at}: work 8 → 32 \\(args, `), diag);
    });
  }

  void it('a restart the log shows, 2 points old: too little to judge, not "steady"', async () => {
    const run = join(dir, 'young');
    await writeShortRun(run, { restartAt: 200, steps: 220, workBefore: 8, workAfter: 32, restart: 'new-file' });
    const report = await whatChanged(host(), run);
    const diag = `${report.headline}\n${series(report)}`;
    assert.deepEqual(
      report.restarts?.map((r) => r.step),
      [210],
      diag,
    );
    assert.equal(report.verdict, 'unknown', diag);
    assert.deepEqual(report.throughput.log?.young, { step: 210, points: 2, needed: 7 }, diag);
    assert.equal(
      report.headline,
      'Too little logged after the restart at step 210 to judge (2 points; a level takes 7: 2 of warm-up, then 5)',
    );
    assert.equal(report.suspects.length, 0, diag);
  });
});
