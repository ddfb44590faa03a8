import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parsePythonJson } from '../../src/core/json';
import { readFileSync } from 'node:fs';
import { ckptArgsProbe, type ArgValue, type CkptArgs } from '../../src/core/args/argsProbe';
import {
  argsDiffTitle,
  changedArgs,
  checkpointLabel,
  enumText,
  renderArgsDocument,
  stableJson,
} from '../../src/core/args/render';
import { ArgsCache } from '../../src/core/args/cache';
import { diffArgs, flattenArgs } from '../../src/core/args/diff';
import { formatLocalTime } from '../../src/core/util/format';

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
  assert.ok(lines.includes(`// captured: ${formatLocalTime(at.getTime())}`), 'a readable local time, not ISO');
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
    'args: step_600 ↔ step_690 (g/a)',
  );
  assert.equal(
    argsDiffTitle({ host: 'g', path: '/a/s1.pt' }, { host: 'h', path: '/b/s1.pt' }),
    'args: g/a/s1 ↔ h/b/s1',
  );
  // the same two steps of two runs: two titles (and two tabs), each naming its run
  assert.equal(
    argsDiffTitle(
      { host: 'g', path: '/c/run-a/step_600/checkpoint.pt', label: 'step_600' },
      { host: 'g', path: '/c/run-a/step_690/checkpoint.pt', label: 'step_690' },
    ),
    'args: step_600 ↔ step_690 (g/run-a)',
  );
  assert.equal(
    argsDiffTitle(
      { host: 'g', path: '/c/run-b/step_600/checkpoint.pt', label: 'step_600' },
      { host: 'g', path: '/c/run-b/step_690/checkpoint.pt', label: 'step_690' },
    ),
    'args: step_600 ↔ step_690 (g/run-b)',
  );
  assert.equal(
    argsDiffTitle({ host: 'g', path: '/c/run-a/step_600.pt' }, { host: 'g', path: '/c/run-b/step_690.pt' }),
    'args: run-a/step_600 ↔ run-b/step_690 (g)',
  );
  assert.equal(argsDiffTitle({ host: 'g', path: '/s1.pt' }, { host: 'g', path: '/s2.pt' }), 'args: s1 ↔ s2 (g)');
  // one name in two runs: the runs tell the two compares (and their tabs) apart
  assert.equal(
    argsDiffTitle({ host: 'g', path: '/c/run-a/step_600' }, { host: 'g', path: '/c/run-b/step_600' }),
    'args: run-a/step_600 ↔ run-b/step_600 (g)',
  );
  assert.equal(
    argsDiffTitle({ host: 'g', path: '/c/run-a/step_600/model.pt' }, { host: 'g', path: '/c/run-b/step_600/model.pt' }),
    'args: run-a/…/model ↔ run-b/…/model (g)',
  );
  assert.equal(
    argsDiffTitle(
      { host: 'g', path: '/c/run-a/step_600/checkpoint.pt', label: 'step_600' },
      { host: 'g', path: '/c/run-b/step_600/checkpoint.pt', label: 'step_600' },
    ),
    'args: run-a/step_600 ↔ run-b/step_600 (g)',
  );
  assert.equal(
    argsDiffTitle({ host: 'g', path: '/c/step_600.pt' }, { host: 'g', path: '/c/step_600.ckpt' }),
    'args: step_600.pt ↔ step_600.ckpt (g)',
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

void test('an enum member is one line in the document and Sched(3) / Sched.COSINE in the changed args', () => {
  const text = SAMPLE.replace(
    '"extra": {}',
    '"sched": {"$enum": "__main__.Sched", "value": 3}, "mode": {"$enum": "mylib.Mode", "name": "FAST"}, ' +
      '"scheds": [{"$enum": "__main__.Sched", "value": 1}]',
  );
  const r = ckptArgsProbe('/x.pt').parse(parsePythonJson(text));
  const doc = renderArgsDocument(r, { host: 'h', capturedAt: new Date(0) });
  const lines = doc.split('\n');
  assert.ok(lines.includes('  "sched": {"$enum": "__main__.Sched", "value": 3},'), doc);
  assert.ok(lines.includes('  "mode": {"$enum": "mylib.Mode", "name": "FAST"},'), doc);
  assert.ok(lines.includes('    {"$enum": "__main__.Sched", "value": 1}'), doc);
  assert.ok(
    lines.some((l) => l.startsWith('// note: {"$enum": CLASS, "value": V} is an enum member pickled by value')),
  );
  // a leaf of the diff, never keys "sched.$enum" and "sched.value"
  const flat = flattenArgs(r.args);
  assert.deepEqual(flat.get('sched'), { $enum: '__main__.Sched', value: 3 });
  assert.equal(flat.has('sched.value'), false);
  assert.equal(enumText({ $enum: '__main__.Sched', value: 3 }), 'Sched(3)');
  assert.equal(enumText({ $enum: 'm.Strategy', value: 'steps' }), 'Strategy("steps")');
  assert.equal(enumText({ $enum: 'mylib.Mode', name: 'FAST' }), 'Mode.FAST');
  assert.equal(enumText({ $enum: 'mylib.Mode', name: 'FAST', extra: 1 }), undefined);
  assert.equal(enumText('Sched(3)'), undefined);
  const other = structuredClone(r.args) as Record<string, ArgValue>;
  other['sched'] = { $enum: '__main__.Sched', value: 2 };
  other['mode'] = { $enum: 'mylib.Mode', name: 'SLOW' };
  other['scheds'] = [{ $enum: 'other.Sched', value: 1 }];
  const changed = changedArgs(r.args, other);
  assert.match(changed, /\n {2}sched: Sched\(3\) → Sched\(2\)\n/);
  assert.match(changed, /\n {2}mode: Mode\.FAST → Mode\.SLOW\n/);
  // the same text for another class: the modules tell them apart
  assert.match(changed, /scheds: \[\{"\$enum": "__main__\.Sched", "value": 1\}\] → \[\{"\$enum": "other\.Sched"/);
  // without an enum by value, no note
  const plain = renderArgsDocument(sample(), { host: 'h', capturedAt: new Date(0) });
  assert.ok(!plain.includes('"$enum"'));
});

const ADAPTER = readFileSync(
  new URL('../fixtures/real/peft/run-lora/checkpoint-10/adapter_config.json', import.meta.url),
  'utf8',
);

function peftResult(path: string, args: ArgValue, baseModel?: string | null): CkptArgs {
  return ckptArgsProbe(path).parse({
    format: 'peft',
    path,
    bytes: 0,
    key: 'adapter_config',
    args,
    argsType: 'peft LORA adapter',
    step: null,
    epoch: null,
    tensors: { count: 2, bytes: 512 },
    topLevelKeys: ['adapter_config'],
    unsafeGlobals: [],
    warnings: [],
    bytesRead: 1336,
    mtime: 1,
    ...(baseModel !== undefined ? { baseModel } : {}),
  });
}

void test('a peft adapter: its config is the args, the base model it names in the header; two diff', () => {
  const cfg = JSON.parse(ADAPTER) as Record<string, ArgValue>;
  const a = peftResult('/runs/lora/checkpoint-10', cfg, null);
  const doc = renderArgsDocument(a, { host: 'h', capturedAt: new Date(0) });
  const lines = doc.split('\n');
  assert.ok(lines.includes('// format:   peft, key "adapter_config" (peft LORA adapter)'), doc);
  assert.ok(lines.includes('// base:     (the adapter names no base model)'), doc);
  assert.ok(!lines.some((l) => l.startsWith('// size:')), 'a folder has no one size');
  assert.ok(lines.includes('  "r": 4,'));
  assert.ok(lines.includes('    "c_attn"'));
  const named = peftResult('/x', { ...cfg, base_model_name_or_path: 'gpt2' }, 'https://u:FAKEpw99@hub.example/gpt2');
  const namedDoc = renderArgsDocument(named, { host: 'h', capturedAt: new Date(0) });
  assert.ok(!namedDoc.includes('FAKEpw99'));
  assert.match(namedDoc, /\/\/ base: {5}https:\/\/u:<redacted sha256:[0-9a-f]{12}>@hub\.example\/gpt2\n/);
  // an older probe's result has no baseModel: null, and no base line for a non-peft format
  assert.equal(sample().baseModel, null);
  assert.ok(!renderArgsDocument(sample(), { host: 'h', capturedAt: new Date(0) }).includes('// base:'));
  // two checkpoints of one adapter: same shape, the changed keys only
  const b = peftResult('/runs/lora/checkpoint-20', { ...cfg, r: 8, target_modules: ['c_attn', 'c_proj'] });
  const d = diffArgs(a.args, b.args);
  assert.deepEqual(
    d.changed.map((c) => c.key),
    ['r', 'target_modules'],
  );
  assert.equal(d.added.length + d.removed.length, 0);
  assert.equal(d.same, Object.keys(cfg).length - 2);
  assert.match(changedArgs(a.args, a.args), /no differences/);
});

void test('an accelerate save_state: the saved state_dict is the args', () => {
  const r = { ...sample(), format: 'accelerate', key: null, argsType: 'dict' };
  const doc = renderArgsDocument(r, { host: 'h', capturedAt: new Date(0) });
  assert.ok(doc.split('\n').includes('// format:   accelerate, the state_dict() accelerate saved (dict)'), doc);
});
