import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trainLogLine, trainLogPoints } from '../../scripts/demo/trainLog';
import { materializeRealRuns } from '../support/realRuns';
import { reloadWindow, scenario, type Workbench } from './harness';

/** The demo's story in small: run-a's loss falls, then rises a little after step 690 when lr was halved. */
function writeDemoRun(root: string): void {
  const dir = join(root, 'run-a');
  mkdirSync(dir, { recursive: true });
  const lines = trainLogPoints({ steps: 3000, seed: 12345, changedAfter: 690 }).map(trainLogLine);
  lines.splice(1500, 0, '{"step": 1500, "loss": NaN}', 'not json');
  writeFileSync(join(dir, 'train_log.jsonl'), lines.join('\n') + '\n');
  for (const s of [600, 690, 780]) {
    mkdirSync(join(dir, `step_${s}`), { recursive: true });
    writeFileSync(join(dir, `step_${s}`, 'checkpoint.pt'), 'demo');
  }
}

const localRoot = mkdtempSync(join(tmpdir(), 'kg-ui-dashboard-'));
writeDemoRun(localRoot);

/** The dark theme, whatever the window started with (its settings.json default does not always apply in time). */
async function darkTheme(vs: Workbench): Promise<void> {
  const rows = vs.page.locator('.quick-input-list .monaco-list-row');
  await vs.page.keyboard.press('F1');
  await vs.page.locator('.quick-input-widget input').fill('>Preferences: Color Theme');
  // Not "Browse Color Themes in Marketplace": that one needs the network.
  await rows
    .filter({ hasText: /^Preferences: Color Theme/ })
    .first()
    .click();
  await vs.page.locator('.quick-input-widget input').fill('Dark Modern');
  await rows
    .filter({ hasText: /^Dark Modern/ })
    .first()
    .click();
  await vs.page.locator('.monaco-workbench.vs-dark').waitFor();
}

/** The plots, legend and side panels of the open dashboard; fails unless every plot's canvas was drawn on. */
async function checkDashboard(vs: Workbench, shot: string): Promise<void> {
  // VS Code puts a webview in an iframe that holds the page's own iframe.
  const page = vs.page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
  const plots = page.locator('.kg-plot');
  await plots.first().waitFor({ timeout: 60_000 });
  const keys = await plots.evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.series));
  assert.deepEqual([...keys].sort(), ['loss', 'lr', 'tok_per_s']);

  // Drawn, not just laid out: each plot's canvas has painted pixels (lines and axes).
  const inked = await page.locator('.kg-plot canvas').evaluateAll((canvases) =>
    canvases.map((el) => {
      const c = el as HTMLCanvasElement;
      const ctx = c.getContext('2d');
      if (!ctx || c.width === 0 || c.height === 0) return 0;
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i + 3]! > 0) n++;
      return n;
    }),
  );
  assert.ok(inked.length >= 3 && inked.every((n) => n > 500), `painted pixels per canvas: ${inked.join(', ')}`);

  await page.locator('.kg-legend-item', { hasText: 'run-a' }).waitFor();
  // The two bad lines are counted, not fatal.
  await page.locator('.kg-legend-item', { hasText: '2 skipped' }).waitFor();
  await page.locator('.kg-checkpoint', { hasText: 'step_690' }).waitFor();
  // The demo log is small: read whole at once, so no preview note.
  assert.equal(await page.locator('.kg-preview-note').count(), 0, 'a small log was shown as a preview');
  await page.locator('.kg-drift h2', { hasText: /baseline drift/i }).waitFor();
  // Away from the tree, so no hover tooltip covers the plots in the screenshot.
  await vs.page.mouse.move(1100, 700);
  await vs.page.waitForTimeout(800);
  await vs.screenshot(shot);
}

const options = { localRoots: [localRoot], settings: { 'workbench.colorTheme': 'Default Dark Modern' } };

scenario('Open Dashboard from the palette on the demo run draws its plots (dark theme)', options, async (vs) => {
  await vs.openView('Known Good');
  await darkTheme(vs);
  await vs.commandPalette('Known Good: Open Dashboard');
  // One host: the run is the only question.
  const row = vs.page.locator('.quick-input-list .monaco-list-row', { hasText: 'run-a' });
  await row.first().waitFor({ timeout: 30_000 });
  await vs.page.keyboard.press('Enter');
  await checkDashboard(vs, 'dashboard-dark');
});

scenario('Open Dashboard on the demo run in Remote Runs (context menu)', options, async (vs) => {
  await vs.openView('Known Good');
  await darkTheme(vs);
  await vs.expand('This machine');
  // The row's accessible name may start with its tooltip (the full path): match the folder name anywhere.
  const run = /\/run-a(\s|,|$)|^run-a(\s|,|$)/;
  await vs.treeItem(run).waitFor({ timeout: 30_000 });
  await vs.contextMenu(run, 'Open Dashboard');
  await checkDashboard(vs, 'dashboard-dark-tree');
  // A window reload brings the dashboard back, drawn again from the run's log.
  await reloadWindow(vs);
  await vs.page.locator('.tabs-container .tab', { hasText: /^Dashboard: / }).waitFor({ timeout: 60_000 });
  await checkDashboard(vs, 'dashboard-restored-after-reload');
});

