import * as assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import * as vscode from 'vscode';
import type { CaptureOutcome, CompareOutcome } from '../../../src/api';
import type { RunDriftInfo } from '../../../src/core/dashboard/protocol';
import { childrenOf, rootNode, type EntryNode } from '../../../src/core/runs/model';
import { activated, setSetting, waitFor, type KnownGoodApi } from './helpers';

/** A small demo run: a train log (one NaN, one malformed line) and two checkpoints. */
function writeRun(root: string, name: string, steps: number, offset = 0): void {
  const dir = join(root, name);
  const lines: string[] = [];
  for (let step = 1; step <= steps; step++) {
    const loss = step === 50 ? 'NaN' : (2 + 8 * Math.exp(-step / 40) + offset).toFixed(4);
    lines.push(
      `{"step": ${step}, "time": ${1_768_000_000 + step}, "loss": ${loss}, "lr": ${(3e-4 * Math.min(1, step / 20)).toExponential(3)}}`,
    );
    if (step === 70) lines.push('{"step": 70, "loss": ');
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'train_log.jsonl'), lines.join('\n') + '\n');
  for (const s of [100, 200]) {
    mkdirSync(join(dir, `step_${s}`), { recursive: true });
    writeFileSync(join(dir, `step_${s}`, 'checkpoint.pt'), 'not really a checkpoint');
  }
}

async function runNodes(api: KnownGoodApi, root: string): Promise<EntryNode[]> {
  await setSetting('localRoots', [root]);
  await waitFor('localRoots to be applied', () => (api.registry.hosts()[0]?.roots[0] === root ? true : undefined));
  const listing = await waitFor('the listing of This machine', async () => {
    const l = await api.tree.ensureListing('local');
    return l?.roots[0]?.path === root && l.roots[0].entry ? l : undefined;
  });
  return childrenOf(rootNode('local', listing.roots[0]!)).filter((n): n is EntryNode => n.kind === 'run');
}

