import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { whatChanged } from '../../src/core/whatChanged/gather';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { TORCH_PYTHON, requireTorch } from '../support/require';

/*
 * The code as a cause on real runs written here (issue 32, items 1 and 2): the replay tests' small real training loop
 * (test/support/replay/train.py, Debian's python3-torch on CPU; tok_s is tokens per CPU-second of the process, so a
 * loaded machine keeps a state's speed its own) in its own git checkout, launched to step 60, resumed from its step-48
 * checkpoint to step 96 with ONE real change that costs speed, and What Changed? asked on the run:
 * - an edit of train.py not committed (an extra forward/backward pass a step: half the speed);
 * - a one-line model.py change committed beside a README-only commit;
 * - an uncommitted edit written before the first launch and one written after the second, with the real cause a flag.
 * Each launch writes its own log (the first is rotated to train_log.1.jsonl, as logrotate names it): a restart the
 * history shows for certain — a step going back inside one file folds into the reduction's buckets, and a relaunch a
 * few seconds later is no wall-time gap.
 */

const LOOP = join(__dirname, '..', 'support', 'replay');

function git(dir: string, ...args: string[]) {
  execFileSync('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', ...args], {
    cwd: dir,
    stdio: 'pipe',
  });
}

function edit(file: string, from: string, to: string) {
  const text = readFileSync(file, 'utf8');
  assert.ok(text.includes(from), `${file} has no ${from}`);
  writeFileSync(file, text.replace(from, to));
}

/** A run folder, its own checkout of the loop, launched once to step 60 (checkpoints at 24 and 48). */
function firstLaunch(root: string, name: string, before?: (dir: string) => void): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'data'), { recursive: true });
  for (const f of readdirSync(LOOP)) cpSync(join(LOOP, f), join(dir, f));
  writeFileSync(join(dir, 'README.md'), '# a small loop\n');
  writeFileSync(join(dir, '.gitignore'), 'data/\nckpt/\n*.jsonl\n__pycache__/\n');
  writeFileSync(join(dir, 'data', 'a.txt'), 'seq=64\n');
  git(dir, 'init', '-q');
  git(dir, 'add', '.');
  git(dir, 'commit', '-q', '-m', 'a small loop');
  before?.(dir);
  launch(dir, ['--steps', '60']);
  renameSync(join(dir, 'train_log.jsonl'), join(dir, 'train_log.1.jsonl'));
  return dir;
}

function launch(dir: string, extra: string[]) {
  execFileSync(TORCH_PYTHON, ['train.py', '--data', 'data/a.txt', '--log_every', '3', '--save_every', '24', ...extra], {
    cwd: dir,
    stdio: 'pipe',
  });
}

/** The second launch: resumed from step 48 to step 96 (steps 49–60 done again). */
function resume(dir: string, extra: string[] = []) {
  launch(dir, ['--steps', '96', '--resume', 'ckpt/step_48.pt', ...extra]);
}

function diag(r: WhatChangedReport): string {
  return `${renderWhatChangedMarkdown(r)}\n${JSON.stringify(r.suspects.map((s) => [s.title, s.score, s.when.text]))}`;
}

void describe('What Changed? on real runs whose code changed at the restart', () => {
  let root: string;
  let runner: ProbeRunner;
  const host = () => ({ id: 'local', label: 'This machine', probes: runner });

  before(() => {
    requireTorch();
    root = mkdtempSync(join(tmpdir(), 'kg-why-code-'));
    runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120_000 });
  });
  after(() => {
    runner?.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  void it('an extra pass a step added to train.py without a commit: the edit, its line and its time lead, at the restart', async () => {
    const dir = firstLaunch(root, 'uncommitted');
    edit(join(dir, 'train.py'), 'for _ in range(repeat):', 'for _ in range(repeat + 1):');
    resume(dir);
    const r = await whatChanged(host(), dir, {});
    assert.equal(r.verdict, 'regression', diag(r));
    const first = r.suspects[0]!;
    assert.equal(first.title, 'train.py (main()): uncommitted edit (for _ in range(repeat + 1):)', diag(r));
    assert.equal(first.coincides, true, diag(r));
    assert.equal(first.when.steps?.from, 48, diag(r));
    assert.match(
      first.when.text,
      /after the last log line before the restart \(step 48, .*\): first run by the launch from step \d+$/,
    );
    assert.match(
      r.headline,
      /; changed at step 48: train\.py \(main\(\)\): uncommitted edit \(for _ in range\(repeat \+ 1\):\)/,
    );
    assert.ok(!/nothing recorded/.test(r.headline), r.headline);
    const doc = first.evidence.find((e) => e.kind === 'git');
    assert.ok(doc?.kind === 'git' && doc.document !== undefined, diag(r));
    assert.match(
      doc.document,
      /^@@ -\d+ \+\d+ @@ main\(\)\n- +for _ in range\(repeat\):\n\+ +for _ in range\(repeat \+ 1\):$/m,
    );
    assert.ok(
      r.restarts?.some((x) => x.changed.includes(first.title)),
      diag(r),
    );
  });

  void it('a one-line model.py change committed beside a README-only commit: one suspect, model.py; the README never ranked', async () => {
    const dir = firstLaunch(root, 'committed');
    edit(join(dir, 'model.py'), 'for _ in range(work):', 'for _ in range(2 * work):');
    git(dir, 'commit', '-q', '-am', 'Mix twice');
    writeFileSync(join(dir, 'README.md'), '# a small loop\n\nRun it: python3 train.py --data data/a.txt\n');
    git(dir, 'commit', '-q', '-am', 'Say how to run it');
    resume(dir);
    const r = await whatChanged(host(), dir, {});
    assert.equal(r.verdict, 'regression', diag(r));
    assert.equal(r.suspects[0]?.title, 'model.py (forward()) changed: 1 commit ("Mix twice")', diag(r));
    assert.equal(r.suspects[0]?.coincides, true, diag(r));
    assert.ok(!r.suspects.some((s) => /README/.test(s.title)), diag(r));
    assert.ok(
      r.unranked.some((u) => u.title === 'README.md: documentation (1 commit ("Say how to run it"))'),
      diag(r),
    );
  });

  void it('an edit written before the first launch and one after the second cannot explain the drop; the flag at the restart does', async () => {
    const dir = firstLaunch(root, 'timing', (d) => edit(join(d, 'model.py'), 'h = x\n', 'h = x + 0\n'));
    resume(dir, ['--work', '8']);
    edit(join(dir, 'train.py'), 'torch.manual_seed(0)', 'torch.manual_seed(1)');
    const r = await whatChanged(host(), dir, {});
    assert.equal(r.verdict, 'regression', diag(r));
    assert.equal(r.suspects[0]?.title, 'work 2 → 8', diag(r));
    const early = r.suspects.find((s) => s.title.startsWith('model.py (forward()): uncommitted edit'));
    assert.ok(early?.ruledOut, diag(r));
    assert.match(
      early.when.text,
      /before the run's first launch \(first log line at step 3\): every launch in the log ran it$/,
    );
    const late = r.suspects.find((s) => s.title.startsWith('train.py (main()): uncommitted edit'));
    assert.ok(late?.ruledOut, diag(r));
    assert.match(late.when.text, /after the latest launch began \(step \d+\): no launch in the log ran it$/);
  });
});
