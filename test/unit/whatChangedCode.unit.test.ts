import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { restartsFromTimes } from '../../src/core/metrics/restarts';
import { analyze } from '../../src/core/whatChanged/analyze';
import { codeKindOf, docsWhy } from '../../src/core/whatChanged/causes/codeKind';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';
import {
  codeChangeSchema,
  gitStateSchema,
  launchRecordSchema,
  launchRecordsSchema,
  type CodeHunk,
} from '../../src/core/whatChanged/factsProbe';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';
import { realLoop } from '../support/realLoop';
import { NO_OTHER_FACTS, reducedSeries } from '../support/facts';

/*
 * The code as a cause (issue 32, items 1 and 2), on facts written by hand around a real-loop log that halves its speed
 * at a restart at step 600: what a change's lines of code make it (precision, compile, a host sync …), documentation
 * never ranked, one suspect a changed file or function, and an uncommitted edit dated by its mtime on the log's
 * timeline — the launch that first ran it.
 */

const LOOP = realLoop({ steps: 1000, speed: (s) => (s <= 600 ? 30 : 15), launches: [600], seed: 3 });
const at = (step: number) => LOOP.time[LOOP.step.indexOf(step)]!;
/** The restart's gap: after the last log line of the first launch (step 600), before the second's first (610). */
const IN_GAP = at(600) + 100;

function hunk(over: Partial<CodeHunk>): CodeHunk {
  return codeChangeSchema.parse({ file: 'f.py', hunks: [over] }).hunks[0]!;
}

function facts(git: Record<string, unknown>): WhatChangedFacts {
  const checkpoints = [];
  const args = [];
  for (let step = 100; step <= 1000; step += 100) {
    checkpoints.push({
      label: `step_${step}`,
      path: `/r/ckpt/step_${step}.pt`,
      argsPath: `/r/ckpt/step_${step}.pt`,
      step,
      mtime: at(step),
    });
    args.push({ label: `step_${step}`, step, args: { lr: 3e-4, batch_size: 32 } });
  }
  const reduction = {
    series: [
      reducedSeries(
        'tok_s',
        LOOP.step,
        LOOP.stepsPerSec.map((v) => v * 1000),
        LOOP.time,
      ),
    ],
  } as unknown as MetricsReduction;
  return {
    host: { id: 'h', label: 'gpu' },
    run: '/r',
    remoteNow: at(1000) + 100,
    checkpoints,
    args,
    log: { path: '/r/train_log.jsonl', reduction, restarts: restartsFromTimes(LOOP.step, LOOP.time) },
    ...NO_OTHER_FACTS,
    probe: {
      now: at(1000) + 100,
      paths: [],
      git: [gitStateSchema.parse({ path: '/r', repo: '/r', head: 'a'.repeat(40), branch: 'main', ...git })],
      stats: [],
      launches: [],
      elapsedMs: 1,
    },
  };
}

function titles(r: WhatChangedReport): string {
  return `${r.headline}\nranked: ${r.suspects.map((s) => `${s.title} [${s.score}]`).join('; ')}\nunranked: ${r.unranked.map((u) => u.title).join('; ')}`;
}

const AUTOCAST = {
  function: 'main',
  lines: [88, 88],
  old: ['    with torch.autocast("cuda", dtype=torch.bfloat16):'],
  new: ['    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=False):  # debugging'],
  removed: ['with torch.autocast("cuda", dtype=torch.bfloat16):'],
  added: ['with torch.autocast("cuda", dtype=torch.bfloat16, enabled=False):'],
};

