import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parsePythonJson } from '../../src/core/json';
import { isKnownGoodError } from '../../src/core/errors';
import {
  benchArgs,
  benchTerminalArgv,
  describeBenchConfig,
  throughputBenchProbe,
} from '../../src/core/bench/benchProbe';
import { compareThroughput, describeDifferences, formatRate } from '../../src/core/bench/compare';
import { BENCH_DEFAULT_STEPS, benchDisplay, benchHeadline, benchStepsText } from '../../src/core/bench/run';
import {
  compileThroughputRegex,
  customBenchmarkSchema,
  median,
  parseHumanNumber,
  throughputFromJsonl,
  throughputFromOutput,
  valueAt,
} from '../../src/core/bench/customBenchmark';
import { BENCH_PRESETS } from '../../src/core/bench/records';
import { logTailArgs, logTailProbe } from '../../src/core/metrics/logTail';
import { metricsReduceArgs } from '../../src/core/metrics/metricsProbe';

// Printed by a real run of python/throughput_bench.py on CPU (Debian torch 1.13), see the file for the values.
const FIXTURE = join(__dirname, '..', 'fixtures', 'bench', 'throughput_bench.cpu.json');

void test('throughput_bench schema accepts the output of a real CPU run', () => {
  const raw = parsePythonJson(readFileSync(FIXTURE, 'utf8'));
  const r = throughputBenchProbe({}).parse(raw);
  assert.equal(r.config.device, 'cpu');
  assert.ok(r.tokensPerSec.median > 0);
  assert.ok(r.tokensPerSec.min <= r.tokensPerSec.median && r.tokensPerSec.median <= r.tokensPerSec.max);
  assert.match(r.fingerprint.torch, /^\d+\.\d+/);
  assert.equal(r.compileS, null);
  assert.equal(describeBenchConfig(r.config), `2×64 h4 seq 64 b4 fp32 cpu ${r.config.attentionUsed}`);
  // A document missing what the comparison needs is refused, naming the probe.
  const broken = { ...(raw as Record<string, unknown>), tokensPerSec: { median: 'fast' } };
  assert.throws(
    () => throughputBenchProbe({}).parse(broken),
    (e) => {
      return isKnownGoodError(e, 'bad-output') && /throughput_bench/.test(e.message) && /tokensPerSec/.test(e.message);
    },
  );
});

void test('throughput_bench argv: only what is set, in a fixed order', () => {
  assert.deepEqual(benchArgs({}), []);
  assert.deepEqual(
    benchArgs({ layers: 12, width: 1024, seq: 2048, batch: 8, dtype: 'bf16', attention: 'flex', compile: true }),
    [
      '--layers',
      '12',
      '--width',
      '1024',
      '--seq',
      '2048',
      '--batch',
      '8',
      '--dtype',
      'bf16',
      '--attention',
      'flex',
      '--compile',
    ],
  );
  assert.deepEqual(throughputBenchProbe({ steps: 3, device: 'cpu' }).args, ['--steps', '3', '--device', 'cpu']);
  assert.throws(() => benchArgs({ layers: 0 }));
  const argv = benchTerminalArgv('/opt/py/bin/python3', { steps: 2 }, 'NONCE1');
  assert.deepEqual(argv.slice(0, 3), ['/opt/py/bin/python3', '-u', '-c']);
  assert.deepEqual(argv.slice(4), ['--steps', '2']);
  assert.match(argv[3]!, /NONCE1/);
  assert.match(argv[3]!, /def main\(argv\)/);
});

void test('human numbers as training scripts print them', () => {
  const cases: [string, number | undefined][] = [
    ['12800', 12800],
    ['12,800', 12800],
    ['1,234,567.5', 1234567.5],
    ['12 800', 12800],
    ['12.8K', 12800],
    ['12.8k', 12800],
    ['4.3M', 4300000],
    ['1.28e4', 12800],
    ['.5', 0.5],
    ['-3', -3],
    ['12,8', undefined],
    ['abc', undefined],
    ['', undefined],
    ['1.2.3', undefined],
  ];
  for (const [text, want] of cases) assert.equal(parseHumanNumber(text), want, text);
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 2, 3]), 2.5);
});

