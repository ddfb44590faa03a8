import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import type { Page } from 'playwright-core';
import { materializeRealRuns } from '../support/realRuns';
import { reloadWindow, rowMenu, scenario, writeDemoCheckpoint } from './harness';

/*
 * Issue 36 item 4f: after Reload Window what was open comes back with its text. Open before the reload: the args
 * diff of run-a's step_600 and step_690, the environment compare of This machine with a baseline (the host "now", a
 * capture), and, active, the What Changed? report of plain-dataset-padded (a run of the regressions corpus). After
 * it: both diffs are there with both sides' text, and the report shows again.
 */

const demo = mkdtempSync(join(tmpdir(), 'kg-ui-reload-docs-'));
writeDemoCheckpoint(join(demo, 'run-a', 'step_600'), 600, { batch_size: 32, lr: 3e-4 });
writeDemoCheckpoint(join(demo, 'run-a', 'step_690'), 690, { batch_size: 32, lr: 1.5e-4 });
// The runs' args name their data by the path the GPU box had: the corpus goes there (as evidenceDocuments.ui.ts).
const CORPUS = '/tmp/kg-real-runs/regressions';
rmSync(CORPUS, { recursive: true, force: true });
const corpus = materializeRealRuns('regressions', CORPUS);
after(() => rmSync(CORPUS, { recursive: true, force: true }));

const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');

/** Waits until a diff editor's side shows `expected` (Monaco fills it in after the tab shows). */
async function diffSide(page: Page, side: 'original' | 'modified', expected: RegExp): Promise<void> {
  const lines = page.locator(`.editor-group-container.active .monaco-diff-editor .editor.${side} .view-lines`).first();
  await lines.waitFor({ timeout: 60_000 });
  for (let i = 0; i < 240 && !expected.test(plain(await lines.textContent())); i++) await page.waitForTimeout(250);
  assert.match(plain(await lines.textContent()), expected);
}

/** The report page whose headline is shown (VS Code puts a webview in an iframe holding the page's). */
async function reportShown(page: Page): Promise<string> {
  for (let i = 0; i < 480; i++) {
    const n = await page.locator('iframe.webview.ready').count();
    for (let j = 0; j < n; j++) {
      const f = page.frameLocator(`iframe.webview.ready >> nth=${j}`).frameLocator('#active-frame');
      const headline = await f
        .locator('h1.kg-headline')
        .textContent({ timeout: 500 })
        .catch(() => null);
      if (headline) return headline;
    }
    await page.waitForTimeout(250);
  }
  throw new Error('no What Changed? report shown');
}

scenario(
  'Reload Window brings back the args and environment diffs and the active What Changed? report',
  { localRoots: [demo, corpus], timeoutMs: 540_000 },
  async (vs) => {
    const { page, row } = vs;
    const tab = (text: string | RegExp) => page.locator('.tabs-container .tab', { hasText: text });
    const menu = (label: string, entry: RegExp) =>
      rowMenu(page, row(label), page.getByRole('menuitem', { name: entry }));
    const input = page.locator('.quick-input-widget input');
    /** Opens a row by its label (a click can be swallowed by a redraw: read the state, click again). */
    const open = async (label: string) => {
      const r = row(label).first();
      await r.waitFor({ timeout: 90_000 });
      for (let attempt = 1; (await r.getAttribute('aria-expanded')) !== 'true'; attempt++) {
        if (attempt > 4) throw new Error(`${label} did not open`);
        await r.locator('.label-name').click();
        await page
          .waitForFunction((el) => el?.getAttribute('aria-expanded') === 'true', await r.elementHandle(), {
            timeout: 10_000,
          })
          .catch(() => undefined);
      }
    };
    await vs.openView('Known Good');
    await vs.expand('This machine');
    await open(demo);
    await open('run-a');
    await row('step_690').waitFor({ timeout: 30_000 });

    // the args diff, kept open (not a preview)
    await menu('step_690', /^Compare with Previous Step/);
    const argsTab = tab('args: step_600 ↔ step_690 (This machine/run-a)');
    await argsTab.waitFor({ timeout: 60_000 });
    await argsTab.dblclick();
    await diffSide(page, 'modified', /"lr": 0\.00015/);

    // a baseline of This machine, then its compare with the host now
    await vs.commandPalette('Known Good: Capture Environment Baseline');
    await page.waitForFunction(
      () =>
        document.querySelector<HTMLInputElement>('.quick-input-widget input')?.value.startsWith('baseline ') ?? false,
      undefined,
      { timeout: 90_000 },
    );
    await input.fill('before reload');
    await page.keyboard.press('Enter');
    await page
      .getByText(/Saved baseline "before reload"/)
      .first()
      .waitFor({ timeout: 120_000 });
    await vs.commandPalette('Known Good: Compare Environment with Baseline');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'before reload' }).first().waitFor();
    await page.keyboard.press('Enter');
    const envTab = tab(/"before reload" ↔ now/);
    await envTab.waitFor({ timeout: 120_000 });
    await diffSide(page, 'original', /python/);
    await diffSide(page, 'modified', /python/);

    // What Changed? on a run of the corpus: its report is the active editor at the reload
    await open(corpus);
    await row('plain-dataset-padded').waitFor({ timeout: 90_000 });
    await menu('plain-dataset-padded', /^What Changed\?/);
    await page.locator('.tabs-container .tab.active', { hasText: 'What Changed? plain-dataset-padded' }).waitFor({
      timeout: 120_000,
    });
    const headline = await reportShown(page);
    await vs.screenshot('reload-docs-1-before');

    await reloadWindow(vs);
    const reportTab = page.locator('.tabs-container .tab', { hasText: 'What Changed? plain-dataset-padded' });
    await reportTab.waitFor({ timeout: 60_000 });
    assert.equal(await reportShown(page), headline);
    await vs.screenshot('reload-docs-2-report-restored');
    await argsTab.waitFor({ timeout: 60_000 });
    await argsTab.click();
    await diffSide(page, 'original', /"lr": 0\.0003/);
    await diffSide(page, 'modified', /"lr": 0\.00015/);
    await vs.screenshot('reload-docs-3-args-restored');
    await envTab.waitFor({ timeout: 60_000 });
    await envTab.click();
    await diffSide(page, 'original', /python/);
    await diffSide(page, 'modified', /python/);
    assert.doesNotMatch(
      plain(await page.locator('.editor-group-container.active .monaco-diff-editor').first().textContent()),
      /capture is gone/,
    );
    await vs.screenshot('reload-docs-4-env-restored');
  },
);