// A training script This machine's baselines hash (knownGood.env.scriptGlobs): edited between capture and compare.
const driftScripts = mkdtempSync(join(tmpdir(), 'kg-ui-dashboard-scripts-'));
writeFileSync(join(driftScripts, 'train.py'), 'lr = 3e-4\n');

// A run logging now (its points from an hour ago to two hours ahead): what the scenario captures is in its time, and
// the drift panel shows only what was captured during a run.
const liveRoot = mkdtempSync(join(tmpdir(), 'kg-ui-dashboard-live-'));
{
  const t0 = Math.floor(Date.now() / 1000) - 3600;
  mkdirSync(join(liveRoot, 'run-live'));
  const lines = Array.from({ length: 180 }, (_, i) =>
    JSON.stringify({ step: (i + 1) * 10, time: t0 + i * 60, loss: 2 }),
  );
  writeFileSync(join(liveRoot, 'run-live', 'train_log.jsonl'), lines.join('\n') + '\n');
}

scenario(
  "The open dashboard follows Capture and Compare Environment during its run: the run's drift changes without reopening",
  {
    ...options,
    localRoots: [liveRoot],
    settings: {
      ...options.settings,
      'knownGood.env.scriptGlobs': [join(driftScripts, '*.py')],
      // no copy in the demo root the other scenarios list
      'knownGood.baselines.copyToRemote': false,
    },
    timeoutMs: 240_000,
  },
  async (vs) => {
    const { page } = vs;
    const input = page.locator('.quick-input-widget input');
    const rows = page.locator('.quick-input-list .monaco-list-row');
    await vs.openView('Known Good');
    await vs.commandPalette('Known Good: Open Dashboard');
    await rows.filter({ hasText: 'run-live' }).first().waitFor({ timeout: 30_000 });
    await page.keyboard.press('Enter');
    const dash = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    const drift = dash.locator('.kg-drift');
    await dash.locator('.kg-plot').first().waitFor({ timeout: 60_000 });
    // the panel's own snapshot of now falls in the live run's time: alone, it has nothing to compare with (or, taken
    // too slowly, none is there)
    await drift
      .getByText(/^(No baseline captured|Only now \(.*\) was captured) during this run/)
      .waitFor({ timeout: 30_000 });
    await drift.getByText(/^run: \d{4}-\d\d-\d\d \d\d:\d\d – /).waitFor();

    // Capture (one host: only the label is asked): the dashboard shows it at once, the run's only snapshot.
    await vs.commandPalette('Known Good: Capture Environment Baseline');
    await input.waitFor();
    await input.fill('dash known good');
    await page.keyboard.press('Enter');
    await drift
      .getByText(/^Only baseline "dash known good" .* was captured during this run: nothing to compare it with/)
      .waitFor({ timeout: 90_000 });

    // Compare after an edit: the compare's snapshot is the dashboard's "now" too, and in the run's time.
    writeFileSync(join(driftScripts, 'train.py'), 'lr = 1e-3  # "just a quick tweak"\n');
    await vs.commandPalette('Known Good: Compare Environment with Baseline');
    await input.fill('dash known good');
    await rows.filter({ hasText: 'dash known good' }).first().waitFor();
    await page.keyboard.press('Enter');
    await page.getByRole('tab', { name: /"dash known good" ↔ now/ }).waitFor({ timeout: 90_000 });
    await page.getByRole('tab', { name: /^Dashboard: run-live/ }).click();
    await drift
      .locator('.kg-muted', { hasText: /baseline "dash known good" → now \(.*1 changed/ })
      .waitFor({ timeout: 30_000 });
    await drift.locator('.kg-drift-text', { hasText: /scripts/ }).waitFor();
    await vs.page.mouse.move(1100, 700);
    await vs.screenshot('dashboard-drift-after-compare');
  },
);

scenario(
  'Benchmark chart with one result: it can be marked known-good from the dashboard, and the chart says so',
  {
    ...options,
    settings: {
      ...options.settings,
      // Debian's torch for a tiny CPU benchmark on This machine; xterm's DOM renderer, so its rows can be read
      'knownGood.localPython': '/usr/bin/python3',
      'terminal.integrated.gpuAcceleration': 'off',
      'knownGood.baselines.copyToRemote': false,
    },
    timeoutMs: 300_000,
  },
  async (vs) => {
    const { page } = vs;
    const rows = page.locator('.quick-input-list .monaco-list-row');
    await vs.openView('Known Good');
    // One kept result (the only host is taken without asking).
    await vs.commandPalette('Known Good: Run Throughput Benchmark');
    await page.waitForFunction(
      () =>
        /Benchmark configuration/.test(
          document.querySelector<HTMLInputElement>('.quick-input-widget input')?.placeholder ?? '',
        ),
      undefined,
      { timeout: 30_000 },
    );
    await page.locator('.quick-input-widget input').fill('Tiny (CPU)');
    await rows.first().waitFor();
    await page.keyboard.press('Enter');
    for (let i = 0; i < 720; i++) {
      const text = (await page.locator('.xterm-rows > div').allTextContents()).join('\n');
      if (/kept with the baselines of This machine/.test(text)) break;
      assert.ok(i < 719, `the benchmark never finished: ${text}`);
      await page.waitForTimeout(250);
    }

    await vs.commandPalette('Known Good: Open Dashboard');
    await rows.filter({ hasText: 'run-a' }).first().waitFor({ timeout: 30_000 });
    await page.keyboard.press('Enter');
    const dash = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    await dash.locator('.kg-plot').first().waitFor({ timeout: 60_000 });
    const bench = dash.locator('.kg-bench-list');
    await dash.getByText('no known-good result marked: mark one below').waitFor({ timeout: 60_000 });
    assert.equal(await bench.locator('li').count(), 1);
    // The one point's chart is drawn (uPlot's canvas has ink), on a range around it.
    const inked = await dash
      .locator('.kg-bench-canvas canvas')
      .first()
      .evaluate((el) => {
        const c = el as HTMLCanvasElement;
        const d = c.getContext('2d')?.getImageData(0, 0, c.width, c.height).data ?? new Uint8ClampedArray();
        let n = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i]! > 0) n++;
        return n;
      });
    assert.ok(inked > 200, `benchmark chart pixels: ${inked}`);

    await bench.getByRole('button', { name: 'Mark known-good' }).click();
    await bench.getByText('known-good', { exact: true }).waitFor({ timeout: 30_000 });
    await dash.getByText(/^tokens\/s; known-good /).waitFor();
    await bench.getByRole('button', { name: 'Unmark' }).waitFor();
    await dash.locator('.kg-bench-canvas').first().scrollIntoViewIfNeeded();
    await vs.page.mouse.move(1100, 700);
    await vs.screenshot('dashboard-bench-marked');
    // Unmark again: the host's one reference is What Changed?'s too.
    await bench.getByRole('button', { name: 'Unmark' }).click();
    await bench.getByRole('button', { name: 'Mark known-good' }).waitFor({ timeout: 30_000 });
  },
);

