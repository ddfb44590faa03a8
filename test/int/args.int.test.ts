import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProbeRunner } from '../../src/core/probes/runner';
import { requireTorch, TORCH_PYTHON } from '../support/require';
import { LocalTransport } from '../../src/core/transport/local';
import { ckptArgsProbe } from '../../src/core/args/argsProbe';
import { changedArgs, renderArgsDocument } from '../../src/core/args/render';
import { isKnownGoodError } from '../../src/core/errors';

// Real checkpoints written by Debian's torch; the probe runs under the plain python3 (no torch).
const TORCH_PY = TORCH_PYTHON;

let dir = '';
let runner: ProbeRunner;

function torchSave(file: string, lr: number, namespace: boolean): void {
  const script = `
import argparse, sys, torch
args = dict(lr=${lr}, batch_size=32, name="run", betas=(0.9, 0.999), clip=float("inf"), scale=float("nan"))
if ${namespace ? 'True' : 'False'}:
    args = argparse.Namespace(**args)
torch.manual_seed(0)
torch.save({"args": args, "model": torch.nn.Linear(3, 2).state_dict(), "step": 600}, sys.argv[1])
`;
  const r = spawnSync(TORCH_PY, ['-c', script, file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

before(() => {
  requireTorch();
  dir = mkdtempSync(join(tmpdir(), 'kg-args-int-'));
  runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 30000 });
});

after(() => {
  runner.dispose();
  rmSync(dir, { recursive: true, force: true });
});

void test('reads a real torch checkpoint through the resident helper and the one-shot path', async () => {
  const file = join(dir, 'step_600.pt');
  torchSave(file, 0.01, true);
  const { value } = await runner.run(ckptArgsProbe(file));
  assert.equal(value.format, 'torch-zip');
  assert.equal(value.argsType, 'argparse.Namespace');
  const args = value.args as Record<string, unknown>;
  assert.equal(args['lr'], 0.01);
  assert.deepEqual(args['betas'], [0.9, 0.999]);
  assert.equal(args['clip'], Infinity);
  assert.ok(Number.isNaN(args['scale']));
  assert.equal(value.step, 600);
  assert.deepEqual(value.tensors, { count: 2, bytes: (6 + 2) * 4 });
  assert.equal(value.bytes, statSync(file).size);
  const once = await runner.runOnce(ckptArgsProbe(file, { keys: ['step'] }));
  assert.equal(once.value.args, 600);
  const all = await runner.run(ckptArgsProbe(file, { all: true }));
  const model = (all.value.args as Record<string, Record<string, unknown>>)['model']!;
  assert.deepEqual(model['weight'], { dtype: 'float32', shape: [2, 3], bytes: 24 });
});

void test('two checkpoints that differ in lr render documents that differ on that line only', async () => {
  // Same path, host, size and capture time: anything else that differed would be rendering noise.
  const file = join(dir, 'step.pt');
  const at = new Date('2025-06-01T00:00:00Z');
  torchSave(file, 0.01, false);
  const a = (await runner.run(ckptArgsProbe(file))).value;
  torchSave(file, 0.02, false);
  const b = (await runner.run(ckptArgsProbe(file))).value;
  assert.equal(a.bytes, b.bytes);
  const da = renderArgsDocument(a, { host: 'This machine', capturedAt: at }).split('\n');
  const db = renderArgsDocument(b, { host: 'This machine', capturedAt: at }).split('\n');
  assert.equal(da.length, db.length);
  const diff = da.map((l, i) => [l, db[i]]).filter(([x, y]) => x !== y);
  assert.deepEqual(diff, [['  "lr": 0.01,', '  "lr": 0.02,']]);
  assert.match(changedArgs(a.args, b.args), /^changed:\n {2}lr: 0\.01 → 0\.02$/m);
});

void test('a hostile checkpoint is reported, and nothing runs', async () => {
  const file = join(dir, 'hostile.pt');
  const marker = join(dir, 'MARKER');
  const script = `
import os, sys, torch
class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + sys.argv[2],))
torch.save({"args": {"lr": 0.1}, "evil": Evil()}, sys.argv[1])
`;
  const r = spawnSync(TORCH_PY, ['-c', script, file, marker], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const { value } = await runner.run(ckptArgsProbe(file));
  assert.deepEqual(value.unsafeGlobals, ['posix.system']);
  assert.match(value.warnings[0] ?? '', /^UNSAFE: .*posix\.system/);
  assert.deepEqual(value.args, { lr: 0.1 });
  assert.equal(existsSync(marker), false);
});

void test('errors are one line and name the problem', async () => {
  const junk = join(dir, 'notes.txt');
  writeFileSync(junk, 'not a checkpoint\n');
  await assert.rejects(
    () => runner.run(ckptArgsProbe(junk)),
    (e: unknown) =>
      isKnownGoodError(e, 'probe-failed') && /not a checkpoint/.test(e.message) && !e.message.includes('\n'),
  );
  await assert.rejects(
    () => runner.run(ckptArgsProbe(join(dir, 'missing.pt'))),
    (e: unknown) => isKnownGoodError(e, 'probe-failed') && /no such file/.test(e.message),
  );
});
