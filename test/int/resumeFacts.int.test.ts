import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isKnownGoodError } from '../../src/core/errors';
import { ProbeRunner } from '../../src/core/probes/runner';
import { SshPool } from '../../src/core/transport/ssh';
import { resumeDifferences, STEP_ON_GPU_HINT } from '../../src/core/whatChanged/resumeDifferences';
import { resumeFactsProbe } from '../../src/core/whatChanged/resumeFacts';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { requireTorch, TORCH_PYTHON } from '../support/require';
import { startSshd, type TestSshd } from '../support/sshd';

// Real torch checkpoints written by Debian's torch (test/python/resume_ckpt_writer.py: a GPU run's checkpoints before
// and after a resume with map_location="cuda", the storages' devices tagged through torch's serialization registry),
// read over real SSH by the stdlib probe through the resident helper, then compared.

let sshd: TestSshd;
let pool: SshPool;
let runner: ProbeRunner;
let dir = '';

before(async () => {
  requireTorch();
  dir = mkdtempSync(join(tmpdir(), "kg-resume ssh 'q' #"));
  chmodSync(dir, 0o755);
  const r = spawnSync(TORCH_PYTHON, [join(__dirname, '..', 'python', 'resume_ckpt_writer.py'), dir], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
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

void test('a resume that moved the step counters onto the GPU is read over SSH and is the one difference', async () => {
  const b = (await runner.run(resumeFactsProbe(join(dir, 'gpu-before.pt')))).value;
  const a = (await runner.run(resumeFactsProbe(join(dir, 'gpu-after.pt')))).value;
  assert.equal(b.format, 'torch-zip');
  assert.deepEqual([b.step, a.step], [500, 600]);
  assert.equal(b.optimizers[0]?.state['step']?.tensors[0]?.location, 'cpu');
  assert.equal(a.optimizers[0]?.state['step']?.tensors[0]?.location, 'cuda:0');
  const diffs = resumeDifferences(b, a);
  assert.deepEqual(
    diffs.map((d) => [d.text, d.speed, d.hint]),
    [['optimizer state `step`: cpu (float32, 4 tensors) → cuda:0 (float32, 4)', 'known', STEP_ON_GPU_HINT]],
  );
  // two checkpoints written the same way do not differ
  assert.deepEqual(resumeDifferences(b, b), []);
});

void test('a Hugging Face checkpoint folder over SSH: optimizer.pt, scheduler.pt and rng_state.pth', async () => {
  const { value } = await runner.run(resumeFactsProbe(join(dir, 'checkpoint-500')));
  assert.equal(value.format, 'hf-folder');
  assert.equal(value.step, 500);
  assert.deepEqual(
    value.optimizers.map((o) => [o.source, o.paramsWithState]),
    [['optimizer.pt', 4]],
  );
  assert.deepEqual([value.scheduler, value.rng], [['scheduler.pt'], ['rng_state.pth']]);
});

void test('a file that is not a checkpoint is one line with its code, over SSH', async () => {
  const file = join(dir, 'train.log');
  writeFileSync(file, 'step 500 loss 2.1\n');
  await assert.rejects(
    () => runner.run(resumeFactsProbe(file)),
    (e: unknown) =>
      isKnownGoodError(e, 'probe-failed') &&
      e.detail?.['probeCode'] === 'not-a-checkpoint' &&
      /not a checkpoint/.test(e.message) &&
      !e.message.includes('\n'),
  );
});