void test('what a change is, by the lines of code it removed and added (comments are never read)', () => {
  const kind = (removed: string[], added: string[]) => {
    const k = codeKindOf([hunk({ removed, added })]);
    return `${k.category}: ${k.label} (${k.line})`;
  };
  assert.equal(
    kind([], ['model = torch.compile(model)']),
    'compile: torch.compile added (model = torch.compile(model))',
  );
  assert.equal(
    kind(['model = torch.compile(model, mode="max-autotune")'], []),
    'compile: torch.compile removed (model = torch.compile(model, mode="max-autotune"))',
  );
  assert.equal(
    kind(AUTOCAST.removed, AUTOCAST.added),
    'dtype: precision/autocast changed (with torch.autocast("cuda", dtype=torch.bfloat16, enabled=False):)',
  );
  assert.equal(kind([], ['scaler = torch.cuda.amp.GradScaler()']).split(':')[0], 'dtype');
  assert.equal(
    kind(['y = F.scaled_dot_product_attention(q, k, v)'], ['y = (q @ k.transpose(-2, -1)).softmax(-1) @ v']),
    'attention: the attention implementation removed (y = F.scaled_dot_product_attention(q, k, v))',
  );
  assert.equal(kind([], ['last_loss = loss.item()']), 'host-sync: a host sync added (last_loss = loss.item())');
  assert.equal(kind([], ['x = checkpoint(block, x, use_reentrant=False)']).split(':')[0], 'memory');
  assert.equal(kind(['num_workers=4,'], ['num_workers=0,']).split(':')[0], 'dataloader');
  // no kind: plain code, its first added line shown; re.compile and save_checkpoint are no compile nor checkpointing
  assert.equal(kind(['for _ in range(2):'], ['for _ in range(3):']), 'code: changed (for _ in range(3):)');
  assert.equal(kind([], ['PAT = re.compile(r"\\d+")', 'save_checkpoint(model, path)']).split(':')[0], 'code');
  // a comment that names autocast is no code: the host sends the hunk as cosmetic, with no lines of code
  assert.equal(
    codeKindOf([hunk({ old: ['x = 1'], new: ['x = 1  # autocast off?'], cosmetic: true })]).category,
    'code',
  );
});

void test('documentation and repository metadata by their paths; a requirements.txt or a vocab.txt is none', () => {
  for (const p of [
    'README.md',
    'docs/setup.py',
    'doc/index.html',
    'LICENSE',
    'COPYING',
    'CHANGELOG',
    'NOTES.txt',
    '.gitignore',
    'sub/.gitattributes',
    '.github/workflows/ci.yml',
    'x/guide.rst',
  ])
    assert.ok(docsWhy(p), p);
  for (const p of [
    'train.py',
    'requirements.txt',
    'data/vocab.txt',
    'Makefile',
    'config.yaml',
    'notes.py',
    'licenses.py',
  ])
    assert.equal(docsWhy(p), null, p);
});

void test('a README-only commit beside a one-line model.py change: one suspect for model.py, the README never ranked', () => {
  const docs = { hash: 'd'.repeat(40), time: IN_GAP + 1, subject: 'Say how to run it', files: ['README.md'] };
  const mix = { hash: 'm'.repeat(40), time: IN_GAP, subject: 'Mix twice', files: ['model.py'] };
  const r = analyze(
    facts({
      commitsSince: 2,
      changedSince: ['README.md', 'model.py'],
      commits: [docs, mix],
      base: 'b'.repeat(40),
      codeChanges: [
        {
          file: 'README.md',
          hunks: [
            {
              lines: [3, 3],
              old: ['Run it.'],
              new: ['Run it: python train.py'],
              removed: ['Run it.'],
              added: ['Run it: python train.py'],
            },
          ],
        },
        {
          file: 'model.py',
          python: true,
          functions: ['forward'],
          hunkCount: 1,
          hunks: [
            {
              function: 'forward',
              lines: [15, 15],
              old: ['        for _ in range(work):'],
              new: ['        for _ in range(2 * work):'],
              removed: ['for _ in range(work):'],
              added: ['for _ in range(2 * work):'],
            },
          ],
        },
      ],
    }),
  );
  assert.equal(r.verdict, 'regression', titles(r));
  assert.equal(r.suspects[0]?.title, 'model.py (forward()) changed: 1 commit ("Mix twice")', titles(r));
  assert.equal(r.suspects[0]?.coincides, true, titles(r));
  assert.ok(!r.suspects.some((s) => s.title.includes('README')), titles(r));
  assert.ok(
    r.unranked.some((u) => u.title === 'README.md: documentation (1 commit ("Say how to run it"))'),
    titles(r),
  );
  // the evidence of model.py is its own commit and diff, not the README's
  const doc = r.suspects[0].evidence.find((e) => e.kind === 'git');
  const text = doc?.kind === 'git' ? (doc.document ?? '') : '';
  assert.ok(text.includes('+        for _ in range(2 * work):'), JSON.stringify(doc));
  assert.ok(!text.includes('README') && !text.includes('Say how'), text);
  assert.match(r.headline, /; changed at step 600: model\.py \(forward\(\)\) changed: 1 commit \("Mix twice"\)/);
});

void test('a README-only commit at the shift alone is listed, never ranked as "the training loop itself changed"', () => {
  const r = analyze(
    facts({
      commitsSince: 1,
      changedSince: ['README.md'],
      commits: [{ hash: 'd'.repeat(40), time: IN_GAP, subject: 'Docs', files: ['README.md'] }],
      base: 'b'.repeat(40),
      codeChanges: [{ file: 'README.md', hunks: [{ lines: [1, 1], old: ['a'], new: ['b'] }] }],
    }),
  );
  assert.deepEqual(r.suspects, [], titles(r));
  assert.ok(
    r.unranked.some((u) => u.title.startsWith('README.md: documentation')),
    titles(r),
  );
});

