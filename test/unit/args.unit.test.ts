import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parsePythonJson } from '../../src/core/json';
import { ckptArgsProbe, type CkptArgs } from '../../src/core/args/argsProbe';
import {
  argsDiffTitle,
  changedArgs,
  checkpointLabel,
  diffArgs,
  flattenArgs,
  renderArgsDocument,
  stableJson,
} from '../../src/core/args/render';
import { ArgsCache } from '../../src/core/args/cache';

// What python/ckpt_args.py prints for a small checkpoint (NaN/Infinity as Python writes them).
const SAMPLE = `{"format": "torch-zip", "path": "/ckpt/run1/step_600.pt", "bytes": 1234, "key": "args",
 "args": {"lr": 0.01, "betas": [0.9, 0.999], "model": {"depth": 12, "act": "gelu"}, "clip": Infinity, "scale": NaN,
 "tags": [], "extra": {}},
 "argsType": "argparse.Namespace", "step": 600, "epoch": null, "tensors": {"count": 2, "bytes": 36},
 "topLevelKeys": ["args", "model", "step"], "unsafeGlobals": [], "warnings": [], "bytesRead": 910, "mtime": 1.5}`;

function sample(): CkptArgs {
  return ckptArgsProbe('/ckpt/run1/step_600.pt').parse(parsePythonJson(SAMPLE));
}

void test('probe call: args and options', () => {
  assert.deepEqual(ckptArgsProbe('/a b/c.pt').args, ['/a b/c.pt']);
  assert.deepEqual(ckptArgsProbe('/x.pt', { keys: ['config', 'opt'], all: true }).args, [
    '/x.pt',
    '--key',
    'config',
    '--key',
    'opt',
    '--all',
  ]);
  assert.deepEqual(ckptArgsProbe('-weird.pt').args, ['./-weird.pt']);
  assert.equal(ckptArgsProbe('/x.pt').probe, 'ckpt_args');
});

void test('schema accepts NaN/Infinity values and refuses a malformed result', () => {
  const r = sample();
  assert.equal(r.step, 600);
  const args = r.args as Record<string, unknown>;
  assert.ok(Number.isNaN(args['scale']));
  assert.equal(args['clip'], Infinity);
  assert.throws(
    () => ckptArgsProbe('/x').parse({ ...JSON.parse(SAMPLE.replace(/NaN|Infinity/g, '0')), tensors: {} }),
    /ckpt_args.*tensors/,
  );
});

void test('stableJson: sorted keys at every level, one value per line, non-finite numbers readable', () => {
  const text = stableJson({ b: 1, a: { d: [1, { z: 2, y: 3 }], c: null }, n: NaN, i: -Infinity, e: [], o: {} });
  assert.equal(
    text,
    [
      '{',
      '  "a": {',
      '    "c": null,',
      '    "d": [',
      '      1,',
      '      {',
      '        "y": 3,',
      '        "z": 2',
      '      }',
      '    ]',
      '  },',
      '  "b": 1,',
      '  "e": [],',
      '  "i": -Infinity,',
      '  "n": NaN,',
      '  "o": {}',
      '}',
    ].join('\n'),
  );
  // same content, other insertion order: same text
  assert.equal(stableJson({ x: 1, y: { b: 2, a: 1 } }), stableJson({ y: { a: 1, b: 2 }, x: 1 }));
});

void test('document: header then args; unsafe warnings stand out', () => {
  const at = new Date('2025-01-02T03:04:05Z');
  const doc = renderArgsDocument(sample(), { host: 'gpu-box', capturedAt: at });
  const lines = doc.split('\n');
  assert.equal(lines[0], '// Known Good: args of step_600');
  assert.ok(lines.includes('// host:     gpu-box'));
  assert.ok(lines.includes('// path:     /ckpt/run1/step_600.pt'));
  assert.ok(lines.includes('// format:   torch-zip, key "args" (argparse.Namespace)'));
  assert.ok(lines.includes('// step:     600'));
  assert.ok(lines.includes('// captured: 2025-01-02T03:04:05.000Z'));
  assert.ok(lines.includes('  "lr": 0.01,'));
  assert.ok(lines.includes('  "scale": NaN,'));
  const hostile = { ...sample(), unsafeGlobals: ['posix.system'], warnings: ['UNSAFE: calls posix.system'] };
  assert.ok(renderArgsDocument(hostile, { host: 'h', capturedAt: at }).includes('// ⚠ UNSAFE: calls posix.system'));
});

