import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { SshPool } from '../../src/core/transport/ssh';
import { whatChanged, type WhatChangedHost } from '../../src/core/whatChanged/gather';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { TORCH_PYTHON, requireTorch } from '../support/require';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * The restart itself (issue 32 items 3 and 4) on real runs made at test time: a small real AdamW loop
 * (test/support/resumeRun/train.py, Debian's python3-torch on CPU) writes real torch checkpoints and a real log,
 * is stopped at step 210 and resumed from its step_200 checkpoint. How it resumes is a line of its train.py, as in a
 * real project (no flag, no launch record says it): resumed "onto the GPU", the checkpoints the second launch writes
 * say AdamW's step counters are on cuda:0 (torch's serialization registry tags them, as a GPU run's say) and its steps
 * cost more (see the script). What Changed? over a real sshd must name the restart itself from the checkpoints, with
 * the fact and the advice — also when the learning rate changed at the same restart, which never takes the blame — and
 * call a run resumed onto the CPU steady. Speeds are tokens per CPU-second of the loop's own process.
 */

const LOOP = join(__dirname, '..', 'support', 'resumeRun', 'train.py');

/** A run folder: one launch to step 210, then one resumed from step_200 to step 400 with `lr` (the first: 0.0003). */
function makeRun(root: string, name: string, resumeMap: 'cpu' | 'cuda', lr = '0.0003'): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  cpSync(LOOP, join(dir, 'train.py'));
  const train = readFileSync(join(dir, 'train.py'), 'utf8');
  writeFileSync(join(dir, 'train.py'), train.replace(/^RESUME_MAP = "cpu"$/m, `RESUME_MAP = "${resumeMap}"`));
  const launch = (...args: string[]) =>
    execFileSync(TORCH_PYTHON, ['train.py', '--save_every', '50', '--log_every', '5', ...args], {
      cwd: dir,
      stdio: 'pipe',
    });
  launch('--steps', '210', '--lr', '0.0003');
  launch('--steps', '400', '--resume', 'ckpt/step_200.pt', '--lr', lr);
  return dir;
}

void describe('What Changed? on a real run restarted with nothing changed but how it resumed (real sshd)', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let runner: ProbeRunner;
  let host: WhatChangedHost;
  let root: string;
  const runs: Record<'gpu' | 'lrGpu' | 'cpu', string> = { gpu: '', lrGpu: '', cpu: '' };

  before(async () => {
    requireTorch();
    root = mkdtempSync(join(tmpdir(), 'kg-restart-'));
    runs.gpu = makeRun(root, 'resume-gpu', 'cuda');
    runs.lrGpu = makeRun(root, 'lr-resume-gpu', 'cuda', '0.0001');
    runs.cpu = makeRun(root, 'resume-cpu', 'cpu');
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const transport = pool.transport(endpointOf(sshd), 'test-sshd');
    runner = new ProbeRunner(transport, { python: 'python3', timeoutMs: 120_000 });
    host = { id: transport.id, label: 'test-sshd', probes: runner };
  });
  after(async () => {
    runner?.dispose();
    pool?.dispose();
    await sshd?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  const titles = (r: WhatChangedReport) => r.suspects.map((s) => s.title).join('; ');

  void it('resumed onto the GPU with nothing changed: the restart itself leads, with the step counters and what to do', async () => {
    const r = await whatChanged(host, runs.gpu, {});
    assert.equal(r.verdict, 'regression', r.headline);
    const s = r.suspects[0]!;
    assert.equal(s.source, 'restart', titles(r));
    assert.equal(s.title, 'the restart itself: optimizer state `step`: cpu (float32, 6 tensors) → cuda:0 (float32, 6)');
    assert.ok(s.coincides, JSON.stringify(s.reasons));
    assert.match(s.detail, /step_200\.pt \(the last checkpoint before the restart\) against step_250\.pt/);
    assert.match(s.detail, /torch\.load\(path, map_location="cpu"\)/);
    assert.match(s.detail, /s\["step"\] = s\["step"\]\.cpu\(\)/);
    assert.match(r.headline, /\(0\.\d\d×\); changed at step 2\d\d: the restart itself: optimizer state `step`: cpu/);
    assert.equal(s.prove?.command, `known-good replay test-sshd ${runs.gpu}`);
    assert.deepEqual(r.restarts?.[0]?.resume?.differences, [
      'optimizer state `step`: cpu (float32, 6 tensors) → cuda:0 (float32, 6)',
    ]);
    // the two resume states are read in the round what_changed.py already takes: three round trips
    assert.equal(r.gathered.roundTrips, 3);
  });

  void it('an lr change at the same restart never takes the blame: listed as costing nothing, the restart itself leads', async () => {
    const r = await whatChanged(host, runs.lrGpu, {});
    assert.equal(r.verdict, 'regression', r.headline);
    assert.equal(r.suspects[0]?.source, 'restart', titles(r));
    assert.ok(!r.suspects.some((s) => /^lr /.test(s.title)), titles(r));
    assert.ok(!/: lr 0\.0003/.test(r.headline), r.headline);
    const lr = r.unranked.find((u) => u.title === 'lr 0.0003 → 0.0001');
    assert.ok(lr && !('score' in lr) && lr.inert === true, JSON.stringify(r.unranked));
    assert.match(lr.why, /changes what a step computes, not what it costs/);
  });

  void it('resumed onto the CPU: steady, and the checkpoints around the restart hold the same resume state', async () => {
    const r = await whatChanged(host, runs.cpu, {});
    assert.equal(r.verdict, 'steady', r.headline);
    assert.deepEqual(r.suspects, []);
    assert.deepEqual(r.restarts?.[0]?.resume, { before: 'step_200.pt', after: 'step_250.pt', differences: [] });
  });
});
