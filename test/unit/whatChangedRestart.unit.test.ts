import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ArgValue } from '../../src/core/args/argsProbe';
import { parseEnvSnapshot } from '../../src/core/baselines/envProbe';
import type { MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { restartsFromTimes } from '../../src/core/metrics/restarts';
import { analyze } from '../../src/core/whatChanged/analyze';
import { argCategory, inertArgWhy } from '../../src/core/whatChanged/categories';
import { resumePair } from '../../src/core/whatChanged/causes/restart';
import type { CheckpointFact, WhatChangedFacts } from '../../src/core/whatChanged/facts';
import { whatChangedProbeSchema } from '../../src/core/whatChanged/factsProbe';
import { whatChangedHtml } from '../../src/core/whatChanged/html';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { STEP_ON_GPU_HINT } from '../../src/core/whatChanged/resumeDifferences';
import { resumeFactsProbe, type ResumeFacts } from '../../src/core/whatChanged/resumeFacts';
import { NO_OTHER_FACTS, reducedSeries } from '../support/facts';
import { realLoop } from '../support/realLoop';

/*
 * Issue 32 items 3 and 4 on facts written by hand: a setting that changes no step's cost (the learning rate) never
 * takes the blame for a drop at a restart, and the restart itself — what the resumed process loaded, read from the
 * checkpoints around it (python/resume_facts.py: the real probe results of test/fixtures/resume) — is a suspect of
 * its own, with the fact, what to do and the replay that proves it.
 */

// Real probe results: a GPU run's checkpoint before a restart (AdamW's step counters on the CPU) and after a resume
// with torch.load(..., map_location="cuda") (on cuda:0). test/fixtures/resume/README.md
function fixture(name: string): ResumeFacts {
  const raw: unknown = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'resume', `${name}.json`), 'utf8'));
  return resumeFactsProbe('/r/ckpt').parse(raw);
}

/**
 * A real-loop log (saves, evals, warm-up, heavy tails) restarted at step 600 whose speed after the restart is
 * `ratio` of before; checkpoints every 100 steps dated by the log's clock; `args(step)` saved in each.
 */
function restartedRun(ratio: number, args: (step: number) => Record<string, ArgValue>): WhatChangedFacts {
  const l = realLoop({ steps: 1200, speed: (s) => (s > 600 ? 30 * ratio : 30), launches: [600], seed: 11 });
  const y = l.stepsPerSec.map((v) => v * 4096);
  const reduction = { series: [reducedSeries('tok_s', l.step, y, l.time)] } as unknown as MetricsReduction;
  const checkpoints: CheckpointFact[] = [];
  for (let step = 100; step <= 1200; step += 100) {
    const i = l.step.indexOf(step);
    checkpoints.push({
      label: `step_${step}`,
      path: `/r/ckpt/step_${step}.pt`,
      argsPath: `/r/ckpt/step_${step}.pt`,
      step,
      mtime: l.time[i]!,
    });
  }
  return {
    host: { id: 'h', label: 'gpu-box' },
    run: '/r',
    remoteNow: l.time.at(-1)! + 10,
    checkpoints,
    args: checkpoints.map((c) => ({ label: c.label, step: c.step, args: args(c.step) })),
    log: { path: '/r/train_log.jsonl', reduction, restarts: restartsFromTimes(l.step, l.time) },
    ...NO_OTHER_FACTS,
  };
}

const plainArgs = (lr: (step: number) => number) => (step: number) => ({
  lr: lr(step),
  batch_size: 16,
  steps: step <= 600 ? 600 : 1000,
  resume: step <= 600 ? null : 'ckpt/step_600.pt',
});

/** The facts with the resume state of the checkpoints around the restart (step_600 before, step_700 after). */
function withResume(f: WhatChangedFacts, before: ResumeFacts, after: ResumeFacts): WhatChangedFacts {
  const ck = (label: string) => f.checkpoints.find((c) => c.label === label)!;
  const restart = f.log!.restarts![0]!.step;
  return {
    ...f,
    resume: {
      restart,
      before: { checkpoint: ck('step_600'), facts: before },
      after: { checkpoint: ck('step_700'), facts: after },
    },
  };
}

