import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProbeRunner } from '../../src/core/probes/runner';
import { requireTorch, TORCH_PYTHON } from '../support/require';
import { SshPool } from '../../src/core/transport/ssh';
import { ckptArgsProbe } from '../../src/core/args/argsProbe';
import { ArgsReader } from '../../src/core/args/reader';
import { ckptStatProbe } from '../../src/core/args/moreProbes';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { startSshd, type TestSshd } from '../support/sshd';

// Real torch checkpoints written by Debian's torch, read over real SSH by the stdlib probe (plain python3, no torch)
// through the resident helper on one pooled ssh2 connection.
const TORCH_PY = TORCH_PYTHON;

let sshd: TestSshd;
let pool: SshPool;
let runner: ProbeRunner;
let dir = '';

function torchRun(script: string, ...argv: string[]): void {
  const r = spawnSync(TORCH_PY, ['-c', script, ...argv], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

function saveArgs(file: string, lr: number): void {
  torchRun(
    `
import argparse, sys, torch
args = argparse.Namespace(lr=float(sys.argv[2]), batch_size=32, betas=(0.9, 0.999), dtype=torch.bfloat16, device=torch.device("cpu"))
torch.manual_seed(0)
torch.save({"args": args, "model": torch.nn.Linear(4, 4).state_dict(), "step": 690}, sys.argv[1])
`,
    file,
    String(lr),
  );
}

before(async () => {
  requireTorch();
  dir = mkdtempSync(join(tmpdir(), "kg-args ssh 'q' #"));
  chmodSync(dir, 0o755);
  sshd = await startSshd();
  pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
  runner = new ProbeRunner(pool.transport(endpointOf(sshd), 'test-sshd'), { python: 'python3', timeoutMs: 30000 });
});

after(async () => {
  runner?.dispose();
  pool?.dispose();
  await sshd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

void test('args of a real torch checkpoint over SSH through the resident helper, one connection', async () => {
  const file = join(dir, 'step 690 "x".pt');
  saveArgs(file, 0.02);
  const before = sshd.connectionCount();
  const { value } = await runner.run(ckptArgsProbe(file));
  assert.equal(value.format, 'torch-zip');
  assert.equal(value.argsType, 'argparse.Namespace');
  assert.deepEqual(value.args, {
    lr: 0.02,
    batch_size: 32,
    betas: [0.9, 0.999],
    dtype: 'torch.bfloat16',
    device: 'cpu',
  });
  assert.equal(value.step, 690);
  assert.deepEqual(value.tensors, { count: 2, bytes: (16 + 4) * 4 });
  assert.equal(value.unsafeGlobals.length, 0);
  // second read and the stat: the same helper, no new connection
  const st = await runner.run(ckptStatProbe(file));
  assert.equal(st.value.bytes, value.bytes);
  assert.equal(st.value.dir, false);
  // the read carries the same stat: the args cache keys a first read by it, with no stat request of its own
  assert.deepEqual(value.stat, { bytes: st.value.bytes, mtime: st.value.mtime });
  assert.ok(sshd.connectionCount() - before <= 1, `connections: ${sshd.connectionCount() - before}`);
});

void test('the cached reader over SSH: reopening reads nothing, a rewritten checkpoint is read again', async () => {
  const file = join(dir, 'step_600.pt');
  saveArgs(file, 0.01);
  const reader = new ArgsReader({
    host: () => ({ label: 'test-sshd', probes: runner }),
    allowTorchLoad: () => false,
    confirmUnsafeLoad: () => Promise.resolve(false),
  });
  const ref = { hostId: 'test-sshd', path: file, label: 'step_600' };
  const a = await reader.read(ref);
  assert.equal(a.fromCache, false);
  const again = await reader.read(ref);
  assert.equal(again.fromCache, true);
  assert.deepEqual(again.result, a.result);

  saveArgs(file, 0.03); // same size: only the mtime tells
  const t = new Date(Date.now() + 5000);
  utimesSync(file, t, t);
  const b = await reader.read(ref);
  assert.equal(b.fromCache, false);
  assert.equal((b.result.args as Record<string, unknown>)['lr'], 0.03);
  const doc = await reader.document(ref);
  assert.match(doc, /^\/\/ host: {5}test-sshd$/m);
  assert.match(doc, /^ {2}"lr": 0\.03$/m);
});

void test('a hostile checkpoint over SSH: reported with its unsafe globals, and nothing runs', async () => {
  const file = join(dir, 'hostile.pt');
  const marker = join(dir, 'PWNED');
  torchRun(
    `
import os, shlex, sys, torch
class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + shlex.quote(sys.argv[2]),))
torch.save({"args": {"lr": 0.1}, "evil": Evil()}, sys.argv[1])
`,
    file,
    marker,
  );
  // the file really is hostile: a plain pickle load of its data.pkl runs the command
  torchRun(
    `
import pickle, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
class U(pickle.Unpickler):
    def persistent_load(self, pid):
        return None
U(z.open(name)).load()
`,
    file,
  );
  assert.equal(existsSync(marker), true, 'the hostile pickle should create the marker when loaded normally');
  rmSync(marker);

  const { value } = await runner.run(ckptArgsProbe(file));
  assert.deepEqual(value.unsafeGlobals, ['posix.system']);
  assert.deepEqual(value.args, { lr: 0.1 });
  const reader = new ArgsReader({
    host: () => ({ label: 'test-sshd', probes: runner }),
    allowTorchLoad: () => true,
    confirmUnsafeLoad: () => Promise.reject(new Error('must not be asked: the safe reader decoded it')),
  });
  const doc = await reader.document({ hostId: 'test-sshd', path: file, label: 'hostile' });
  assert.match(doc.split('\n')[0]!, /^\/\/ ⚠ UNSAFE: .*posix\.system/);
  assert.equal(existsSync(marker), false);
});

void test('errors over SSH are one line: missing file, not a checkpoint', async () => {
  await assert.rejects(
    () => runner.run(ckptArgsProbe(join(dir, 'missing.pt'))),
    (e: unknown) => /no such file/.test(String(e)) && !String(e).includes('\n'),
  );
  await assert.rejects(() => runner.run(ckptStatProbe(join(dir, 'missing.pt'))), /no such file/);
});