void test('flatten and diff: nested keys as a.b.c, NaN equals NaN', () => {
  assert.deepEqual([...flattenArgs({ a: { b: { c: 1 } }, l: [1, 2], e: {} }).keys()], ['a.b.c', 'l', 'e']);
  const a = { lr: 0.01, model: { depth: 12, act: 'gelu' }, gone: true, nan: NaN, betas: [0.9, 0.999] };
  const b = { lr: 0.02, model: { depth: 12, act: 'relu', width: 512 }, nan: NaN, betas: [0.9, 0.95] };
  const d = diffArgs(a, b);
  assert.deepEqual(
    d.changed.map((c) => c.key),
    ['betas', 'lr', 'model.act'],
  );
  assert.deepEqual(d.added, [{ key: 'model.width', value: 512 }]);
  assert.deepEqual(d.removed, [{ key: 'gone', value: true }]);
  assert.equal(d.same, 2);
  const text = changedArgs(a, b, { a: 'step_600', b: 'step_690' });
  assert.equal(
    text,
    [
      '// Known Good: changed args, step_600 ↔ step_690',
      '// 3 changed, 1 added, 1 removed (2 the same)',
      'changed:',
      '  betas: [0.9, 0.999] → [0.9, 0.95]',
      '  lr: 0.01 → 0.02',
      '  model.act: "gelu" → "relu"',
      'added in step_690:',
      '  model.width: 512',
      'removed in step_690:',
      '  gone: true',
      '',
    ].join('\n'),
  );
  assert.match(changedArgs(a, a), /no differences \(6 the same\)/);
});

void test('labels and diff titles', () => {
  assert.equal(checkpointLabel('/c/run/step_600.pt'), 'step_600');
  assert.equal(checkpointLabel('/c/run/checkpoint-500/'), 'checkpoint-500');
  assert.equal(checkpointLabel('/c/dcp/.metadata'), '.metadata');
  assert.equal(
    argsDiffTitle({ host: 'g', path: '/a/step_600.pt' }, { host: 'g', path: '/a/step_690.pt' }),
    'args: step_600 ↔ step_690 (g)',
  );
  assert.equal(
    argsDiffTitle({ host: 'g', path: '/a/s1.pt' }, { host: 'h', path: '/b/s1.pt' }),
    'args: s1 (g) ↔ s1 (h)',
  );
});

void test('cache: keyed by host + path + size + mtime, bounded LRU', () => {
  const c = new ArgsCache<string>(2);
  const k = { host: 'g', path: '/a.pt', size: 10, mtime: 100 };
  c.set(k, 'v1');
  assert.equal(c.get(k), 'v1');
  assert.equal(c.get({ ...k, mtime: 101 }), undefined, 'a rewritten checkpoint is read again');
  assert.equal(c.get({ ...k, size: 11 }), undefined);
  assert.equal(c.get({ ...k, host: 'h' }), undefined);
  assert.equal(c.get({ ...k, view: '--all' }), undefined);
  c.set({ ...k, path: '/b.pt' }, 'b');
  c.get(k); // a is now the most recent
  c.set({ ...k, path: '/c.pt' }, 'c');
  assert.equal(c.size, 2);
  assert.equal(c.get({ ...k, path: '/b.pt' }), undefined, 'least recently used goes first');
  assert.equal(c.get(k), 'v1');
  c.forget('g', '/a.pt');
  assert.equal(c.get(k), undefined);
  assert.throws(() => new ArgsCache(0));
});

void test('a shared value shown as {"$ref": path} is one leaf of the diff, not a key "$ref"', () => {
  const text = SAMPLE.replace(
    '"extra": {}',
    '"extra": {"$ref": "$.model"}, "big": {"$bigint": {"bits": 14300, "digits": 4305, "negative": false}}',
  );
  const r = ckptArgsProbe('/x.pt').parse(parsePythonJson(text));
  const flat = flattenArgs(r.args);
  assert.deepEqual(flat.get('extra'), { $ref: '$.model' });
  assert.equal(flat.has('extra.$ref'), false);
  const other = structuredClone(r.args) as Record<string, unknown>;
  other['extra'] = { $ref: '$.betas' };
  const changed = changedArgs(r.args, other as typeof r.args);
  assert.match(changed, /extra: \{"\$ref": "\$\.model"\} → \{"\$ref": "\$\.betas"\}/);
  assert.match(renderArgsDocument(r, { host: 'h', capturedAt: new Date(0) }), /"\$ref": "\$\.model"/);
});
