import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ARGS_SCHEME, fromArgsUri, toArgsUri, type ArgsUriSpec, type UriParts } from '../../src/core/args/uri';
import { argsPathOf, checkpointOf, checkpointRefOf, previousCheckpoint } from '../../src/core/args/target';
import { decodeTarget } from '../../src/core/runs/targets';
import { ArgsReader, isDecodeFailure, type ArgsHost } from '../../src/core/args/reader';
import { entryNode, rootNode, type RunsNode } from '../../src/core/runs/model';
import { listingsOf } from '../support/listings';
import type { RootListing, RunEntry } from '../../src/core/runs/listRuns';
import type { ProbeCall, ProbeOutcome } from '../../src/core/probes/probe';
import { KnownGoodError } from '../../src/core/errors';

const NASTY = [
  '/ckpt/run 1/step_600.pt',
  `/ckpt/it's "quoted"/step.pt`,
  '/ckpt/#hash/?query=1&x=%20/100%.pt',
  '/ckpt/ünï/日本語/🚀.pt',
  '/ckpt/new\nline/tab\there.pt',
  '/ckpt/back\\slash/..//double//',
  '-starts-with-dash.pt',
  '',
];

/** What VS Code does to a URI when it becomes a string and back: every component percent-encoded, then decoded. */
function viaString(u: UriParts): UriParts {
  const s = `${u.scheme}://${encodeURIComponent(u.authority)}${u.path.split('/').map(encodeURIComponent).join('/')}?${encodeURIComponent(u.query)}`;
  const m = /^([^:]+):\/\/([^/]*)([^?]*)\?(.*)$/s.exec(s)!;
  return {
    scheme: m[1]!,
    authority: decodeURIComponent(m[2]!),
    path: decodeURIComponent(m[3]!),
    query: decodeURIComponent(m[4]!),
  };
}

void test('args URIs round-trip nasty paths, host ids and labels, also through a string', () => {
  for (const path of NASTY) {
    for (const spec of [
      { hostId: 'local', path, view: 'args' },
      { hostId: 'ssh:user@gpu box:22', path, view: 'args', label: 'step\n600' },
      { hostId: 'a', path, view: 'changed', other: { hostId: 'b#?%', path: NASTY[3]! } },
      { hostId: 'a', path, view: 'changed', label: 'B', other: { hostId: 'b', path: NASTY[4]!, label: 'A "x"' } },
    ] as ArgsUriSpec[]) {
      const u = toArgsUri(spec);
      assert.equal(u.scheme, ARGS_SCHEME);
      assert.deepEqual(fromArgsUri(u), spec);
      assert.deepEqual(fromArgsUri(viaString(u)), spec);
      // the readable path is one line and names the checkpoint
      assert.ok(!/[\n\t\r]/.test(u.path), u.path);
      assert.ok(u.path.startsWith('/') && !u.path.slice(1).includes('/'), u.path);
    }
  }
});

void test('args URI paths: tab titles and language modes', () => {
  assert.equal(toArgsUri({ hostId: 'h', path: '/c/run/step_600.pt', view: 'args' }).path, '/step_600 args.jsonc');
  assert.equal(
    toArgsUri({
      hostId: 'h',
      path: '/c/step_690/checkpoint.pt',
      label: 'step_690',
      view: 'changed',
      other: { hostId: 'h', path: '/c/step_600/checkpoint.pt', label: 'step_600' },
    }).path,
    '/step_600 ↔ step_690 changed args.txt',
  );
});