void test('one suspect a function: precision in main() and a plain change in lr_at() of one file, each its own kind', () => {
  const r = analyze(
    facts({
      commitsSince: 1,
      changedSince: ['train.py'],
      commits: [{ hash: 'c'.repeat(40), time: IN_GAP, subject: 'Try fp32; longer warm-up', files: ['train.py'] }],
      base: 'b'.repeat(40),
      codeChanges: [
        {
          file: 'train.py',
          python: true,
          functions: ['lr_at', 'main'],
          hunkCount: 3,
          hunks: [
            {
              function: 'lr_at',
              lines: [5, 5],
              old: ['    w = 100'],
              new: ['    w = 200'],
              removed: ['w = 100'],
              added: ['w = 200'],
            },
            {
              function: 'lr_at',
              lines: [9, 9],
              old: ['    # cosine'],
              new: ['    # cosine, then flat'],
              cosmetic: true,
            },
            AUTOCAST,
          ],
        },
      ],
    }),
  );
  assert.deepEqual(
    r.suspects.map((s) => [s.title, s.category]),
    [
      [
        'train.py (main()): precision/autocast changed (with torch.autocast("cuda", dtype=torch.bfloat16, enabled=False):)',
        'dtype',
      ],
      ['train.py (lr_at()) changed: 1 commit ("Try fp32; longer warm-up")', 'code'],
    ],
    titles(r),
  );
});

void test('an uncommitted edit made between the last log line and the restart: the first suspect, at the shift, with its line', () => {
  const r = analyze(
    facts({
      dirty: true,
      dirtyFiles: ['train.py'],
      dirtyChanges: [
        {
          file: 'train.py',
          python: true,
          status: 'modified',
          mtime: IN_GAP,
          functions: ['main'],
          hunkCount: 1,
          hunks: [AUTOCAST],
        },
      ],
    }),
  );
  const first = r.suspects[0]!;
  assert.equal(
    first.title,
    'train.py (main()): uncommitted edit, precision/autocast changed (with torch.autocast("cuda", dtype=torch.bfloat16, enabled=False):)',
    titles(r),
  );
  assert.equal(first.category, 'dtype');
  assert.equal(first.coincides, true);
  assert.equal(first.score, 75);
  assert.deepEqual(first.when.steps, { from: 600, to: 610 });
  assert.match(
    first.when.text,
    /^edited \S+, after the last log line before the restart \(step 600, \S+\): first run by the launch from step 610$/,
  );
  // the headline agrees with the suspects: the edit, never "nothing recorded at the restart differs"
  assert.match(
    r.headline,
    /\(0\.\d\d×\); changed at step 600: train\.py \(main\(\)\): uncommitted edit, precision\/autocast changed/,
    titles(r),
  );
  assert.ok(!/nothing recorded/.test(r.headline));
  // its evidence: the diff against HEAD, with the line and when it was written
  const doc = first.evidence.find((e) => e.kind === 'git');
  assert.ok(doc?.kind === 'git' && doc.document, JSON.stringify(first.evidence));
  assert.match(doc.document, /^\+\+\+ b\/train\.py\t\(working tree\)$/m);
  assert.match(
    doc.document,
    /^@@ -88 \+88 @@ main\(\)\n- +with torch\.autocast\("cuda", dtype=torch\.bfloat16\):\n\+ +with torch\.autocast\("cuda", dtype=torch\.bfloat16, enabled=False\):/m,
  );
  assert.match(doc.document, /^last written \d{4}-/m);
  assert.deepEqual(r.restarts?.[0]?.changed, [first.title]);
});

