import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { atRestart, isRealShift, realChangepoints, type RealSeriesChangepoints } from '../support/realChangepoints';
import { realRunNames, type RealRunSet } from '../support/realRuns';

/*
 * Issue 22's changepoints on the real runs written on the GPU box (test/fixtures/real/runs/ and regressions/): on a
 * run where nothing slowed it, no changepoint at all on any throughput series (its saves, evals, warm-ups, settling
 * and wander are not shifts); on a run changed at its restart, a shift of 10% or more by the run's own measure
 * (truth.json) is found at the restart, within one logging window. Read as What Changed? reads them; the real probes,
 * run locally. `node --import tsx scripts/changepoint-real.ts` prints the same table.
 */

const describeCp = (c: { at: number; firstAfter: number; ratio: number | null }) =>
  `${c.at}→${c.firstAfter} ${c.ratio?.toFixed(2)}`;

for (const set of ['runs', 'regressions'] as RealRunSet[]) {
  void describe(`changepoints on the real ${set} (issue 22)`, () => {
    let runner: ProbeRunner;
    let all: RealSeriesChangepoints[];
    before(async () => {
      runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120_000 });
      all = await realChangepoints(runner, set);
    });
    after(() => runner?.dispose());

    for (const name of realRunNames(set)) {
      void it(`${name}: zero changepoints when nothing slowed it, else the shift at the restart within one logging window`, (t) => {
        const series = all.filter((s) => s.run === name);
        assert.ok(series.length, 'a throughput series read');
        for (const s of series) {
          t.diagnostic(`${s.key} (own ${s.ownRatio?.toFixed(2)}): ${s.changepoints.map(describeCp).join(', ') || '—'}`);
          if (s.steady) assert.deepEqual(s.changepoints.map(describeCp), [], `${name} ${s.key}`);
          else if (isRealShift(s)) {
            const hit = atRestart(s);
            assert.ok(hit, `${name} ${s.key}: no changepoint at the restart (${s.restart}, window ${s.window})`);
            // the same way as the run measured it (a drop where it slowed down)
            assert.equal(hit.ratio! < 1, s.ownRatio! < 1, `${describeCp(hit)} vs own ${s.ownRatio}`);
          }
        }
      });
    }
  });
}