void test('fromArgsUri refuses what it did not write', () => {
  const good = toArgsUri({ hostId: 'h', path: '/x.pt', view: 'args' });
  assert.throws(() => fromArgsUri({ ...good, scheme: 'file' }), /scheme file/);
  assert.throws(() => fromArgsUri({ ...good, query: 'not base64 json' }), /not a Known Good args document/);
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  assert.throws(
    () => fromArgsUri({ scheme: ARGS_SCHEME, query: enc({ v: 2, h: 'h', p: '/x', w: 'args' }) }),
    /version 2/,
  );
  assert.throws(
    () => fromArgsUri({ scheme: ARGS_SCHEME, query: enc({ v: 1, h: 'h', p: '/x', w: 'weights' }) }),
    /view weights/,
  );
  assert.throws(
    () => fromArgsUri({ scheme: ARGS_SCHEME, query: enc({ v: 1, h: 'h', p: '/x', w: 'changed' }) }),
    /other side/,
  );
  assert.throws(
    () => fromArgsUri({ scheme: ARGS_SCHEME, query: enc({ v: 1, h: 'h', p: 5, w: 'args' }) }),
    /host or path/,
  );
  assert.throws(() => toArgsUri({ hostId: 'h', path: '/x', view: 'changed' }), /two checkpoints/);
});

// ---------------------------------------------------------------------------------------------------------------

function ck(name: string, step: number | undefined, extra: Partial<RunEntry> = {}): RunEntry {
  return {
    name,
    path: `run-a/${name}`,
    kind: 'file',
    size: 100,
    mtime: 1000 + (step ?? 0),
    role: 'checkpoint',
    ...(step !== undefined ? { step } : {}),
    ...extra,
  };
}

function listing(children: RunEntry[]): RootListing {
  const run: RunEntry = { name: 'run-a', path: 'run-a', kind: 'dir', size: 0, mtime: 1, role: 'dir', children };
  const other: RunEntry = {
    name: 'run-b',
    path: 'run-b',
    kind: 'dir',
    size: 0,
    mtime: 1,
    role: 'dir',
    children: [{ ...ck('step_650.pt', 650), path: 'run-b/step_650.pt' }],
  };
  return {
    root: '/ckpt',
    path: '/ckpt',
    status: 'ok',
    message: '',
    signature: null,
    entry: { name: 'ckpt', path: '', kind: 'dir', size: 0, mtime: 1, role: 'dir', children: [run, other] },
  };
}

/** The checkpoint at `path` of This machine's listing of `root`, resolved as a command on its row gets it. */
async function resolvedAt(root: RootListing, path: string) {
  const l = await listingsOf([root]);
  const r = l.resolve({ kind: 'checkpoint', hostId: 'local', path });
  assert.ok(r, path);
  return r;
}

void test('previous checkpoint: highest lower step in the same run only; none for the first', async () => {
  const kids = [
    ck('step_700.pt', 700),
    ck('step_600.pt', 600),
    ck('step_690.pt', 690),
    ck('notes.txt', undefined, { role: 'other' }),
  ];
  const root = listing(kids);
  const prev = async (name: string) => previousCheckpoint(await resolvedAt(root, `/ckpt/run-a/${name}`));
  assert.deepEqual(await prev('step_690.pt'), { hostId: 'local', path: '/ckpt/run-a/step_600.pt', label: 'step_600' });
  assert.equal((await prev('step_700.pt'))?.label, 'step_690');
  assert.equal(await prev('step_600.pt'), undefined);
  // without steps: the newest written before it
  const t = [
    ck('last.pt', undefined, { mtime: 50 }),
    ck('best.pt', undefined, { mtime: 40 }),
    ck('old.pt', undefined, { mtime: 10 }),
  ];
  assert.equal(previousCheckpoint(await resolvedAt(listing(t), '/ckpt/run-a/last.pt'))?.label, 'best');
});

