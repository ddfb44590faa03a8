import * as assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireTorch } from '../support/require';
import { writeStory } from '../support/whatChangedStory';
import type { FrameLocator, Page } from 'playwright-core';
import { reloadWindow, rowMenu, scenario } from './harness';

/*
 * Issue 16's story on This machine: run-a's tok/s falls from 12.8K to 4.3K after step 600, where the dataset arg
 * changed. Right-click the run → What Changed? → the report's headline and first suspect; a click on the suspect
 * opens its evidence, the args diff of step_600 and step_700.
 */

requireTorch();
const story = mkdtempSync(join(tmpdir(), 'kg-ui-why-'));
writeStory(story);

/** Monaco renders spaces as no-break spaces. */
/** The page (inside VS Code's webview iframe) of the webview that shows `selector`. */
async function waitForFrame(page: Page, selector: string, timeoutMs: number): Promise<FrameLocator> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const n = await page.locator('iframe.webview.ready').count();
    for (let i = 0; i < n; i++) {
      const f = page.frameLocator(`iframe.webview.ready >> nth=${i}`).frameLocator('#active-frame');
      if (
        (await f
          .locator(selector)
          .count()
          .catch(() => 0)) > 0
      )
        return f;
    }
    if (Date.now() > until) throw new Error(`no webview shows ${selector}`);
    await page.waitForTimeout(250);
  }
}

const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');

scenario(
  'What Changed? on a run: the headline says 0.34× and the dataset change; its row opens the args diff',
  { localRoots: [join(story, 'runs')], timeoutMs: 300_000 },
  async (vs) => {
    const { page } = vs;
    const row = vs.row;
    await vs.openView('Known Good');
    await vs.expand('This machine');
    // listing This machine starts a helper: slow on a loaded 2-core machine
    await row('run-a').waitFor({ timeout: 90_000 });
    await rowMenu(page, row('run-a'), page.getByRole('menuitem', { name: /^What Changed\?/ }));

    // VS Code puts a webview in an iframe that holds the page's own iframe.
    const report = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    const headline = report.locator('h1.kg-headline');
    await headline.waitFor({ timeout: 120_000 });
    const text = (await headline.textContent()) ?? '';
    assert.match(text, /^4\.3K tok\/s now vs 12\.8K at step_600 \(0\.34×\)/);
    assert.match(text, /dataset openwebtext-10k → openwebtext-dedup-v2/);
    const first = report.locator('li.kg-suspect').first();
    assert.equal(
      (await first.locator('.kg-title').textContent())?.trim(),
      'dataset openwebtext-10k → openwebtext-dedup-v2',
    );
    // a change its timing rules out (the data folder itself, written with the story, long after the shift) is
    // listed last under its own heading, never ranked among the causes
    assert.match(
      plain(await report.locator('h3.kg-ruled-out').textContent()),
      /^Changed, but not where the metric shifted/,
    );
    assert.match(
      (await report.locator('ol.kg-ruled-out li.kg-suspect .kg-title').first().textContent()) ?? '',
      /^data .*\/data modified after the reference$/,
    );
    await page.locator('.tabs-container .tab', { hasText: 'What Changed? run-a' }).waitFor();
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(500);
    await vs.screenshot('what-changed-report');

    // Copy as Markdown: the host copies the report's Markdown and says so in the page
    await report.locator('button', { hasText: 'Copy as Markdown' }).click();
    await report.locator('#kg-status', { hasText: /Copied as Markdown|clipboard/i }).waitFor({ timeout: 15_000 });
    const status = (await report.locator('#kg-status').textContent()) ?? '';
    assert.equal(status, 'Copied as Markdown.', status);

    // a click on the first suspect opens its evidence: the args diff of the two checkpoints around the change
    await first.locator('.kg-detail').click();
    const diffTab = page.locator('.tabs-container .tab', { hasText: /args: step_600 ↔ step_700/ });
    await diffTab.waitFor({ timeout: 60_000 });
    const diff = page.locator('.monaco-diff-editor').first();
    await diff.waitFor();
    const modified = diff.locator('.editor.modified .view-lines');
    await page.waitForFunction(
      (el) => el?.textContent?.replace(/\u00a0/g, ' ').includes('openwebtext-dedup-v2') ?? false,
      await modified.elementHandle(),
      { timeout: 60_000 },
    );
    const original = plain(await diff.locator('.editor.original .view-lines').textContent());
    assert.match(original, /openwebtext-10k/);
    assert.doesNotMatch(original, /openwebtext-dedup-v2/);
    await diff.locator('.editor.modified .line-insert, .editor.modified .char-insert').first().waitFor();
    await page.waitForTimeout(300);
    await vs.screenshot('what-changed-args-diff');

    // its other evidence: the plot opens the dashboard on the run's log
    await page.locator('.tabs-container .tab', { hasText: 'What Changed? run-a' }).click();
    await first.locator('a.kg-evidence', { hasText: /^plot of tok_s/ }).click();
    await page.locator('.tabs-container .tab', { hasText: /^Dashboard: / }).waitFor({ timeout: 60_000 });
    // …zoomed to the steps around the changepoint (the evidence's window), as the toolbar says
    const dash = page.frameLocator('iframe.webview.ready >> nth=-1').frameLocator('#active-frame');
    await dash.locator('.kg-plot').first().waitFor({ timeout: 60_000 });
    await dash.locator('.kg-zoom-note', { hasText: /^steps 5\d\d–7\d\d$/ }).waitFor({ timeout: 30_000 });
    await page.mouse.move(1100, 700);
    await vs.screenshot('what-changed-plot-zoomed');

    // Reload the window: the report comes back as gathered (no remote call), and its evidence still opens.
    await reloadWindow(vs);
    const reportTab = page.locator('.tabs-container .tab', { hasText: 'What Changed? run-a' });
    await reportTab.waitFor({ timeout: 60_000 });
    await reportTab.click();
    // (the restored dashboard has a webview too: take the one that shows the report)
    const again = await waitForFrame(page, 'h1.kg-headline', 60_000);
    assert.equal((await again.locator('h1.kg-headline').textContent()) ?? '', text);
    await page.mouse.move(1100, 700);
    await vs.screenshot('what-changed-restored');
    // Its evidence opens from the restored panel: the args diff (restored with the window too) closed, then a click.
    const restoredDiff = page.locator('.tabs-container .tab', { hasText: /args: step_600 ↔ step_700/ });
    if (await restoredDiff.count()) {
      await restoredDiff.first().hover();
      await restoredDiff.first().locator('.codicon-close').click();
      await restoredDiff.first().waitFor({ state: 'detached', timeout: 15_000 });
    }
    await reportTab.click();
    await again.locator('li.kg-suspect').first().locator('.kg-detail').click();
    await page.locator('.tabs-container .tab', { hasText: /args: step_600 ↔ step_700/ }).waitFor({ timeout: 60_000 });
  },
);
