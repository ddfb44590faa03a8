// The built dashboard (dist/webview) in headless Chromium, under the same CSP the panel uses, fed the fixture.
// A shim stands in for acquireVsCodeApi and records what the page posts; themes are applied the way VS Code does it
// (variables on <html>, a class on <body>), then changed live to check the redraw.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { requireFile } from '../support/require';
import { CHROMIUM_ARGS } from '../../scripts/vscode/browser';
import { dashboardHtml, DASHBOARD_SCRIPT, DASHBOARD_STYLES } from '../../webview/src/html';
import { loadInitFixture } from '../fixtures/dashboard';
import { parseWebviewMessage, type InitMessage } from '../../src/core/dashboard/protocol';
import { runDataFromReduction } from '../../src/core/dashboard/fromReduction';
import { runDrift, runSpanOf } from '../../src/core/dashboard/sources';
import { baselineSchema, type Baseline } from '../../src/core/baselines/store';
import type { EnvSnapshot } from '../../src/core/baselines/envProbe';
import { h200KnownGood, h200Now } from '../fixtures/env';
import { reduce } from '../support/runHistory';
import { GPU_SERIES } from '../../src/core/hardware/gpuKeys';
import { gpuPlotOf } from '../../src/core/hardware/gpuPlot';
import { dashboardLogRun, dashboardTimeline } from '../support/gpuTimeline';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = resolve(__dirname, '../..');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const NONCE = 'a1B2c3D4e5F6g7H8i9J0kLmN';

// VS Code's own values for these variables (Dark Modern / Light Modern).
const DARK: Record<string, string> = {
  '--vscode-font-family': 'system-ui, "Ubuntu", "Droid Sans", sans-serif',
  '--vscode-font-size': '13px',
  '--vscode-editor-font-family': '"Droid Sans Mono", monospace',
  '--vscode-editor-background': '#1f1f1f',
  '--vscode-editor-foreground': '#cccccc',
  '--vscode-foreground': '#cccccc',
  '--vscode-descriptionForeground': '#9d9d9d',
  '--vscode-panel-border': '#2b2b2b',
  '--vscode-charts-foreground': '#cccccc',
  '--vscode-charts-lines': 'rgba(204, 204, 204, 0.5)',
  '--vscode-charts-blue': '#3794ff',
  '--vscode-charts-orange': '#d18616',
  '--vscode-charts-green': '#89d185',
  '--vscode-charts-purple': '#b180d7',
  '--vscode-charts-red': '#f14c4c',
  '--vscode-charts-yellow': '#cca700',
  '--vscode-button-background': '#0078d4',
  '--vscode-button-foreground': '#ffffff',
  '--vscode-button-secondaryBackground': '#313131',
  '--vscode-button-secondaryForeground': '#cccccc',
  '--vscode-button-secondaryHoverBackground': '#3c3c3c',
  '--vscode-button-hoverBackground': '#026ec1',
  '--vscode-checkbox-background': '#313131',
  '--vscode-checkbox-border': '#3c3c3c',
  '--vscode-checkbox-foreground': '#cccccc',
  '--vscode-dropdown-background': '#313131',
  '--vscode-dropdown-border': '#3c3c3c',
  '--vscode-dropdown-foreground': '#cccccc',
  '--vscode-badge-background': '#616161',
  '--vscode-badge-foreground': '#f8f8f8',
  '--vscode-textCodeBlock-background': '#2b2b2b',
  '--vscode-focusBorder': '#0078d4',
};
const LIGHT: Record<string, string> = {
  ...DARK,
  '--vscode-editor-background': '#ffffff',
  '--vscode-editor-foreground': '#3b3b3b',
  '--vscode-foreground': '#3b3b3b',
  '--vscode-descriptionForeground': '#3b3b3b',
  '--vscode-panel-border': '#e5e5e5',
  '--vscode-charts-foreground': '#616161',
  '--vscode-charts-lines': 'rgba(97, 97, 97, 0.5)',
  '--vscode-charts-blue': '#1a85ff',
  '--vscode-charts-orange': '#d18616',
  '--vscode-charts-green': '#388a34',
  '--vscode-charts-purple': '#652d90',
  '--vscode-charts-red': '#e51400',
  '--vscode-charts-yellow': '#bf8803',
  '--vscode-button-secondaryBackground': '#e5e5e5',
  '--vscode-button-secondaryForeground': '#3b3b3b',
  '--vscode-button-secondaryHoverBackground': '#cccccc',
  '--vscode-checkbox-background': '#f8f8f8',
  '--vscode-checkbox-border': '#cecece',
  '--vscode-checkbox-foreground': '#3b3b3b',
  '--vscode-dropdown-background': '#ffffff',
  '--vscode-dropdown-border': '#cecece',
  '--vscode-dropdown-foreground': '#3b3b3b',
  '--vscode-badge-background': '#cccccc',
  '--vscode-badge-foreground': '#3b3b3b',
  '--vscode-textCodeBlock-background': '#f2f2f2',
};