// The real regressions corpus as written on the GPU box (test/fixtures/real/regressions): plain-dataset-padded was
// restarted at step 600 on a padded copy of its data and fell to 0.38× tokens/s (truth.json).
const realRoot = materializeRealRuns(
  'regressions',
  join(mkdtempSync(join(tmpdir(), 'kg-ui-dashboard-real-')), 'regressions'),
);

scenario(
  "A restarted real run's dashboard marks the restart on every plot and the report's drop at it, also after a reload",
  { ...options, localRoots: [realRoot], timeoutMs: 240_000 },
  async (vs) => {
    await vs.openView('Known Good');
    await darkTheme(vs);
    await vs.expand('This machine');
    const run = /\/plain-dataset-padded(\s|,|$)|^plain-dataset-padded(\s|,|$)/;
    await vs.treeItem(run).waitFor({ timeout: 30_000 });
    await vs.contextMenu(run, 'Open Dashboard');
    const check = async (shot: string) => {
      const dash = vs.page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
      const tok = dash.locator('.kg-plot[data-series="tok_s"] .kg-plot-marks');
      await tok.waitFor({ timeout: 60_000 });
      // What Changed?'s changepoint of tok_s (the drop, at the restart) and the restart, in words under the plot
      await tok.getByText(/^shift 2\d\d\.\dK → 9\d\.\dK \(0\.38×\) at step 600$/).waitFor({ timeout: 60_000 });
      await tok.getByText('restart (time-gap) at step 610').waitFor();
      const perPlot = await dash
        .locator('.kg-plot')
        .evaluateAll((els) =>
          els.map((e) => [(e as HTMLElement).dataset.series, e.querySelectorAll('[data-kind="restart"]').length]),
        );
      assert.ok(perPlot.length >= 3, JSON.stringify(perPlot));
      for (const [key, n] of perPlot) assert.equal(n, 1, `restart marks on ${key}: ${JSON.stringify(perPlot)}`);
      await vs.page.mouse.move(1100, 700);
      await vs.page.waitForTimeout(500);
      await vs.screenshot(shot);
    };
    await check('dashboard-restart-marks');
    await reloadWindow(vs);
    await vs.page.locator('.tabs-container .tab', { hasText: /^Dashboard: / }).waitFor({ timeout: 60_000 });
    await check('dashboard-restart-marks-after-reload');
  },
);
