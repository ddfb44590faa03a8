import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { replayCommand, runTimeoutMs } from '../../src/cli/commands/replay';
import { commandHelp, parseCommandLine } from '../../src/cli/options';
import { flagValue, withFlag, withoutFlag, withOverride } from '../../src/core/replay/argv';
import { launchChanges, restartChange, stateOf } from '../../src/core/replay/changes';
import { durationText, RUN_TIMEOUT_MS } from '../../src/core/replay/replay';
import { applyOverrides, overridesFor, STACKS, stackOf, withoutName } from '../../src/core/replay/stacks';

/* Replay's override table and its states (issue 33 items 2 and 3): pure functions of the recorded launches. */

const plain = ['/usr/bin/python3', 'train.py', '--data', 'data/a.txt', '--steps', '48', '--lr=0.0003'];

void describe('argv edits keep every other word as it was', () => {
  void it('a flag is read and set in its own style, appended where absent, removed with its value', () => {
    assert.equal(flagValue(plain, '--steps'), '48');
    assert.equal(flagValue(plain, '--lr'), '0.0003');
    assert.equal(flagValue(plain, '--resume'), undefined);
    assert.deepEqual(withFlag(plain, '--lr', '0.1'), [...plain.slice(0, 6), '--lr=0.1']);
    assert.deepEqual(withFlag(plain, '--steps', '60'), [...plain.slice(0, 5), '60', '--lr=0.0003']);
    assert.deepEqual(withFlag(plain, '--resume', 'ck/s 1.pt'), [...plain, '--resume', 'ck/s 1.pt']);
    assert.deepEqual(withoutFlag(plain, '--data'), ['/usr/bin/python3', 'train.py', '--steps', '48', '--lr=0.0003']);
    // a value that is shell text stays one word: nothing here ever joins words into a command line
    assert.deepEqual(withFlag(['p'], '--x', '$(touch x); `id`'), ['p', '--x', '$(touch x); `id`']);
  });

  void it('after -- nothing is a flag of the launch', () => {
    assert.equal(flagValue(['p', '--', '--steps', '3'], '--steps'), undefined);
  });

  void it('Hydra overrides keep their + prefix', () => {
    assert.deepEqual(withOverride(['p', '+trainer.max_steps=5', 'x=1'], 'trainer.max_steps', '9'), [
      'p',
      '+trainer.max_steps=9',
      'x=1',
    ]);
    assert.deepEqual(withOverride(['p'], 'hydra.run.dir', '/r'), ['p', 'hydra.run.dir=/r']);
  });
});

void describe('the override table', () => {
  void it('tells the stacks apart from their words', () => {
    assert.equal(stackOf(plain), 'plain');
    assert.equal(stackOf(['python', 'main.py', 'fit', '--trainer.max_steps=100']), 'lightning');
    assert.equal(stackOf(['python', 'run.py', '--output_dir', 'out', '--max_steps', '5']), 'hf');
    assert.equal(stackOf(['python', 'train.py', 'trainer.max_steps=100', 'model=gpt']), 'hydra');
  });

  void it("uses the launch's own flag for each role, else the usual one, and says which it guessed", () => {
    const argv = [...plain, '--resume', 'ckpt/step_24.pt'];
    const { overrides, guessed } = overridesFor(STACKS.plain, argv, {
      resume: '/r/ck.pt',
      output: '/replay/runs/1',
      steps: '60',
    });
    assert.deepEqual(guessed, ['output']);
    const out = applyOverrides(STACKS.plain, argv, overrides);
    assert.equal(flagValue(out, '--resume'), '/r/ck.pt');
    assert.equal(flagValue(out, '--steps'), '60');
    assert.equal(flagValue(out, '--out_dir'), '/replay/runs/1');
    // a name the person gave wins
    const named = overridesFor(STACKS.plain, argv, { resume: '/c', output: '/o', steps: '1' }, { output: '--save' });
    assert.deepEqual(named.guessed, []);
    assert.equal(flagValue(applyOverrides(STACKS.plain, argv, named.overrides), '--save'), '/o');
  });

  void it('LightningCLI takes --flag=value, HF its TrainingArguments, Hydra key=value', () => {
    const values = { resume: '/c.ckpt', output: '/o', steps: '700' };
    const l = ['python', 'main.py', 'fit', '--trainer.max_steps=600'];
    const lo = applyOverrides(STACKS.lightning, l, overridesFor(STACKS.lightning, l, values).overrides);
    assert.deepEqual(lo, [
      'python',
      'main.py',
      'fit',
      '--trainer.max_steps=700',
      '--ckpt_path=/c.ckpt',
      '--trainer.default_root_dir=/o',
    ]);
    const h = ['python', 'run.py', '--output_dir', 'out'];
    const ho = applyOverrides(STACKS.hf, h, overridesFor(STACKS.hf, h, values).overrides);
    assert.deepEqual(ho, [
      'python',
      'run.py',
      '--output_dir',
      '/o',
      '--resume_from_checkpoint',
      '/c.ckpt',
      '--max_steps',
      '700',
    ]);
    const y = ['python', 'train.py', 'trainer.max_steps=600'];
    const yo = applyOverrides(STACKS.hydra, y, overridesFor(STACKS.hydra, y, values).overrides);
    assert.deepEqual(yo, ['python', 'train.py', 'trainer.max_steps=700', 'ckpt_path=/c.ckpt', 'hydra.run.dir=/o']);
  });
});

