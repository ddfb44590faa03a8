import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BisectReport } from '../../src/core/bisect/engine';
import { restartChange, type ReplayChange, type Skipped } from '../../src/core/replay/changes';
import type { ReplayOutcome, ReplayPlan } from '../../src/core/replay/replay';
import {
  argName,
  changesOfSubject,
  culpritIdOf,
  proofOf,
  reportWithProof,
  suspectSubjectSchema,
} from '../../src/core/replay/suspects';
import { gitDrafts } from '../../src/core/whatChanged/causes/code';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';
import { gitStateSchema } from '../../src/core/whatChanged/factsProbe';
import { whatChangedHtml } from '../../src/core/whatChanged/html';
import type { Suspect, SuspectSubject, WhatChangedReport } from '../../src/core/whatChanged/model';
import { proofLine, renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { NO_OTHER_FACTS } from '../support/facts';

/*
 * Prove by Replay (issue 33): a What Changed? suspect's subject found among the replay plan's changes — an arg key of
 * the checkpoints against the launch's flag, a variable, the files of a commit or of uncommitted edits, a data path
 * against a flag's value, the restart itself as the `restart` change — and what a replay said put on the report.
 */

const CWD = '/runs/r';
const REPO = '/runs/r';

const changes: ReplayChange[] = [
  { id: 'arg:--work', kind: 'arg', flag: '--work', good: '2', now: '8', label: '--work: 2 → 8' },
  { id: 'arg:--max-steps', kind: 'arg', flag: '--max-steps', good: null, now: '9', label: '--max-steps' },
  { id: 'arg:--data', kind: 'data', flag: '--data', good: 'data/a.txt', now: 'data/b.txt', label: 'data --data' },
  { id: 'env:KG_REPLAY_SLOW', kind: 'env', name: 'KG_REPLAY_SLOW', good: null, now: '1', label: 'KG_REPLAY_SLOW' },
  { id: 'code:model.py', kind: 'code', path: 'model.py', how: 'committed', label: 'model.py' },
  { id: 'code:train.py', kind: 'code', path: 'train.py', how: 'uncommitted', label: 'train.py' },
];
const skipped: Skipped[] = [
  { id: 'arg:--tokenizer', label: 'data --tokenizer', why: 'the old data is gone: /d/tok is no longer on box' },
];
const plan: Pick<ReplayPlan, 'changes' | 'skipped' | 'checkout'> = {
  changes,
  skipped,
  checkout: { repo: REPO, cwdRel: '', good: 'abc' },
};
const ids = (s: SuspectSubject) => changesOfSubject(s, plan, CWD).ids;

void describe("a suspect's subject as the replay's changes", () => {
  void it('an arg key meets the flag it was parsed from (dashes, dots and hyphens aside)', () => {
    assert.deepEqual(ids({ kind: 'arg', key: 'work' }), ['arg:--work']);
    assert.deepEqual(ids({ kind: 'arg', key: '--work' }), ['arg:--work']);
    assert.deepEqual(ids({ kind: 'arg', key: 'trainer.max_steps' }), ['arg:--max-steps']);
    assert.equal(argName('--optimizer.lr'), 'lr');
    // a data key is an arg too: the replay's change is the flag
    assert.deepEqual(ids({ kind: 'arg', key: 'data' }), ['arg:--data']);
  });

  void it('a variable by name; a data path by the flag whose value (relative to the launch) it is', () => {
    assert.deepEqual(ids({ kind: 'env', name: 'KG_REPLAY_SLOW' }), ['env:KG_REPLAY_SLOW']);
    assert.deepEqual(ids({ kind: 'data', path: '/runs/r/data/b.txt' }), ['arg:--data']);
    assert.deepEqual(ids({ kind: 'data', path: '/runs/r/data/a.txt' }), ['arg:--data']);
  });

  void it("code: a commit's files, uncommitted edits only, a hashed script by absolute path, every file", () => {
    assert.deepEqual(ids({ kind: 'code', repo: REPO, files: ['model.py'] }), ['code:model.py']);
    assert.deepEqual(ids({ kind: 'code', repo: null, files: [], uncommitted: true }), ['code:train.py']);
    assert.deepEqual(ids({ kind: 'code', repo: null, files: ['/runs/r/train.py'] }), ['code:train.py']);
    assert.deepEqual(ids({ kind: 'code', repo: REPO, files: [] }), ['code:model.py', 'code:train.py']);
  });

  void it("each code suspect, one a file or a function of it, carries its file: Prove by Replay finds the file's change", () => {
    const fn = (name: string, line: number) => ({
      function: name,
      lines: [line, line],
      old: ['    w = 1'],
      new: ['    w = 2'],
      removed: ['w = 1'],
      added: ['w = 2'],
    });
    const g = gitStateSchema.parse({
      path: REPO,
      repo: REPO,
      head: 'a'.repeat(40),
      base: 'b'.repeat(40),
      commitsSince: 1,
      changedSince: ['model.py', 'README.md'],
      commits: [{ hash: 'c'.repeat(40), time: 100, subject: 'Two functions', files: ['model.py', 'README.md'] }],
      codeChanges: [
        { file: 'model.py', python: true, functions: ['a', 'b'], hunkCount: 2, hunks: [fn('a', 3), fn('b', 9)] },
        { file: 'README.md', hunks: [{ lines: [1, 1], old: ['x'], new: ['y'] }] },
      ],
      dirty: true,
      dirtyFiles: ['train.py'],
      dirtyChanges: [
        { file: 'train.py', from: 'old_train.py', status: 'renamed', mtime: 50, hunkCount: 1, hunks: [fn('main', 4)] },
      ],
    });
    const facts: WhatChangedFacts = {
      host: { id: 'h', label: 'box' },
      run: CWD,
      remoteNow: 200,
      checkpoints: [],
      args: [],
      log: null,
      ...NO_OTHER_FACTS,
      probe: { now: 200, paths: [], git: [g], stats: [], launches: [], elapsedMs: 1 },
    };
    const drafts = gitDrafts(facts, 0, []);
    const of = (title: RegExp) => drafts.find((d) => title.test(d.title))?.subject;
    // model.py's two functions are two suspects; a replay puts back whole files, so both are model.py's change
    assert.deepEqual(of(/^model\.py \(a\(\)\)/), { kind: 'code', repo: REPO, files: ['model.py'] });
    assert.deepEqual(of(/^model\.py \(b\(\)\)/), { kind: 'code', repo: REPO, files: ['model.py'] });
    assert.deepEqual(ids(of(/^model\.py \(a/)!), ['code:model.py']);
    // an uncommitted rename by both its names; only the uncommitted changes of the plan are it
    assert.deepEqual(of(/^train\.py/), {
      kind: 'code',
      repo: REPO,
      files: ['old_train.py', 'train.py'],
      uncommitted: true,
    });
    assert.deepEqual(ids(of(/^train\.py/)!), ['code:train.py']);
    // documentation is never ranked: nothing to prove
    assert.equal(of(/^README\.md/), undefined);
  });

  void it('the restart itself is the `restart` change only, and where it was left out that says why', () => {
    const withRestart = { ...plan, changes: [...changes, restartChange('step_48.pt')] };
    assert.deepEqual(changesOfSubject({ kind: 'restart' }, withRestart, CWD).ids, ['restart']);
    assert.throws(
      () =>
        changesOfSubject(
          { kind: 'restart' },
          { ...plan, skipped: [{ id: 'restart', label: 'the resume from step_48.pt', why: 'not asked for' }] },
          CWD,
          'the restart itself',
        ),
      /the restart itself cannot be replayed: the resume from step_48\.pt: not asked for/,
    );
  });

  void it('a subject the launches do not differ in is refused with what they do differ in, or why it was left out', () => {
    assert.throws(
      () => changesOfSubject({ kind: 'env', name: 'NCCL_ALGO' }, plan, CWD, 'NCCL_ALGO set'),
      /Prove by Replay: NCCL_ALGO set cannot be replayed: the two recorded launches do not differ in it \(they differ in --work: 2 → 8, /,
    );
    assert.throws(
      () => changesOfSubject({ kind: 'arg', key: 'tokenizer' }, plan, CWD),
      /cannot be replayed: data --tokenizer: the old data is gone/,
    );
  });

  void it('a subject handed through a command is parsed, never trusted', () => {
    assert.ok(suspectSubjectSchema.safeParse({ kind: 'arg', key: 'lr' }).success);
    assert.ok(!suspectSubjectSchema.safeParse({ kind: 'shell', cmd: 'rm -rf /' }).success);
    assert.ok(!suspectSubjectSchema.safeParse({ kind: 'code', repo: null, files: 'x' }).success);
  });
});

function bisectReport(kind: 'culprit' | 'not-reproduced', confirmed: boolean): BisectReport {
  return {
    changes,
    repeats: 3,
    threshold: 0.05,
    budget: { rounds: 5, runs: 60 },
    rounds: [],
    good: 14100,
    bad: 5700,
    verdict:
      kind === 'culprit'
        ? { kind, ids: ['arg:--work'], why: 'confirmed: …' }
        : { kind, ids: changes.map((c) => c.id), why: 'good 14.1K, bad 13.9K, under the 5 % threshold' },
    ...(kind === 'culprit'
      ? {
          confirmation: {
            round: 2,
            confirmed,
            revertedRestores: true,
            revertedMatchesGood: true,
            aloneSlows: confirmed,
          },
        }
      : {}),
    runs: 18,
  };
}

function outcome(r: BisectReport, headline: string): ReplayOutcome {
  return {
    plan: {
      ...plan,
      id: 'x',
      dir: '/h/.known-good/replays/r/x',
      stack: 'plain',
      overrides: [],
      guessed: [],
      local: [],
      text: '',
      gpus: { slots: [], needsWord: false, text: '' },
    },
    report: r,
    runs: Array.from({ length: 18 }, () => ({ state: [], speed: 1, outDir: '', message: '', gpu: null })),
    headline,
    markdown: '',
  };
}

function suspect(id: string, title: string, subject: SuspectSubject): Suspect {
  return {
    id,
    source: 'args',
    category: 'other',
    title,
    detail: '',
    when: { text: '' },
    coincides: true,
    ruledOut: false,
    score: 50,
    reasons: [],
    evidence: [{ kind: 'replay', title: 'Prove by Replay', hostId: 'h', run: CWD }],
    subject,
  };
}

function whatChangedReport(): WhatChangedReport {
  return {
    schema: 1,
    headline: 'slower',
    verdict: 'regression',
    host: { id: 'h', label: 'box' },
    run: CWD,
    generatedAt: '2026-12-01T00:00:00Z',
    reference: { kind: 'changepoint', label: 'step_48', why: 'w', checkpoint: null, time: null, baseline: null },
    now: { checkpoint: null, time: null, envCapturedAt: null, log: null },
    throughput: { log: null, bench: null, dropped: true },
    changepoints: { method: 'm', why: 'w', series: [] },
    suspects: [
      suspect('s1', 'work 2 → 8', { kind: 'arg', key: 'work' }),
      suspect('s2', 'lr 1 → 2', { kind: 'arg', key: 'lr' }),
    ],
    replayable: true,
    unranked: [],
    unknown: [],
    gathered: { roundTrips: 1, requests: 1, elapsedMs: 1, checkpointsRead: 0, checkpoints: 0 },
  };
}

void describe("a replay's word on the report", () => {
  void it('confirmed only for a culprit confirmed both ways; numbers and cost in the line', () => {
    const o = outcome(bisectReport('culprit', true), 'Culprit: --work: 2 → 8 — confirmed: …');
    const p = proofOf(o, 'tok_s', 94.4, new Date(0));
    assert.equal(p.verdict, 'confirmed');
    assert.equal(p.culprit, '--work: 2 → 8');
    assert.equal(culpritIdOf(o), 'arg:--work');
    assert.equal(
      proofLine(p),
      'confirmed by replay: --work: 2 → 8 — known-good 14.1K → now 5.7K tok_s (−60 %), 18 runs in 94 s',
    );
    const unconfirmed = proofOf(outcome(bisectReport('culprit', false), 'Culprit: … did not confirm'), 'tok_s', 1);
    assert.equal(unconfirmed.verdict, 'inconclusive');
    const none = proofOf(
      outcome(bisectReport('not-reproduced', false), 'Not reproduced by replay: good 14.1K, bad 13.9K'),
      'tok_s',
      1,
    );
    assert.equal(none.verdict, 'not-reproduced');
    assert.match(proofLine(none), /^not reproduced by replay — .*: good 14\.1K, bad 13\.9K$/);
  });

  void it('Prove by Replay marks the suspect of that subject; Bisect All Changes the report and the culprit', () => {
    const o = outcome(bisectReport('culprit', true), 'Culprit: --work: 2 → 8 — confirmed');
    const p = proofOf(o, 'tok_s', 10);
    const m = { plan, cwd: CWD, culpritId: culpritIdOf(o) };
    // the subject as the command parsed it back (its fields in another order) is the same subject
    const one = reportWithProof(whatChangedReport(), p, { key: 'work', kind: 'arg' }, m);
    assert.equal(one.suspects[0]!.replay?.verdict, 'confirmed');
    assert.equal(one.suspects[1]!.replay, undefined);
    assert.equal(one.replay, undefined);
    const all = reportWithProof(whatChangedReport(), p, null, m);
    assert.equal(all.replay?.verdict, 'confirmed');
    assert.equal(all.suspects[0]!.replay?.culprit, '--work: 2 → 8');
    assert.equal(all.suspects[1]!.replay, undefined, 'a suspect the culprit is not');
    // shown: the page and the Markdown say it on the suspect, escaped
    const html = whatChangedHtml(all, { cspSource: 'vscode-resource:', nonce: 'abcdefghijklmnopqrstuvwxyz012345' });
    assert.match(
      html,
      /<div class="kg-proof confirmed" data-proof="confirmed"><b>confirmed by replay: --work: 2 → 8<\/b> — known-good 14\.1K/,
    );
    assert.match(html, /data-action="replayAll"/);
    assert.match(renderWhatChangedMarkdown(all), /\*\*Every change: confirmed by replay: --work: 2 → 8 — /);
    assert.match(renderWhatChangedMarkdown(all), /\n {3}- \*\*confirmed by replay: --work: 2 → 8 — known-good/);
  });
});
