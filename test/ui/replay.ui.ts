import * as assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireTorch } from '../support/require';
import { makeReplayRun } from '../support/replayRuns';
import { rowMenu, scenario, TEST_SSH_HOST } from './harness';

/*
 * Issue 33 item 5 in real VS Code: a run on the test sshd launched twice through kg_record.py (the small CPU training
 * loop of test/support/replay/), the second launch resumed from step 48 with --work 2 → 8. What Changed? on the run
 * ranks "work 2 → 8"; Prove by Replay on it shows the plan (both launches, the overrides, the change) and asks; Run
 * opens the live terminal, where the run is resumed from its known-good checkpoint in both launches, interleaved;
 * when it ends, the suspect in the report says "confirmed by replay" with the numbers. The loop's speed is tokens per
 * CPU-second of its own process and --work 8 does four times the work: the verdict holds whatever the machine's load.
 */

requireTorch();
const root = mkdtempSync(join(tmpdir(), 'kg-ui-replay-'));
makeReplayRun(root, 'arg', { name: 'run-work' });

const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');

scenario(
  'What Changed? suspect work 2 → 8 → Prove by Replay → Run → the suspect says "confirmed by replay"',
  { sshHost: { roots: [root] }, timeoutMs: 600_000 },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.expand(TEST_SSH_HOST);
    await vs.treeItem(root).waitFor({ timeout: 60_000 });
    if (!(await vs.row('run-work').isVisible())) await vs.expand(root);
    await vs.row('run-work').waitFor({ timeout: 60_000 });
    await rowMenu(page, vs.row('run-work'), page.getByRole('menuitem', { name: /^What Changed\?/ }));

    const report = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    await report.locator('h1.kg-headline').waitFor({ timeout: 180_000 });
    const suspect = report.locator('li.kg-suspect', { hasText: 'work 2 → 8' }).first();
    await suspect.waitFor({ timeout: 30_000 });
    // a run with two recorded launches can be replayed: the report offers it on the suspect and for every change
    await report.locator('button', { hasText: 'Bisect All Changes' }).waitFor();
    const prove = suspect.locator('a.kg-evidence', { hasText: 'Prove by Replay' });
    await prove.scrollIntoViewIfNeeded();
    await page.mouse.move(1100, 700);
    await vs.screenshot('replay-1-suspect');
    await prove.click();

    // The plan, before anything runs: both launches, the overrides, the one change; Run or Edit Flags…
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.waitFor({ timeout: 180_000 });
    const asked = plain(await dialog.textContent());
    assert.match(asked, /Replay work 2 → 8 of run-work: 1 change\(s\)/, asked);
    assert.match(asked, /Changes bisected \(1\): {2}--work: \(not set\) → 8/, asked);
    assert.match(
      asked,
      /Resumed from step_48\.pt with --resume, --out_dir \(a guess\), --steps; at most 18 runs/,
      asked,
    );
    assert.ok(await dialog.getByRole('button', { name: 'Edit Flags…' }).isVisible());
    // the whole plan is a document: both launches as recorded, the overrides, what is left out and why
    await page.locator('.tabs-container .tab', { hasText: 'replay run-work plan.txt' }).waitFor();
    const planDoc = plain(await page.locator('.editor-instance .view-lines').first().textContent());
    assert.match(planDoc, /Known-good launch \(in /, planDoc);
    assert.match(planDoc, /--resume \S+\/ckpt\/step_48\.pt \(resume from the reference checkpoint\)/, planDoc);
    assert.match(planDoc, /arg:--work {2}--work: \(not set\) → 8/, planDoc);
    await vs.screenshot('replay-2-plan');
    await dialog.getByRole('button', { name: 'Run' }).click();

    // The live terminal: the plan, each round and run with its speed; then the verdict.
    await page
      .locator('.terminal-tab, .tabs-list .monaco-list-row, .single-terminal-tab', {
        hasText: 'Replay @',
      })
      .first()
      .waitFor({ timeout: 60_000 })
      .catch(() => undefined);
    const tab = page.locator('.tabs-container .tab', { hasText: 'replay run-work.md' });
    await tab.waitFor({ timeout: 540_000 });
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(500);
    await vs.screenshot('replay-3-terminal-and-report');

    // Back in What Changed?: the suspect carries the replay's word and its numbers.
    await page.locator('.tabs-container .tab', { hasText: 'What Changed? run-work' }).click();
    const proof = report.locator('li.kg-suspect', { hasText: 'work 2 → 8' }).first().locator('.kg-proof');
    await proof.waitFor({ timeout: 60_000 });
    const said = plain(await proof.textContent());
    assert.match(
      said,
      /^confirmed by replay: --work: \(not set\) → 8 — known-good [\d.]+K? → now [\d.]+K? tok_s \(−\d+ %\), \d+ runs in \d+ s/,
      said,
    );
    assert.equal(await proof.getAttribute('data-proof'), 'confirmed');
    await proof.scrollIntoViewIfNeeded();
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(300);
    await vs.screenshot('replay-4-confirmed');
  },
);
