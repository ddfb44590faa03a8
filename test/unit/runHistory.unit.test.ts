import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { historyReduction, metricsLogsOf, stitchReductions } from '../../src/core/metrics/history';
import { metricsReductionSchema } from '../../src/core/metrics/metricsProbe';
import { STEPS_PER_SEC_KEY, derivedSpeed } from '../../src/core/metrics/speedFromTime';
import { runsListingSchema } from '../../src/core/runs/listRuns';
import { previousCheckpoint } from '../../src/core/args/target';
import { runCheckpoints } from '../../src/core/dashboard/sources';
import { buildRootNodes, childrenOf, newestCheckpoint, type EntryNode, type RunsNode } from '../../src/core/runs/model';
import { analyze } from '../../src/core/whatChanged/analyze';
import { medianOf } from '../../src/core/whatChanged/seriesStats';
import type { ArgsFact, WhatChangedFacts } from '../../src/core/whatChanged/facts';
import { whatChangedHtml } from '../../src/core/whatChanged/html';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { realLoop, type LoopLog } from '../support/realLoop';
import { listRun, reduce, writeHfRun, writeLightningRun } from '../support/runHistory';
import { NO_OTHER_FACTS } from '../support/facts';

/*
 * One run, one history (issue 22): a restarted run's files stitched by step, the later launch winning where steps
 * overlap, its restart recorded, its speed read across both halves; on runs laid out as HF Trainer and Lightning lay
 * them out, read with the real list_runs.py and metrics_reduce.py.
 */

function history(dir: string) {
  const run = listRun(dir);
  const files = metricsLogsOf(run).map((e) => posix.join(dir, e.path));
  const parts = files.map((path) => ({ path, reduction: reduce(path) }));
  return { files, parts, h: stitchReductions(parts) };
}

function factsOf(
  dir: string,
  parts: ReturnType<typeof history>['parts'],
  h: ReturnType<typeof history>['h'],
  change: (step: number) => NonNullable<ArgsFact['args']>,
  steps: number[],
  time: (s: number) => number,
): WhatChangedFacts {
  const checkpoints = steps.map((step) => ({
    label: `checkpoint-${step}`,
    path: `${dir}/checkpoint-${step}`,
    argsPath: `${dir}/checkpoint-${step}/a`,
    step,
    mtime: time(step),
  }));
  return {
    host: { id: 'h', label: 'gpu' },
    run: dir,
    remoteNow: time(steps.at(-1)!) + 60,
    checkpoints,
    args: checkpoints.map((c) => ({ label: c.label, step: c.step, args: change(c.step) })),
    log: {
      path: parts.at(-1)!.path,
      reduction: historyReduction(parts, h),
      sources: parts.map((p) => p.path),
      restarts: h.restarts,
    },
    ...NO_OTHER_FACTS,
  };
}

function loops(speedAfter: number, seed: number): { a: LoopLog; b: LoopLog } {
  return {
    a: realLoop({ steps: 640, speed: () => 32, seed }),
    b: realLoop({ steps: 1200, speed: (s) => (s > 600 ? speedAfter : 32), launches: [600], seed }),
  };
}

