import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ArgValue } from '../../src/core/args/argsProbe';
import { KnownGoodError } from '../../src/core/errors';
import { launchText, launchWords } from '../../src/core/replay/command';
import { setupFromFacts, type SetupChoices } from '../../src/core/replay/fromFacts';
import { launchesText } from '../../src/core/replay/sources';
import { launchRecordSchema } from '../../src/core/whatChanged/factsProbe';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';

/*
 * Where a replay's launches come from (issue 33 item 2): each source the run can leave — kg_record.py's records,
 * wandb's runs, LightningCLI's and Hydra's configs (with the script the person names), a command the person
 * confirms — made into the setup's two launches from facts written by hand, as What Changed? gathers them.
 */

const RUN = '/home/u/proj';
const LOG = `${RUN}/train_log.jsonl`;

function rec(fields: unknown) {
  return launchRecordSchema.parse(fields);
}

/** Facts of a run with checkpoints at 24, 48 (the known-good launch) and 72 (now), args as given per checkpoint. */
function facts(
  records: unknown[],
  others: unknown[],
  args: Record<string, ArgValue> = {},
  log = LOG,
): WhatChangedFacts {
  const cks = [24, 48, 72].map((step) => ({
    label: `step_${step}.pt`,
    path: `${RUN}/ckpt/step_${step}.pt`,
    argsPath: `${RUN}/ckpt/step_${step}.pt`,
    step,
    mtime: null,
  }));
  return {
    host: { id: 'h', label: 'h' },
    run: RUN,
    remoteNow: 0,
    checkpoints: cks,
    args: cks.map((k) => ({ label: k.label, step: k.step, args: args[k.label] ?? null })),
    log: {
      path: log,
      reduction: { series: [{ x: [3, 6, 9, 12] }] } as unknown as NonNullable<WhatChangedFacts['log']>['reduction'],
    },
    env: { now: null, baselines: [] },
    bench: [],
    marks: {},
    probe: {
      now: 0,
      paths: [],
      git: [{ path: RUN, head: 'c0ffee0000000000', base: 'beef000000000000' } as never],
      stats: [],
      launches: [
        {
          path: `${RUN}/.known-good/launches.jsonl`,
          exists: records.length > 0,
          records: records.map(rec),
          others: others.map(rec),
          error: null,
        },
      ],
      elapsedMs: 0,
    },
    dataHistory: [],
    unknown: [],
    gathered: { roundTrips: 0, requests: 0, elapsedMs: 0 },
  };
}

const report = {
  reference: { checkpoint: { label: 'step_48.pt' } },
  throughput: { log: { key: 'tok_s', reference: 100 } },
} as unknown as WhatChangedReport;

const setup = (f: WhatChangedFacts, c: SetupChoices = {}) => setupFromFacts(f, report, { steps: 12, ...c });

function usage(f: () => unknown, re: RegExp) {
  assert.throws(f, (e: unknown) => e instanceof KnownGoodError && re.test(e.message));
}

const ckptArgs = (work: number, extra: Record<string, ArgValue> = {}) => ({
  data: 'data/a.txt',
  out_dir: '.',
  steps: 72,
  resume: 'ckpt/step_48.pt',
  work,
  lr: 0.0003,
  batch: 8,
  ...extra,
});