void test('custom benchmark: throughput from output by regex (first capture group, median of the last N)', () => {
  const output = [
    'loading data...',
    '\u001b[32mstep 1\u001b[0m | loss 9.1 | 1.1K tok/s',
    'step 2 | loss 8.2 | 12.0K tok/s',
    'step 3 | loss 7.4 | 12,800 tok/s',
    'step 4 | loss 6.9 | 13.1K tok/s\r',
    'step 5 | loss 6.5 | 12.9K tok/s',
    'done',
  ].join('\n');
  const r = throughputFromOutput(output, String.raw`\|\s*([\d.,]+[KM]?) tok/s`, 3);
  assert.ok(r);
  assert.deepEqual(r.used, [12800, 13100, 12900]);
  assert.equal(r.tokensPerSec, 12900);
  assert.equal(r.found, 5);
  assert.equal(throughputFromOutput('nothing here', String.raw`([\d.]+) tok/s`), undefined);
  assert.throws(
    () => compileThroughputRegex('tok/s'),
    (e) => isKnownGoodError(e, 'settings') && /capture group/.test(e.message),
  );
  assert.throws(
    () => compileThroughputRegex('(unclosed'),
    (e) => isKnownGoodError(e, 'settings'),
  );
});

void test('custom benchmark: throughput from a jsonl file by key, torn and malformed lines skipped', () => {
  const lines = [];
  for (let i = 0; i < 20; i++)
    lines.push(JSON.stringify({ step: i, tok_per_s: 1000 + i, perf: { 'tok/s': 2000 + i } }));
  lines.splice(5, 0, 'Traceback (most recent call last):');
  lines.push('{"step": 20, "tok_per_s": NaN}');
  lines.push('{"step": 21, "tok_per_s": 99'); // torn: still being written
  const text = lines.join('\n');
  const r = throughputFromJsonl(text, 'tok_per_s', 5);
  assert.ok(r);
  assert.deepEqual(r.used, [1015, 1016, 1017, 1018, 1019]);
  assert.equal(r.tokensPerSec, 1017);
  assert.equal(r.found, 20);
  assert.equal(throughputFromJsonl(text, 'perf.tok/s', 2)?.tokensPerSec, 2018.5);
  assert.equal(throughputFromJsonl(text, 'missing'), undefined);
  assert.equal(valueAt({ 'a.b': { c: 1 } }, 'a.b.c'), 1);
  assert.equal(valueAt({ 'train/tok_per_s': 5 }, 'train/tok_per_s'), 5);
  const cfg = customBenchmarkSchema.parse({
    command: 'python train.py',
    jsonl: { path: 'log.jsonl', key: 'tok_per_s' },
  });
  assert.equal(cfg.lastN, 10);
  assert.equal(customBenchmarkSchema.safeParse({ command: 'python train.py' }).success, false);
});

void test('compare with baseline: ratio text and what differs', () => {
  const c = compareThroughput(
    {
      tokensPerSec: 4321,
      fingerprint: { torch: '2.11.0', cuda: '12.8', gpu: 'NVIDIA H200', threads: 8, triton: '3.5.0' },
      config: { layers: 12, width: 1024, steps: 30, compile: false },
    },
    {
      label: 'good-run',
      tokensPerSec: 12800,
      fingerprint: { torch: '2.10.0', cuda: '12.8', gpu: 'NVIDIA H200', threads: 16 },
      config: { layers: 12, width: 1024, steps: 20, compile: true },
    },
  );
  assert.equal(c.text, '4.3K tok/s now vs 12.8K tok/s at baseline "good-run" (0.34×)');
  assert.ok(c.ratio !== null && Math.abs(c.ratio - 4321 / 12800) < 1e-12);
  assert.deepEqual(
    c.fingerprint.map((d) => d.field),
    ['torch', 'triton'],
  );
  assert.deepEqual(describeDifferences(c.fingerprint), [
    'torch: 2.11.0 (baseline 2.10.0)',
    'triton: 3.5.0 (baseline null)',
  ]);
  assert.deepEqual(c.config, [{ field: 'compile', now: false, baseline: true }]);
  const none = compareThroughput({ tokensPerSec: 5 }, { label: 'x', tokensPerSec: 0 });
  assert.equal(none.ratio, null);
  assert.equal(none.text, '5 tok/s now vs 0 tok/s at baseline "x"');
  assert.equal(formatRate(1.5e9), '1.5G');
  assert.equal(
    compareThroughput({ tokensPerSec: 25600 }, { label: 'b', tokensPerSec: 1000 }).text.endsWith('(25.6×)'),
    true,
  );
});

