import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { metricsLogsOf, stitchReductions } from '../../src/core/metrics/history';
import { metricsReduceProbe } from '../../src/core/metrics/metricsProbe';
import { derivedSpeed } from '../../src/core/metrics/speedFromTime';
import { ProbeRunner } from '../../src/core/probes/runner';
import { listRunsProbe } from '../../src/core/runs/listRuns';
import { LocalTransport } from '../../src/core/transport/local';
import { medianOf } from '../../src/core/whatChanged/seriesStats';
import { whatChanged } from '../../src/core/whatChanged/gather';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { materializeRealRuns, realRunNames } from '../support/realRuns';

/*
 * Issue 22 on the real runs written on the GPU box (test/fixtures/real/runs/: a plain loop, Lightning and the HF
 * Trainer, each restarted at step 600 with one real change or none): the stitched history covers every logged step,
 * the speed derived from wall times matches the run's own measure, What Changed? gives the verdict truth.json gives,
 * with zero changepoints on the steady run. The real probes, run locally.
 */

interface Truth {
  regression?: boolean;
  restarts: { step: number }[];
  change: { key: string } | null;
  speed: { metric: string; [k: string]: unknown };
}

describe('whole runs: the real restarted runs (issue 22)', () => {
  let dir: string;
  let runner: ProbeRunner;
  before(() => {
    dir = materializeRealRuns('runs');
    runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 60000 });
  });
  after(() => {
    runner.dispose();
    rmSync(dirname(dir), { recursive: true, force: true });
  });
  const truthOf = (name: string) => JSON.parse(readFileSync(join(dir, name, 'truth.json'), 'utf8')) as Truth;

  for (const name of realRunNames('runs')) {
    it(`${name}: one history over both launches, the restart recorded, the verdict right`, async (t) => {
      const truth = truthOf(name);
      const run = join(dir, name);
      const { value: listing } = await runner.run(listRunsProbe([run]));
      const files = metricsLogsOf(listing.roots[0]!.entry!).map((e) => join(run, e.path));
      const parts = [];
      for (const path of files)
        parts.push({ path, reduction: (await runner.run(metricsReduceProbe({ path, x: 'step' }))).value });
      const h = stitchReductions(parts);
      t.diagnostic(`${files.length} file(s); restarts ${JSON.stringify(h.restarts.map((r) => [r.step, r.signals]))}`);
      // stitched step coverage: every logging window of both launches, once
      const longest = [...h.series].filter((s) => !/val|eval/.test(s.key)).sort((a, b) => b.x.length - a.x.length)[0]!;
      assert.ok(
        longest.x.every((x, i) => i === 0 || x > longest.x[i - 1]!),
        'steps ascending, none twice',
      );
      assert.ok(longest.x[0]! <= 20 && longest.x.at(-1)! >= 990, `${longest.key}: ${longest.x[0]}…${longest.x.at(-1)}`);
      assert.ok(longest.x.length >= 98, `${longest.key}: ${longest.x.length} points`);
      if (files.length > 1)
        assert.ok(
          h.restarts.some((r) => Math.abs(r.step - 600) <= 10),
          'the restart at step 600',
        );
      // speed from wall time where the run logs none (HF): within 5% of the run's own measure, both halves
      const d = derivedSpeed(
        h.series,
        h.restarts.map((r) => r.step),
      )[0];
      const own = truth.speed[truth.speed.metric] as { before?: number; after?: number } | undefined;
      if (d && own?.before !== undefined && own.after !== undefined) {
        const half = (lo: number, hi: number) => medianOf(d.last.filter((_, i) => d.x[i]! > lo && d.x[i]! <= hi));
        const before = half(20, 600);
        const afterV = half(630, Infinity);
        t.diagnostic(`derived ${before.toFixed(1)} → ${afterV.toFixed(1)}; the run: ${own.before} → ${own.after}`);
        assert.ok(Math.abs(before / own.before - 1) < 0.05, `before ${before} vs ${own.before}`);
        assert.ok(Math.abs(afterV / own.after - 1) < 0.05, `after ${afterV} vs ${own.after}`);
      }
      const report = await whatChanged({ id: 'local', label: 'local', probes: runner }, run, {});
      t.diagnostic(report.headline);
      const regression = truth.regression ?? truth.change !== null;
      assert.equal(report.verdict, regression ? 'regression' : 'steady', report.headline);
      // The steady loop ran ~25% faster for its first 200 steps (10 s after its process started, 1.2 s after its
      // first window; 326K tok/s, then 254K through the rest of the launch and 270K after the restart): the run
      // settling, left out as warm-up (SETTLE_SECONDS), so no changepoint at all; none at the restart either.
      if (!regression) {
        for (const s of report.changepoints.series) {
          if (!s.throughput) continue;
          assert.deepEqual(s.changepoints, [], `${s.key}: ${JSON.stringify(s.changepoints)}`);
        }
      } else {
        const tp = report.changepoints.series.find((s) => s.throughput && s.changepoints.length)!;
        t.diagnostic(JSON.stringify(tp.changepoints.map((c) => [c.at, c.firstAfter, c.ratio?.toFixed(2)])));
        // the largest slowdown is the one at the restart
        const cp = [...tp.changepoints].sort((u, v) => (u.ratio ?? 1) - (v.ratio ?? 1))[0]!;
        assert.ok(cp.at <= 600 && cp.firstAfter >= 600 && cp.firstAfter <= 640, `${tp.key}: ${cp.at}–${cp.firstAfter}`);
        assert.match(renderWhatChangedMarkdown(report), /### Restarts/);
      }
    });
  }
});