void describe('changes and states', () => {
  const good = {
    argv: plain,
    env: { NCCL_ALGO: 'Ring', SSH_CONNECTION: 'a', MY_API_KEY: '<redacted sha256:0123456789ab>' },
  };
  const now = {
    argv: [
      '/usr/bin/python3',
      'train.py',
      '--data',
      'data/b.txt',
      '--steps',
      '72',
      '--lr=0.0001',
      '--work',
      '8',
      '--resume',
      'ck/48.pt',
    ],
    env: {
      NCCL_ALGO: 'Tree',
      SSH_CONNECTION: 'b',
      KG_X: '1',
      MY_API_KEY: '<redacted sha256:ba9876543210>',
      '-S/bin/sh': 'x',
    },
  };

  void it("flags, data and variables; the replay's own flags, secrets, session variables and bad names left out", () => {
    const { changes, skipped } = launchChanges(good, now, 'plain');
    assert.deepEqual(
      changes.map((c) => `${c.kind} ${c.id}`),
      ['data arg:--data', 'arg arg:--lr', 'arg arg:--work', 'env env:KG_X', 'env env:NCCL_ALGO'],
    );
    const why = Object.fromEntries(skipped.map((s) => [s.id, s.why]));
    assert.match(why['arg:--steps']!, /set by the replay itself/);
    assert.match(why['arg:--resume']!, /set by the replay itself/);
    assert.match(why['env:MY_API_KEY']!, /a secret/);
    assert.match(why['env:-S/bin/sh']!, /^refused: .*not a variable name/);
    assert.match(why['env:session']!, /as the host has them now/);
  });

  void it('a state is now with every change not applied taken back', () => {
    const { changes } = launchChanges(good, now, 'plain');
    const s = stateOf(now, changes, new Set(['arg:--work', 'env:KG_X']), 'plain');
    assert.equal(flagValue(s.argv, '--work'), '8');
    assert.equal(flagValue(s.argv, '--data'), 'data/a.txt');
    assert.equal(flagValue(s.argv, '--lr'), '0.0003');
    assert.deepEqual(s.env, { set: { KG_X: '1', NCCL_ALGO: 'Ring' }, unset: [] });
    const goodState = stateOf(now, changes, new Set(), 'plain');
    assert.equal(flagValue(goodState.argv, '--work'), undefined, 'a flag the known-good launch lacked is removed');
    assert.deepEqual(goodState.env.unset, ['KG_X']);
    assert.equal(goodState.fresh, false, 'without the restart among the changes every state resumes');
  });

  void it('the restart taken back is a fresh start: the resume flag dropped in its own style, nothing else', () => {
    const changes = [restartChange('step_48.pt')];
    assert.deepEqual(changes[0], { id: 'restart', kind: 'restart', label: 'the resume from step_48.pt' });
    assert.equal(stateOf(now, changes, new Set(), 'plain').fresh, true);
    assert.equal(stateOf(now, changes, new Set(['restart']), 'plain').fresh, false);
    assert.deepEqual(withoutName(STACKS.plain, now.argv, '--resume'), now.argv.slice(0, -2));
    assert.deepEqual(withoutName(STACKS.lightning, ['p', 'fit', '--ckpt_path=/c.pt', '--x=1'], '--ckpt_path'), [
      'p',
      'fit',
      '--x=1',
    ]);
    assert.deepEqual(withoutName(STACKS.hydra, ['p', '+ckpt_path=/c.pt', 'x=1'], 'ckpt_path'), ['p', 'x=1']);
  });
});

void describe("the CLI's limit on each replay run", () => {
  const limit = (...words: string[]) => runTimeoutMs(parseCommandLine(replayCommand, ['host', '/r', ...words]).options);

  void it('is --run-timeout, else 30 minutes: never the global --timeout (it bounds the gathering)', () => {
    assert.equal(RUN_TIMEOUT_MS, 30 * 60_000);
    assert.equal(limit(), RUN_TIMEOUT_MS);
    assert.equal(limit('--timeout', '20'), RUN_TIMEOUT_MS);
    assert.equal(limit('--timeout', '20', '--run-timeout', '5400'), 5_400_000);
    assert.equal(limit('--run-timeout', '45'), 45_000);
    for (const bad of ['0', '-5', '1.5', 'soon'])
      assert.throws(() => limit('--run-timeout', bad), /--run-timeout .*: a whole number/);
    assert.match(
      commandHelp(replayCommand),
      /--run-timeout SECONDS\s+the limit on each run, its start-up included \(default 30 min\)/,
    );
  });

  void it('is said in words in the plan', () => {
    assert.equal(durationText(RUN_TIMEOUT_MS), '30 min');
    assert.equal(durationText(90_000), '1 min 30 s');
    assert.equal(durationText(45_000), '45 s');
    assert.equal(durationText(3_900_000), '1 h 5 min');
  });
});
