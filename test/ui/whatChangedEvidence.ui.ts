import * as assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after } from 'node:test';
import { dirname } from 'node:path';
import type { FrameLocator, Page } from 'playwright-core';
import { materializeRealRuns } from '../support/realRuns';
import { rowMenu, scenario, type Workbench } from './harness';

/*
 * Issue 23: "with evidence (the two launch records side by side in the diff editor)" and "a commit's evidence opens
 * its message and diff as a read-only document", in real VS Code on two runs of the real regressions corpus:
 * plain-launch-blocking (its launch records: CUDA_LAUNCH_BLOCKING=1 added at the restart) and plain-host-sync (a
 * commit that added `.item()` to the loop).
 */

const corpus = materializeRealRuns('regressions');
after(() => rmSync(dirname(corpus), { recursive: true, force: true }));

/** Monaco renders spaces as no-break spaces. */
const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');

/** The report page of the What Changed? tab now active (VS Code puts a webview in an iframe holding the page's). */
async function report(vs: Workbench, run: string): Promise<FrameLocator> {
  const { page } = vs;
  await vs.row(run).waitFor({ timeout: 90_000 });
  await rowMenu(page, vs.row(run), page.getByRole('menuitem', { name: /^What Changed\?/ }));
  await page.locator('.tabs-container .tab.active', { hasText: `What Changed? ${run}` }).waitFor({ timeout: 120_000 });
  return waitForReport(page, run);
}

async function waitForReport(page: Page, run: string): Promise<FrameLocator> {
  for (let i = 0; i < 480; i++) {
    const n = await page.locator('iframe.webview.ready').count();
    for (let j = 0; j < n; j++) {
      const f = page.frameLocator(`iframe.webview.ready >> nth=${j}`).frameLocator('#active-frame');
      const h = await f
        .locator('h1.kg-headline')
        .count()
        .catch(() => 0);
      if (
        h > 0 &&
        (await f
          .locator('li.kg-suspect')
          .count()
          .catch(() => 0)) > 0
      ) {
        const title = (await f.locator('li.kg-suspect .kg-title').first().textContent()) ?? '';
        if (run === 'plain-launch-blocking' ? /CUDA_LAUNCH_BLOCKING/.test(title) : /train\.py/.test(title)) return f;
      }
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no report of ${run}`);
}

scenario(
  'What Changed? evidence: a launch suspect opens the two launch records side by side, a commit its message and diff read-only',
  { localRoots: [corpus], timeoutMs: 420_000 },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.expand('This machine');

    const blocking = await report(vs, 'plain-launch-blocking');
    const first = blocking.locator('li.kg-suspect').first();
    assert.match(
      (await first.locator('.kg-title').textContent()) ?? '',
      /^process env: CUDA_LAUNCH_BLOCKING=1 added \(restart at step 6\d\d\)$/,
    );
    await first.locator('a.kg-evidence', { hasText: /launch 1\.txt ↔ kg_record launch 2\.txt/ }).click();
    await page.locator('.tabs-container .tab', { hasText: /kg_record launch 1 ↔ 2/ }).waitFor({ timeout: 60_000 });
    const diff = page.locator('.monaco-diff-editor').first();
    const modified = diff.locator('.editor.modified .view-lines');
    await page.waitForFunction(
      (el) => el?.textContent?.replace(/\u00a0/g, ' ').includes('CUDA_LAUNCH_BLOCKING=1') ?? false,
      await modified.elementHandle(),
      { timeout: 60_000 },
    );
    assert.doesNotMatch(
      plain(await diff.locator('.editor.original .view-lines').textContent()),
      /CUDA_LAUNCH_BLOCKING/,
    );
    await diff.locator('.editor.modified .line-insert, .editor.modified .char-insert').first().waitFor();
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(300);
    await vs.screenshot('what-changed-evidence-0-launch-records');

    const sync = await report(vs, 'plain-host-sync');
    const code = sync.locator('li.kg-suspect').first();
    await code.locator('a.kg-evidence', { hasText: /^git log of / }).click();
    const tab = page.locator('.tabs-container .tab', { hasText: 'commits.diff' });
    await tab.waitFor({ timeout: 60_000 });
    const lines = page.locator('.monaco-editor .view-lines').first();
    for (let i = 0; i < 120 && !plain(await lines.textContent()).includes('loss.item()'); i++)
      await page.waitForTimeout(250);
    const text = plain(await lines.textContent());
    assert.match(text, /Keep the latest loss for the progress line/);
    assert.match(text, /last_loss = loss\.item\(\)/);
    // read-only: typing changes nothing and leaves no unsaved buffer
    await lines.click();
    await page.keyboard.type('xyz');
    await page.waitForTimeout(500);
    assert.doesNotMatch(plain(await lines.textContent()), /xyz/);
    assert.equal(await tab.evaluate((el) => el.classList.contains('dirty')), false);
    await page.mouse.move(1100, 700);
    await vs.screenshot('what-changed-evidence-1-commit');
  },
);