void test('args path of a checkpoint: a file itself, a folder through its state file, HF/DCP folders whole', () => {
  const f = (name: string, size = 10): RunEntry => ({
    name,
    path: `s/${name}`,
    kind: 'file',
    size,
    mtime: 1,
    role: 'weights',
  });
  const dir = (children: RunEntry[]): RunEntry => ({
    name: 's',
    path: 's',
    kind: 'dir',
    size: 0,
    mtime: 1,
    role: 'checkpoint',
    children,
  });
  assert.equal(argsPathOf(f('step_1.pt'), '/c/step_1.pt'), '/c/step_1.pt');
  assert.equal(
    argsPathOf(dir([f('model.pt', 900), f('checkpoint.pt', 1000), f('config.json')]), '/c/s/'),
    '/c/s/checkpoint.pt',
  );
  assert.equal(argsPathOf(dir([f('model.pt', 900), f('optim.pt', 300)]), '/c/s'), '/c/s/optim.pt');
  assert.equal(
    argsPathOf(dir([f('model.safetensors'), f('training_args.bin'), f('trainer_state.json')]), '/c/s'),
    '/c/s',
  );
  assert.equal(argsPathOf(dir([f('__0_0.distcp'), f('.metadata')]), '/c/s'), '/c/s');
  assert.equal(argsPathOf(dir([]), '/c/s'), '/c/s');
  // accelerate save_state: the registered objects (the run's args), not the smallest pickle (random_states_0.pkl).
  assert.equal(
    argsPathOf(
      dir([
        f('model.safetensors', 900),
        f('optimizer.bin', 500),
        f('random_states_0.pkl', 10),
        f('custom_checkpoint_1.pkl', 90),
        f('custom_checkpoint_0.pkl', 80),
      ]),
      '/c/s',
    ),
    '/c/s/custom_checkpoint_0.pkl',
  );
  // peft: the adapter's folder, read for its adapter_config.json.
  assert.equal(argsPathOf(dir([f('adapter_config.json'), f('adapter_model.safetensors', 900)]), '/c/s'), '/c/s');
});

void test('checkpointRefOf: rows resolved in the listing, plain refs as named, and nothing else', async () => {
  const kids = [
    ck('step_600.pt', 600),
    ck('odd.pt', 7, { path: 'run-a/odd\ufffd.pt', pathB64: 'cnVuLWEvb2Rk/y5wdA==' }),
  ];
  const root = listing(kids);
  const l = await listingsOf([root]);
  const ofRow = (node: RunsNode) => {
    const t = decodeTarget(node);
    return checkpointRefOf(t, t ? l.resolve(t) : undefined);
  };
  assert.deepEqual(ofRow(entryNode('local', root, kids[0]!, false)), {
    hostId: 'local',
    path: '/ckpt/run-a/step_600.pt',
    label: 'step_600',
  });
  assert.deepEqual(checkpointOf({ hostId: 'local', path: '/a/step_5.pt' }), {
    hostId: 'local',
    path: '/a/step_5.pt',
    label: 'step_5',
  });
  assert.equal(ofRow(rootNode('local', root)), undefined);
  assert.equal(ofRow(entryNode('local', root, root.entry!.children![0]!, false)), undefined); // a run
  assert.equal(checkpointOf('nope'), undefined);
  assert.equal(checkpointOf(undefined), undefined);
  assert.throws(() => ofRow(entryNode('local', root, kids[1]!, false)), /not UTF-8/);
});

void test('the args commands decode their checkpoint as a CommandTarget; the listing says which file holds the args', async () => {
  const folder: RunEntry = {
    ...ck('step_700', 700),
    kind: 'dir',
    children: [
      { ...ck('model.pt', undefined), path: 'run-a/step_700/model.pt', role: 'weights', size: 900 },
      { ...ck('checkpoint.pt', undefined), path: 'run-a/step_700/checkpoint.pt', role: 'weights', size: 1000 },
    ],
  };
  const root = listing([folder]);
  const target = decodeTarget(entryNode('local', root, folder, false));
  assert.ok(target);
  const l = await listingsOf([root]);
  assert.deepEqual(checkpointRefOf(target, l.resolve(target)), {
    hostId: 'local',
    path: '/ckpt/run-a/step_700/checkpoint.pt',
    label: 'step_700',
  });
  // not resolved (a URI, a plain call) the path is read as named
  assert.deepEqual(checkpointRefOf(target, undefined), {
    hostId: 'local',
    path: '/ckpt/run-a/step_700',
    label: 'step_700',
  });
  assert.deepEqual(decodeTarget({ hostId: 'local', path: '/a/step_5.pt' }), {
    kind: 'checkpoint',
    hostId: 'local',
    path: '/a/step_5.pt',
  });
  const uri = toArgsUri({ hostId: 'h', path: '/c/s/checkpoint.pt', label: 's', view: 'args' });
  assert.deepEqual(checkpointOf(uri), { hostId: 'h', path: '/c/s/checkpoint.pt', label: 's' });
  assert.equal(checkpointRefOf({ kind: 'log', hostId: 'h', path: '/c/log.jsonl' }, undefined), undefined);
});

