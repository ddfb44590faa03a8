import * as assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rowMenu, scenario, writeDemoCheckpoint } from './harness';

/*
 * Issue 23: "Record Launches of This Run…" on a run of This machine: where the records go, whether to copy kg_record.py
 * (not here: the int test copies it), then the read-only document with the line to put in front of the launch.
 */

const story = mkdtempSync(join(tmpdir(), 'kg-ui-record-'));
const run = join(story, 'runs', 'run-a');
writeDemoCheckpoint(join(run, 'step_100'), 100, { lr: 3e-4, dataset: 'owt' });
writeFileSync(join(run, 'train_log.jsonl'), '{"step": 10, "loss": 2.5}\n{"step": 20, "loss": 2.4}\n');

/** Monaco renders spaces as no-break spaces. */
const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');

scenario(
  'Record Launches of This Run… on a run: where, then the line to put in front of the launch in a read-only document',
  { localRoots: [join(story, 'runs')], timeoutMs: 300_000 },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.expand('This machine');
    await vs.row('run-a').waitFor({ timeout: 90_000 });
    await rowMenu(page, vs.row('run-a'), page.getByRole('menuitem', { name: /^Record Launches of This Run/ }));
    const rows = page.locator('.quick-input-list .monaco-list-row');
    // where the records go: the run folder or the home folder on the host
    await rows.filter({ hasText: 'Inside the run folder' }).waitFor({ timeout: 30_000 });
    await page.waitForTimeout(300);
    await vs.screenshot('record-launches-where');
    await rows.filter({ hasText: 'In my home folder on the host' }).click();
    // kg_record.py is not on this machine's home folder: show the line only (the int test copies it)
    await rows
      .filter({ hasText: /Show the line only|Keep the copy there/ })
      .first()
      .waitFor({ timeout: 60_000 });
    await rows
      .filter({ hasText: /Show the line only|Keep the copy there/ })
      .first()
      .click();
    const tab = page.locator('.tabs-container .tab', { hasText: 'record-launches.md' });
    await tab.waitFor({ timeout: 60_000 });
    const lines = page.locator('.monaco-editor .view-lines').first();
    // the document wraps long lines: compared without whitespace
    const flat = async () => plain(await lines.textContent()).replace(/\s+/g, '');
    for (let i = 0; i < 120 && !(await flat()).includes('kg_record.py--run'); i++) await page.waitForTimeout(250);
    const text = await flat();
    assert.match(text, /kg_record\.py--run\S*run-a--home--pythontrain\.py/);
    assert.match(text, /torchrun--nproc_per_node=8train\.py/);
    assert.match(text, /nothingiswrittenintherunfolder/);
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(300);
    await vs.screenshot('record-launches-line');
  },
);