void test('metrics probes: argv', () => {
  assert.deepEqual(metricsReduceArgs({ path: '/r/log.jsonl' }), ['/r/log.jsonl']);
  assert.deepEqual(
    metricsReduceArgs({
      path: '/r/log.jsonl',
      buckets: 500,
      x: 'time',
      window: { from: 10, to: 20.5 },
      offset: 77,
      series: ['loss', 'lr'],
    }),
    [
      '/r/log.jsonl',
      '--buckets',
      '500',
      '--x',
      'time',
      '--from',
      '10',
      '--to',
      '20.5',
      '--offset',
      '77',
      '--series',
      'loss,lr',
    ],
  );
  assert.deepEqual(logTailArgs({ path: '/l', offset: -1, maxBytes: 10, inode: 5, latestOnly: true }), [
    '/l',
    '--offset',
    '-1',
    '--max-bytes',
    '10',
    '--inode',
    '5',
    '--latest-only',
  ]);
  assert.deepEqual(logTailProbe({ path: '/l', offset: 0, inode: null }).args, ['/l', '--offset', '0']);
});

test('the benchmark says in words what it runs; the step counts are the probe defaults', () => {
  const py = readFileSync(join(__dirname, '..', '..', 'python', 'throughput_bench.py'), 'utf8');
  for (const [name, device] of [
    ['CPU_DEFAULTS', 'cpu'],
    ['CUDA_DEFAULTS', 'cuda'],
  ] as const) {
    const block = new RegExp(`${name} = \\{([^}]*)\\}`).exec(py)?.[1] ?? '';
    const num = (k: string) => Number(new RegExp(`"${k}": (\\d+)`).exec(block)?.[1]);
    assert.deepEqual(BENCH_DEFAULT_STEPS[device], { steps: num('steps'), warmup: num('warmup') }, name);
  }
  // The Tiny preset: 6 timed steps, but 8 run (a first step and a warm-up before them), and it says so.
  assert.equal(benchStepsText({ device: 'cpu' }), '6 timed steps after a first step and 1 warm-up (8 in all)');
  assert.match(
    BENCH_PRESETS.find((p) => p.id === 'tiny')!.detail,
    /6 timed steps after a first and 1 warm-up \(8 in all\)/,
  );
  assert.equal(
    benchHeadline({ python: 'python3', label: 'gpu-box' }, { device: 'cuda', compile: true }),
    'Known Good benchmark: cuda, 20 timed steps after a first step and 5 warm-up (26 in all), torch.compile, python3 on gpu-box',
  );
  assert.match(benchStepsText({}), /^20 \(GPU\) or 6 \(CPU\) timed steps/);
  assert.equal(
    benchDisplay(
      '/opt/py 3/bin/python',
      { device: 'cpu', steps: 2 },
      'python3 -u -c <loader> <python/throughput_bench.py: 18.4 KB zlib+base64>',
    ),
    "'/opt/py 3/bin/python' -u throughput_bench.py --steps 2 --device cpu  # throughput_bench.py travels in the command line (18.4 KB packed)",
  );
});