void test('args URIs are on defineDocUri (d=…); a query written before (the bare base64url JSON) still reads', () => {
  const spec: ArgsUriSpec = { hostId: 'h', path: '/c/step_1.pt', view: 'args', label: 'step_1' };
  const u = toArgsUri(spec);
  assert.match(u.query, /^d=[A-Za-z0-9_-]+$/);
  const legacy = Buffer.from(JSON.stringify({ v: 1, h: 'h', p: '/c/step_1.pt', w: 'args', l: 'step_1' })).toString(
    'base64url',
  );
  assert.deepEqual(fromArgsUri({ scheme: ARGS_SCHEME, query: legacy }), spec);
  assert.throws(
    () => fromArgsUri({ scheme: ARGS_SCHEME, query: 'd=%%%' }),
    (e: unknown) => {
      assert.ok(e instanceof KnownGoodError && e.code === 'internal');
      return true;
    },
  );
});

// ---------------------------------------------------------------------------------------------------------------

/** A host whose probes answer from a table (size/mtime change when a test "rewrites" a file), counting calls. */
function fakeHost(files: Map<string, { bytes: number; mtime: number; lr: number; bad?: string }>) {
  const calls: string[] = [];
  const answer = <R>(call: ProbeCall<R>, how: string): Promise<ProbeOutcome<R>> => {
    const path = call.args[0]!;
    calls.push(`${how} ${call.probe} ${call.args.join(' ')}`);
    const f = files.get(path);
    if (!f)
      return Promise.reject(
        new KnownGoodError('probe-failed', `${call.probe}: no such file: ${path}`, { probeCode: 'not-found' }),
      );
    const stat = call.args.includes('--stat');
    if (!stat && f.bad && call.probe === 'ckpt_args') {
      return Promise.reject(new KnownGoodError('probe-failed', `ckpt_args: ${f.bad}`, { probeCode: 'corrupt' }));
    }
    if (!stat && call.probe === 'ckpt_args_torch' && !call.args.includes('--unsafe')) {
      return Promise.reject(new KnownGoodError('probe-failed', 'refused', { probeCode: 'needs-unsafe' }));
    }
    const raw = stat
      ? { path, bytes: f.bytes, mtime: f.mtime, dir: false }
      : {
          format: call.probe === 'ckpt_args' ? 'torch-zip' : 'torch-load',
          path,
          bytes: f.bytes,
          key: 'args',
          args: { lr: f.lr, bs: 32 },
          argsType: 'dict',
          step: 1,
          epoch: null,
          tensors: { count: 0, bytes: 0 },
          topLevelKeys: ['args'],
          unsafeGlobals: [],
          warnings: [],
          bytesRead: 10,
          mtime: f.mtime,
        };
    return Promise.resolve({ value: call.parse(raw), python: { executable: 'python3', version: '3.11.0' } });
  };
  const host: ArgsHost = {
    label: 'gpu-box',
    probes: { run: (c) => answer(c, 'run'), runOnce: (c) => answer(c, 'once') },
  };
  return { host, calls };
}