describe('Dashboard', () => {
  let root: string;

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'kg-dashboard-'));
    writeRun(root, 'run-a', 300);
    writeRun(root, 'run-b', 120, 0.5);
  });
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await setSetting('localRoots', undefined);
    rmSync(root, { recursive: true, force: true });
  });

  it('opens on a run of This machine: the webview says ready, the host answers with the run', async () => {
    const api = await activated();
    const runA = (await runNodes(api, root)).find((n) => n.label === 'run-a');
    assert.ok(runA, 'run-a is listed');
    await vscode.commands.executeCommand('knownGood.dashboard.open', runA);

    const panel = await waitFor('the dashboard panel', () =>
      api.dashboard.panels().find((p) => p.title === 'Dashboard: run-a'),
    );
    // The webview (real page, real script, CSP in force) loaded and completed the handshake.
    const init = await waitFor(
      'ready and init',
      () => (panel.received.includes('ready') ? panel.lastInit : undefined),
      60_000,
    );
    assert.equal(panel.posted[0], 'init', 'nothing is posted before ready');
    assert.equal(init.runs.length, 1);
    const run = init.runs[0]!;
    assert.equal(run.run.label, 'run-a');
    assert.equal(run.run.path, join(root, 'run-a', 'train_log.jsonl'));
    // The log has a time column and no speed of its own: its speed is derived from the wall time (one step a second).
    assert.deepEqual(run.series.map((s) => s.key).sort(), ['loss', 'lr', 'steps/s (from wall time)']);
    const speed = run.series.find((s) => s.key === 'steps/s (from wall time)')!;
    assert.ok(speed.last.length > 0 && speed.last.every((v) => Math.abs(v - 1) < 1e-9), String(speed.last));
    assert.equal(run.run.skipped.nonFinite, 1);
    assert.equal(run.run.skipped.malformed, 1);
    const loss = run.series.find((s) => s.key === 'loss')!;
    assert.equal(loss.x[loss.x.length - 1], 300);
    assert.deepEqual(
      init.checkpoints.map((c) => c.label),
      ['step_100', 'step_200'],
    );
    assert.equal(panel.dropped, 0);
  });

  it('validates what the webview posts and answers zoom requests for the exact window', async () => {
    const api = await activated();
    const panel = api.dashboard.panels().find((p) => p.title === 'Dashboard: run-a');
    assert.ok(panel);
    const runId = panel.lastInit!.runs[0]!.run.id;
    panel.simulate({ type: 'requestRange', run: runId, series: 'loss', from: 200, to: 100 });
    panel.simulate({ type: 'openArgs' });
    panel.simulate('ready');
    assert.equal(panel.dropped, 3);

    const before = panel.posted.length;
    panel.simulate({ type: 'requestRange', run: runId, series: 'loss', from: 100.5, to: 150 });
    const range = await waitFor('rangeData', () =>
      panel.posted.length > before && panel.lastPosted?.type === 'rangeData' ? panel.lastPosted : undefined,
    );
    assert.equal(range.from, 100.5);
    assert.equal(range.to, 150);
    assert.ok(range.data.x.length > 0);
    assert.ok(
      range.data.x.every((x) => x >= 100 && x <= 150),
      JSON.stringify(range.data.x),
    );

    // A reloaded page says ready again and gets a full init again.
    const inits = panel.posted.filter((t) => t === 'init').length;
    panel.simulate({ type: 'ready', version: 1 });
    await waitFor('a second init', () => (panel.posted.filter((t) => t === 'init').length > inits ? true : undefined));
  });

  it('marks a benchmark result known-good from the dashboard: stored beside the results, sent back marked', async function () {
    this.timeout(180_000);
    const api = await activated();
    const panel = api.dashboard.panels().find((p) => p.title === 'Dashboard: run-a');
    assert.ok(panel);
    // A real benchmark on This machine (Debian's torch, CPU), kept in the store as usual.
    const out = await vscode.commands.executeCommand<{ file?: string; error?: string; screen?: string }>(
      'knownGood.bench.run',
      { hostId: 'local' },
      { config: '{"device": "cpu", "layers": 1, "steps": 3, "warmup": 1}', label: 'dashboard ref' },
    );
    assert.ok(out?.file, out?.error ?? out?.screen);
    const id = basename(out.file, '.json');
    const dropped = panel.dropped;
    // The bench result just kept makes the panel read its side data too; that read may still be in flight and post
    // an unmarked point after the mark. The promise is that the last post is never older than the last change: wait
    // for the marked one.
    const sideWith = (what: string, marked: boolean) =>
      waitFor(
        what,
        () => {
          const m = panel.lastPosted;
          return m?.type === 'side' && m.hosts[0]?.bench.find((b) => b.id === id)?.baseline === marked ? m : undefined;
        },
        60_000,
      );
    try {
      panel.simulate({ type: 'markReference', host: 'local', result: id });
      const side = await sideWith('the side data, marked', true);
      assert.ok(
        side.hosts[0]?.bench.some((b) => b.id === id && b.baseline),
        JSON.stringify(side.hosts),
      );
      assert.ok(existsSync(join(dirname(dirname(out.file)), 'reference.json')), 'the mark is not stored');
      assert.equal(panel.dropped, dropped, 'the message was dropped');
    } finally {
      // Unmark again: the host's one known-good reference is also What Changed?'s, and no other test expects one.
      panel.simulate({ type: 'markReference', host: 'local', result: null });
    }
    await sideWith('the side data, unmarked', false);
    assert.ok(!existsSync(join(dirname(dirname(out.file)), 'reference.json')), 'the mark is still stored');
    await vscode.commands.executeCommand('workbench.action.terminal.killAll');
  });

  it('follows the log: appended lines arrive as runData', async () => {
    const api = await activated();
    const panel = api.dashboard.panels().find((p) => p.title === 'Dashboard: run-a')!;
    panel.simulate({ type: 'toggleFollow', on: true });
    await waitFor('follow on', () => (panel.posted.includes('follow') ? true : undefined));
    const { appendFileSync } = await import('node:fs');
    appendFileSync(
      join(root, 'run-a', 'train_log.jsonl'),
      '{"step": 301, "loss": 2.01, "lr": 0.0003}\n{"step": 302, "loss": 2.0, "lr": 0.0003}\n',
    );
    const data = await waitFor(
      'runData with step 302',
      () => {
        const m = panel.lastPosted;
        return m?.type === 'runData' && m.data.series.find((s) => s.key === 'loss')?.x.includes(302)
          ? m.data
          : undefined;
      },
      20_000,
    );
    assert.equal(data.run.skipped.nonFinite, 1, 'counts carry over');
    panel.simulate({ type: 'toggleFollow', on: false });
  });

  it('follows the log: a new training process after the one before ended is marked as a restart (issue 23)', async () => {
    const api = await activated();
    const panel = api.dashboard.panels().find((p) => p.title === 'Dashboard: run-a')!;
    const runA = (await runNodes(api, root)).find((n) => n.label === 'run-a')!;
    const log = join(root, 'run-a', 'train_log.jsonl');
    const { appendFileSync } = await import('node:fs');
    const { spawn } = await import('node:child_process');
    // a training process: a real process working in the run folder, running until the test ends it
    const started = (env: NodeJS.ProcessEnv) =>
      new Promise<import('node:child_process').ChildProcess>((resolve, reject) => {
        const p = spawn('sh', ['-c', 'echo ready; exec sleep 600'], {
          cwd: join(root, 'run-a'),
          env,
          stdio: ['ignore', 'pipe', 'ignore'],
        });
        p.stdout.once('data', () => resolve(p));
        p.once('error', reject);
      });
    const env = { ...process.env };
    delete env['CUDA_LAUNCH_BLOCKING'];
    const first = await started(env);
    let second: import('node:child_process').ChildProcess | undefined;
    try {
      panel.simulate({ type: 'toggleFollow', on: true });
      appendFileSync(log, '{"step": 303, "loss": 2.0, "lr": 0.0003}\n');
      // the follow poll read the first process's step and saw the process (the watch is shared: the row says so)
      await waitFor(
        'runData with step 303',
        () => (panel.lastRunData?.data.series.find((x) => x.key === 'loss')?.x.includes(303) ? true : undefined),
        20_000,
      );
      await waitFor(
        'the first process seen by the follow poll',
        async () => {
          const item = await api.tree.getTreeItem(runA);
          return typeof item.description === 'string' && item.description.startsWith('running') ? true : undefined;
        },
        30_000,
      );
      // The poll that read step 303 looks for the training process after it posts the data: killing the first
      // before that look would let it see the second already, and mark the restart at 302. Polls run one at a time:
      // once one more has ended, the one that read step 303 has ended too, its look included.
      const polls = panel.pollsDone;
      await waitFor('the poll that read step 303 ended', () => (panel.pollsDone > polls ? true : undefined), 30_000);
      first.kill('SIGKILL');
      second = await started({ ...env, CUDA_LAUNCH_BLOCKING: '1' });
      appendFileSync(log, '{"step": 304, "loss": 2.0, "lr": 0.0003}\n');
      const data = await waitFor(
        'runData with the restart marked',
        () => {
          const m = panel.lastRunData;
          return m?.data.run.restarts?.some((r) => r.label.startsWith('restart (new process')) ? m.data : undefined;
        },
        30_000,
      );
      assert.deepEqual(
        data.run.restarts?.map((r) => [r.step, r.label]),
        [[303, `restart (new process, PID ${first.pid} → ${second.pid})`]],
      );
      const item = await api.tree.getTreeItem(runA);
      assert.equal(typeof item.description === 'string' && item.description.startsWith('running · restarted'), true);
    } finally {
      panel.simulate({ type: 'toggleFollow', on: false });
      first.kill('SIGKILL');
      second?.kill('SIGKILL');
    }
  });

  it("keeps its drift block current, limited to the run's time: a capture and a compare during the run re-send it", async function () {
    this.timeout(180_000);
    const api = await activated();
    // a run logging now: its points span the next ten minutes, so what is captured during the test is in its time
    // (outside the tree's root, so the other tests' listings do not change)
    const t0 = Math.floor(Date.now() / 1000) - 60;
    const lines = Array.from({ length: 120 }, (_, i) => `{"step": ${i + 1}, "time": ${t0 + i * 5}, "loss": 2.5}`);
    const liveDir = mkdtempSync(join(tmpdir(), 'kg-dashboard-live-'));
    const logPath = join(liveDir, 'train_log.jsonl');
    writeFileSync(logPath, lines.join('\n') + '\n');
    await setSetting('baselines.copyToRemote', false);
    await setSetting('env.extraVariables', undefined);
    const panel = await api.dashboard.open([{ hostId: 'local', logPath, label: 'run-live' }]);
    await waitFor('ready and init', () => (panel.received.includes('ready') ? panel.lastInit : undefined), 60_000);
    /** The run's drift in the newest side message posted since `from` (messages posted), if it passes `ok`. */
    const driftSince = async (what: string, from: number, ok: (d: RunDriftInfo) => boolean) => {
      let seen: RunDriftInfo | undefined;
      try {
        return await waitFor(
          what,
          () => {
            const m = panel.lastPosted;
            const d = panel.posted.length > from && m?.type === 'side' ? m.hosts[0]?.runs[0] : undefined;
            if (d) seen = d;
            return d && ok(d) ? d : undefined;
          },
          60_000,
        );
      } catch (e) {
        // what the panel did send, so that a failure says which part of the drift is missing
        throw new Error(
          `${String(e)}; posted since: ${panel.posted.slice(from).join(', ')}; last drift seen: ${JSON.stringify(seen)}`,
        );
      }
    };
    let captured: CaptureOutcome | undefined;
    try {
      let from = panel.posted.length;
      const label = `dashboard drift ${Date.now()}`;
      captured = await vscode.commands.executeCommand<CaptureOutcome | undefined>(
        'knownGood.baselines.capture',
        { hostId: 'local' },
        { label },
      );
      assert.ok(captured, 'the baseline was not captured');
      // Captured during the run and re-sent without reopening: the only snapshot of the run's time, no drift yet.
      const one = await driftSince('the side data after the capture', from, (d) => d.note.includes(label));
      assert.equal(one.drift, null);
      assert.match(one.note, new RegExp(`^Only baseline "${label}" \\(.*\\) was captured during this run`));
      assert.equal(one.span?.from, t0);

      // One more variable recorded: the compare's "now" has it, the baseline does not; both are in the run's time.
      await setSetting('env.extraVariables', ['HOME']);
      from = panel.posted.length;
      const out = await vscode.commands.executeCommand<CompareOutcome | undefined>('knownGood.baselines.compare', {
        hostId: 'local',
        baselineId: captured.id,
      });
      assert.ok(out);
      assert.equal(out.unchanged, false, out.headline);
      const d = await driftSince('the side data after the compare', from, (x) => (x.drift?.changes ?? 0) > 0);
      assert.match(d.drift!.baseline, new RegExp(`^baseline "${label}" → now \\(`));
      assert.match(d.drift!.text, /HOME/);

      // The same host seen from a run of January: nothing captured in its time, so no drift shown for it.
      const old = await api.dashboard.open([
        { hostId: 'local', logPath: join(root, 'run-b', 'train_log.jsonl'), label: 'run-b in January' },
      ]);
      const oldDrift = await waitFor(
        "the January run's side data",
        () => {
          const m = old.lastPosted;
          return m?.type === 'side' ? m.hosts[0]?.runs[0] : old.lastInit?.hosts?.[0]?.runs[0];
        },
        60_000,
      );
      assert.equal(oldDrift.drift, null);
      assert.match(oldDrift.note, /^No baseline captured during this run\./);
    } finally {
      await setSetting('env.extraVariables', undefined);
      await setSetting('baselines.copyToRemote', undefined);
      if (captured) rmSync(captured.file, { force: true });
      rmSync(liveDir, { recursive: true, force: true });
    }
  });

  it('a large log: a sampled preview first, then a runData with the exact data replaces it', async () => {
    const api = await activated();
    // Outside the tree's root, so the other tests' listings do not change. ~8 MB: sampled with a 64 KiB budget.
    const dir = mkdtempSync(join(tmpdir(), 'kg-dashboard-big-'));
    const logPath = join(dir, 'train_log.jsonl');
    const total = 80_000;
    const lines: string[] = [];
    for (let step = 1; step <= total; step++) {
      const loss = (2 + 8 * Math.exp(-step / 9000) + ((step * 7919) % 97) / 1000).toFixed(4);
      lines.push(
        `{"step": ${step}, "time": ${1_768_000_000 + step}, "loss": ${loss}, "tok_per_s": ${40000 + (step % 13)}}`,
      );
    }
    writeFileSync(logPath, lines.join('\n') + '\n');
    // The exact read waits until the preview is on the page (a 6 MB log is read exactly before the page is ready).
    let release!: () => void;
    const gate = new Promise<void>((ok) => (release = ok));
    try {
      const panel = await api.dashboard.open([{ hostId: 'local', logPath, label: 'big-run' }], {
        previewBytes: 65536,
        beforeExact: () => gate,
      });
      const init = await waitFor('the first init', () => panel.firstInit, 60_000);
      assert.ok(panel.firstDataMs !== undefined && panel.firstDataMs > 0, 'firstDataMs recorded');
      const preview = init.runs[0]!;
      assert.ok(preview.run.sample, `the first init is not a preview: ${JSON.stringify(preview.run)}`);
      assert.ok(preview.run.sample.bytes < preview.run.sample.of / 4, JSON.stringify(preview.run.sample));
      assert.ok(preview.run.lines > 0 && preview.run.lines < total, `preview lines ${preview.run.lines}`);
      assert.equal(panel.exactDataMs, undefined, 'exact before the exact read');

      // Zoom works on a preview: window reads are exact.
      panel.simulate({ type: 'requestRange', run: preview.run.id, series: 'loss', from: 40_000, to: 40_100 });
      const range = await waitFor('rangeData', () =>
        panel.lastPosted?.type === 'rangeData' ? panel.lastPosted : undefined,
      );
      assert.ok(range.data.x.length > 0 && range.data.x.every((x) => x >= 40_000 && x <= 40_100));

      const t0 = performance.now();
      release();
      const exact = await waitFor(
        'runData with the exact data',
        () => (panel.lastRunData && !panel.lastRunData.data.run.sample ? panel.lastRunData.data : undefined),
        60_000,
      );
      assert.equal(exact.run.id, preview.run.id);
      assert.equal(exact.run.lines, total, 'the exact data counts every line of the file');
      assert.equal(exact.series.find((s) => s.key === 'loss')?.x.at(-1), total);
      const exactMs = await waitFor('exactDataMs', () => panel.exactDataMs);
      assert.ok(exactMs >= panel.firstDataMs, `exact ${exactMs} ms before first ${panel.firstDataMs} ms`);
      console.log(
        `dashboard big log (${(Buffer.byteLength(lines.join('\n')) / 1e6).toFixed(1)} MB): first data (preview of ` +
          `${preview.run.sample.bytes} bytes, ${preview.run.lines} lines) ${Math.round(panel.firstDataMs)} ms after opening; ` +
          `exact read ${Math.round(performance.now() - t0)} ms once released`,
      );
      assert.equal(panel.dropped, 0);
    } finally {
      await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('overlays several selected runs in one panel', async () => {
    const api = await activated();
    const runs = await runNodes(api, root);
    assert.equal(runs.length, 2);
    await vscode.commands.executeCommand('knownGood.dashboard.open', runs[0], runs);
    const panel = await waitFor('the two-run panel', () =>
      api.dashboard.panels().find((p) => p.title === 'Dashboard: 2 runs'),
    );
    const init = await waitFor('init', () => panel.lastInit, 60_000);
    assert.deepEqual(init.runs.map((r) => r.run.label).sort(), ['run-a', 'run-b']);
    assert.equal(init.checkpoints.length, 4);
    assert.equal(new Set(init.checkpoints.map((c) => c.run)).size, 2);
  });
});
