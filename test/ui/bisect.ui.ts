import * as assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireTorch } from '../support/require';
import { STEP_S, writeStory } from '../support/whatChangedStory';
import { rowMenu, scenario, TEST_SSH_HOST, type Workbench } from './harness';

/*
 * Issue 26 from What Changed?: the story's run on the test sshd, a baseline captured and marked Known-Good while
 * NCCL_P2P_DISABLE was 0, then the host's environment sets it to 1 (its BASH_ENV, read by every fresh session). The
 * report lists the variable as a suspect with "Confirm by bisect"; the click runs the bisect with the user's own
 * benchmark command (knownGood.benchmark.*: its speed follows NCCL_P2P_DISABLE, so the search is deterministic
 * whatever the machine's load) and opens the report: the culprit, confirmed.
 */

requireTorch();
const story = mkdtempSync(join(tmpdir(), 'kg-ui-bisect-'));
// The drop (step 600) comes ten minutes after this file loads: the baseline the scenario captures and marks is from
// before it, as a known-good environment is.
writeStory(story, Math.floor(Date.now() / 1000) + 600 - 600 * STEP_S);

async function answer(vs: Workbench, text: string, rowText: string): Promise<void> {
  const input = vs.page.locator('.quick-input-widget input');
  await input.waitFor();
  await input.fill(text);
  await vs.page.locator('.quick-input-list .monaco-list-row', { hasText: rowText }).first().waitFor();
  await vs.page.keyboard.press('Enter');
}

scenario(
  'What Changed? suspect NCCL_P2P_DISABLE → Confirm by bisect → the report names it, confirmed',
  {
    sshHost: { roots: [join(story, 'runs')] },
    settings: {
      'knownGood.benchmark.command':
        'if [ "$NCCL_P2P_DISABLE" = 1 ]; then echo "tok/s 5000"; else echo "tok/s 9000"; fi',
      'knownGood.benchmark.throughputRegex': 'tok/s (\\d+)',
    },
    timeoutMs: 400_000,
  },
  async (vs) => {
    const { page } = vs;
    const bashEnv = join(vs.sshd!.dir, 'bash_env');
    appendFileSync(bashEnv, 'export NCCL_P2P_DISABLE=0\n');
    await vs.openView('Known Good');
    await vs.treeItem(TEST_SSH_HOST).waitFor();

    // The known-good environment: captured and marked, so What Changed? compares with it.
    await vs.commandPalette('Known Good: Capture Environment Baseline');
    await answer(vs, TEST_SSH_HOST, TEST_SSH_HOST);
    const label = page.locator('.quick-input-widget input');
    await label.waitFor();
    await label.fill('before the switch');
    await page.keyboard.press('Enter');
    await page
      .getByText(/Saved baseline "before the switch"/)
      .first()
      .waitFor({ timeout: 90_000 });
    await vs.expand(TEST_SSH_HOST);
    await vs.treeItem('Baselines').waitFor({ timeout: 60_000 });
    // A redraw (the host's listing arriving) can swallow a click: click again, reading the state each time.
    const baselinesRow = vs.row('Baselines');
    for (let attempt = 1; (await baselinesRow.getAttribute('aria-expanded')) !== 'true'; attempt++) {
      if (attempt > 5) throw new Error('Baselines did not expand after 5 clicks');
      // (a redraw can leave the row never "stable" for Playwright: the click is forced, its effect read back)
      await baselinesRow
        .locator('.label-name')
        .click({ force: true, timeout: 5_000 })
        .catch(() => undefined);
      await page
        .waitForFunction((el) => el?.getAttribute('aria-expanded') === 'true', await baselinesRow.elementHandle(), {
          timeout: 10_000,
        })
        .catch(() => undefined);
    }
    await vs.treeItem('before the switch').waitFor();
    await vs.contextMenu('before the switch', 'Mark as Known-Good');

    appendFileSync(bashEnv, 'export NCCL_P2P_DISABLE=1\n');
    // The resident helper keeps the environment it started with: a new session reads the changed one.
    await vs.contextMenu(TEST_SSH_HOST, 'Disconnect');
    const hostRow = vs.treeItem(TEST_SSH_HOST);
    await page.waitForTimeout(500);
    if ((await hostRow.getAttribute('aria-expanded')) !== 'true') await vs.expand(TEST_SSH_HOST);
    // the root's row (its path) holds the run; it may already be open
    const root = join(story, 'runs');
    await vs.treeItem(root).waitFor({ timeout: 60_000 });
    if (!(await vs.row('run-a').isVisible())) await vs.expand(root);
    await vs.row('run-a').waitFor({ timeout: 60_000 });
    await rowMenu(page, vs.row('run-a'), page.getByRole('menuitem', { name: /^What Changed\?/ }));
    const report = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    await report.locator('h1.kg-headline').waitFor({ timeout: 120_000 });
    const suspect = report.locator('li.kg-suspect', { hasText: 'NCCL_P2P_DISABLE 0 → 1' }).first();
    await suspect.waitFor({ timeout: 30_000 });
    const link = suspect.locator('a.kg-evidence', { hasText: 'Confirm by bisect' });
    await link.scrollIntoViewIfNeeded();
    await vs.screenshot('bisect-1-suspect');
    await link.click();

    // The user's command is set: the bisect asks which benchmark measures the states.
    await answer(vs, 'Your benchmark command', 'Your benchmark command');
    const tab = page.locator('.tabs-container .tab', { hasText: `${TEST_SSH_HOST} bisect.md` });
    await tab.waitFor({ timeout: 180_000 });
    const doc = page.locator('.editor-instance .view-lines').first();
    await page.waitForFunction(
      (el) => el?.textContent?.replace(/\u00a0/g, ' ').includes('Culprit: NCCL_P2P_DISABLE') ?? false,
      await doc.elementHandle(),
      { timeout: 60_000 },
    );
    const text = ((await doc.textContent()) ?? '').replace(/\u00a0/g, ' ');
    assert.match(text, /Culprit: NCCL_P2P_DISABLE: 0 → 1 — confirmed/);
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(300);
    await vs.screenshot('bisect-2-report');
  },
);
