import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { captureSnapshot } from '../../src/core/baselines/capture';
import { BaselineStore } from '../../src/core/baselines/store';
import { ProbeRunner } from '../../src/core/probes/runner';
import { SshPool } from '../../src/core/transport/ssh';
import type { Transport } from '../../src/core/transport/types';
import { keepDataFingerprints, whatChanged, type WhatChangedHost } from '../../src/core/whatChanged/gather';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { requireTorch } from '../support/require';
import { startSshd, type TestSshd } from '../support/sshd';
import { noise, STEP_S, writeCheckpoints, writeData, writeLog, writeStory } from '../support/whatChangedStory';

/*
 * The story of issue 16 over a real OpenSSH sshd, with real torch checkpoints: a run whose tok/s falls from 12.8K to
 * 4.3K after step 600, where the dataset arg changed between step_600 and step_700; a baseline captured early, an
 * unrelated NCCL_DEBUG added later and the training script edited after the baseline. Then the same shape of drop
 * where the dataset stays and torch's build changes (+cu128 → +cu130) between the two checkpoints.
 */

void describe('What changed? over a real sshd', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let dir: string;
  let bashEnv: string;
  let baseEnv: string;
  let transport: Transport;
  const runners: ProbeRunner[] = [];
  let storyRun = '';

  /** A fresh runner: a new login, which reads the remote environment as it is now. The previous runners end. */
  function host(): WhatChangedHost & { runner: ProbeRunner } {
    // the earlier ones are done: each helper holds a session of the connection (sshd allows 10)
    for (const r of runners.splice(0)) r.dispose();
    const runner = new ProbeRunner(transport, { python: 'python3', timeoutMs: 60000 });
    runners.push(runner);
    return { id: transport.id, label: 'test-sshd', probes: runner, runner };
  }

  before(async () => {
    requireTorch();
    dir = mkdtempSync(join(tmpdir(), 'kg-why-'));
    sshd = await startSshd();
    bashEnv = join(sshd.dir, 'bash_env');
    baseEnv = readFileSync(bashEnv, 'utf8');
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    transport = pool.transport(endpointOf(sshd), 'test-sshd');
  });
  after(async () => {
    for (const r of runners) r.dispose();
    pool?.dispose();
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  void it('the dataset change at step 600 ranks first; NCCL_DEBUG and the script edit are listed lower', async () => {
    const root = join(dir, 'story');
    const { run, t0 } = writeStory(root);
    const code = join(root, 'code');
    mkdirSync(code, { recursive: true });
    const train = join(code, 'train.py');
    writeFileSync(train, 'print("train")\n');
    const git = (...a: string[]) =>
      execFileSync('git', ['-C', code, ...a], {
        env: {
          ...process.env,
          GIT_AUTHOR_NAME: 't',
          GIT_AUTHOR_EMAIL: 't@x',
          GIT_COMMITTER_NAME: 't',
          GIT_COMMITTER_EMAIL: 't@x',
        },
      });
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'train');

    // the baseline, captured "before" (early in the run)
    writeFileSync(bashEnv, baseEnv);
    const store = new BaselineStore(join(dir, 'store'));
    const early = host();
    const snap = await captureSnapshot(
      { spec: { name: 'test-sshd', roots: [], container: undefined }, transport, probes: early.runner },
      { scriptGlobs: [join(code, '*.py')], extraVariables: [], cacheDirs: [] },
    );
    assert.equal(snap.scripts.files.length, 1);
    // the data the newest checkpoint names, kept beside the baseline (dataset inside data_dir, and data_dir)
    assert.equal(await keepDataFingerprints(early, run, store), 2);
    await store.save({
      label: 'before',
      host: transport.id,
      hostLabel: 'test-sshd',
      snapshot: snap,
      capturedAt: new Date((t0 + 150) * 1000).toISOString(),
    });
    // later: an unrelated variable, and the script edited after the baseline
    writeFileSync(bashEnv, `${baseEnv}\nexport NCCL_DEBUG=INFO\n`);
    writeFileSync(train, 'print("train, edited")\n');

    const report = await whatChanged(host(), run, { store });
    const md = renderWhatChangedMarkdown(report);
    const diag = `${md}\n${JSON.stringify(report.suspects.map((s) => [s.title, s.score]))}`;
    if (process.env['KG_PRINT']) console.log(md);

    assert.equal(report.verdict, 'regression', diag);
    const tp = report.changepoints.series.find((s) => s.key === 'tok_s');
    assert.ok(tp, diag);
    assert.equal(tp.changepoints.length, 1, diag);
    assert.ok(Math.abs(tp.changepoints[0]!.at - 600) <= 10, `changepoint at ${tp.changepoints[0]!.at}`);
    assert.equal(report.reference.kind, 'changepoint');
    assert.equal(report.reference.label, 'step_600');
    assert.equal(report.reference.baseline?.label, 'before');

    const first = report.suspects[0]!;
    assert.equal(first.title, 'dataset openwebtext-10k → openwebtext-dedup-v2', diag);
    assert.equal(first.source, 'args');
    assert.equal(first.coincides, true);
    assert.deepEqual(first.when.steps, { from: 600, to: 700 });
    assert.ok(
      first.reasons.some((r) => r.points > 0 && /shifted at step 600/.test(r.why)),
      diag,
    );
    assert.deepEqual(
      first.evidence.map((e) => e.kind),
      ['args-diff', 'file', 'plot'],
    );
    assert.equal(
      report.headline,
      '4.3K tok/s now vs 12.8K at step_600 (0.34×); changed at step 600: dataset openwebtext-10k → openwebtext-dedup-v2 (args, step_600 → step_700)',
    );

    const nccl = report.suspects.findIndex((s) => s.title === 'NCCL_DEBUG=INFO added');
    const script = report.suspects.findIndex((s) => s.title === `${train} edited`);
    assert.ok(nccl > 0, diag);
    assert.ok(script > 0, diag);
    assert.ok(
      report.suspects[script]!.reasons.some((r) => r.points < 0 && /after the shift/.test(r.why)),
      diag,
    );
    // the edit not committed is its own suspect, with its line; made after the shift, it is ruled out
    const edit = report.suspects.find((s) => s.title === 'train.py: uncommitted edit (print("train, edited"))');
    assert.ok(edit?.ruledOut, diag);
    // cosmetic and unchanged args never rank
    assert.ok(!report.suspects.some((s) => /^(out_dir|seed|lr|data_dir) /.test(s.title)), diag);
    assert.equal(report.gathered.roundTrips, 3);
    assert.equal(report.gathered.checkpointsRead, 10);

    assert.ok(md.startsWith(`**${report.headline}**`), md);
    assert.match(md, /1\. \*\*dataset openwebtext-10k → openwebtext-dedup-v2\*\* — score \d+ \(args, at the shift\)/);
    assert.match(md, /`tok_s` at step 600: 12\.8K → 4\.3K \(0\.34×/);
    storyRun = run;
    // the data fingerprints are kept for the next report
    assert.equal(
      readdirSync(join(store.hostDir(transport.id), 'what-changed')).filter((n) => n.startsWith('data-')).length,
      2,
    );
  });

  void it('a drop that coincides with a torch build change (+cu128 → +cu130) ranks it first', async () => {
    const t0 = Math.floor(Date.now() / 1000) - 20000;
    const root = join(dir, 'torch');
    const run = join(root, 'runs', 'run-b');
    const data = join(root, 'data');
    const fake = join(root, 'site', 'torch');
    mkdirSync(run, { recursive: true });
    mkdirSync(fake, { recursive: true });
    writeData(data, 'openwebtext-10k', 4, t0 - 1000);
    writeCheckpoints(run, t0, () => 'openwebtext-10k', data);
    writeLog(run, t0);
    // torch as the snapshot sees it (torch/version.py, never imported): a cu128 build at the baseline…
    writeFileSync(join(fake, '__init__.py'), '');
    writeFileSync(join(fake, 'version.py'), "__version__ = '2.11.0+cu128'\ncuda = '12.8'\ngit_version = 'abc'\n");
    writeFileSync(bashEnv, `${baseEnv}\nexport PYTHONPATH=${join(root, 'site')}\n`);
    const store = new BaselineStore(join(dir, 'store-torch'));
    const early = host();
    const snap = await captureSnapshot(
      { spec: { name: 'test-sshd', roots: [], container: undefined }, transport, probes: early.runner },
      { scriptGlobs: [], extraVariables: [], cacheDirs: [] },
    );
    assert.equal(snap.torch.version, '2.11.0+cu128');
    await store.save({
      label: 'before',
      host: transport.id,
      snapshot: snap,
      capturedAt: new Date((t0 + 150) * 1000).toISOString(),
    });
    // …replaced by a cu130 build while the run was stopped at step 600; and NCCL_DEBUG added later
    writeFileSync(join(fake, 'version.py'), "__version__ = '2.11.0+cu130'\ncuda = '13.0'\ngit_version = 'def'\n");
    const installed = t0 + 600 * STEP_S + 3;
    utimesSync(join(fake, 'version.py'), installed, installed);
    writeFileSync(bashEnv, `${baseEnv}\nexport PYTHONPATH=${join(root, 'site')}\nexport NCCL_DEBUG=INFO\n`);
    // benchmark results kept for the host: one early, one now
    await store.appendResult(transport.id, {
      kind: 'throughput',
      baselineId: null,
      at: new Date((t0 + 100) * 1000).toISOString(),
      tokensPerSec: 12900,
    });
    await store.appendResult(transport.id, {
      kind: 'throughput',
      baselineId: null,
      at: new Date().toISOString(),
      tokensPerSec: 4400,
    });

    const report = await whatChanged(host(), run, { store });
    const md = renderWhatChangedMarkdown(report);
    const first = report.suspects[0]!;
    assert.equal(first.category, 'torch-build', md);
    assert.equal(first.title, 'torch 2.11.0+cu128 → 2.11.0+cu130 (build +cu128 → +cu130)', md);
    assert.equal(first.coincides, true, md);
    assert.match(first.when.text, /^torch installed /);
    assert.ok(
      first.evidence.some((e) => e.kind === 'bench-compare'),
      md,
    );
    assert.ok(!report.suspects.some((s) => s.source === 'args'), md);
    assert.match(
      report.headline,
      /^4\.3K tok\/s now vs 12\.8K at step_600 \(0\.34×\); changed at step 600: torch 2\.11\.0\+cu128 → 2\.11\.0\+cu130/,
    );
    assert.equal(report.throughput.bench?.ratio?.toFixed(2), '0.34');
    assert.ok(report.suspects.findIndex((s) => s.title === 'NCCL_DEBUG=INFO added') > 0, md);

    // on the host alone (no run): the benchmark pair is the evidence; the torch build still leads
    const onHost = await whatChanged(host(), null, { store });
    const hostMd = renderWhatChangedMarkdown(onHost);
    assert.equal(onHost.verdict, 'regression', hostMd);
    assert.equal(onHost.run, null);
    assert.equal(onHost.suspects[0]?.category, 'torch-build', hostMd);
    assert.equal(onHost.suspects[0]?.coincides, false);
    assert.match(
      onHost.headline,
      /^benchmark 4\.4K tok\/s now vs 12\.9K at .* \(0\.34×\); first suspect: torch 2\.11\.0\+cu128/,
    );
    assert.ok(onHost.unknown.some((u) => u.why === 'no run given: the host only'));
  });

  void it('on a checkpoint before the drop: later steps are left out, and there is nothing to explain', async () => {
    assert.ok(storyRun, 'runs after the story');
    const report = await whatChanged(host(), storyRun, { nowCheckpoint: 'step_500' });
    assert.equal(report.now.checkpoint?.label, 'step_500');
    assert.equal(report.gathered.checkpoints, 5);
    assert.equal(report.verdict, 'steady', report.headline);
    assert.deepEqual(report.suspects, []);
    const tp = report.changepoints.series.find((s) => s.key === 'tok_s');
    assert.ok(tp && tp.changepoints.length === 0);
    // on step_700 the drop is there again
    const after = await whatChanged(host(), storyRun, { nowCheckpoint: 'step_700' });
    assert.equal(after.suspects[0]?.title, 'dataset openwebtext-10k → openwebtext-dedup-v2', after.headline);
  });

  void it('nothing to explain: no changepoint and no drop says so, and ranks nothing', async () => {
    const t0 = Math.floor(Date.now() / 1000) - 20000;
    const run = join(dir, 'steady', 'run-c');
    mkdirSync(run, { recursive: true });
    writeFileSync(bashEnv, baseEnv);
    writeCheckpoints(run, t0, (s) => (s <= 600 ? 'a' : 'b'), join(dir, 'steady', 'data'));
    const g = noise(3);
    const lines = [];
    for (let step = 1; step <= 1000; step++)
      lines.push(JSON.stringify({ step, tok_s: Math.round(12800 * (1 + 0.06 * g())) }));
    writeFileSync(join(run, 'train_log.jsonl'), lines.join('\n') + '\n');
    const report = await whatChanged(host(), run, {});
    assert.equal(report.verdict, 'steady');
    assert.deepEqual(report.suspects, []);
    assert.match(
      report.headline,
      /^No throughput drop and no changepoint in train_log\.jsonl: nothing to explain; \d+ differences? since step_100 listed, not ranked$/,
    );
    assert.ok(report.unranked.some((u) => u.title === 'dataset a → b'));
    assert.ok(report.unknown.some((u) => u.fact === 'environment at the reference' && /no baseline saved/.test(u.why)));
    assert.ok(
      report.unknown.some((u) => /^data .*\/steady\/data\/a$/.test(u.fact) && u.why === 'not found'),
      JSON.stringify(report.unknown),
    );
    assert.ok(report.unknown.some((u) => u.fact.startsWith('git state of ') && u.why === 'not in a git checkout'));
  });

  void it('a run folder that is not there: every fact unknown with why, no suspect invented', async () => {
    const report = await whatChanged(host(), join(dir, 'no-such-run'), {});
    assert.equal(report.verdict, 'unknown');
    assert.deepEqual(report.suspects, []);
    assert.match(report.headline, /^Cannot tell whether throughput dropped: no metrics log/);
    assert.ok(
      report.unknown.some((u) => u.fact.startsWith('listing of ')),
      JSON.stringify(report.unknown),
    );
  });

  void it('the CLI: known-good why local RUN gives the same headline, as Markdown and as --json, exit 1', () => {
    assert.ok(storyRun, 'runs after the story');
    const home = mkdtempSync(join(tmpdir(), 'kg-why-home-'));
    try {
      const cli = (...argv: string[]) =>
        spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...argv], {
          encoding: 'utf8',
          env: { ...process.env, HOME: home },
        });
      const json = cli('why', 'local', storyRun, '--json');
      assert.equal(json.status, 1, json.stderr);
      const doc = JSON.parse(json.stdout) as { headline: string; suspects: { title: string }[] };
      assert.equal(
        doc.headline,
        '4.3K tok/s now vs 12.8K at step_600 (0.34×); changed at step 600: dataset openwebtext-10k → openwebtext-dedup-v2 (args, step_600 → step_700)',
      );
      const text = cli('why', `local:${storyRun}`);
      assert.equal(text.status, 1, text.stderr);
      assert.ok(text.stdout.startsWith(`**${doc.headline}**\n`), text.stdout);
      // no baseline in this HOME: said, not skipped over
      assert.match(text.stdout, /- environment at the reference: no baseline saved for this host/);
      const bad = cli('why', 'local', 'relative/run');
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /must be an absolute path/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