void test('HF Trainer run restarted at checkpoint-600, 4.2× slower: one history of both event files, the restart a fact, a regression', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-hf-'));
  try {
    const { a, b } = loops(32 / 4.2, 3);
    writeHfRun(dir, a, b, 600, 640);
    const { files, parts, h } = history(dir);
    assert.equal(files.length, 2, files.join(' '));
    assert.match(files[0]!, /Dec01_10-00-00_vm/);
    const loss = h.series.find((s) => s.key === 'train/loss')!;
    // every logged step once: 10…600 from the first launch, 610…1200 from the second (its 610…640 win)
    assert.deepEqual(
      loss.x,
      Array.from({ length: 120 }, (_, i) => (i + 1) * 10),
    );
    assert.equal(loss.t![loss.x.indexOf(610)], b.time[b.step.indexOf(610)]);
    assert.equal(h.restarts.length, 1);
    const r = h.restarts[0]!;
    assert.equal(r.step, 610);
    assert.equal(r.prevStep, 600);
    assert.deepEqual(r.signals, ['new-source', 'step-back', 'time-gap']);
    assert.ok(r.gapSeconds! > 600, `gap ${r.gapSeconds}`);
    // speed from time, both halves, within 5% of what the loop measured
    const [d] = derivedSpeed(h.series, [610]);
    assert.equal(d!.key, STEPS_PER_SEC_KEY);
    const half = (xs: number[], ys: number[], lo: number, hi: number) =>
      medianOf(ys.filter((_, i) => xs[i]! > lo && xs[i]! <= hi));
    for (const [lo, hi] of [
      [0, 600],
      [620, 1200],
    ] as const) {
      const derived = half(d!.x, d!.last, lo, hi);
      const measured = half(b.step, b.stepsPerSec, lo, hi);
      assert.ok(Math.abs(derived / measured - 1) < 0.05, `${lo}–${hi}: ${derived} vs ${measured}`);
    }
    const report = analyze(
      factsOf(
        dir,
        parts,
        h,
        (s) => ({ gradient_checkpointing: s > 600 }),
        [200, 400, 600, 800, 1000, 1200],
        (s) => b.time[b.step.indexOf(s)]!,
      ),
    );
    assert.equal(report.verdict, 'regression', report.headline);
    assert.match(
      report.headline,
      /steps\/s \(from wall time\) now vs 3\d\.\d+ at checkpoint-600 \(0\.2\d×\); changed at step 600: gradient_checkpointing/,
    );
    assert.equal(report.restarts?.[0]?.step, 610);
    assert.deepEqual(report.restarts?.[0]?.changed, ['gradient_checkpointing false → true']);
    const page = whatChangedHtml(report, { nonce: 'abcdefghijklmnop1234', cspSource: 'vscode-resource:' });
    assert.match(page, /<h2>Restarts<\/h2><ul class="kg-facts"><li>step 610 at /);
    assert.match(page, /log: 2 files, stitched by step/);
    assert.match(
      renderWhatChangedMarkdown(report),
      /### Restarts\n\n- step 610 at .* \(new-source, step-back, time-gap, \d+ s after the last point before, `Dec01_10-40-00_vm\/events/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('Lightning run resumed into version_1 with no change: both versions stitched, steady, zero changepoints', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-pl-'));
  try {
    const { a, b } = loops(32, 5);
    writeLightningRun(dir, a, b, 600, 630);
    const { files, parts, h } = history(dir);
    assert.deepEqual(
      files.map((f) => f.split('/').slice(-2).join('/')),
      ['version_0/metrics.csv', 'version_1/metrics.csv'],
    );
    const sps = h.series.find((s) => s.key === 'samples_per_sec')!;
    assert.deepEqual(
      sps.x,
      Array.from({ length: 120 }, (_, i) => (i + 1) * 10),
    );
    assert.equal(h.restarts[0]?.step, 610);
    assert.ok(h.restarts[0].signals.includes('new-source') && h.restarts[0].signals.includes('step-back'));
    const report = analyze(
      factsOf(
        dir,
        parts,
        h,
        () => ({ lr: 1e-3 }),
        [200, 400, 600, 800, 1000, 1200],
        (s) => b.time[b.step.indexOf(s)]!,
      ),
    );
    assert.equal(report.verdict, 'steady', report.headline);
    for (const s of report.changepoints.series) if (s.throughput) assert.deepEqual(s.changepoints, [], s.key);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('Lightning run 2.6× slower after its resume: the shift found at the restart, with its levels', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-pl-'));
  try {
    const { a, b } = loops(32 / 2.6, 8);
    writeLightningRun(dir, a, b, 600, 620);
    const { parts, h } = history(dir);
    const report = analyze(
      factsOf(
        dir,
        parts,
        h,
        (s) => ({ precision: s > 600 ? '32' : 'bf16-mixed' }),
        [200, 400, 600, 800, 1000, 1200],
        (s) => b.time[b.step.indexOf(s)]!,
      ),
    );
    assert.equal(report.verdict, 'regression', report.headline);
    const tp = report.changepoints.series.find((s) => s.key === 'samples_per_sec')!;
    assert.equal(tp.changepoints.length, 1, JSON.stringify(tp.changepoints));
    assert.equal(tp.changepoints[0]!.launch, 610);
    assert.equal(tp.changepoints[0]!.at, 600);
    assert.match(
      report.headline,
      /^9\d\.?\d* samples_per_sec now vs 2\d\d at checkpoint-600 \(0\.3\d×\); changed at step 600: precision/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('rotated jsonl logs are one history, the highest suffix oldest; a launch that starts mid-bucket is cut exactly', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-rot-'));
  try {
    const l = realLoop({ steps: 3000, speed: () => 20, launches: [1000, 2000], seed: 4, logEvery: 1 });
    const files: [string, number, number][] = [
      ['train_log.2.jsonl', 1, 1000],
      ['train_log.1.jsonl', 1001, 2000],
      ['train_log.jsonl', 1001 + 999, 3000], // the last launch resumed from step 1999: step 2000 logged twice
    ];
    for (const [name, lo, hi] of files)
      writeFileSync(
        join(dir, name),
        l.step
          .map((s, i) =>
            s >= lo && s <= hi
              ? JSON.stringify({
                  step: s,
                  time: l.time[i],
                  loss: 2,
                  tok_s: l.stepsPerSec[i]! * 1000 + (name === 'train_log.jsonl' ? 1 : 0),
                }) + '\n'
              : '',
          )
          .join(''),
      );
    const run = listRun(dir);
    const logs = metricsLogsOf(run).map((e) => e.name);
    assert.deepEqual(logs, ['train_log.2.jsonl', 'train_log.1.jsonl', 'train_log.jsonl']);
    const parts = logs.map((name) => {
      const path = join(dir, name);
      const out = execFileSync('python3', ['python/metrics_reduce.py', path, '--x', 'step', '--buckets', '100'], {
        encoding: 'utf8',
      });
      return { path, reduction: metricsReductionSchema.parse(JSON.parse(out)) };
    });
    const h = stitchReductions(parts);
    assert.deepEqual(
      h.restarts.map((r) => r.step),
      [1001, 2000],
    );
    assert.ok(h.restarts[1]!.signals.includes('new-source') && h.restarts[1]!.signals.includes('step-back'));
    // buckets of the second file that reach step 2000 are cut: the newest file's step 2000 stands
    const tok = h.series.find((s) => s.key === 'tok_s')!;
    assert.ok(
      tok.x.every((x, i) => i === 0 || x > tok.x[i - 1]!),
      'ascending, no step twice',
    );
    assert.equal(h.sources[1]!.steps![1] < 2000, true, `second file kept up to ${h.sources[1]!.steps![1]}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('Remote Runs shows a Lightning run as one run, its versions (launches) folders inside it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-tree-'));
  try {
    const { a, b } = loops(32, 6);
    writeLightningRun(join(dir, 'pl-run'), a, b, 600, 620);
    const out = execFileSync('python3', ['python/list_runs.py', dir], { encoding: 'utf8' });
    const listing = runsListingSchema.parse(JSON.parse(out));
    const [root] = buildRootNodes('h', listing);
    const [run] = childrenOf(root!);
    assert.equal(run?.kind, 'run');
    assert.equal(run?.label, 'pl-run');
    assert.match(
      String(run && 'description' in run ? run.description : ''),
      /^2 versions · 6 checkpoints · last step 1200/,
    );
    const [logs] = childrenOf(run);
    assert.equal(logs?.kind, 'folder');
    const versions = childrenOf(logs);
    assert.deepEqual(versions.map((v) => [v.kind, v.label]).sort(), [
      ['folder', 'version_0'],
      ['folder', 'version_1'],
    ]);
    assert.ok(versions.every((v) => 'contextValue' in v && v.contextValue.includes('lightning-version')));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('A Lightning run lists the checkpoints of all its versions in one order, a shared name with its version; Compare with Previous Step crosses versions', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-tree-'));
  try {
    // Resumed from step 600 into version_1, which saved step 500 again (a resume from 400 after a crash, say) and its
    // own last.ckpt; version_0 has a last.ckpt too. Times in the order written.
    const files: [string, string, number][] = [
      ['version_0', 'epoch=0-step=500.ckpt', 1],
      ['version_0', 'epoch=0-step=600.ckpt', 2],
      ['version_0', 'last.ckpt', 3],
      ['version_1', 'epoch=0-step=500.ckpt', 4],
      ['version_1', 'epoch=1-step=1200.ckpt', 5],
      ['version_1', 'epoch=0-step=800.ckpt', 6],
      ['version_1', 'last.ckpt', 7],
    ];
    for (const [v, name, t] of files) {
      const d = join(dir, 'pl-run', 'lightning_logs', v, 'checkpoints');
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, name), '');
      writeFileSync(join(dir, 'pl-run', 'lightning_logs', v, 'metrics.csv'), 'step,loss\n1,2\n');
      utimesSync(join(d, name), 1_700_000_000 + t, 1_700_000_000 + t);
    }
    const out = execFileSync('python3', ['python/list_runs.py', dir], { encoding: 'utf8' });
    const listing = runsListingSchema.parse(JSON.parse(out));
    const [root] = buildRootNodes('h', listing);
    const [run] = childrenOf(root!);
    const want = [
      ['version_0/epoch=0-step=500.ckpt', 'version_0 · epoch 0 · step 500'],
      ['version_1/epoch=0-step=500.ckpt', 'version_1 · epoch 0 · step 500'],
      ['epoch=0-step=600.ckpt', 'version_0 · epoch 0 · step 600'],
      ['epoch=0-step=800.ckpt', 'version_1 · epoch 0 · step 800'],
      ['epoch=1-step=1200.ckpt', 'version_1 · epoch 1 · step 1200'],
      ['version_0/last.ckpt', 'last save of version_0'],
      ['version_1/last.ckpt', 'last save of version_1'],
    ];
    const ckpts = (node: RunsNode, newestFirst: boolean) =>
      childrenOf(node, { newestFirst }).filter((n): n is EntryNode => n.kind === 'checkpoint');
    const shown = ckpts(run!, false).map((n) => [n.label, /^(.*?) · \d+ B/.exec(n.description ?? '')?.[1]]);
    assert.deepEqual(shown, want);
    assert.deepEqual(
      ckpts(run!, true).map((n) => n.label),
      want.map(([l]) => l).reverse(),
    );
    // the versions keep their logs; their checkpoints are listed once, by the run
    const [logs] = childrenOf(run!).filter((n) => n.label === 'lightning_logs');
    for (const v of childrenOf(logs!))
      assert.deepEqual(
        childrenOf(v).map((n) => n.label),
        ['metrics.csv'],
      );

    // Compare with Previous Step: the preceding checkpoint in that one order, whichever version wrote it
    const rootListing = listing.roots[0]!;
    const previous = (label: string) => {
      const node = ckpts(run!, false).find((n) => n.label === label)!;
      const ref = previousCheckpoint({
        kind: 'checkpoint',
        hostId: 'h',
        path: node.remotePath,
        root: rootListing,
        entry: node.entry,
        inCheckpoint: false,
        step: node.entry.step,
        format: node.entry.format,
        metricsLog: undefined,
      });
      return ref && [ref.label, ref.path.slice(dir.length + 1)];
    };
    assert.deepEqual(previous('epoch=0-step=600.ckpt'), [
      'epoch=0-step=500',
      'pl-run/lightning_logs/version_1/checkpoints/epoch=0-step=500.ckpt',
    ]);
    assert.deepEqual(previous('epoch=0-step=800.ckpt'), [
      'epoch=0-step=600',
      'pl-run/lightning_logs/version_0/checkpoints/epoch=0-step=600.ckpt',
    ]);
    assert.equal(previous('version_0/epoch=0-step=500.ckpt'), undefined);

    // the dashboard lists them the same way
    const runEntry = (run as EntryNode).entry;
    const dash = runCheckpoints({ hostId: 'h', logPath: '', label: 'pl-run', root: rootListing, run: runEntry }, 'r');
    assert.deepEqual(
      dash.map((c) => c.checkpoint.label),
      want.map(([l]) => l),
    );

    // Reveal Newest Checkpoint: its node path ends at the run, which lists it
    const newest = newestCheckpoint(listing, 'h')!;
    assert.equal(newest.entry.path, 'pl-run/lightning_logs/version_1/checkpoints/last.ckpt');
    const listed = ckpts(run!, true).find((n) => n.entry.path === newest.entry.path)!;
    assert.deepEqual(newest.ids.slice(1), [(run as EntryNode).id, listed.id]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
