import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ArgValue, CkptArgs } from '../../src/core/args/argsProbe';
import { ArgsReader, type ArgsHost } from '../../src/core/args/reader';
import { renderArgsDiffSide, type ArgsDiffSide } from '../../src/core/args/render';
import { fromArgsUri, toArgsUri } from '../../src/core/args/uri';
import type { ProbeCall, ProbeOutcome } from '../../src/core/probes/probe';
import { formatLocalTime } from '../../src/core/util/format';

function result(path: string, args: ArgValue, over: Partial<CkptArgs> = {}): CkptArgs {
  return {
    format: 'torch-zip',
    path,
    bytes: 1234,
    key: 'args',
    args,
    argsType: 'argparse.Namespace',
    step: 600,
    epoch: null,
    tensors: { count: 2, bytes: 36 },
    topLevelKeys: ['args'],
    unsafeGlobals: [],
    warnings: [],
    bytesRead: 10,
    mtime: 1,
    baseModel: null,
    ...over,
  };
}

const ARGS = { lr: 0.01, model: { depth: 12, act: 'gelu' }, seed: 1, warmup: 100 };

function sides(aArgs: ArgValue, bArgs: ArgValue): [ArgsDiffSide, ArgsDiffSide] {
  return [
    {
      result: result('/ckpt/run/step_600.pt', aArgs),
      meta: { host: 'gpu-box', capturedAt: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)) },
    },
    {
      result: result('/ckpt/run/step_690/model.pt', bArgs, {
        bytes: 999_999,
        step: 690,
        tensors: { count: 7, bytes: 9 },
      }),
      meta: { host: 'gpu-box', capturedAt: new Date(Date.UTC(2026, 0, 2, 9, 0, 0)), label: 'step_690' },
    },
  ];
}

/** The line numbers (0-based, in each document) a line diff marks as changed: an LCS, as a diff editor shows. */
function changedLines(a: string[], b: string[]): { a: number[]; b: number[] } {
  const lcs = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out = { a: [] as number[], b: [] as number[] };
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.a.push(i++);
    else out.b.push(j++);
  }
  while (i < a.length) out.a.push(i++);
  while (j < b.length) out.b.push(j++);
  return out;
}

void test('args diff: identical args on checkpoints of other sizes, tensors and read times give no diff lines', () => {
  const [a, b] = sides(ARGS, { ...ARGS });
  const left = renderArgsDiffSide(a, b, 'a');
  const right = renderArgsDiffSide(a, b, 'b');
  assert.equal(left, right, 'both sides of identical args are the same text');
  const said = left.split('\n').filter((l) => l.includes('args identical'));
  assert.deepEqual(said, ['// args identical (5 keys)'], 'one clear line says so');
  // the per-side facts are still there, on both sides
  assert.match(left, /^\/\/ A: step_600 \(gpu-box\) \/ckpt\/run\/step_600\.pt, 1\.2 KB, 2 tensors, step 600, read /m);
  assert.match(left, /^\/\/ B: step_690 \(gpu-box\) \/ckpt\/run\/step_690\/model\.pt, 977 KB, 7 tensors/m);
});

void test('args diff: only arg lines differ, so Next Change lands on an arg', () => {
  const [a, b] = sides(ARGS, { ...ARGS, lr: 0.02, model: { depth: 24, act: 'gelu' } });
  const left = renderArgsDiffSide(a, b, 'a').split('\n');
  const right = renderArgsDiffSide(a, b, 'b').split('\n');
  const d = changedLines(left, right);
  const lines = [...d.a.map((i) => left[i]!), ...d.b.map((j) => right[j]!)];
  assert.deepEqual(lines.sort(), ['    "depth": 12', '    "depth": 24', '  "lr": 0.01,', '  "lr": 0.02,'].sort());
  // the first change (what Next Change goes to) is an arg line, not a comment
  const first = Math.min(...d.a);
  assert.ok(!left[first]!.startsWith('//'), `first change is ${left[first]}`);
  assert.ok(left.includes('// args: 2 changed, 0 added, 0 removed (3 the same)'));
});

void test('args diff: a warning of one side is shown on both, named by side', () => {
  const [a, b] = sides(ARGS, ARGS);
  b.result.warnings = ['UNSAFE: calls posix.system', 'a note'];
  const left = renderArgsDiffSide(a, b, 'a');
  assert.equal(left, renderArgsDiffSide(a, b, 'b'));
  assert.match(left, /^\/\/ ⚠ B: UNSAFE: calls posix\.system$/m);
  assert.match(left, /^\/\/ note B: a note$/m);
});

void test('args diff URIs: left and right name the other side and survive the codec', () => {
  const a = { hostId: 'settings:gpu', path: '/ckpt/step_600.pt', label: 'step_600' };
  const b = { hostId: 'settings:gpu', path: '/ckpt/step_690.pt' };
  const left = fromArgsUri(toArgsUri({ ...a, view: 'left', other: b }));
  assert.deepEqual(left, { ...a, view: 'left', other: b });
  assert.equal(toArgsUri({ ...b, view: 'right', other: a }).path, '/step_690 args.jsonc');
  assert.throws(() => toArgsUri({ ...a, view: 'left' }));
});