/** Like VS Code's Dark High Contrast: black, white text, a cyan border around everything. */
const HIGH_CONTRAST: Record<string, string> = {
  ...DARK,
  '--vscode-editor-background': '#000000',
  '--vscode-editor-foreground': '#ffffff',
  '--vscode-foreground': '#ffffff',
  '--vscode-descriptionForeground': '#ffffff',
  '--vscode-contrastBorder': '#6fc3df',
  '--vscode-panel-border': '#6fc3df',
  '--vscode-charts-foreground': '#ffffff',
  '--vscode-charts-lines': 'rgba(255, 255, 255, 0.6)',
  '--vscode-charts-blue': '#4fc1ff',
};

/** Builds with the project's build script; dist/webview is what the panel serves. */
function build(): string {
  const r = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, `node scripts/build.mjs failed:\n${r.stderr}${r.stdout}`);
  const dir = join(ROOT, 'dist/webview');
  for (const f of [DASHBOARD_SCRIPT, ...DASHBOARD_STYLES])
    assert.ok(existsSync(join(dir, f)), `build did not produce ${f}`);
  return dir;
}

/** Paths the page asked for that do not exist: a misspelt resource name shows up here. */
const missing: string[] = [];

const TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css', '.map': 'application/json' };

function serve(dir: string): Promise<{ server: Server; origin: string }> {
  return new Promise((ok) => {
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (url.pathname === '/') {
        const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(
          dashboardHtml({
            cspSource: origin,
            nonce: NONCE,
            scriptUri: `${origin}/webview/${DASHBOARD_SCRIPT}`,
            cssUris: DASHBOARD_STYLES.map((s) => `${origin}/webview/${s}`),
          }),
        );
        return;
      }
      if (url.pathname === '/favicon.ico') {
        res.writeHead(204).end();
        return;
      }
      const name = url.pathname.replace(/^\/webview\//, '');
      const file = join(dir, name);
      if (!url.pathname.startsWith('/webview/') || name.includes('..') || !existsSync(file)) {
        missing.push(url.pathname);
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
      res.end(readFileSync(file));
    });
    server.listen(0, '127.0.0.1', () =>
      ok({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    );
  });
}

/**
 * Runs in the page before its scripts: the acquireVsCodeApi shim and a CSP violation recorder. A string, not a
 * function: tsx would wrap named functions in a helper that does not exist in the page.
 */
const SHIM = `
(() => {
  const posted = [];
  const violations = [];
  let state;
  let acquired = false;
  window.__posted = posted;
  window.__violations = violations;
  window.__state = () => state;
  window.acquireVsCodeApi = () => {
    if (acquired) throw new Error('acquireVsCodeApi called twice');
    acquired = true;
    return {
      postMessage: (m) => posted.push(JSON.parse(JSON.stringify(m))),
      getState: () => state,
      setState: (s) => { state = s; },
    };
  };
  document.addEventListener('securitypolicyviolation', (e) =>
    violations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber));
})();
`;

async function applyTheme(
  page: Page,
  kind: 'vscode-dark' | 'vscode-light' | 'vscode-high-contrast',
  vars: Record<string, string>,
): Promise<void> {
  await page.evaluate(
    ({ kind, vars }) => {
      const html = document.documentElement;
      html.removeAttribute('style');
      for (const [k, v] of Object.entries(vars)) html.style.setProperty(k, v);
      document.body.className = kind;
    },
    { kind, vars },
  );
}

const posted = (page: Page): Promise<{ type: string; [k: string]: unknown }[]> =>
  page.evaluate(() => (window as unknown as { __posted: { type: string }[] }).__posted);

/** Pixels of each plot canvas close to `rgb`: the run's line and, fainter, its band do not match; only the line. */
/**
 * Reads `read` until `ok` holds and returns that reading; after 30 s it returns the last one, for the caller's
 * assert to fail on. A redraw or a posted message is waited for, never a set time a slow machine may overrun.
 */
async function eventually<T>(read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const until = Date.now() + 30_000;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function countColor(page: Page, selector: string, hex: string): Promise<number> {
  return page.evaluate(
    ({ selector, hex }) => {
      const want = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
      let n = 0;
      for (const c of Array.from(document.querySelectorAll<HTMLCanvasElement>(selector))) {
        const ctx = c.getContext('2d');
        if (!ctx) continue;
        const d = ctx.getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4) {
          if ((d[i + 3] ?? 0) < 200) continue;
          const dist =
            Math.abs((d[i] ?? 0) - (want[0] ?? 0)) +
            Math.abs((d[i + 1] ?? 0) - (want[1] ?? 0)) +
            Math.abs((d[i + 2] ?? 0) - (want[2] ?? 0));
          if (dist < 40) n++;
        }
      }
      return n;
    },
    { selector, hex },
  );
}

function nonTransparent(page: Page, selector: string): Promise<number> {
  return page.evaluate((selector) => {
    const c = document.querySelector<HTMLCanvasElement>(selector);
    const d = c?.getContext('2d')?.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    if (d) for (let i = 3; i < d.length; i += 4) if ((d[i] ?? 0) > 0) n++;
    return n;
  }, selector);
}

let browser: Browser | undefined;
let server: Server | undefined;
let origin = '';
let init: InitMessage;

before(async () => {
  requireFile(CHROMIUM, 'chromium');
  const dir = build();
  ({ server, origin } = await serve(dir));
  init = loadInitFixture();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
  });
  mkdirSync(ARTIFACTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await new Promise<void>((ok) => (server ? server.close(() => ok()) : ok()));
});

/** The dashboard page in a fresh context, once it said ready; page errors and console errors/warnings collected. */
async function openDashboard(): Promise<{
  context: BrowserContext;
  page: Page;
  problems: string[];
  warnings: string[];
}> {
  assert.ok(browser);
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const problems: string[] = [];
  const warnings: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console.error: ${m.text()}`);
    if (m.type() === 'warning') warnings.push(m.text());
  });
  await page.addInitScript({ content: SHIM });
  await page.goto(`${origin}/`);
  await page.waitForFunction(() =>
    (window as unknown as { __posted: { type: string }[] }).__posted.some((m) => m.type === 'ready'),
  );
  return { context, page, problems, warnings };
}

void test('dashboard renders the fixture in headless Chromium, dark then light', async () => {
  // Handshake: ready first, and nothing drawn before init.
  const { context, page, problems, warnings } = await openDashboard();
  assert.deepEqual((await posted(page))[0], { type: 'ready', version: 1 });
  assert.equal(await page.locator('.kg-plot canvas').count(), 0, 'drew before init');

  await applyTheme(page, 'vscode-dark', DARK);
  // An invalid message is logged and ignored, not fatal.
  await page.evaluate(() => window.postMessage({ type: 'init', runs: 'nope' }, '*'));
  await page.evaluate((m) => window.postMessage(m, '*'), init);
  await page.waitForSelector('.kg-plot[data-series="loss"] canvas');
  await page.waitForSelector('.kg-bench-canvas canvas');
  assert.ok(
    warnings.some((w) => w.includes('ignored a message') && w.includes('init')),
    `no warning for the bad message: ${warnings.join(' | ')}`,
  );

  // Saved before the checks, so a failure leaves a picture of what went wrong.
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-dark.png'), fullPage: true });

  // One plot per series, runs in distinct theme colours, bands and axes drawn.
  const series = await page.locator('.kg-plot').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.series));
  // The run's speed first, then the loss (issue 22: the question the dashboard answers first is the speed).
  assert.deepEqual(series, ['tok_per_s', 'loss', 'lr']);
  const lossCanvas = '.kg-plot[data-series="loss"] canvas';
  const painted = await nonTransparent(page, lossCanvas);
  assert.ok(painted > 5_000, `loss canvas nearly empty: ${painted} px`);
  const blueDark = await countColor(page, lossCanvas, DARK['--vscode-charts-blue']!);
  const orangeDark = await countColor(page, lossCanvas, DARK['--vscode-charts-orange']!);
  assert.ok(blueDark > 300, `run 1 line (charts-blue) barely drawn: ${blueDark} px`);
  assert.ok(orangeDark > 300, `run 2 line (charts-orange) barely drawn: ${orangeDark} px`);
  assert.ok(
    (await countColor(page, '.kg-bench-canvas canvas', DARK['--vscode-charts-green']!)) > 50,
    'baseline not marked on the bench plot',
  );
  // uPlot's legend names both runs; skipped counts are shown.
  const legend = await page.locator('.kg-plot[data-series="loss"] .u-legend').innerText();
  assert.match(legend, /baseline-1b/);
  assert.match(legend, /lr6e-4/);
  assert.match(await page.locator('.kg-legend').innerText(), /16 skipped/);
  assert.match(await page.locator('.kg-drift-text').innerText(), /torch\s+2\.5\.1\+cu124\s+→\s+2\.6\.0\+cu126/);
  // Text is readable on the dark background: the computed colour is the theme's foreground.
  assert.equal(
    await page
      .locator('.kg-plot-title')
      .first()
      .evaluate((e) => getComputedStyle(e).color),
    'rgb(204, 204, 204)',
  );

  // Series toggle: unchecking lr removes its plot and tells the host; checking brings it back.
  const lrBox = page.locator('.kg-series-chooser vscode-checkbox[data-value="lr"]');
  await lrBox.click();
  await page.waitForSelector('.kg-plot[data-series="lr"]', { state: 'detached' });
  assert.deepEqual((await posted(page)).at(-1), { type: 'selectSeries', keys: ['tok_per_s', 'loss'] });
  await lrBox.click();
  await page.waitForSelector('.kg-plot[data-series="lr"] canvas');
  assert.deepEqual((await posted(page)).at(-1), { type: 'selectSeries', keys: ['tok_per_s', 'loss', 'lr'] });

  // Checkpoint buttons post the right paths; the first of a run has nothing to diff against.
  const ckpts = init.checkpoints;
  const second = ckpts[1]!;
  await page.locator(`.kg-checkpoint[data-path="${second.path}"] vscode-button[data-action="open-args"]`).click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'openArgs', path: second.path });
  await page.locator(`.kg-checkpoint[data-path="${second.path}"] vscode-button[data-action="diff-args"]`).click();
  assert.deepEqual((await posted(page)).at(-1), { type: 'diffArgs', a: ckpts[0]!.path, b: second.path });
  const before = (await posted(page)).length;
  await page
    .locator(`.kg-checkpoint[data-path="${ckpts[0]!.path}"] vscode-button[data-action="diff-args"]`)
    .click({ force: true });
  assert.equal((await posted(page)).length, before, 'diff of the first checkpoint posted a message');

  // Hovering shows each run's value at the cursor, though the runs' buckets sit at different steps.
  const hover = (await page.locator('.kg-plot[data-series="loss"] .u-over').boundingBox())!;
  await page.mouse.move(hover.x + hover.width * 0.25, hover.y + hover.height / 2);
  const values = await page.locator('.kg-plot[data-series="loss"] .u-legend .u-value').allInnerTexts();
  assert.equal(values.length, 3, values.join(' | '));
  for (const v of values.slice(1)) assert.match(v, /^\d+(\.\d+)?$/, `legend value "${v}" (all: ${values.join(' | ')})`);

  // Zoom: a drag over the loss plot asks the host for finer buckets of each run, in steps.
  const over = page.locator('.kg-plot[data-series="loss"] .u-over');
  const box = (await over.boundingBox())!;
  await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction(() =>
    (window as unknown as { __posted: { type: string }[] }).__posted.some((m) => m.type === 'requestRange'),
  );
  const rangeRequests = async () =>
    (await posted(page)).flatMap((m) => {
      const r = parseWebviewMessage(m);
      return r.ok && r.message.type === 'requestRange' ? [r.message] : [];
    });
  const requests = await eventually(rangeRequests, (rs) => new Set(rs.map((r) => r.run)).size >= 2);
  const runsAsked = new Set(requests.map((r) => r.run));
  assert.equal(runsAsked.size, 2, `expected requests for both runs: ${JSON.stringify(requests)}`);
  const lossReq = requests.find((r) => r.series === 'loss' && r.run === init.runs[0]!.run.id)!;
  const { from, to } = lossReq;
  assert.ok(from < to && to - from < 40_000, `zoom window ${from}..${to} is not narrower than the run`);
  // Answer with finer buckets; the plot takes them without errors.
  const xs = Array.from({ length: 200 }, (_, i) => Math.round(from + ((to - from) * (i + 1)) / 200));
  await page.evaluate((m) => window.postMessage(m, '*'), {
    type: 'rangeData',
    run: lossReq.run,
    series: 'loss',
    from,
    to,
    data: {
      key: 'loss',
      x: xs,
      min: xs.map(() => 2.5),
      max: xs.map(() => 3.5),
      last: xs.map(() => 3),
      t: xs.map((x) => 1736496000 + x * 0.35),
    },
  });
  await page.waitForTimeout(100);
  await page.locator('vscode-button[data-action="reset-zoom"]').click();
  await page.mouse.move(0, 0);

  // Live theme switch: the canvases are drawn again with the light theme's colours.
  await applyTheme(page, 'vscode-light', LIGHT);
  await page.waitForFunction(() => getComputedStyle(document.body).backgroundColor === 'rgb(255, 255, 255)');
  const [blueLight, blueDarkAfter] = await eventually(
    () =>
      Promise.all([
        countColor(page, lossCanvas, LIGHT['--vscode-charts-blue']!),
        countColor(page, lossCanvas, DARK['--vscode-charts-blue']!),
      ]),
    ([light, dark]) => light > 300 && dark < light / 4,
  );
  assert.ok(blueLight > 300, `light theme line not drawn in its charts-blue: ${blueLight} px`);
  assert.ok(
    blueDarkAfter < blueLight / 4,
    `dark colours left after the theme switch: ${blueDarkAfter} vs ${blueLight}`,
  );
  assert.equal(
    await page
      .locator('.kg-plot-title')
      .first()
      .evaluate((e) => getComputedStyle(e).color),
    'rgb(59, 59, 59)',
  );
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-light.png'), fullPage: true });

  // High contrast: lines in its colours, white text, the contrast border around panels and swatches.
  await applyTheme(page, 'vscode-high-contrast', HIGH_CONTRAST);
  await page.waitForFunction(() => getComputedStyle(document.body).backgroundColor === 'rgb(0, 0, 0)');
  const blueHc = await eventually(
    () => countColor(page, lossCanvas, HIGH_CONTRAST['--vscode-charts-blue']!),
    (n) => n > 300,
  );
  assert.ok(blueHc > 300, `high-contrast line not drawn in its charts-blue: ${blueHc} px`);
  assert.equal(
    await page
      .locator('.kg-plot-title')
      .first()
      .evaluate((e) => getComputedStyle(e).color),
    'rgb(255, 255, 255)',
  );
  assert.equal(
    await page
      .locator('.kg-swatch')
      .first()
      .evaluate((e) => getComputedStyle(e).outlineColor),
    'rgb(111, 195, 223)',
  );
  // Every swatch of the first run (legend and checkpoint list) follows the theme.
  const swatchColors = await page
    .locator('.kg-swatch')
    .evaluateAll((els) => [...new Set(els.map((e) => getComputedStyle(e).backgroundColor))]);
  assert.ok(swatchColors.includes('rgb(79, 193, 255)'), swatchColors.join(' '));
  assert.ok(!swatchColors.includes('rgb(55, 148, 255)'), `dark-theme swatch left: ${swatchColors.join(' ')}`);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-high-contrast.png'), fullPage: true });

  // State for the serializer: enough to reopen the runs.
  const state = (await page.evaluate(() => (window as unknown as { __state: () => unknown }).__state())) as {
    runs: { id: string }[];
    selected: string[];
  };
  assert.deepEqual(
    state.runs.map((r) => r.id),
    init.runs.map((r) => r.run.id),
  );
  assert.deepEqual(state.selected, ['tok_per_s', 'loss', 'lr']);

  // Everything the page posted is a valid protocol message.
  for (const m of await posted(page)) assert.ok(parseWebviewMessage(m).ok, JSON.stringify(m));

  const violations = await page.evaluate(() => (window as unknown as { __violations: string[] }).__violations);
  assert.deepEqual(violations, [], 'CSP violations');
  assert.deepEqual(missing, [], 'requests for missing files');
  assert.deepEqual(problems, []);
  await context.close();
});

void test('a preview shows its note until the exact data replaces it (choices and zoom kept); side data per host', async () => {
  const { context, page, problems } = await openDashboard();
  await applyTheme(page, 'vscode-dark', DARK);

  // The first init: run 1 is a preview (7% of its log), the side data is still being read.
  const [run1, run2] = init.runs;
  assert.ok(run1 && run2);
  const preview = structuredClone(run1);
  preview.run.sample = { bytes: 7_000_000, of: 100_000_000, failed: false };
  preview.run.lines = 7_001;
  // A preview has fewer buckets (the windows only): every 4th.
  preview.series = preview.series.map((s) => {
    const keep = (_v: number, i: number) => i % 4 === 0;
    return {
      ...s,
      x: s.x.filter(keep),
      min: s.min.filter(keep),
      max: s.max.filter(keep),
      last: s.last.filter(keep),
      ...(s.t ? { t: s.t.filter(keep) } : {}),
    };
  });
  await page.evaluate((m) => window.postMessage(m, '*'), {
    ...init,
    runs: [preview, run2],
    drift: null,
    bench: [],
    hosts: [],
    sidePending: true,
  });
  await page.waitForSelector('.kg-plot[data-series="loss"] canvas');
  const note = page.locator('.kg-preview');
  assert.equal(await note.getAttribute('role'), 'status');
  assert.equal(await note.isVisible(), true);
  assert.equal(
    await note.innerText(),
    'Preview of baseline-1b: sampled 7% of train_log.jsonl — reading the whole log…',
  );
  assert.match(await page.locator(`.kg-legend-item[data-run="${run1.run.id}"]`).innerText(), /preview/);
  assert.doesNotMatch(await page.locator(`.kg-legend-item[data-run="${run2.run.id}"]`).innerText(), /preview/);
  // Theme-aware: the note's border comes from the theme (focusBorder here), not a fixed colour.
  assert.equal(
    await page.locator('.kg-preview-note').evaluate((e) => getComputedStyle(e).borderLeftColor),
    'rgb(0, 120, 212)',
  );
  assert.match(await page.locator('.kg-drift').innerText(), /Reading the baselines…/);
  assert.match(await page.locator('.kg-bench').innerText(), /Reading the benchmark history…/);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-preview.png'), fullPage: true });

  // The user's choices while the preview shows: lr hidden, smoothing 0.5, a zoom on the loss plot.
  await page.locator('.kg-series-chooser vscode-checkbox[data-value="lr"]').click();
  await page.waitForSelector('.kg-plot[data-series="lr"]', { state: 'detached' });
  await page.locator('[data-control="smoothing"] input').evaluate((e) => {
    const input = e as HTMLInputElement;
    input.value = '0.5';
    input.dispatchEvent(new Event('input'));
  });
  const over = page.locator('.kg-plot[data-series="loss"] .u-over');
  const box = (await over.boundingBox())!;
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.mouse.move(0, 0);
  const rangeAsks = async (run: string) =>
    (await posted(page)).filter((m) => m.type === 'requestRange' && m.run === run).length;
  const asksBefore = await eventually(
    () => rangeAsks(run1.run.id),
    (n) => n > 0,
  );
  assert.ok(asksBefore > 0, 'the zoom asked for finer buckets');

  // The side data lands: one part per host, each named.
  const otherBench = [
    { time: 1736496000, tokPerS: 9100, label: 'bench a', baseline: true },
    { time: 1736668800, tokPerS: 9300, label: 'bench b', baseline: false },
  ];
  await page.evaluate((m) => window.postMessage(m, '*'), {
    type: 'side',
    hosts: [
      { host: 'gpu-box', label: 'gpu-box', drift: init.drift, bench: init.bench },
      { host: 'lab-2', label: 'lab-2 (A100)', drift: null, bench: otherBench },
    ],
  });
  await page.waitForFunction(() => document.querySelectorAll('.kg-bench-canvas canvas').length === 2);
  assert.deepEqual(await page.locator('.kg-drift h3.kg-host').allInnerTexts(), ['gpu-box', 'lab-2 (A100)']);
  assert.deepEqual(await page.locator('.kg-bench h3.kg-host').allInnerTexts(), ['gpu-box', 'lab-2 (A100)']);
  assert.match(
    await page.locator('.kg-drift .kg-host-part[data-host="lab-2"]').innerText(),
    /No baseline recorded for this host/,
  );
  assert.match(await page.locator('.kg-drift .kg-host-part[data-host="gpu-box"] .kg-drift-text').innerText(), /torch/);
  assert.match(await page.locator('.kg-bench .kg-host-part[data-host="lab-2"]').innerText(), /known-good 9100/);
  for (const host of ['gpu-box', 'lab-2']) {
    const px = await nonTransparent(page, `.kg-bench .kg-host-part[data-host="${host}"] canvas`);
    assert.ok(px > 500, `bench plot of ${host} nearly empty: ${px} px`);
  }

  // The exact data replaces the preview: the note goes, the plots redraw with every bucket, the choices stay.
  const exact = structuredClone(run1);
  await page.evaluate((m) => window.postMessage(m, '*'), { type: 'runData', data: exact });
  await page.waitForSelector('.kg-preview', { state: 'hidden' });
  assert.equal(await page.locator('.kg-preview-note').count(), 0);
  assert.doesNotMatch(await page.locator(`.kg-legend-item[data-run="${run1.run.id}"]`).innerText(), /preview/);
  assert.equal(await page.locator('.kg-plot[data-series="lr"]').count(), 0, 'lr stays hidden');
  assert.equal(
    await page.locator('[data-control="smoothing"] input').evaluate((e) => (e as HTMLInputElement).value),
    '0.5',
  );
  assert.ok(
    (await eventually(
      () => rangeAsks(run1.run.id),
      (n) => n > asksBefore,
    )) > asksBefore,
    'the zoom window was kept and asked again',
  );
  const lossCanvas = '.kg-plot[data-series="loss"] canvas';
  assert.ok((await nonTransparent(page, lossCanvas)) > 5_000, 'loss plot empty after the exact data');
  assert.ok((await countColor(page, lossCanvas, DARK['--vscode-charts-blue']!)) > 200, 'run 1 line not drawn');
  assert.match(await page.locator('.kg-runs').innerText(), /100,016/);
  await page.locator('vscode-button[data-action="reset-zoom"]').click();
  await page.mouse.move(0, 0);
  await page.waitForTimeout(150);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-exact-hosts.png'), fullPage: true });

  // A failed exact read: the note stays, saying the whole log could not be read.
  await page.evaluate((m) => window.postMessage(m, '*'), {
    type: 'runData',
    data: { ...preview, run: { ...preview.run, sample: { bytes: 7_000_000, of: 100_000_000, failed: true } } },
  });
  await page.waitForSelector('.kg-preview-failed');
  assert.match(await note.innerText(), /sampled 7% of train_log\.jsonl — the whole log could not be read/);

  for (const m of await posted(page)) assert.ok(parseWebviewMessage(m).ok, JSON.stringify(m));
  const violations = await page.evaluate(() => (window as unknown as { __violations: string[] }).__violations);
  assert.deepEqual(violations, [], 'CSP violations');
  assert.deepEqual(problems, []);
  await context.close();
});

void test('benchmark: one point, marking a result known-good; checkpoints on the plots; the drift text wraps', async () => {
  const { context, page, problems } = await openDashboard();
  await applyTheme(page, 'vscode-dark', DARK);
  const run = init.runs[0]!;
  const long = `  PATH: ${Array.from({ length: 12 }, (_v, i) => `+/opt/toolchain-${i}/very/long/folder/bin`).join(', ')}`;
  const side = (marked: boolean) => [
    {
      host: 'gpu-box',
      label: 'gpu-box',
      drift: { ...init.drift!, text: `1 difference between the baseline and now\n${long}` },
      bench: [{ id: 'r1', time: 1830000000, tokPerS: 12800, label: 'first run', baseline: marked }],
    },
  ];
  // No checkpoints first: the loss plot's pixels without markers.
  await page.evaluate((m) => window.postMessage(m, '*'), {
    ...init,
    runs: [run],
    checkpoints: [],
    hosts: side(false),
  });
  await page.waitForSelector('.kg-bench-canvas canvas');
  await page.waitForSelector('.kg-plot[data-series="loss"] canvas');
  const lossCanvas = '.kg-plot[data-series="loss"] canvas';
  const plain = await nonTransparent(page, lossCanvas);

  // One benchmark point: drawn inside the chart, and offered to be marked.
  const bench = page.locator('.kg-bench .kg-host-part[data-host="gpu-box"]');
  assert.match(await bench.innerText(), /no known-good result marked: mark one below/);
  assert.ok((await countColor(page, '.kg-bench-canvas canvas', DARK['--vscode-charts-blue']!)) > 10, 'point drawn');
  await page.locator('vscode-button[data-action="mark-reference"]').click();
  const marks = (await posted(page)).filter((m) => m.type === 'markReference');
  assert.deepEqual(marks, [{ type: 'markReference', host: 'gpu-box', result: 'r1' }]);
  assert.ok(parseWebviewMessage(marks[0]).ok);
  // The host answers with the side data, the result now marked.
  await page.evaluate((m) => window.postMessage(m, '*'), { type: 'side', hosts: side(true) });
  await page.waitForSelector('vscode-button[data-action="unmark-reference"]');
  assert.match(await bench.innerText(), /known-good 12800 \(first run\)/);
  assert.ok(
    (await countColor(page, '.kg-bench-canvas canvas', DARK['--vscode-charts-green']!)) > 20,
    'the known-good point is not marked on the chart',
  );

  // The drift text wraps inside its column instead of running off the right edge.
  const drift = page.locator('.kg-drift-text');
  const overflow = await drift.evaluate((e) => e.scrollWidth - e.clientWidth);
  assert.ok(overflow <= 1, `the drift text overflows by ${overflow} px`);
  assert.doesNotMatch(await page.locator('.kg-drift').innerText(), /\d{4}-\d\d-\d\dT\d\d:/, 'a raw ISO time is shown');

  // With the checkpoints: a dashed marker per checkpoint on the plot.
  await page.evaluate((m) => window.postMessage(m, '*'), { ...init, runs: [run], hosts: side(true) });
  const withMarks = await eventually(
    () => nonTransparent(page, lossCanvas),
    (n) => n > plain + 200,
  );
  assert.ok(withMarks > plain + 200, `no checkpoint markers drawn: ${plain} → ${withMarks} px`);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-bench-one-point.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await context.close();
});

void test("a restarted real run (plain-dataset-padded): every plot marks the restart, tok_s the report's drop at it; the drift is the run's own", async () => {
  // the run as the host sends it: its log read by the real probe, marks from the report's function (logShifts)
  const log = join(ROOT, 'test/fixtures/real/regressions/plain-dataset-padded/train_log.jsonl');
  const data = runDataFromReduction(
    { id: 'gpu-box:padded', label: 'plain-dataset-padded', host: 'gpu-box' },
    reduce(log),
  );
  const span = runSpanOf(data)!;
  const iso = (s: number) => new Date(s * 1000).toISOString();
  const known = baselineSchema.parse({
    schema: 1,
    id: 'b-before',
    label: 'known good',
    host: 'gpu-box',
    capturedAt: iso(span.from - 86_400),
    snapshot: h200KnownGood,
  });
  const during = (label: string, at: number, snapshot: EnvSnapshot) =>
    baselineSchema.parse({
      schema: 1,
      id: label.replace(/\W/g, '-'),
      label,
      host: 'gpu-box',
      capturedAt: iso(at),
      snapshot,
    });
  const side = (baselines: Baseline[]) => [
    {
      host: 'gpu-box',
      label: 'gpu-box',
      drift: null,
      bench: [],
      runs: [runDrift({ id: data.run.id, label: data.run.label, span }, baselines, undefined)],
    },
  ];
  const { context, page, problems } = await openDashboard();
  await applyTheme(page, 'vscode-dark', DARK);
  const bare: InitMessage = { ...init, runs: [{ ...data, run: { ...data.run, restarts: [], shifts: [] } }] };
  await page.evaluate((m) => window.postMessage(m, '*'), { ...bare, checkpoints: [], hosts: side([known]) });
  const tokCanvas = '.kg-plot[data-series="tok_s"] canvas';
  await page.waitForSelector(tokCanvas);
  const unmarked = await nonTransparent(page, tokCanvas);
  assert.equal(await page.locator('.kg-plot-marks').count(), 0, 'marks listed without any sent');

  await page.evaluate((m) => window.postMessage(m, '*'), {
    ...init,
    runs: [data],
    checkpoints: [],
    hosts: side([known]),
  });
  const tokMarks = page.locator('.kg-plot[data-series="tok_s"] .kg-plot-marks');
  await tokMarks.waitFor();
  const words = await tokMarks.innerText();
  assert.match(words, /^shift 2\d\d\.\dK → 9\d\.\dK \(0\.38×\) at step 600$/m);
  assert.match(words, /^restart \(time-gap\) at step 610$/m);
  // the restart on every plot, the drop on tok_s only where the report has it
  const plots = await page.locator('.kg-plot').evaluateAll((els) =>
    els.map((e) => ({
      key: (e as HTMLElement).dataset.series,
      restarts: e.querySelectorAll('.kg-plot-mark[data-kind="restart"]').length,
    })),
  );
  assert.ok(plots.length >= 3, JSON.stringify(plots));
  for (const p of plots) assert.equal(p.restarts, 1, `${p.key}: ${JSON.stringify(plots)}`);
  const marked = await eventually(
    () => nonTransparent(page, tokCanvas),
    (n) => n > unmarked + 100,
  );
  assert.ok(marked > unmarked + 100, `the marks are not drawn: ${unmarked} → ${marked} px`);
  // no baseline during the run (the host's is from the day before): said, and no drift from another time
  const drift = page.locator('.kg-drift');
  assert.match(await drift.innerText(), /No baseline captured during this run/);
  assert.equal(await drift.locator('.kg-drift-text').count(), 0);
  await page.mouse.move(5, 5);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-restart-and-shift-marks.png'), fullPage: true });

  // on the time axis the same marks, at their wall times
  await page.evaluate(() => {
    const d = document.querySelector<HTMLSelectElement>('[data-control="axis"]')!;
    d.value = 'time';
    d.dispatchEvent(new Event('change'));
  });
  const timeWords = await eventually(
    () => tokMarks.innerText(),
    (t) => !/at step/.test(t),
  );
  assert.match(timeWords, /^shift .* \(0\.38×\) at \d{4}-\d\d-\d\d \d\d:\d\d$/m);
  assert.match(timeWords, /^restart \(time-gap\) at \d{4}-\d\d-\d\d \d\d:\d\d$/m);

  // two baselines captured during the run: their drift, and only theirs
  const mid = (span.from + span.to) / 2;
  await page.evaluate((m) => window.postMessage(m, '*'), {
    type: 'side',
    hosts: side([known, during('at launch', span.from + 1, h200KnownGood), during('mid-run', mid, h200Now)]),
  });
  await drift.locator('.kg-drift-text').waitFor();
  const text = await drift.innerText();
  assert.match(text, /baseline "at launch" → baseline "mid-run"/);
  assert.match(text, /run: \d{4}-\d\d-\d\d \d\d:\d\d – \d{4}-\d\d-\d\d \d\d:\d\d/);
  assert.doesNotMatch(text, /known good/);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-drift-during-run.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await context.close();
});

void test("a run's GPU timeline plots right under its throughput, on its steps, with the power cap and the neighbour marked", async () => {
  // the timeline is WRITTEN (H200 rows in NVIDIA's documented nvidia-smi format: test/support/gpuTimeline.ts)
  const { context, page, problems } = await openDashboard();
  await applyTheme(page, 'vscode-dark', DARK);
  const run = dashboardLogRun();
  await page.evaluate((m) => window.postMessage(m, '*'), { ...init, runs: [run], checkpoints: [] });
  const tok = '.kg-plot[data-series="tok_s"] canvas';
  await page.waitForSelector(tok);
  const before = await nonTransparent(page, tok);
  assert.equal(await page.locator('.kg-plot[data-series^="gpu: "]').count(), 0);

  const plot = gpuPlotOf(dashboardTimeline())!;
  await page.evaluate((m) => window.postMessage(m, '*'), { type: 'gpu', run: run.run.id, plot });
  await page.waitForSelector(`.kg-plot[data-series="${GPU_SERIES.sm}"] canvas`);
  const order = await page.locator('.kg-plot').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.series));
  assert.deepEqual(order.slice(0, 4), ['tok_s', GPU_SERIES.sm, GPU_SERIES.util, GPU_SERIES.power]);
  assert.equal(
    await page.locator(`.kg-plot[data-series="${GPU_SERIES.sm}"] .kg-plot-title`).innerText(),
    'gpu: SM clock MHz (line: GPU 1, the slowest; band: GPUs 0, 1)',
  );
  // the marks (power cap from/to, the neighbour) are drawn on the throughput plot too
  const after = await eventually(
    () => nonTransparent(page, tok),
    (n) => n > before + 100,
  );
  assert.ok(after > before + 100, `no GPU marks drawn on the throughput: ${before} → ${after} px`);
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-gpu-timeline.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await context.close();
});