void test('settings that change no step cost are cosmetic with their reason; those that can cost one are not', () => {
  for (const [key, a, b] of [
    ['lr', 3e-4, 1e-4],
    ['learning_rate', 5e-5, 1e-4],
    ['optimizer.min_lr', 1e-5, 0],
    ['lr_scheduler_type', 'cosine', 'linear'],
    ['adam_beta2', 0.999, 0.95],
    ['betas', [0.9, 0.999], [0.9, 0.95]],
    ['weight_decay', 0.1, 0],
    ['warmup_steps', 100, 500],
    ['num_warmup_steps', 100, 500],
  ] as const) {
    assert.equal(argCategory(key, a, b), 'cosmetic', key);
    assert.match(inertArgWhy(key, a, b) ?? '', /changes what a step computes, not what it costs/, key);
  }
  for (const key of ['batch_size', 'dropout', 'momentum', 'max_grad_norm', 'num_workers', 'compile'])
    assert.equal(inertArgWhy(key, 1, 2), null, key);
  // a loop that stops less often cannot be slower; more often it can (a log line often reads the loss: a host sync)
  assert.match(inertArgWhy('log_every', 10, 100) ?? '', /less often \(every 10 → 100 steps\)/);
  assert.equal(argCategory('log_every', 10, 100), 'cosmetic');
  assert.equal(argCategory('log_every', 100, 10), 'frequency');
  assert.equal(argCategory('logging_steps', '100', '10'), 'frequency');
  // an eval or save stops one speed window: a median level leaves it out while it is at most one window in four
  assert.match(inertArgWhy('eval_every', 250, 100, 10) ?? '', /one speed window in 10/);
  assert.equal(argCategory('eval_every', 250, 100, 10), 'cosmetic');
  assert.equal(argCategory('save_steps', 500, 100, 50), 'frequency');
  assert.equal(argCategory('eval_every', 250, 100), 'frequency');
  assert.equal(argCategory('log_every', 100, 10, 1), 'frequency');
  assert.equal(argCategory('eval_strategy', 'steps', 'epoch'), 'frequency');
});

void test('an lr-only restart that fell to 0.82×: the lr never headlines; nothing that costs a step changed there', () => {
  const r = analyze(
    restartedRun(
      0.82,
      plainArgs((s) => (s <= 600 ? 3e-4 : 1e-4)),
    ),
  );
  assert.equal(r.verdict, 'regression', r.headline);
  assert.ok(!r.suspects.some((s) => s.title.startsWith('lr ')), r.suspects.map((s) => s.title).join('; '));
  assert.match(
    r.headline,
    /\(0\.8\d×\); nothing that changes a step's cost changed at the restart at step 610 \(only lr 0\.0003 → 0\.0001, which cannot\)$/,
  );
  const lr = r.unranked.find((u) => u.title === 'lr 0.0003 → 0.0001');
  assert.ok(lr && !('score' in lr) && lr.inert, JSON.stringify(r.unranked));
  assert.match(lr.why, /not what it costs/);
  assert.deepEqual(r.restarts?.[0]?.changed, ['lr 0.0003 → 0.0001 (no cost to a step)']);
});

void test('a restart with nothing changed whose step counters went to the GPU: the restart itself is the suspect, with the fact, the advice and the replay', () => {
  const r = analyze(
    withResume(
      restartedRun(
        0.82,
        plainArgs(() => 3e-4),
      ),
      fixture('gpu-before'),
      fixture('gpu-after'),
    ),
  );
  assert.equal(r.verdict, 'regression', r.headline);
  const s = r.suspects[0]!;
  assert.equal(s.source, 'restart');
  assert.equal(s.category, 'resume');
  assert.equal(s.title, 'the restart itself: optimizer state `step`: cpu (float32, 4 tensors) → cuda:0 (float32, 4)');
  assert.ok(s.coincides, JSON.stringify(s.reasons));
  assert.ok(s.detail.includes(STEP_ON_GPU_HINT), s.detail);
  assert.match(s.detail, /map_location="cpu"/);
  assert.match(s.detail, /step_600 \(the last checkpoint before the restart\) against step_700/);
  assert.match(s.reasons[0]!.why, /AdamW step counters on the GPU make every step wait/);
  assert.equal(s.when.text, 'step_600 → step_700, around the restart at step 610');
  assert.equal(
    r.headline.split('; ')[1],
    'changed at step 600: the restart itself: optimizer state `step`: cpu (float32, 4 tensors) → cuda:0 (float32, 4) (restart, step_600 → step_700, around the restart at step 610)',
  );
  // the proof: the replay, which needs the launches' command lines (none recorded here)
  assert.equal(s.prove?.kind, 'replay');
  assert.equal(s.prove.command, 'known-good replay gpu-box /r');
  assert.equal(s.prove.ready, false);
  assert.match(s.prove.text, /from step_600 with nothing changed.*record the launches/);
  // the evidence: both checkpoints' resume state side by side
  const pair = s.evidence.find((e) => e.kind === 'text-diff');
  assert.ok(pair?.kind === 'text-diff', JSON.stringify(s.evidence));
  assert.match(pair.a.text, /^optimizer optimizer state step: cpu \(float32, 4 tensors\)$/m);
  assert.match(pair.b.text, /^optimizer optimizer state step: cuda:0 \(float32, 4 tensors\)$/m);
  assert.deepEqual(r.restarts?.[0]?.resume, {
    before: 'step_600',
    after: 'step_700',
    differences: ['optimizer state `step`: cpu (float32, 4 tensors) → cuda:0 (float32, 4)'],
  });
  const md = renderWhatChangedMarkdown(r);
  assert.match(md, /prove it: `known-good replay gpu-box \/r`/);
  assert.match(md, /resume state step_600 → step_700: optimizer state \\`step\\`: cpu/);
  assert.deepEqual(r.restarts?.[0]?.changed, []);
  assert.match(
    whatChangedHtml(r, { nonce: 'abcdefghijklmnop0123', cspSource: "'self'" }),
    /data-prove="replay">prove it: <code>known-good replay gpu-box \/r<\/code>/,
  );
});