void test('ArgsReader.diffSide: both sides read once each, the same header on both', async () => {
  const runs: string[] = [];
  const host: ArgsHost = {
    label: 'gpu-box',
    probes: {
      run<R>(call: ProbeCall<R>): Promise<ProbeOutcome<R>> {
        const path = call.args[0]!;
        const stat = call.args.includes('--stat');
        runs.push(`${stat ? 'stat' : 'read'} ${path}`);
        const value = stat
          ? { path, bytes: 1, mtime: 1, dir: false }
          : result(path, path.includes('600') ? ARGS : { ...ARGS, seed: 2 });
        return Promise.resolve({ value: value as R } as ProbeOutcome<R>);
      },
      runOnce<R>(): Promise<ProbeOutcome<R>> {
        return Promise.reject(new Error('not used'));
      },
    },
  };
  const reader = new ArgsReader({
    host: () => host,
    allowTorchLoad: () => false,
    confirmUnsafeLoad: () => Promise.resolve(false),
  });
  const a = { hostId: 'h', path: '/c/step_600.pt', label: 'step_600' };
  const b = { hostId: 'h', path: '/c/step_690.pt', label: 'step_690' };
  const [left, right] = await Promise.all([reader.diffSide(a, b, 'a'), reader.diffSide(a, b, 'b')]);
  const head = (s: string) => s.split('\n').filter((l) => l.startsWith('//'));
  assert.deepEqual(head(left), head(right));
  assert.match(left, /"seed": 1/);
  assert.match(right, /"seed": 2/);
  assert.equal(runs.filter((r) => r.startsWith('read ')).length, 2);
});

void test('ArgsReader: a first read is one request (the stat comes with it); again, a stat; rewritten, a stat and a read', async () => {
  const runs: string[] = [];
  let mtime = 1;
  const host: ArgsHost = {
    label: 'gpu-box',
    probes: {
      run<R>(call: ProbeCall<R>): Promise<ProbeOutcome<R>> {
        const path = call.args[0]!;
        const stat = call.args.includes('--stat');
        runs.push(`${stat ? 'stat' : 'read'} ${path}`);
        const value = stat
          ? { path, bytes: 1, mtime, dir: false }
          : { ...result(path, { ...ARGS, seed: mtime }), stat: { bytes: 1, mtime } };
        return Promise.resolve({ value: value as R } as ProbeOutcome<R>);
      },
      runOnce<R>(): Promise<ProbeOutcome<R>> {
        return Promise.reject(new Error('not used'));
      },
    },
  };
  const reader = new ArgsReader({
    host: () => host,
    allowTorchLoad: () => false,
    confirmUnsafeLoad: () => Promise.resolve(false),
  });
  const a = { hostId: 'h', path: '/c/step_600.pt', label: 'step_600' };
  const b = { hostId: 'h', path: '/c/step_690.pt', label: 'step_690' };
  // a diff of two files never read: both sides ask at once, each file is read once, nothing stat'ed
  await Promise.all([reader.diffSide(a, b, 'a'), reader.diffSide(a, b, 'b')]);
  assert.deepEqual(runs.sort(), ['read /c/step_600.pt', 'read /c/step_690.pt']);
  runs.length = 0;
  const again = await reader.read(a);
  assert.equal(again.fromCache, true);
  assert.deepEqual(runs, ['stat /c/step_600.pt']);
  runs.length = 0;
  mtime = 2; // rewritten
  const fresh = await reader.read(a);
  assert.equal(fresh.fromCache, false);
  assert.equal((fresh.result.args as Record<string, unknown>)['seed'], 2);
  assert.deepEqual(runs, ['stat /c/step_600.pt', 'read /c/step_600.pt']);
});

void test('readable local time: date, time and the offset, in the local zone', () => {
  const saved = process.env['TZ'];
  try {
    process.env['TZ'] = 'Europe/Berlin';
    assert.equal(formatLocalTime(Date.UTC(2026, 0, 2, 3, 4, 5)), '2026-01-02 04:04:05 (UTC+01:00)');
    process.env['TZ'] = 'UTC';
    assert.equal(formatLocalTime(Date.UTC(2026, 6, 2, 3, 4, 5)), '2026-07-02 03:04:05 (UTC)');
    process.env['TZ'] = 'America/St_Johns';
    assert.equal(formatLocalTime(Date.UTC(2026, 0, 2, 3, 4, 5)), '2026-01-01 23:34:05 (UTC-03:30)');
    assert.equal(formatLocalTime(NaN), 'unknown');
  } finally {
    if (saved === undefined) delete process.env['TZ'];
    else process.env['TZ'] = saved;
  }
});