void test('an uncommitted edit written before the run began, or after its latest launch began, cannot explain the shift', () => {
  const change = (file: string, mtime: number) => ({
    file,
    python: true,
    status: 'modified',
    mtime,
    functions: ['main'],
    hunkCount: 1,
    hunks: [AUTOCAST],
  });
  const r = analyze(
    facts({
      dirty: true,
      dirtyFiles: ['early.py', 'late.py', 'notes.md', 'gone.py'],
      dirtyChanges: [
        change('early.py', at(10) - 3600),
        change('late.py', at(700)),
        { file: 'notes.md', status: 'modified', mtime: IN_GAP, hunks: [{ lines: [1, 1], old: ['a'], new: ['b'] }] },
        {
          file: 'gone.py',
          python: true,
          status: 'deleted',
          mtime: null,
          hunks: [{ lines: [1, 0], old: ['x = 1'], removed: ['x = 1'] }],
        },
      ],
    }),
  );
  const early = r.suspects.find((s) => s.title.startsWith('early.py'));
  const late = r.suspects.find((s) => s.title.startsWith('late.py'));
  assert.ok(early?.ruledOut, titles(r));
  assert.match(
    early.when.text,
    /before the run's first launch \(first log line at step 10\): every launch in the log ran it$/,
  );
  assert.ok(late?.ruledOut, titles(r));
  assert.match(late.when.text, /after the latest launch began \(step 610\): no launch in the log ran it$/);
  // the documentation edit is listed, never ranked, though written at the restart; a deleted file is a suspect, undated
  assert.ok(!r.suspects.some((s) => s.title.startsWith('notes.md')), titles(r));
  assert.ok(r.unranked.some((u) => u.title === 'notes.md: documentation, uncommitted'));
  const gone = r.suspects.find((s) => s.title === 'gone.py: uncommitted edit, deleted');
  assert.equal(gone?.when.text, 'not known (deleted, not committed)', titles(r));
  // nothing at the restart: the headline says so rather than promote an edit of another time
  assert.match(r.headline, /; nothing recorded at the restart at step 610 differs/, titles(r));
});

void test("a launch record's own start is the launch's: an edit written after it, before its first log line, is not at the restart", () => {
  // the second launch started (kg_record's unixTime) 60 s after the first's last log line; its first log line came
  // later still. An edit between its start and its first log line was not read by it.
  const started = at(600) + 60;
  const f = facts({
    dirty: true,
    dirtyFiles: ['train.py'],
    dirtyChanges: [
      {
        file: 'train.py',
        python: true,
        status: 'modified',
        mtime: started + 30,
        functions: ['main'],
        hunkCount: 1,
        hunks: [AUTOCAST],
      },
    ],
  });
  const records = [at(10) - 5, started].map((time) => launchRecordSchema.parse({ source: 'kg_record', time }));
  f.probe!.launches = [launchRecordsSchema.parse({ path: '/r/.known-good/launches.jsonl', exists: true, records })];
  const r = analyze(f);
  const edit = r.suspects.find((s) => s.title.startsWith('train.py (main()): uncommitted edit'));
  assert.ok(edit?.ruledOut, titles(r));
  assert.match(edit.when.text, /after the latest launch began \(step 610\): no launch in the log ran it$/);
  // without the record, the same edit is in the restart's gap: at the shift
  f.probe!.launches = [];
  assert.equal(analyze(f).suspects[0]?.coincides, true);
});

void test('an uncommitted edit the launch records also saw (their diff hash changed): one suspect, the records its evidence', () => {
  const f = facts({
    dirty: true,
    dirtyFiles: ['train.py'],
    dirtyChanges: [
      {
        file: 'train.py',
        python: true,
        status: 'modified',
        mtime: IN_GAP,
        functions: ['main'],
        hunkCount: 1,
        hunks: [AUTOCAST],
      },
    ],
  });
  const records = [
    { time: at(10) - 5, gitDiff: null },
    { time: IN_GAP + 10, gitDiff: 'b'.repeat(64) },
  ].map((r) => launchRecordSchema.parse({ source: 'kg_record', gitHead: 'a'.repeat(40), ...r }));
  f.probe!.launches = [launchRecordsSchema.parse({ path: '/r/.known-good/launches.jsonl', exists: true, records })];
  const r = analyze(f);
  // no second suspect naming the same edit by its hash
  assert.ok(!r.suspects.some((s) => /uncommitted changes differ/.test(s.title)), titles(r));
  assert.ok(!r.unranked.some((u) => /uncommitted changes differ/.test(u.title)), titles(r));
  const edit = r.suspects[0]!;
  assert.match(edit.title, /^train\.py \(main\(\)\): uncommitted edit, precision\/autocast changed/, titles(r));
  assert.match(
    edit.detail,
    /; the launch records agree: at the restart at step 610 \(launch records 1 → 2\), the uncommitted diff of the script's checkout \(sha256 none → b{64}\)$/,
  );
  assert.ok(edit.evidence.some((e) => e.kind === 'text-diff' && e.title === 'kg_record launch 1 ↔ 2'));
  // without the file-by-file compare, the records' hash is all there is: it stays a suspect of its own
  f.probe!.git = [gitStateSchema.parse({ path: '/r', repo: '/r', head: 'a'.repeat(40), branch: 'main' })];
  assert.ok(analyze(f).suspects.some((s) => /^launch: uncommitted changes differ/.test(s.title)));
});