void test('an lr change beside a resume onto the GPU: the restart itself leads, the lr is listed as costing nothing', () => {
  const f = restartedRun(
    0.82,
    plainArgs((s) => (s <= 600 ? 3e-4 : 1e-4)),
  );
  const r = analyze(withResume(f, fixture('gpu-before'), fixture('gpu-after')));
  assert.equal(r.suspects[0]?.source, 'restart', r.headline);
  assert.ok(!r.suspects.some((s) => s.title.startsWith('lr ')));
  assert.match(r.headline, /; changed at step 600: the restart itself: optimizer state `step`/);
  assert.deepEqual(r.restarts?.[0]?.changed, ['lr 0.0003 → 0.0001 (no cost to a step)']);
});

void test('the checkpoints around the restart hold the same resume state: no restart suspect, and the report says they were compared', () => {
  const same = fixture('gpu-before');
  const r = analyze(
    withResume(
      restartedRun(
        0.82,
        plainArgs(() => 3e-4),
      ),
      same,
      { ...same, step: 700 },
    ),
  );
  assert.ok(!r.suspects.some((s) => s.source === 'restart'));
  assert.match(r.headline, /; nothing recorded at the restart at step 610 differs$/);
  assert.deepEqual(r.restarts?.[0]?.resume?.differences, []);
  assert.match(renderWhatChangedMarkdown(r), /resume state step_600 → step_700: the same/);
  // a checkpoint that could not be read is a fact not known, never a silent "the same"
  const f = withResume(
    restartedRun(
      0.82,
      plainArgs(() => 3e-4),
    ),
    same,
    same,
  );
  f.resume!.after = { checkpoint: f.resume!.after.checkpoint, facts: null, error: 'not-a-checkpoint: truncated' };
  const u = analyze(f);
  assert.ok(u.unknown.some((x) => x.fact === 'resume state of step_700' && x.why === 'not-a-checkpoint: truncated'));
  assert.equal(u.restarts?.[0]?.resume, undefined);
});

void test('only a scheduler or RNG state saved on one side: listed in the detail of nothing, never a suspect', () => {
  const b = fixture('gpu-before');
  const r = analyze(
    withResume(
      restartedRun(
        0.82,
        plainArgs(() => 3e-4),
      ),
      b,
      { ...b, rng: [], step: 700 },
    ),
  );
  assert.ok(!r.suspects.some((s) => s.source === 'restart'), r.suspects.map((s) => s.title).join('; '));
  assert.deepEqual(r.restarts?.[0]?.resume?.differences, ['RNG state: rng_state → not saved']);
});