void test('reader: cached by size and mtime; a rewritten file is read again; concurrent reads share one probe', async () => {
  const files = new Map([
    ['/c/a.pt', { bytes: 100, mtime: 1, lr: 0.1 }],
    ['/c/b.pt', { bytes: 100, mtime: 1, lr: 0.2 }],
  ]);
  const { host, calls } = fakeHost(files);
  const reader = new ArgsReader({
    host: () => host,
    allowTorchLoad: () => false,
    confirmUnsafeLoad: () => Promise.resolve(false),
  });
  const a = { hostId: 'gpu', path: '/c/a.pt', label: 'step_600' };
  const b = { hostId: 'gpu', path: '/c/b.pt', label: 'step_690' };
  const reads = () => calls.filter((c) => !c.includes('--stat')).length;

  const [r1, r2] = await Promise.all([reader.read(a), reader.read(a)]);
  assert.equal(reads(), 1);
  assert.equal(r1.fromCache || r2.fromCache, false);
  const r3 = await reader.read(a);
  assert.equal(r3.fromCache, true);
  assert.equal(reads(), 1);
  assert.equal(r3.capturedAt, r1.capturedAt);

  files.set('/c/a.pt', { bytes: 100, mtime: 2, lr: 0.3 }); // rewritten in place, same size
  const r4 = await reader.read(a);
  assert.equal(r4.fromCache, false);
  assert.deepEqual(r4.result.args, { lr: 0.3, bs: 32 });
  assert.equal(reads(), 2);

  const doc = await reader.document(a);
  assert.match(doc, /^\/\/ Known Good: args of step_600$/m);
  assert.match(doc, /^\/\/ host: {5}gpu-box$/m);
  assert.match(doc, /^ {2}"lr": 0\.3$/m);
  const changed = await reader.changed(a, b);
  assert.match(
    changed,
    /^\/\/ Known Good: changed args, step_600 ↔ step_690\n\/\/ A: \/c\/a\.pt \(gpu-box\)\n\/\/ B: \/c\/b\.pt \(gpu-box\)\n/,
  );
  assert.match(changed, /^ {2}lr: 0\.3 → 0\.2$/m);
  assert.doesNotMatch(changed, /bs:/);
  assert.equal(reads(), 3); // b only: a came from the cache
});

void test('reader: torch.load fallback only when allowed, and weights_only=False only after a yes', async () => {
  const files = new Map([['/c/odd.pt', { bytes: 5, mtime: 1, lr: 0.5, bad: 'corrupt pickle in /c/odd.pt' }]]);
  const ref = { hostId: 'gpu', path: '/c/odd.pt', label: 'odd' };
  let allow = false;
  let answer = false;
  const asked: string[] = [];
  const { host, calls } = fakeHost(files);
  const reader = new ArgsReader({
    host: () => host,
    allowTorchLoad: () => allow,
    confirmUnsafeLoad: (h, p) => {
      asked.push(`${h} ${p}`);
      return Promise.resolve(answer);
    },
  });
  await assert.rejects(
    () => reader.read(ref),
    (e: unknown) => isDecodeFailure(e) && /corrupt pickle/.test(String(e)),
  );
  assert.ok(!calls.some((c) => c.includes('ckpt_args_torch')));

  allow = true;
  await assert.rejects(() => reader.read(ref), /declined/);
  assert.deepEqual(asked, ['gpu-box /c/odd.pt']);
  assert.ok(
    calls.some((c) => c === 'once ckpt_args_torch /c/odd.pt'),
    calls.join('\n'),
  );
  assert.ok(!calls.some((c) => c.includes('--unsafe')));

  answer = true;
  const r = await reader.read(ref);
  assert.equal(r.result.format, 'torch-load');
  assert.ok(calls.includes('once ckpt_args_torch /c/odd.pt --unsafe'));
  assert.equal(asked.length, 2);

  // a missing file is not a decode failure: no fallback
  await assert.rejects(() => reader.read({ hostId: 'gpu', path: '/c/missing.pt', label: 'm' }), /no such file/);
  assert.ok(!calls.some((c) => c.includes('ckpt_args_torch /c/missing.pt')));
});
