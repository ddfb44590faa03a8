import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BaselineStore } from '../../src/core/baselines/store';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { scoreCorpus, scoreTable, summarize, type CorpusRow } from '../support/corpusScore';
import { CATEGORY_WHY } from '../../src/core/whatChanged/categories';
import { whatChanged } from '../../src/core/whatChanged/gather';
import { materializeRealRuns } from '../support/realRuns';

/*
 * Issue 23's acceptance on the real regressions corpus (13 runs written on the GPU box, each restarted at step ~600
 * with one real change or none): What Changed? — the core analysis `known-good why` runs — on every run, judged
 * against its truth.json. The score table is printed; `npm run bench -- --only regressions` prints the same over the
 * loopback sshd. RIGHT lists the runs the analysis gets right today: a run leaving it fails the test.
 */

const RIGHT = [
  'hf-dataset-longer',
  'hf-gradient-checkpointing',
  'hf-run-name',
  'lightning-batch-halved',
  'lightning-no-change',
  'plain-comment-edit',
  'plain-compile-off',
  'plain-dataset-padded',
  'plain-host-sync',
  'lightning-precision',
  'plain-launch-blocking',
  'plain-no-change',
  'plain-workers-collate',
];

void describe('What Changed? on the real regressions corpus', () => {
  let dir: string;
  let runner: ProbeRunner;
  let rows: CorpusRow[];

  before(async () => {
    dir = materializeRealRuns('regressions');
    runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120_000 });
    rows = await scoreCorpus({ id: 'local', label: 'This machine', probes: runner }, dir);
  });
  after(() => {
    runner?.dispose();
    if (dir) rmSync(dirname(dir), { recursive: true, force: true });
  });

  void it('no false alarm: every run that did not slow down is steady', (t) => {
    for (const line of scoreTable(rows).split('\n')) t.diagnostic(line);
    const alarms = rows.filter((r) => r.falseAlarm).map((r) => `${r.run}: ${r.headline}`);
    assert.deepEqual(alarms, []);
  });

  void it('a slowdown at a restart whose cause was not recorded: the verdict names the restart and what was not recorded', async () => {
    // plain-launch-blocking without its launch records: CUDA_LAUNCH_BLOCKING=1 was only in the launch environment
    const run = join(dirname(dir), 'unrecorded');
    cpSync(join(dir, 'plain-launch-blocking'), run, { recursive: true, preserveTimestamps: true });
    rmSync(join(run, '.known-good'), { recursive: true });
    const report = await whatChanged({ id: 'local', label: 'This machine', probes: runner }, run, {});
    assert.equal(report.verdict, 'regression', report.headline);
    assert.match(
      report.headline,
      /\(0\.\d\d×\); nothing recorded at the restart at step 6\d0 differs; not recorded for this run: command line, process environment \(record launches to see it next time\)$/,
    );
    assert.ok(report.unknown.some((u) => u.fact === 'command line and process environment of each launch'));
    assert.equal(report.launches?.recorded, false);
  });

  void it("accelerate's launch config as kg_record records it: mixed_precision changed at the restart ranks first", async () => {
    // plain-launch-blocking's own launch records, CUDA_LAUNCH_BLOCKING taken out and the configs the real accelerate
    // wrote (test/fixtures/real/accelerate-config: bf16, then `accelerate config default`'s "no") put in
    const run = join(dirname(dir), 'accelerate-config');
    cpSync(join(dir, 'plain-launch-blocking'), run, { recursive: true, preserveTimestamps: true });
    const real = join(__dirname, '..', 'fixtures', 'real', 'accelerate-config');
    const file = join(run, '.known-good', 'launches.jsonl');
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    const configs = ['bf16_config.yaml', 'default_config.yaml'].map((n) => {
      const c = JSON.parse(readFileSync(join(real, n), 'utf8')) as Record<string, unknown>;
      return Object.fromEntries(Object.entries(c).map(([k, v]) => [k, String(v)]));
    });
    const t = statSync(file).mtime;
    writeFileSync(
      file,
      lines
        .map((l, i) => {
          const rec = JSON.parse(l) as { env: Record<string, string>; accelerate?: unknown };
          delete rec.env.CUDA_LAUNCH_BLOCKING;
          rec.accelerate = { path: '/home/u/.cache/huggingface/accelerate/default_config.yaml', config: configs[i] };
          return JSON.stringify(rec);
        })
        .join('\n') + '\n',
    );
    utimesSync(file, t, t);
    const report = await whatChanged({ id: 'local', label: 'This machine', probes: runner }, run, {});
    assert.equal(report.verdict, 'regression', report.headline);
    assert.match(
      report.suspects[0]?.title ?? '',
      /^launch: accelerate\.mixed_precision bf16 → no \(restart at step 6\d\d\)$/,
      report.suspects.map((s) => s.title).join('; '),
    );
    assert.equal(report.suspects[0]?.category, 'dtype');
  });

  void it('the live training process (/proc): a new process with CUDA_LAUNCH_BLOCKING=1 after the restart ranks first without launch records', async () => {
    // plain-launch-blocking without its launch records; its training process is a real process working in the run,
    // seen by one report, then replaced by one started with CUDA_LAUNCH_BLOCKING=1 (a new PID is a restart)
    const run = join(dirname(dir), 'live');
    cpSync(join(dir, 'plain-launch-blocking'), run, { recursive: true, preserveTimestamps: true });
    rmSync(join(run, '.known-good'), { recursive: true });
    const store = new BaselineStore(mkdtempSync(join(tmpdir(), 'kg-live-store-')));
    const host = { id: 'local', label: 'This machine', probes: runner };
    const started = (env: NodeJS.ProcessEnv) =>
      new Promise<ChildProcess>((resolve, reject) => {
        const p = spawn('sh', ['-c', 'echo ready; exec sleep 600'], {
          cwd: run,
          env,
          stdio: ['ignore', 'pipe', 'ignore'],
        });
        p.stdout.once('data', () => resolve(p));
        p.once('error', reject);
      });
    const env = { ...process.env };
    delete env.CUDA_LAUNCH_BLOCKING;
    const first = await started(env);
    let second: ChildProcess | undefined;
    try {
      const before = await whatChanged(host, run, { store });
      assert.equal(before.launches?.running?.[0]?.pid, first.pid, JSON.stringify(before.launches));
      first.kill('SIGKILL');
      second = await started({ ...env, CUDA_LAUNCH_BLOCKING: '1' });
      const report = await whatChanged(host, run, { store });
      assert.equal(report.verdict, 'regression', report.headline);
      assert.equal(report.launches?.running?.[0]?.pid, second.pid);
      assert.match(
        report.suspects[0]?.title ?? '',
        /^process env: CUDA_LAUNCH_BLOCKING=1 added \(restart at step 6\d\d\)$/,
        report.suspects.map((s) => s.title).join('; '),
      );
      const pair = report.suspects[0]!.evidence.find((e) => e.kind === 'text-diff');
      assert.ok(pair?.kind === 'text-diff' && /^CUDA_LAUNCH_BLOCKING=1$/m.test(pair.b.text));
    } finally {
      first.kill('SIGKILL');
      second?.kill('SIGKILL');
      rmSync(store.dir, { recursive: true, force: true });
    }
  });

  void it("LightningCLI's config.yaml of each version (the documented layout, written here): a Trainer flag changed at the restart ranks first without launch records", async () => {
    const run = join(dirname(dir), 'lightning-cli');
    cpSync(join(dir, 'lightning-precision'), run, { recursive: true, preserveTimestamps: true });
    rmSync(join(run, '.known-good'), { recursive: true });
    for (const [v, p] of [
      [0, 'bf16-mixed'],
      [1, '32-true'],
    ] as const) {
      const f = join(run, 'lightning_logs', `version_${v}`, 'config.yaml');
      writeFileSync(f, `seed_everything: 1\ntrainer:\n  precision: ${p}\n  max_steps: ${v ? 1000 : 600}\n`);
      const t = statSync(join(run, 'lightning_logs', `version_${v}`, 'hparams.yaml')).mtime;
      utimesSync(f, t, t);
    }
    const report = await whatChanged({ id: 'local', label: 'This machine', probes: runner }, run, {});
    assert.equal(report.verdict, 'regression', report.headline);
    assert.match(
      report.suspects[0]?.title ?? '',
      /^lightning config: trainer\.precision bf16-mixed → 32-true \(restart at step 6\d\d\)$/,
    );
    assert.ok(report.unranked.some((u) => u.title.startsWith('lightning config: trainer.max_steps 600 → 1000')));
  });

  void it("a real code change's evidence is its commit and diff (hunks in their function); a comment-only commit is cosmetic", () => {
    const sync = rows.find((r) => r.run === 'plain-host-sync')!.report.suspects[0]!;
    const git = sync.evidence.find((e) => e.kind === 'git');
    assert.ok(git?.kind === 'git' && git.document !== undefined, JSON.stringify(sync.evidence));
    assert.match(git.document, /^ {4}Keep the latest loss for the progress line$/m);
    assert.match(git.document, /^@@ .* main\(\)\n\+ +last_loss = loss\.item\(\) {2}# shown in the progress line$/m);
    const comment = rows.find((r) => r.run === 'plain-comment-edit')!.report.unranked.map((u) => u.title);
    assert.ok(
      comment.some((t) => /^train\.py: comments, docstrings or whitespace only \(1 commit/.test(t)),
      comment.join('; '),
    );
    // a launch suspect's evidence: the two launch records side by side
    const blocking = rows.find((r) => r.run === 'plain-launch-blocking')!.report.suspects[0]!;
    const pair = blocking.evidence.find((e) => e.kind === 'text-diff');
    assert.ok(pair?.kind === 'text-diff', JSON.stringify(blocking.evidence));
    assert.ok(!/^CUDA_LAUNCH_BLOCKING=/m.test(pair.a.text) && /^CUDA_LAUNCH_BLOCKING=1$/m.test(pair.b.text));
    // bookkeeping at the restart is listed, never ranked
    const precision = rows.find((r) => r.run === 'lightning-precision')!.report;
    assert.ok(precision.unranked.some((u) => u.title.startsWith('launch: --max_steps 600 → 1000')));
    assert.ok(!precision.suspects.some((s) => /max_steps|ckpt_path/.test(s.title)));
  });

  void it('every ranked suspect of every corpus report carries one line of why its kind can move speed, first', () => {
    const missing = rows.flatMap((r) =>
      r.report.suspects
        .filter((s) => !(s.reasons[0]?.why.endsWith(`: ${CATEGORY_WHY[s.category]}`) ?? false))
        .map((s) => `${r.run}: ${s.title}: ${s.reasons[0]?.why ?? '(no reason)'}`),
    );
    assert.deepEqual(missing, []);
    assert.ok(rows.filter((r) => r.truth.regression).every((r) => r.report.suspects.length > 0));
  });

  void it('the runs it gets right stay right (the first suspect the true change; no-change runs steady)', () => {
    const wrong = rows.filter((r) => RIGHT.includes(r.run) && !r.right).map((r) => `${r.run}: ${r.headline}`);
    assert.deepEqual(wrong, []);
    assert.ok(summarize(rows).rightFirst >= RIGHT.length);
  });
});