void test('a compile cache empty at the restart (every file newer than the launch before) is a fact of the restart itself', () => {
  const f = restartedRun(
    0.82,
    plainArgs(() => 3e-4),
  );
  const restart = f.log!.restarts![0]!;
  const same = fixture('gpu-before');
  const cache = (oldest: number) => ({
    name: 'inductor',
    path: '/tmp/torchinductor_u',
    exists: true,
    files: 40,
    bytes: 40_000,
    oldestMtime: oldest,
    newestMtime: restart.time! + 100,
  });
  const env = (oldest: number) => ({
    now: parseEnvSnapshot({
      schema: 1,
      capturedAt: new Date().toISOString(),
      host: {},
      python: {},
      packages: {},
      torch: {},
      cuda: {},
      gpus: {},
      env: {},
      scripts: {},
      caches: [cache(oldest)],
    }),
    baselines: [],
  });
  const cold = analyze({ ...withResume(f, same, { ...same, step: 700 }), env: env(restart.time! - 1) });
  const s = cold.suspects.find((x) => x.source === 'restart');
  assert.ok(s, cold.suspects.map((x) => x.title).join('; '));
  assert.equal(s.title, 'the restart itself: inductor compile cache');
  assert.match(s.detail, /inductor compile cache \(\/tmp\/torchinductor_u\) empty at the restart: its 40 files/);
  // a cache that held files from before the launch before stopped was not empty
  const warm = analyze({ ...withResume(f, same, { ...same, step: 700 }), env: env(f.checkpoints[0]!.mtime!) });
  assert.ok(!warm.suspects.some((x) => x.source === 'restart'));
});

void test('resumePair: the last checkpoint the launch before wrote and the first the resumed launch wrote', () => {
  const ck = (step: number, mtime: number | null): CheckpointFact => ({
    label: `step_${step}`,
    path: `/r/step_${step}`,
    argsPath: `/r/step_${step}`,
    step,
    mtime,
  });
  const restart = { step: 610, time: 5000, prevStep: 650, gapSeconds: 60, signals: ['step-back' as const] };
  // step_700 of the first launch was written again by the resumed launch: it is no checkpoint of before
  const cks = [ck(500, 4000), ck(600, 4500), ck(700, 5400), ck(800, 5600)];
  const p = resumePair(cks, [restart], 610);
  assert.ok(p && !('missing' in p));
  assert.deepEqual([p.before.label, p.after.label], ['step_600', 'step_700']);
  const q = resumePair(cks.slice(0, 2), [restart], undefined);
  assert.ok(q && 'missing' in q);
  assert.equal(q.missing, 'no checkpoint written by the launch resumed at step 610 yet');
  assert.equal(resumePair(cks, [], undefined), null);
});

void test("a launch flag that costs no step (kg_record's --lr) is listed, never ranked; with the launches recorded the replay is ready", () => {
  const f = restartedRun(0.82, (step) => ({ batch_size: 16, steps: step <= 600 ? 600 : 1000 }));
  const record = (lr: string, time: number) => ({
    source: 'kg_record',
    time,
    argv: ['python3', 'train.py', '--batch_size', '16', '--lr', lr],
    cwd: '/r',
  });
  const restart = f.log!.restarts![0]!;
  const first = f.log!.reduction.series[0]!.t![0]!;
  const records = [record('0.0003', first - 5), record('0.0001', restart.time! - 5)];
  const probe = whatChangedProbeSchema.parse({
    now: f.remoteNow,
    paths: [],
    git: [],
    stats: [],
    launches: [{ path: '/r/.known-good/launches.jsonl', exists: true, records }],
    elapsedMs: 1,
  });
  const r = analyze({ ...f, probe });
  assert.ok(!r.suspects.some((s) => s.title.includes('--lr')), r.suspects.map((s) => s.title).join('; '));
  const lr = r.unranked.find((u) => u.title === 'launch: --lr 0.0003 → 0.0001 (restart at step 610)');
  assert.ok(lr && !('score' in lr) && lr.inert, JSON.stringify(r.unranked));
  assert.match(
    r.headline,
    /; nothing that changes a step's cost changed at the restart at step 610 \(only launch: --lr 0\.0003 → 0\.0001 \(restart at step 610\), which cannot\); its launch records show no difference either$/,
  );
  // beside the step counters on the GPU: the restart itself leads, and its replay has the commands it needs
  const g = analyze({ ...withResume(f, fixture('gpu-before'), fixture('gpu-after')), probe });
  assert.equal(g.suspects[0]?.source, 'restart');
  assert.equal(g.suspects[0]?.prove?.ready, true);
  assert.match(
    g.suspects[0]?.prove?.text ?? '',
    /^resumes the launch before the restart from step_600 with nothing changed/,
  );
});
