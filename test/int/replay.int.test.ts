import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { setupFromFacts } from '../../src/core/replay/fromFacts';
import { planReplay, runReplay, type ReplayHost } from '../../src/core/replay/replay';
import { SshPool } from '../../src/core/transport/ssh';
import { analyze } from '../../src/core/whatChanged/analyze';
import { gatherFacts } from '../../src/core/whatChanged/gather';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { TORCH_PYTHON, requireTorch } from '../support/require';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Replay (issue 33) against a real sshd, one kind of change at a time: a small real training loop
 * (test/support/replay/train.py, Debian's python3-torch on CPU) is launched through kg_record.py, checkpointed, and
 * resumed with ONE change — a flag, a variable, a committed edit of model.py, an uncommitted edit of train.py, a data
 * file — and the replay resumes it from its known-good checkpoint in both launches and finds that change, confirmed.
 * Given only a change that costs nothing it says "not reproduced". Speeds are the loop's own tokens per CPU-second
 * (beside other work, the CPU clock keeps a state's speed its own); each effect is 2x or more, far above that noise.
 */

const LOOP = join(__dirname, '..', 'support', 'replay');
const RECORD = join(__dirname, '..', '..', 'python', 'kg_record.py');
const THRESHOLD = 0.25;
const STEPS = 12;

type Kind = 'arg' | 'env' | 'code' | 'uncommitted' | 'data';

function git(dir: string, ...args: string[]) {
  execFileSync('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', ...args], {
    cwd: dir,
    stdio: 'pipe',
  });
}

/** A run folder: its own git checkout, two launches through kg_record.py, the second with one change of `kind`. */
function makeRun(root: string, kind: Kind, harmless = false): string {
  const dir = join(root, `run-${kind}${harmless ? '-lr' : ''}`);
  mkdirSync(join(dir, 'data'), { recursive: true });
  for (const f of readdirSync(LOOP)) cpSync(join(LOOP, f), join(dir, f));
  writeFileSync(join(dir, 'README.md'), '# a replay test run\n');
  writeFileSync(join(dir, '.gitignore'), 'data/\nckpt/\n*.jsonl\n__pycache__/\n');
  writeFileSync(join(dir, 'data', 'a.txt'), 'seq=32\n');
  writeFileSync(join(dir, 'data', 'b.txt'), 'seq=256\n');
  git(dir, 'init', '-q');
  git(dir, 'add', '.');
  git(dir, 'commit', '-q', '-m', 'a small loop');
  const launch = (extra: string[], env: Record<string, string> = {}) =>
    execFileSync(
      TORCH_PYTHON,
      [RECORD, '--run', dir, '--', TORCH_PYTHON, 'train.py', '--log_every', '3', '--save_every', '24', ...extra],
      { cwd: dir, stdio: 'pipe', env: { ...process.env, ...env } },
    );
  launch(['--data', 'data/a.txt', '--steps', '48', '--lr', '0.0003']);
  const args = ['--steps', '72', '--resume', 'ckpt/step_48.pt'];
  let data = 'data/a.txt';
  const lr = harmless ? '0.0001' : '0.0003';
  let env: Record<string, string> = {};
  if (kind === 'arg') args.push('--work', '8');
  if (kind === 'env') env = { KG_REPLAY_SLOW: '1' };
  if (kind === 'data') data = 'data/b.txt';
  if (kind === 'code') {
    const model = readFileSync(join(dir, 'model.py'), 'utf8');
    writeFileSync(join(dir, 'model.py'), model.replace('for _ in range(work):', 'for _ in range(4 * work):'));
    git(dir, 'commit', '-q', '-am', 'Mix more');
  }
  if (kind === 'uncommitted') {
    const train = readFileSync(join(dir, 'train.py'), 'utf8');
    writeFileSync(join(dir, 'train.py'), train.replace('repeat = 3 if', 'repeat = 4 if not'));
  }
  launch(['--data', data, ...args, '--lr', lr], env);
  return dir;
}

void describe('replay from the known-good checkpoint, one kind of change at a time (real sshd)', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let host: ReplayHost;
  let root: string;
  let home: string;

  before(async () => {
    requireTorch();
    root = mkdtempSync(join(tmpdir(), 'kg-replay-'));
    sshd = await startSshd();
    home = sshd.home;
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const transport = pool.transport(endpointOf(sshd), 'test-sshd');
    const probes = new ProbeRunner(transport, { python: TORCH_PYTHON, timeoutMs: 120_000, resident: false });
    host = { transport, probes, label: 'test-sshd', python: TORCH_PYTHON };
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  async function replay(dir: string, only?: string[]) {
    const facts = await gatherFacts({ id: host.transport.id, label: 'test-sshd', probes: host.probes }, dir, {});
    const report = analyze(facts);
    const setup = setupFromFacts(facts, report, {
      steps: STEPS,
      threshold: THRESHOLD,
      ...(only ? { only } : {}),
    });
    const plan = await planReplay(host, setup);
    const text: string[] = [];
    const o = await runReplay(host, plan, setup, { onText: (t) => text.push(t) });
    console.log(`${dir}: ${o.headline} (${o.runs.length} runs)`);
    return { o, plan, text: text.join('') };
  }

  const cases: [Kind, string, string][] = [
    ['arg', 'arg:--work', 'a flag (--work 2 → 8)'],
    ['env', 'env:KG_REPLAY_SLOW', 'a variable (KG_REPLAY_SLOW set)'],
    ['code', 'code:model.py', 'a committed edit of model.py'],
    ['uncommitted', 'code:train.py', 'an edit of train.py not committed'],
    ['data', 'arg:--data', 'a data file with longer samples'],
  ];
  for (const [kind, id, what] of cases) {
    void it(`${what}: named and confirmed by replay, nothing written in the run folder`, async () => {
      const dir = makeRun(root, kind);
      const before = execFileSync('find', [dir, '-newer', join(dir, 'train.py')], { encoding: 'utf8' });
      const { o, plan } = await replay(dir);
      assert.deepEqual(
        plan.changes.map((c) => c.id),
        [id],
        plan.text,
      );
      assert.equal(o.report?.verdict.kind, 'culprit', o.markdown);
      assert.deepEqual(o.report?.verdict.ids, [id]);
      assert.equal(o.report?.confirmation?.confirmed, true, o.markdown);
      // nothing of the user's touched: the run folder holds what it held; the replay's own folder lost its checkpoints
      assert.equal(execFileSync('find', [dir, '-newer', join(dir, 'train.py')], { encoding: 'utf8' }), before);
      assert.ok(plan.dir.startsWith(`${home}/.known-good/replays/`), plan.dir);
      const left = execFileSync('find', [plan.dir, '-name', '*.pt'], { encoding: 'utf8' });
      assert.equal(left, '', 'the replay removes its checkpoints');
      assert.ok(existsSync(join(plan.dir, 'runs')), 'its logs stay');
    });
  }

  void it('given only a change that costs nothing (lr), the replay says "not reproduced", never a culprit', async () => {
    const dir = makeRun(root, 'arg', true);
    const { o, plan } = await replay(dir, ['arg:--lr']);
    assert.deepEqual(
      plan.changes.map((c) => c.id),
      ['arg:--lr'],
    );
    assert.equal(o.report?.verdict.kind, 'not-reproduced', o.markdown);
    assert.match(o.headline, /^Not reproduced by replay/);
  });
});
