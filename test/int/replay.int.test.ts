import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
import { folderPrint, makeReplayRun, makeRestartRun, REPLAY_CHANGE_ID, type ReplayKind } from '../support/replayRuns';
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

const THRESHOLD = 0.25;
const STEPS = 12;

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

  const cases: [ReplayKind, string][] = [
    ['arg', 'a flag (--work 2 → 8)'],
    ['env', 'a variable (KG_REPLAY_SLOW set)'],
    ['code', 'a committed edit of model.py'],
    ['uncommitted', 'an edit of train.py not committed'],
    ['data', 'a data file with longer samples'],
  ];
  for (const [kind, what] of cases) {
    const id = REPLAY_CHANGE_ID[kind];
    void it(`${what}: named and confirmed by replay, nothing written in the run folder`, async () => {
      const dir = makeReplayRun(root, kind);
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
    const dir = makeReplayRun(root, 'arg', { harmless: true });
    const { o, plan } = await replay(dir, ['arg:--lr']);
    assert.deepEqual(
      plan.changes.map((c) => c.id),
      ['arg:--lr'],
    );
    assert.equal(o.report?.verdict.kind, 'not-reproduced', o.markdown);
    assert.match(o.headline, /^Not reproduced by replay/);
  });

  void it('a launch folder that is no git checkout: each run starts in its own folder, the run folder unchanged byte for byte', async () => {
    // the loop appends to launches.txt where it starts and writes its log under --out_dir (test/support/replay/train.py)
    const dir = makeReplayRun(root, 'arg', { git: false, name: 'run-arg-nogit' });
    const print = folderPrint(dir);
    assert.ok(
      print.some((l) => l.startsWith('launches.txt file')) && print.some((l) => l.startsWith('train_log.jsonl')),
    );
    const { o, plan } = await replay(dir);
    assert.equal(plan.checkout.repo, null);
    assert.deepEqual(
      plan.changes.map((c) => c.id),
      ['arg:--work'],
      plan.text,
    );
    assert.equal(o.report?.verdict.kind, 'culprit', o.markdown);
    assert.equal(o.report?.confirmation?.confirmed, true, o.markdown);
    assert.deepEqual(folderPrint(dir), print, 'the run folder is byte for byte as it was');
    // each run started in runs/N/cwd, the script and its data named by their absolute paths
    const started = execFileSync('find', [`${plan.dir}/runs`, '-name', 'launches.txt'], { encoding: 'utf8' })
      .trim()
      .split('\n');
    assert.equal(started.length, o.runs.length);
    for (const f of started) {
      assert.match(f, /\/runs\/\d+\/cwd\/launches\.txt$/);
      const argv = JSON.parse(readFileSync(f, 'utf8')) as string[];
      assert.equal(argv[argv.indexOf('--data') + 1], join(dir, 'data/a.txt'));
    }
  });

  void it('the restart itself, with nothing else changed: a resume that costs speed is the culprit, confirmed', async () => {
    // resumed "onto the GPU" (test/support/resumeRun/train.py): the resumed runs are slower than fresh starts
    const dir = makeRestartRun(root, 'cuda');
    const print = folderPrint(dir);
    const { o, plan } = await replay(dir);
    assert.deepEqual(folderPrint(dir), print, 'the run folder (no git checkout) is byte for byte as it was');
    assert.deepEqual(
      plan.changes.map((c) => c.id),
      ['restart'],
      plan.text,
    );
    assert.match(
      plan.text,
      /^The restart \(restart\): the launch started fresh \(no resume, steps 0→12\) against it resumed from step_48\.pt \(steps 48→60\)/m,
    );
    assert.match(plan.text, /for reference, not a state: the run's own tok_s before the restart was \d/);
    assert.match(plan.text, /^Each run is stopped after 30 min, its start-up included \(--run-timeout SECONDS\)$/m);
    assert.equal(o.report?.verdict.kind, 'culprit', o.markdown);
    assert.deepEqual(o.report?.verdict.ids, ['restart']);
    assert.equal(o.report?.confirmation?.confirmed, true, o.markdown);
    assert.ok(o.report.bad < o.report.good, o.markdown);
  });

  void it('the restart itself, a harmless resume: not reproduced', async () => {
    const dir = makeRestartRun(root, 'cpu');
    const { o, plan } = await replay(dir);
    assert.deepEqual(
      plan.changes.map((c) => c.id),
      ['restart'],
    );
    assert.equal(o.report?.verdict.kind, 'not-reproduced', o.markdown);
    assert.match(o.headline, /^Not reproduced by replay/);
  });
});
