import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEnvSnapshot, type EnvSnapshotInput } from '../../src/core/baselines/envProbe';
import { BaselineStore, type Baseline } from '../../src/core/baselines/store';
import type { MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { analyze } from '../../src/core/whatChanged/analyze';
import { dataPathsOf } from '../../src/core/whatChanged/causes/args';
import { describeSamples } from '../../src/core/whatChanged/causes/data';
import { diffArgs, flattenArgs } from '../../src/core/args/diff';
import type { ArgValue } from '../../src/core/args/argsProbe';
import {
  argCategory,
  CATEGORY_WEIGHT,
  CATEGORY_WHY,
  envCategory,
  isBookkeepingArg,
  throughputRank,
} from '../../src/core/whatChanged/categories';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';
import { whatChangedProbe } from '../../src/core/whatChanged/factsProbe';
import { sampleCheckpoints } from '../../src/core/whatChanged/gather';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { WhatChangedStore } from '../../src/core/whatChanged/store';

/*
 * The analysis on facts written by hand: what ranks, what never ranks, which reference is picked, and what the
 * report says when there is nothing to explain.
 */

const T0 = 1_760_000_000;

function snapshot(at: number, over: Partial<EnvSnapshotInput> = {}) {
  return parseEnvSnapshot({
    schema: 1,
    capturedAt: new Date(at * 1000).toISOString(),
    host: {},
    python: {},
    packages: {},
    torch: {},
    cuda: {},
    gpus: {},
    env: {},
    scripts: {},
    ...over,
  });
}

function baseline(id: string, label: string, at: number, snap = snapshot(at)): Baseline {
  return {
    schema: 1,
    id,
    revision: 0,
    label,
    host: 'h',
    hostLabel: 'h',
    container: null,
    capturedAt: snap.capturedAt,
    snapshot: snap,
  };
}

function log(levels: (step: number) => number): MetricsReduction {
  const x: number[] = [];
  const y: number[] = [];
  let s = 1;
  for (let step = 1; step <= 1000; step++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    x.push(step);
    y.push(levels(step) * (1 + 0.04 * (s / 2 ** 32 - 0.5)));
  }
  return {
    series: [{ key: 'tokens_per_sec', x, min: y, max: y, last: y, count: 1000, lastX: 1000, lastValue: y[999]! }],
  } as unknown as MetricsReduction;
}

function facts(over: Partial<WhatChangedFacts> = {}): WhatChangedFacts {
  const checkpoints = [];
  const args = [];
  for (let step = 100; step <= 1000; step += 100) {
    checkpoints.push({
      label: `step_${step}`,
      path: `/r/step_${step}`,
      argsPath: `/r/step_${step}/ckpt.pt`,
      step,
      mtime: T0 + step * 10,
    });
    args.push({
      label: `step_${step}`,
      step,
      args: {
        batch_size: step <= 400 ? 32 : 16,
        run_name: `run-${step}`,
        out_dir: '/r',
        model: { attn_impl: 'flash', n_layer: 12 },
        lr: 3e-4,
      },
    });
  }
  return {
    host: { id: 'h', label: 'gpu' },
    run: '/r',
    remoteNow: T0 + 20000,
    checkpoints,
    args,
    log: { path: '/r/train_log.jsonl', reduction: log((s) => (s <= 400 ? 10000 : 5000)) },
    env: { now: null, baselines: [] },
    bench: [],
    marks: {},
    probe: null,
    dataHistory: [],
    unknown: [],
    gathered: { roundTrips: 3, requests: 14, elapsedMs: 500 },
    ...over,
  };
}

void test('a shape change at the shift ranks first; a run name that changes every checkpoint never ranks', () => {
  const r = analyze(facts());
  assert.equal(r.verdict, 'regression');
  assert.equal(r.reference.label, 'step_400');
  assert.equal(r.suspects.length, 1, JSON.stringify(r.suspects));
  assert.equal(r.suspects[0]!.title, 'batch_size 32 → 16');
  assert.equal(r.suspects[0]!.category, 'shape');
  assert.equal(r.suspects[0]!.score, 75);
  assert.deepEqual(
    r.suspects[0]!.reasons.map((x) => x.points),
    [25, 50],
  );
  assert.deepEqual(r.unranked, [
    {
      source: 'args',
      title: 'run_name run-400 → run-1000',
      why: 'resume bookkeeping: where a launch starts, ends, resumes from and writes',
    },
  ]);
  assert.equal(
    r.headline,
    '5.0K tok/s now vs 10.0K at step_400 (0.50×); changed at step 400: batch_size 32 → 16 (args, step_400 → step_500)',
  );
  const md = renderWhatChangedMarkdown(r);
  assert.match(md, /score: \+25 the batch\/sequence shape .*; \+50 changed between steps 400 and 500/);
  assert.match(
    md,
    /### Not ranked \(cosmetic\)\n\n- run_name run-400 → run-1000 \(args; resume bookkeeping: where a launch starts, ends, resumes from and writes\)/,
  );
});

void test('with no changepoint and no drop nothing is ranked, and the headline says so', () => {
  const r = analyze(facts({ log: { path: '/r/train_log.jsonl', reduction: log(() => 10000) } }));
  assert.equal(r.verdict, 'steady');
  assert.deepEqual(r.suspects, []);
  assert.equal(r.reference.kind, 'earliest');
  assert.match(
    r.headline,
    /^No throughput drop and no changepoint in train_log\.jsonl: nothing to explain; 2 differences since step_100 listed, not ranked$/,
  );
  assert.match(renderWhatChangedMarkdown(r), /### Differences \(not ranked: nothing to explain\)/);
  assert.doesNotMatch(renderWhatChangedMarkdown(r), /Suspects/);
});

void test('a marked baseline is the reference, ahead of the changepoint; the env diff is against it', () => {
  const good = baseline(
    'b-good',
    'good-run',
    T0 + 150,
    snapshot(T0 + 150, { env: { vars: { NCCL_P2P_DISABLE: '0' } } }),
  );
  const later = baseline('b-later', 'later', T0 + 9000);
  const now = snapshot(T0 + 20000, {
    env: { vars: { NCCL_P2P_DISABLE: '1', WANDB_MODE: 'offline' } },
    torch: { found: true, version: '2.11.0+cu130' },
  });
  const r = analyze(facts({ env: { now, baselines: [later, good] }, marks: { baselineId: 'b-good' } }));
  assert.equal(r.reference.kind, 'marked-baseline');
  assert.equal(r.reference.label, 'baseline "good-run"');
  assert.equal(r.reference.checkpoint?.label, 'step_100');
  assert.equal(r.reference.baseline?.id, 'b-good');
  const titles = r.suspects.map((s) => s.title);
  assert.ok(titles.includes('NCCL_P2P_DISABLE 0 → 1'), titles.join(' | '));
  // a variable that does not move speed is seen, never ranked
  assert.ok(!titles.some((t) => t.startsWith('WANDB_MODE')));
  assert.ok(r.unranked.some((u) => u.title === 'WANDB_MODE=offline added'));
  // an env variable suspect offers Confirm by bisect against the reference baseline (issue 26)
  const nccl = r.suspects.find((s) => s.title === 'NCCL_P2P_DISABLE 0 → 1')!;
  assert.deepEqual(
    nccl.evidence.find((e) => e.kind === 'bisect'),
    {
      kind: 'bisect',
      title: 'Confirm by bisect',
      hostId: nccl.evidence[0]!.hostId,
      baselineId: 'b-good',
      change: 'env:NCCL_P2P_DISABLE',
    },
  );
  // without the mark: the newest baseline captured by the reference time
  const unmarked = analyze(facts({ env: { now, baselines: [later, good] } }));
  assert.equal(unmarked.reference.kind, 'changepoint');
  assert.equal(unmarked.reference.baseline?.id, 'b-good');
  assert.equal(unmarked.reference.baseline?.why, 'the newest captured by the reference time');
});

void test('a benchmark drop with no log is still a regression; its numbers lead the headline', () => {
  const bench = [
    {
      id: 'r1',
      at: new Date((T0 + 50) * 1000).toISOString(),
      kind: 'throughput',
      baselineId: null,
      tokensPerSec: 12800,
    },
    {
      id: 'r2',
      at: new Date((T0 + 19000) * 1000).toISOString(),
      kind: 'throughput',
      baselineId: null,
      tokensPerSec: 4300,
    },
  ];
  const r = analyze(facts({ log: null, bench }));
  assert.equal(r.verdict, 'regression');
  assert.equal(r.throughput.bench?.ratio?.toFixed(2), '0.34');
  assert.match(r.headline, /^benchmark 4\.3K tok\/s now vs 12\.8K at .* \(0\.34×\); first suspect: batch_size 32 → 16/);
  assert.ok(r.unknown.some((u) => u.fact === 'metrics log'));
});

void test('no log and no benchmark: it cannot be told, nothing ranked', () => {
  const r = analyze(facts({ log: null }));
  assert.equal(r.verdict, 'unknown');
  assert.deepEqual(r.suspects, []);
  assert.match(r.headline, /^Cannot tell whether throughput dropped/);
});

void test('args helpers: flattening, data paths inside data_dir, categories, throughput keys', () => {
  assert.deepEqual(
    [...flattenArgs({ a: { b: 1, c: [1, 2] }, d: 'x' })],
    [
      ['a.b', 1],
      ['a.c', [1, 2]],
      ['d', 'x'],
    ],
  );
  assert.deepEqual(
    [
      ...dataPathsOf({
        dataset: 'owt-10k',
        data_dir: '/data',
        tokenizer: '/tok/t.json',
        out_dir: '/r',
        name: 'x/../y',
      }),
    ],
    [
      ['dataset', '/data/owt-10k'],
      ['data_dir', '/data'],
      ['tokenizer', '/tok/t.json'],
    ],
  );
  assert.equal(argCategory('model.attn_impl', 'flash', 'sdpa'), 'attention');
  assert.equal(argCategory('compile', true, false), 'compile');
  assert.equal(argCategory('dtype', 'bfloat16', 'float32'), 'dtype');
  assert.equal(argCategory('num_workers', 8, 2), 'dataloader');
  assert.equal(argCategory('wandb_run_id', 'a', 'b'), 'cosmetic');
  assert.equal(argCategory('cache', '/tmp/a1', '/tmp/b2'), 'cosmetic');
  assert.equal(envCategory('NCCL_DEBUG'), 'runtime-env');
  assert.equal(envCategory('WANDB_MODE'), 'cosmetic');
  assert.equal(throughputRank('tok_s'), 3);
  assert.equal(throughputRank('train/tokens_per_sec'), 3);
  assert.equal(throughputRank('loss'), 0);
  // step times are speeds; Lightning's train/time (seconds since its launch began) is a clock
  assert.equal(throughputRank('train/step_time'), 0.5);
  assert.equal(throughputRank('iter_time_s'), 0.5);
  assert.equal(throughputRank('train/time'), 0);
  assert.equal(throughputRank('train_time'), 0);
});

void test('a data path says what its files hold: rows, the length of a sample, and its real length when padded', () => {
  const fp = (meanLength: number) => ({
    path: '/d',
    exists: true,
    kind: 'dir' as const,
    size: 1,
    mtime: 1,
    files: 2,
    newestMtime: 1,
    hash: 'h',
    truncated: false,
    error: null,
    samples: [
      {
        file: 'train.npy',
        format: 'npy',
        rows: 128,
        rowLength: 129,
        meanLength,
        medianLength: 53,
        padded: meanLength < 129,
        meanLineBytes: null,
      },
    ],
  });
  assert.equal(describeSamples(fp(129)), 'train.npy: 128 rows of 129');
  assert.equal(describeSamples(fp(53.38)), 'train.npy: 128 rows of 129, real 53.38 (padded)');
  assert.equal(describeSamples({ ...fp(1), samples: [] }), null);
  // a parquet footer (python/data_columnar.py): rows and the columns with their types
  const pq = {
    file: 'short.parquet',
    format: 'parquet',
    rows: 120,
    rowLength: null,
    meanLength: null,
    medianLength: null,
    padded: null,
    meanLineBytes: null,
    columns: ['input_ids', 'text', 'label', 'score', 'extra'],
    types: ['list<int32>', 'string', 'int64', 'float', 'bool'],
  };
  assert.equal(
    describeSamples({ ...fp(1), samples: [pq] }),
    'short.parquet: 120 rows (input_ids list<int32>, text string, label int64, score float, … 5 columns)',
  );
  // token files (python/data_shape.py): a Megatron .idx's sequence lengths; a flat nanoGPT .bin's token count
  const none = { rowLength: null, padded: null, meanLineBytes: null };
  const idx = { ...none, file: 'owt.idx', format: 'megatron-idx', rows: 5, meanLength: 284, medianLength: 100 };
  assert.equal(
    describeSamples({ ...fp(1), samples: [idx] }),
    'owt.idx: 5 sequences, 284 tokens on average (median 100)',
  );
  const flat = { ...none, file: 'train.bin', format: 'tokens-bin', rows: null, meanLength: null, medianLength: null };
  assert.equal(
    describeSamples({ ...fp(1), samples: [{ ...flat, tokensIfUint16: 2000 }] }),
    'train.bin: 2000 tokens (as uint16)',
  );
});

void test('what a change really is (issue 23): resume bookkeeping is never ranked, data keys are data whatever the path, categories that move speed', () => {
  for (const k of [
    'start',
    'start_step',
    'max_steps',
    'total_steps',
    'steps',
    'resume',
    'resume_from_checkpoint',
    'ckpt_path',
    'output_dir',
    'seed',
    'data_seed',
    'run_name',
    'master_port',
    'logging_dir',
  ])
    assert.equal(argCategory(k, 1, 2), 'cosmetic', k);
  assert.ok(isBookkeepingArg('trainer.max_steps'));
  assert.ok(!isBookkeepingArg('warmup_steps') && !isBookkeepingArg('eval_steps'));
  assert.equal(argCategory('data_dir', '/tmp/kg/openwebtext-10k', '/tmp/kg/openwebtext-dedup-v2'), 'dataset');
  assert.equal(argCategory('gradient_checkpointing', false, true), 'memory');
  assert.equal(argCategory('zero_stage', 2, 3), 'memory');
  assert.equal(argCategory('offload_optimizer', false, true), 'memory');
  assert.equal(argCategory('eval_steps', 500, 50), 'frequency');
  assert.equal(argCategory('log_every', 10, 1), 'frequency');
  assert.equal(argCategory('packing', true, false), 'dataset');
  assert.equal(argCategory('precision', 'bf16-mixed', '32-true'), 'dtype');
  assert.equal(argCategory('batch_size', 32, 16), 'shape');
  // accelerate's launch config: processes and GPUs are hardware (num_processes is no dataloader's num_proc)
  assert.equal(argCategory('accelerate.num_processes', '4', '1'), 'hardware');
  assert.equal(argCategory('accelerate.distributed_type', 'MULTI_GPU', 'NO'), 'hardware');
  assert.equal(argCategory('accelerate.dynamo_config.dynamo_backend', 'INDUCTOR', 'NO'), 'compile');
  assert.equal(argCategory('accelerate.mixed_precision', 'bf16', 'no'), 'dtype');
  assert.equal(argCategory('dataset_num_proc', 4, 1), 'dataloader');
  for (const c of Object.keys(CATEGORY_WEIGHT) as (keyof typeof CATEGORY_WHY)[])
    assert.ok(CATEGORY_WHY[c].length > 10, c);
  // an eval pass's speed and a running sample count are not the training's speed
  assert.equal(throughputRank('eval/samples_per_second'), 0);
  assert.equal(throughputRank('train/samples'), 0);
  assert.equal(throughputRank('train/device/samples_per_sec'), 1.5);
});

void test('a run with very many checkpoints: an even sample with the first and the last', () => {
  const cks = Array.from({ length: 1000 }, (_, i) => ({
    label: `s${i}`,
    path: '',
    argsPath: '',
    step: i,
    mtime: null,
  }));
  const s = sampleCheckpoints(cks, 100);
  assert.equal(s.length, 100);
  assert.equal(s[0]!.step, 0);
  assert.equal(s[99]!.step, 999);
  assert.deepEqual(whatChangedProbe({ paths: ['-x'], git: ['/r'], stats: ['/v.py'], since: 5 }).args, [
    '--path=-x',
    '--git=/r',
    '--stat=/v.py',
    '--since=5',
  ]);
});

void test('data changed in place at the shift: compared with the fingerprint kept before, it coincides', () => {
  const fp = (hash: string, files: number, newest: number) => ({
    path: '/data/owt',
    exists: true,
    kind: 'dir' as const,
    size: 100 * files,
    mtime: T0 - 100,
    files,
    newestMtime: newest,
    hash,
    truncated: false,
    error: null,
  });
  const base = facts();
  for (const a of base.args) Object.assign(a.args as object, { data_dir: '/data', dataset: 'owt' });
  const r = analyze({
    ...base,
    dataHistory: [{ at: T0 + 100, paths: [fp('aaa', 4, T0 - 100)] }],
    probe: { now: T0 + 20000, paths: [fp('bbb', 5, T0 + 4005)], git: [], stats: [], launches: [], elapsedMs: 1 },
  });
  const data = r.suspects.find((s) => s.source === 'data');
  assert.ok(data, JSON.stringify(r.suspects.map((s) => s.title)));
  assert.equal(data.title, 'data /data/owt changed');
  assert.equal(data.coincides, true);
  assert.equal(data.score, 70);
  assert.match(data.detail, /at the reference: 4 files, 400 bytes, hash aaa; now: 5 files, 500 bytes, hash bbb/);
  // the same data, unchanged since the kept fingerprint: nothing
  const same = analyze({
    ...base,
    dataHistory: [{ at: T0 + 100, paths: [fp('aaa', 4, T0 - 100)] }],
    probe: { now: T0 + 20000, paths: [fp('aaa', 4, T0 - 100)], git: [], stats: [], launches: [], elapsedMs: 1 },
  });
  assert.ok(!same.suspects.some((s) => s.source === 'data'));
  // a folder nested past what_changed.py's depth bound: one "Not known" entry naming that cause, no suspect
  const deep = analyze({
    ...base,
    dataHistory: [{ at: T0 + 100, paths: [fp('aaa', 4, T0 - 100)] }],
    probe: {
      now: T0 + 20000,
      paths: [
        { ...fp('ccc', 1, T0 + 4005), truncated: true, error: 'folders nested deeper than 256 levels were not walked' },
      ],
      git: [],
      stats: [],
      elapsedMs: 1,
    },
  });
  assert.ok(!deep.suspects.some((s) => s.source === 'data'));
  assert.deepEqual(
    deep.unknown.filter((u) => u.fact === 'data /data/owt'),
    [{ fact: 'data /data/owt', why: 'folders nested deeper than 256 levels were not walked' }],
  );
});

void test('a benchmark result marked known-good is the reference, ahead of everything', () => {
  const bench = [
    {
      id: 'r1',
      at: new Date((T0 + 50) * 1000).toISOString(),
      kind: 'throughput',
      baselineId: null,
      tokensPerSec: 9000,
    },
    {
      id: 'r2',
      at: new Date((T0 + 2500) * 1000).toISOString(),
      kind: 'throughput',
      baselineId: null,
      tokensPerSec: 12800,
    },
    {
      id: 'r3',
      at: new Date((T0 + 19000) * 1000).toISOString(),
      kind: 'throughput',
      baselineId: null,
      tokensPerSec: 4300,
    },
  ];
  const r = analyze(facts({ bench, marks: { benchId: 'r2' } }));
  assert.equal(r.reference.kind, 'marked-bench');
  assert.equal(r.reference.checkpoint?.label, 'step_200');
  assert.equal(r.throughput.bench?.reference?.id, 'r2');
  assert.equal(r.throughput.bench?.now?.id, 'r3');
});

void test('marks and kept data fingerprints survive a round trip through the store', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-why-store-'));
  try {
    const baselines = new BaselineStore(dir);
    const store = new WhatChangedStore(baselines);
    assert.deepEqual(await store.marks('ssh:u@h:22'), {});
    const r9 = (await baselines.appendResult('ssh:u@h:22', { at: '2026-01-01T00:00:00Z', tokensPerS: 12800 })).result;
    await store.mark('ssh:u@h:22', { baselineId: 'b1' });
    await store.mark('ssh:u@h:22', { benchId: r9.id });
    assert.deepEqual(await store.marks('ssh:u@h:22'), { baselineId: 'b1', benchId: r9.id });
    const p = {
      path: '/d',
      exists: true,
      kind: 'file' as const,
      size: 1,
      mtime: 2,
      files: null,
      newestMtime: null,
      hash: 'h',
      truncated: false,
      error: null,
    };
    await store.saveData('ssh:u@h:22', '/run', { at: 100, paths: [p] });
    await store.saveData('ssh:u@h:22', '/other', { at: 200, paths: [p] });
    assert.equal(await store.saveData('ssh:u@h:22', '/run', { at: 300, paths: [] }), undefined);
    assert.deepEqual(await store.dataHistory('ssh:u@h:22', '/run'), [{ at: 100, paths: [p] }]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('a compile cache emptied since the baseline is a suspect; one not measured now is unknown, not lost', () => {
  const cache = (name: string, path: string, files: number, exists = true) => ({
    name,
    path,
    exists,
    files,
    bytes: files * 1000,
  });
  const then = snapshot(T0 + 150, { caches: [cache('inductor', '/tmp/ti', 500), cache('custom1', '/cc', 10)] });
  const now = snapshot(T0 + 20000, { caches: [cache('inductor', '/tmp/ti', 0)] });
  const r = analyze(facts({ env: { now, baselines: [baseline('b', 'before', T0 + 150, then)] } }));
  const lost = r.suspects.find((s) => s.category === 'compile-cache');
  assert.ok(lost, JSON.stringify(r.suspects.map((s) => s.title)));
  assert.equal(lost.title, 'inductor compile cache emptied (500 → 0 files)');
  assert.ok(!r.suspects.some((s) => s.title.startsWith('custom1')));
  assert.ok(r.unknown.some((u) => u.fact === 'compile cache custom1 (/cc)'));
});

void test('a log without a throughput series never claims "no drop"', () => {
  const reduction = log(() => 2.5);
  reduction.series[0]!.key = 'loss';
  const r = analyze(facts({ log: { path: '/r/metrics.jsonl', reduction } }));
  assert.equal(r.verdict, 'steady');
  assert.match(
    r.headline,
    /^No throughput measured \(no tok\/s series, no benchmark pair\) and no changepoint in metrics\.jsonl/,
  );
});

void test("the marked benchmark result is the host's one bench reference (the dashboard's mark), both ways", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-why-ref-'));
  try {
    const host = 'ssh:u@h:22';
    const baselines = new BaselineStore(dir);
    const store = new WhatChangedStore(baselines);
    const a = (await baselines.appendResult(host, { at: '2026-01-01T00:00:00Z', tokensPerS: 12800 })).result;
    const b = (await baselines.appendResult(host, { at: '2026-01-05T00:00:00Z', tokensPerS: 4300 })).result;
    // marked from the dashboard (BaselineStore.setReference): What Changed? reads it as its marked result
    await baselines.setReference(host, a.id);
    assert.deepEqual(await store.marks(host), { benchId: a.id });
    // marked through What Changed?: the dashboard's reference moves with it, one mark per host
    await store.mark(host, { benchId: b.id });
    assert.equal((await baselines.reference(host))?.resultId, b.id);
    assert.deepEqual(await store.marks(host), { benchId: b.id });
    // a result that is not kept cannot be marked
    await assert.rejects(store.mark(host, { benchId: 'gone' }));
    // unmarked on the dashboard: no marked result
    await baselines.setReference(host, null);
    assert.deepEqual(await store.marks(host), {});
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

void test('a change its timing rules out is listed after every other suspect, whatever its weight, and never leads', () => {
  // The torch build moved (weight 30) but was installed after the shift: 30 − 25 = 5. A package of no known effect
  // (weight 5) changed at some time since the baseline: 5. Equal scores; the build's heavier category would put it
  // first, but a change after the drop cannot have caused it.
  const good = baseline(
    'b-good',
    'good-run',
    T0 + 150,
    snapshot(T0 + 150, {
      torch: { found: true, version: '2.11.0+cu128', location: '/site/torch' },
      packages: { packages: { tqdm: '4.66.0' } },
    }),
  );
  const now = snapshot(T0 + 20000, {
    torch: { found: true, version: '2.11.0+cu130', location: '/site/torch' },
    packages: { packages: { tqdm: '4.67.1' } },
  });
  const stats = [{ path: '/site/torch/version.py', exists: true, size: 10, mtime: T0 + 9000, error: null }];
  const r = analyze(
    facts({
      env: { now, baselines: [good] },
      probe: { now: T0 + 20000, paths: [], git: [], stats, launches: [], elapsedMs: 1 },
    }),
  );
  const rows = r.suspects.map((s) => `${s.title} ${s.score}${s.ruledOut ? ' ruled out' : ''}`);
  const torch = r.suspects.findIndex((s) => s.category === 'torch-build');
  const tqdm = r.suspects.findIndex((s) => s.title === '1 other package changed');
  assert.equal(r.suspects[0]!.title, 'batch_size 32 → 16', rows.join(' | '));
  assert.ok(torch > tqdm && tqdm > 0, rows.join(' | '));
  assert.equal(r.suspects[torch]!.score, r.suspects[tqdm]!.score, rows.join(' | '));
  assert.equal(r.suspects[torch]!.ruledOut, true);
  assert.match(r.suspects[torch]!.reasons.map((x) => x.why).join('; '), /changed after the shift/);
  assert.equal(r.suspects[tqdm]!.ruledOut, false);
  assert.equal(r.suspects.at(-1)!.category, 'torch-build', 'the ruled-out ones come last');
  const md = renderWhatChangedMarkdown(r);
  assert.match(md, /#### Changed, but not where the metric shifted \(their timing rules them out\)\n\n\d+\. \*\*torch/);

  // Only changes after the shift: the headline names none of them as the cause, and says they are listed.
  const late = facts({ log: { path: '/r/train_log.jsonl', reduction: log((s) => (s <= 300 ? 10000 : 5000)) } });
  const lateR = analyze(late);
  assert.equal(lateR.verdict, 'regression');
  assert.ok(
    lateR.suspects.length > 0 && lateR.suspects.every((s) => s.ruledOut),
    lateR.suspects.map((s) => s.title).join(' | '),
  );
  assert.match(lateR.headline, /; no recorded change at the shift explains it \(1 changed at other times, listed\)$/);
  assert.match(renderWhatChangedMarkdown(lateR), /### Suspects, ranked\n\n#### Changed, but not where/);
});

void test('What Changed? names the args keys Compare Args shows: {}, NaN, nested objects and lists alike', () => {
  const before: ArgValue = {
    batch_size: 32,
    sched: {},
    loss_scale: NaN,
    clip: null,
    model: { n_layer: 12, act: 'gelu' },
    betas: [0.9, 0.999],
    blocks: [{ heads: 8, dim: 64 }],
  };
  const after: ArgValue = {
    batch_size: 16,
    loss_scale: NaN,
    clip: NaN,
    model: { n_layer: 12, act: 'relu', opts: {} },
    betas: [0.9, 0.95],
    blocks: [{ dim: 64, heads: 8 }],
  };
  const f = facts();
  for (const a of f.args) a.args = a.step <= 400 ? before : after;
  const r = analyze(f);
  const seen = [...r.suspects, ...r.unranked]
    .filter((s) => s.source === 'args')
    .map((s) => s.title.split(' ')[0])
    .sort();
  const d = diffArgs(before, after);
  const shown = [...d.changed, ...d.added, ...d.removed].map((c) => c.key).sort();
  // `sched: {}` gone and `opts: {}` new are settings; NaN stays NaN (no change) but null → NaN is one; a list of
  // objects whose keys only moved is the same list
  assert.deepEqual(shown, ['batch_size', 'betas', 'clip', 'model.act', 'model.opts', 'sched']);
  assert.deepEqual(seen, shown);
  const clip = [...r.suspects, ...r.unranked].find((s) => s.title.startsWith('clip '));
  assert.equal(clip?.title, 'clip null → NaN');
});

void test('one flattening: {} below the top is a leaf, args that are not an object are one leaf, NaN is kept', () => {
  assert.deepEqual(
    [...flattenArgs({ a: {}, b: { c: { d: NaN } }, l: [{ x: 1 }] })],
    [
      ['a', {}],
      ['b.c.d', NaN],
      ['l', [{ x: 1 }]],
    ],
  );
  assert.deepEqual([...flattenArgs([1, 2])], [['(args)', [1, 2]]]);
  assert.deepEqual([...flattenArgs({})], []);
  assert.deepEqual(dataPathsOf(null), new Map());
});

void test('a package suspect offers the package bisect once the baseline env was restored (its interpreter exists)', () => {
  const good = baseline(
    'b-good',
    'good run',
    T0 + 150,
    snapshot(T0 + 150, { packages: { packages: { transformers: '4.40.0' } } }),
  );
  const now = snapshot(T0 + 20000, { packages: { packages: { transformers: '4.41.0' } } });
  const withStats = (exists: boolean) =>
    analyze(
      facts({
        env: { now, baselines: [good] },
        marks: { baselineId: 'b-good' },
        probe: {
          now: T0 + 20000,
          paths: [],
          git: [],
          stats: [{ path: '~/.known-good/envs/good-run/bin/python', exists, size: 1, mtime: T0, error: null }],
          launches: [],
          elapsedMs: 1,
        },
      }),
    );
  const bisectOf = (exists: boolean) =>
    withStats(exists)
      .suspects.find((s) => s.title === 'transformers 4.40.0 → 4.41.0')
      ?.evidence.find((e) => e.kind === 'bisect');
  assert.deepEqual(bisectOf(true), {
    kind: 'bisect',
    title: 'Confirm by bisect',
    hostId: bisectOf(true)!.hostId,
    baselineId: 'b-good',
    change: 'package:transformers',
    packages: true,
  });
  assert.equal(bisectOf(false), undefined, 'no restored env: nothing to bisect against');
});