void describe('launchWords: a confirmed command split as a shell would, never given to one', () => {
  void it('splits at blanks, keeps quotes and escapes, and reads leading NAME=value as variables', () => {
    assert.deepEqual(launchWords(`CUDA_VISIBLE_DEVICES=0 A="x y" python3 train.py --name 'my run' --x=a\\ b "q\\"t"`), {
      env: { CUDA_VISIBLE_DEVICES: '0', A: 'x y' },
      argv: ['python3', 'train.py', '--name', 'my run', '--x=a b', 'q"t'],
    });
    // a quoted name is no variable (as in a shell), nor a NAME=value after the command
    assert.deepEqual(launchWords(`'A=1' python3 t.py B=2`), { env: {}, argv: ['A=1', 'python3', 't.py', 'B=2'] });
    assert.deepEqual(launchWords(`python3 t.py '' model.layers=[1,2] # a comment`).argv, [
      'python3',
      't.py',
      '',
      'model.layers=[1,2]',
    ]);
  });
  void it('refuses what only a shell does, and says which', () => {
    const cases: [string, RegExp][] = [
      ['python3 t.py | tee log', /a pipe/],
      ['python3 t.py > log', /a redirection/],
      ['python3 t.py; rm -rf x', /a command list/],
      ['python3 t.py && echo', /background job or &&/],
      ['python3 t.py --data $DATA', /variable or command substitution/],
      ['python3 t.py --x "$(id)"', /variable or command substitution/],
      ['python3 t.py --x `id`', /command substitution/],
      ['python3 t.py --files *.txt', /a glob/],
      ['python3 t.py --data ~/data', /~ is expanded only by a shell/],
      ["python3 t.py 'open", /' is not closed/],
      ['python3 t.py\nrm x', /line break/],
      ['A=1', /no command/],
    ];
    for (const [text, re] of cases) usage(() => launchWords(text), re);
    // quoted, each is literal
    assert.deepEqual(launchWords(`python3 t.py '|' '$HOME' "*" '~/x'`).argv, [
      'python3',
      't.py',
      '|',
      '$HOME',
      '*',
      '~/x',
    ]);
  });
  void it('launchText gives back a line launchWords reads to the same launch', () => {
    const l = { env: { A: "it's a b" }, argv: ['python3', 't.py', '--name', 'my run', '$x', "o'k", '-n', ''] };
    assert.deepEqual(launchWords(launchText(l)), l);
    const m = { env: {}, argv: ['A=1', 'python3', 'B=2'] };
    assert.deepEqual(launchWords(launchText(m)), m);
  });
});

void describe('setupFromFacts: where the two launches come from', () => {
  void it("kg_record.py's two launch records, as before", () => {
    const s = setup(
      facts(
        [
          { argv: ['python3', 'train.py', '--work', '2'], cwd: RUN, time: 1 },
          { argv: ['python3', 'train.py', '--work', '8'], cwd: RUN, time: 2 },
        ],
        [],
      ),
    );
    assert.deepEqual(
      [s.good.argv, s.now.argv],
      [
        ['python3', 'train.py', '--work', '2'],
        ['python3', 'train.py', '--work', '8'],
      ],
    );
    assert.match(s.launches.from.now, /latest launch record \(kg_record\.py\)/);
  });

  void it("wandb's last two runs: interpreter, script, args and folder from wandb-metadata.json", () => {
    const w = (name: string, work: string, time: number) => ({
      source: 'wandb',
      where: `${RUN}/wandb/${name}`,
      argv: ['/home/u/venv/bin/python', 'train.py', '--work', work],
      cwd: RUN,
      interpreter: '/home/u/venv/bin/python',
      gitHead: 'c0ffee',
      time,
    });
    const s = setup(facts([], [w('run-a', '2', 1), w('run-b', '8', 2)]));
    assert.deepEqual(s.good.argv, ['/home/u/venv/bin/python', 'train.py', '--work', '2']);
    assert.deepEqual(s.now.argv, ['/home/u/venv/bin/python', 'train.py', '--work', '8']);
    assert.equal(s.now.cwd, RUN);
    assert.equal(s.stack, 'plain');
    assert.match(launchesText(s.launches), /Current launch: wandb's latest run \(\/home\/u\/proj\/wandb\/run-b\)/);
    // a run whose folder wandb did not say: the person gives it
    const noCwd = [w('run-a', '2', 1), { ...w('run-b', '8', 2), cwd: null }];
    usage(() => setup(facts([], noCwd)), /give --cwd DIR/);
    assert.equal(setup(facts([], noCwd), { cwd: '/srv/x' }).now.cwd, '/srv/x');
  });

  void it('Hydra: says what it found and asks for the script; then python SCRIPT k=v … in hydra.runtime.cwd', () => {
    const h = (t: string, precision: string) => ({
      source: 'hydra',
      where: `${RUN}/outputs/2026-12-01/${t}/.hydra`,
      argv: [`trainer.precision=${precision}`, 'data=small'],
      cwd: RUN,
      job: 'train',
      outputDir: `${RUN}/outputs/2026-12-01/${t}`,
      time: t === '10-00-00' ? 1 : 2,
    });
    const f = facts(
      [],
      [h('10-00-00', 'bf16'), h('11-00-00', '32')],
      {},
      `${RUN}/outputs/2026-12-01/11-00-00/log.jsonl`,
    );
    usage(() => setup(f), /Hydra's record of 2 launches.*trainer\.precision=32 data=small.*--script train\.py\?/s);
    const s = setup(f, { script: `${RUN}/train.py`, python: '/v/bin/python' });
    assert.deepEqual(s.good.argv, ['/v/bin/python', 'train.py', 'trainer.precision=bf16', 'data=small']);
    assert.deepEqual(s.now.argv, ['/v/bin/python', 'train.py', 'trainer.precision=32', 'data=small']);
    assert.equal(s.stack, 'hydra');
    assert.equal(s.now.cwd, RUN);
    // Hydra records no commit: the checkout's at the reference's time, and now
    assert.deepEqual([s.good.gitHead, s.now.gitHead], ['beef000000000000', 'c0ffee0000000000']);
    // the log is read where each run's hydra.run.dir puts it: relative to the output folder, not the project
    assert.deepEqual(s.speed, { kind: 'jsonl', rel: 'log.jsonl', key: 'tok_s' });
    assert.match(s.launches.repeat ?? '', /^--script train\.py --cwd \/home\/u\/proj --interpreter \/v\/bin\/python$/);
  });

  void it('LightningCLI: asks for the script; then python SCRIPT fit --config <version>/config.yaml', () => {
    const l = (v: number) => ({
      source: 'lightning',
      where: `${RUN}/lightning_logs/version_${v}`,
      config: { 'trainer.precision': v ? '32-true' : 'bf16-mixed' },
      lightningConfig: `${RUN}/lightning_logs/version_${v}/config.yaml`,
      outputDir: RUN,
      time: v + 1,
    });
    const f = facts([], [l(0), l(1)]);
    usage(() => setup(f), /LightningCLI's configs of version_0 and version_1.*give --script PATH/s);
    const s = setup(f, { script: 'cli.py' });
    assert.deepEqual(s.good.argv, [
      'python3',
      'cli.py',
      'fit',
      '--config',
      `${RUN}/lightning_logs/version_0/config.yaml`,
    ]);
    assert.deepEqual(s.now.argv, [
      'python3',
      'cli.py',
      'fit',
      '--config',
      `${RUN}/lightning_logs/version_1/config.yaml`,
    ]);
    assert.equal(s.stack, 'lightning');
    assert.match(launchesText(s.launches), /LightningCLI records no folder/);
  });

  void it('a confirmed command is the current launch; the known-good one takes back the checkpoint args', () => {
    const f = facts([], [], {
      'step_24.pt': ckptArgs(2, { steps: 48, resume: null }),
      'step_48.pt': ckptArgs(2, { steps: 48, resume: null }),
      'step_72.pt': ckptArgs(8, { data: 'data/b.txt', lr: 0.0001, batch: 8 }),
    });
    usage(() => setup(f), /has no launch records\. Give the command with --launch/);
    const s = setup(f, {
      launch: `KG_X=1 python3 train.py --data data/b.txt --steps 72 --resume ckpt/step_48.pt --work=8 --lr 0.0001`,
    });
    assert.deepEqual(s.now.argv, [
      'python3',
      'train.py',
      '--data',
      'data/b.txt',
      '--steps',
      '72',
      '--resume',
      'ckpt/step_48.pt',
      '--work=8',
      '--lr',
      '0.0001',
    ]);
    assert.deepEqual(s.now.env, { KG_X: '1' });
    // the reference is the last checkpoint of the earlier args; --steps/--resume are the replay's own: never taken back
    assert.equal(s.reference.label, 'step_48.pt');
    assert.deepEqual(s.good.argv, [
      'python3',
      'train.py',
      '--data',
      'data/a.txt',
      '--steps',
      '72',
      '--resume',
      'ckpt/step_48.pt',
      '--work=2',
      '--lr',
      '0.0003',
    ]);
    assert.equal(s.now.cwd, RUN);
    assert.equal(s.good.gitHead, 'beef000000000000');
    assert.equal(s.now.gitHead, 'c0ffee0000000000');
    const text = launchesText(s.launches);
    assert.match(text, /Known-good launch: the current command with the args of step_48\.pt taken back/);
    assert.match(text, /--data data\/a\.txt, --lr 0\.0003, --work 2/);
    assert.match(text, /Current launch: the command confirmed with --launch/);
    assert.match(text, /KG_X=1 python3 train\.py/);
    assert.equal(
      s.launches.repeat,
      `--launch 'KG_X=1 python3 train.py --data data/b.txt --steps 72 --resume ckpt/step_48.pt --work=8 --lr 0.0001' --cwd /home/u/proj`,
    );
  });

  void it('a key the command does not name is added in the stack style; what cannot be a word is named', () => {
    const f = facts([], [], {
      'step_48.pt': { batch: 16, tags: ['a'], flag: true, nested: { x: 1 } },
      'step_72.pt': { batch: 8, tags: ['b'], flag: false, nested: { x: 2 } },
    });
    const s = setup(f, { launch: 'python3 train.py', cwd: '/srv/run', regex: 'tok/s (\\S+)' });
    assert.deepEqual(s.good.argv, ['python3', 'train.py', '--batch', '16', '--flag']);
    assert.equal(s.good.cwd, '/srv/run');
    assert.match(
      launchesText(s.launches),
      /left as now: nested\.x \(nested: no flag of its own\); tags \(a list or an object\)/,
    );
    // Hydra: key=value overrides, dotted keys included
    const h = setup(f, { launch: 'python3 app.py batch=8' });
    assert.deepEqual(h.good.argv, ['python3', 'app.py', 'batch=16', 'flag=true', 'nested.x=1']);
  });

  void it('one record alone (kg_record or wandb) is the current launch; the known-good one is derived from it', () => {
    const args = { 'step_48.pt': ckptArgs(2, { steps: 48, resume: null }), 'step_72.pt': ckptArgs(8) };
    const one = { argv: ['python3', 'train.py', '--work', '8'], cwd: RUN, time: null, gitHead: 'c0ffee0000000000' };
    const k = setup(facts([one], [], args));
    assert.deepEqual(k.good.argv, ['python3', 'train.py', '--work', '2']);
    assert.equal(k.good.gitHead, 'beef000000000000');
    assert.match(k.launches.from.now, /the launch record \(kg_record\.py\)/);
    const w = setup(
      facts([], [{ ...one, source: 'wandb', where: `${RUN}/wandb/run-b`, interpreter: '/usr/bin/python3' }], args),
    );
    assert.deepEqual(w.good.argv, ['python3', 'train.py', '--work', '2']);
    assert.match(w.launches.from.now, /wandb's run \(\/home\/u\/proj\/wandb\/run-b\)/);
  });

  void it('--cwd and paths from records are plain absolute paths', () => {
    usage(() => setup(facts([], []), { launch: 'python3 t.py', cwd: 'rel/dir' }), /--cwd "rel\/dir": an absolute path/);
  });
});
