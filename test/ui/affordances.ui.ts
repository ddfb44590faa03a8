import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trainLogLine, trainLogPoints } from '../../scripts/demo/trainLog';
import { TORCH_PYTHON } from '../support/require';
import { scenario, writeDemoCheckpoint } from './harness';

// Issue 15 items 8 and 10, what a VS Code user expects without asking: ages in Remote Runs move on by themselves;
// the status-bar throughput item names the run it follows and opens its dashboard; Select Remote Python lists the
// interpreters that have torch first; two checkpoints with the same args compare as "args identical" with no
// changed line (item 3).

const root = mkdtempSync(join(tmpdir(), 'kg-ui-afford-'));
const run = join(root, 'run-a');
for (const step of [100, 200])
  writeDemoCheckpoint(join(run, `step_${step}`), step, { batch_size: 32, model: 'gpt-small', lr: 3e-4 });
writeFileSync(
  join(run, 'train_log.jsonl'),
  trainLogPoints({ steps: 300, seed: 3 }).map(trainLogLine).join('\n') + '\n',
);

scenario(
  'Affordances: ages move on, the status bar names the run and opens its dashboard, torch interpreters first, same args say "args identical"',
  { localRoots: [root], settings: { 'knownGood.localPython': TORCH_PYTHON }, timeoutMs: 300_000 },
  async (vs) => {
    const { page } = vs;
    const row = vs.row;
    // A checkpoint written 20 s ago: its row says "… s ago", and a minute later something older.
    const written = Date.now() / 1000 - 20;
    utimesSync(join(run, 'step_200', 'checkpoint.pt'), written, written);
    utimesSync(join(run, 'step_200'), written, written);

    await vs.openView('Known Good');
    await vs.expand('This machine');
    await vs.expand(root);
    await row('run-a').waitFor({ timeout: 90_000 });
    await vs.expand(/^run-a/);
    const step = row('step_200');
    await step.waitFor({ timeout: 30_000 });
    const ageOf = async () => /(\d+ s ago|just now|\d+ min ago)/.exec((await step.textContent()) ?? '')?.[1];
    const firstAge = await ageOf();
    assert.ok(firstAge, `no age on the step_200 row: ${await step.textContent()}`);

    // The status bar follows the selected run: it names it, and a click opens the run's dashboard.
    await row('run-a').click();
    const status = page.locator('.statusbar-item', { hasText: /run-a ·/ });
    await status.waitFor({ timeout: 30_000 });
    assert.match((await status.textContent()) ?? '', /run-a · .*(tok\/s|step)/);
    await status.click();
    await page.locator('.tabs-container .tab', { hasText: /run-a/ }).first().waitFor({ timeout: 60_000 });
    await vs.screenshot('affordances-1-status-bar-dashboard');

    // Select Remote Python: an interpreter with torch heads the list, above a venv without it.
    execFileSync(TORCH_PYTHON, ['-m', 'venv', '--without-pip', join(vs.server.home, 'venv')]);
    await vs.commandPalette('Known Good: Select Remote Python');
    const rows = page.locator('.quick-input-list .monaco-list-row');
    await page
      .locator('.quick-input-list .monaco-list-row', { hasText: join(vs.server.home, 'venv') })
      .first()
      .waitFor({ timeout: 120_000 });
    const listed = (await rows.allTextContents()).map((t) => t.replace(/\s+/g, ' '));
    assert.match(listed[0] ?? '', /torch \d/, listed.join('\n'));
    const venvAt = listed.findIndex((t) => t.includes(join(vs.server.home, 'venv')));
    const lastTorch = listed.map((t) => /torch \d/.test(t)).lastIndexOf(true);
    assert.ok(venvAt > lastTorch, `a venv without torch listed above one with torch:\n${listed.join('\n')}`);
    await vs.screenshot('affordances-2-python-picker');
    await page.keyboard.press('Escape');

    // Same args in step_100 and step_200: "args identical", nothing marked changed. (Selecting run-a above
    // toggled it shut: a click on a row does both.)
    await vs.expand(/^run-a/);
    await vs.contextMenu(/^step_100/, 'Select for Compare');
    await vs.contextMenu(/^step_200/, 'Compare with Selected');
    const diff = page.locator('.monaco-diff-editor').first();
    await page.locator('.tabs-container .tab', { hasText: 'args: step_100 ↔ step_200' }).waitFor({ timeout: 60_000 });
    await diff
      .getByText(/args\W+identical\W+\(3\W+keys\)/)
      .first()
      .waitFor({ timeout: 30_000 });
    assert.equal(await diff.locator('.editor.modified .view-overlays .line-insert').count(), 0, 'changed lines');
    await vs.screenshot('affordances-3-args-identical');

    // The age moves on by itself: from here nothing is clicked, so only the view's minute tick can redraw it.
    const still = await ageOf();
    const from = Date.now();
    let age = still;
    while (age === still && Date.now() - from < 75_000) {
      await page.waitForTimeout(1000);
      age = await ageOf();
    }
    assert.notEqual(age, still, `step_200 still says "${still}" after ${Date.now() - from} ms`);
    console.log(`[ages] step_200: "${firstAge}" → "${still}" → "${age}" (${Date.now() - from} ms without a click)`);
    await vs.screenshot('affordances-4-age-moved-on');
  },
);
