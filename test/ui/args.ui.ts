import * as assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rowMenu, scenario, writeDemoCheckpoint } from './harness';

/** run-a with step_600 (lr 3e-4) and step_690 (lr 1.5e-4) as the demo lays them out: step_N/checkpoint.pt. */
function writeRun(root: string): void {
  const base = { batch_size: 32, warmup: 2000, model: 'gpt-small' };
  for (const [step, lr] of [
    [600, 3e-4],
    [690, 1.5e-4],
  ] as const) {
    const dir = join(root, 'run-a', `step_${step}`);
    const args = writeDemoCheckpoint(dir, step, { ...base, lr });
    writeFileSync(join(dir, 'config.json'), args + '\n');
  }
}

/** Monaco renders spaces as no-break spaces. */
const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');

const localRoot = mkdtempSync(join(tmpdir(), 'kg-ui-args-'));
writeRun(localRoot);

scenario(
  'Checkpoint args: click opens the args document; Select for Compare + Compare with Selected shows the changed lr',
  { localRoots: [localRoot], timeoutMs: 240_000 },
  async (vs) => {
    const { page } = vs;
    // Rows by their visible label: a row's accessible name is its tooltip (the full path) where it has one.
    const row = vs.row;
    const contextMenu = async (label: string, command: string) => {
      await rowMenu(page, row(label), page.getByRole('menuitem', { name: new RegExp(`^${command}`) }));
    };
    await vs.openView('Known Good');
    await vs.expand('This machine');
    // listing This machine starts a helper: slow on a loaded 2-core machine
    await row('run-a').waitFor({ timeout: 90_000 });
    await row('run-a').click();
    await row('step_600').waitFor({ timeout: 30_000 });

    // click → its args document (a knownGood: document named after the checkpoint)
    await row('step_600').click();
    const tab = page.locator('.tabs-container .tab', { hasText: 'step_600 args.jsonc' });
    await tab.waitFor({ timeout: 30_000 });
    const editor = page.locator('.editor-group-container .monaco-editor .view-lines').first();
    await page.waitForFunction((el) => el?.textContent?.includes('"lr"') ?? false, await editor.elementHandle(), {
      timeout: 30_000,
    });
    const text = plain(await editor.textContent());
    assert.match(text, /Known Good: args of step_600/);
    assert.match(text, /"lr":\s*0\.0003/);
    await vs.screenshot('args-document');

    // right-click step_600 → Select for Compare; right-click step_690 → Compare with Selected
    await contextMenu('step_600', 'Select for Compare');
    await contextMenu('step_690', 'Compare with Selected');
    const diffTab = page.locator('.tabs-container .tab', { hasText: 'args: step_600 ↔ step_690 (This machine/run-a)' });
    await diffTab.waitFor({ timeout: 30_000 });
    const diff = page.locator('.monaco-diff-editor').first();
    await diff.waitFor();
    const modified = diff.locator('.editor.modified .view-lines');
    await page.waitForFunction((el) => el?.textContent?.includes('0.00015') ?? false, await modified.elementHandle(), {
      timeout: 30_000,
    });
    // the changed line is marked on both sides, and it is the lr line
    const inserted = diff.locator('.editor.modified .line-insert, .editor.modified .char-insert');
    await inserted.first().waitFor({ timeout: 15_000 });
    const original = plain(await diff.locator('.editor.original .view-lines').textContent());
    assert.match(original, /"lr":\s*0\.0003/);
    // one header on both sides: the only changed line is the lr line, not the paths, sizes or read times
    assert.match(original, /\/\/ args: 1 changed, 0 added, 0 removed/);
    assert.equal(await diff.locator('.editor.modified .view-overlays .line-insert').count(), 1, 'changed lines');
    await page.waitForTimeout(300);
    await vs.screenshot('args-diff');

    // and the compact view of the same pair
    await contextMenu('step_690', 'Show Changed Args Only');
    const changedTab = page.locator('.tabs-container .tab', { hasText: 'step_600 ↔ step_690 changed args.txt' });
    await changedTab.waitFor({ timeout: 30_000 });
    const changed = page.locator('.editor-group-container .monaco-editor .view-lines').first();
    await page.waitForFunction(
      (el) => el?.textContent?.replace(/\u00a0/g, ' ').includes('lr: 0.0003') ?? false,
      await changed.elementHandle(),
      { timeout: 30_000 },
    );
    assert.doesNotMatch(plain(await changed.textContent()), /batch_size/);
    await vs.screenshot('args-changed-only');
  },
);

/*
 * Issue 36 item 4c/4d: run-a (steps 600, 690, 780) and run-b (600, 690). The same two steps compared in two runs get
 * two tab titles, each naming its host and run; Show Changed Args Only on step_780 shows what changed since step_690,
 * the step before it, although step_600 is still selected for compare.
 */
const twoRuns = mkdtempSync(join(tmpdir(), 'kg-ui-args-runs-'));
for (const [run, step, lr, batch] of [
  ['run-a', 600, 3e-4, 32],
  ['run-a', 690, 1.5e-4, 32],
  ['run-a', 780, 1.5e-4, 64],
  ['run-b', 600, 3e-4, 32],
  ['run-b', 690, 1e-4, 32],
] as const)
  writeDemoCheckpoint(join(twoRuns, run, `step_${step}`), step, { batch_size: batch, model: 'gpt-small', lr });

scenario(
  'Two runs’ compares get two tab titles (host/run); Show Changed Args Only compares with the previous step',
  { localRoots: [twoRuns], timeoutMs: 240_000 },
  async (vs) => {
    const { page, row } = vs;
    const menu = (label: string, command: string, nth = 0) =>
      rowMenu(page, row(label).nth(nth), page.getByRole('menuitem', { name: new RegExp(`^${command}`) }));
    const tab = (text: string) => page.locator('.tabs-container .tab', { hasText: text });
    await vs.openView('Known Good');
    await vs.expand('This machine');
    await row('run-a').waitFor({ timeout: 90_000 });
    await row('run-a').click();
    await row('step_780').waitFor({ timeout: 30_000 });

    // step_600 selected for compare, then Show Changed Args Only on step_780: step_690 ↔ step_780, batch_size only
    await menu('step_600', 'Select for Compare');
    await row('step_600').filter({ hasText: 'selected for compare' }).waitFor({ timeout: 15_000 });
    await menu('step_780', 'Show Changed Args Only');
    await tab('step_690 ↔ step_780 changed args.txt').waitFor({ timeout: 30_000 });
    const changed = page.locator('.editor-group-container .monaco-editor .view-lines').first();
    await page.waitForFunction(
      (el) => el?.textContent?.replace(/\u00a0/g, ' ').includes('batch_size: 32') ?? false,
      await changed.elementHandle(),
      { timeout: 30_000 },
    );
    assert.doesNotMatch(plain(await changed.textContent()), /lr:/, 'lr changed at step_690, not since');
    assert.equal(await tab('step_600 ↔ step_780').count(), 0);
    await vs.screenshot('args-changed-since-previous-step');

    // the same pair of steps in each run: two titles
    await menu('step_690', 'Compare with Previous Step');
    await tab('args: step_600 ↔ step_690 (This machine/run-a)').waitFor({ timeout: 30_000 });
    await row('run-b').click();
    await row('step_690').nth(1).waitFor({ timeout: 30_000 });
    await menu('step_690', 'Compare with Previous Step', 1);
    await tab('args: step_600 ↔ step_690 (This machine/run-b)').waitFor({ timeout: 30_000 });
    await vs.screenshot('args-two-runs-two-titles');
  },
);
