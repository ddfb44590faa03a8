import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Locator } from 'playwright-core';
import { reloadWindow, rowMenu, scenario, TEST_SSH_HOST } from './harness';

/*
 * Issue 25 item 4: after Reload Window Remote Runs comes back as the person left it. The test SSH host, its root and
 * run-a were opened, step_600 selected and step_690 chosen with Select for Compare; after the reload the same rows
 * are open (the host reconnects because its row is open), step_600 is selected, step_690 still says so, and This
 * machine, never opened, neither connects nor says "not connected".
 */

const sshRoot = mkdtempSync(join(tmpdir(), 'kg-ui-reload-'));
for (const [run, step] of [
  ['run-a', 600],
  ['run-a', 690],
  ['run-b', 100],
] as const) {
  mkdirSync(join(sshRoot, run, `step_${step}`), { recursive: true });
  writeFileSync(join(sshRoot, run, `step_${step}`, 'checkpoint.pt'), 'demo');
}
const localRoot = mkdtempSync(join(tmpdir(), 'kg-ui-reload-local-'));

const description = async (row: Locator) =>
  (
    (await row
      .locator('.label-description')
      .first()
      .textContent({ timeout: 5_000 })
      .catch(() => '')) ?? ''
  ).trim();

scenario(
  'Reload Window keeps Remote Runs as it was: the same rows open, the same row selected, This machine quiet',
  { localRoots: [localRoot], sshHost: { roots: [sshRoot] }, timeoutMs: 240_000 },
  async (vs) => {
    const { page, row } = vs;
    await vs.openView('Known Good');
    await vs.expand(TEST_SSH_HOST);
    await row('run-a').waitFor({ timeout: 90_000 });
    // Rows by their visible label: a run's accessible name is its tooltip (its full path).
    await row('run-a').click();
    await row('step_600').waitFor({ timeout: 30_000 });
    await rowMenu(page, row('step_690'), page.getByRole('menuitem', { name: /^Select for Compare/ }));
    // A click selects the row (and opens its args: a checkpoint's click).
    await row('step_600').click();
    await page.waitForFunction(
      () => document.querySelector('[role=treeitem][aria-selected=true] .label-name')?.textContent === 'step_600',
      undefined,
      { timeout: 10_000 },
    );
    const thisMachine = vs.treeItem('This machine');
    assert.equal(await description(thisMachine), '', 'This machine, never opened, says nothing about connecting');
    await vs.screenshot('reload-before');

    await reloadWindow(vs);
    await vs.openView('Known Good');
    // The host's row is open again and lists by itself: nobody clicked it.
    await row('step_600').waitFor({ timeout: 90_000 });
    for (const label of [TEST_SSH_HOST, sshRoot, 'run-a'])
      assert.equal(await row(label).first().getAttribute('aria-expanded'), 'true', `${label} open again`);
    assert.equal(await row('run-b').getAttribute('aria-expanded'), 'false', 'run-b was never opened');
    await page.waitForFunction(
      () => document.querySelector('[role=treeitem][aria-selected=true] .label-name')?.textContent === 'step_600',
      undefined,
      { timeout: 30_000 },
    );
    assert.match(await description(row('step_690')), /selected for compare/);
    assert.equal(await thisMachine.getAttribute('aria-expanded'), 'false');
    assert.equal(await description(thisMachine), '', 'This machine after the reload');
    // Lazily: the open host connected again (its icon says so), This machine, closed, was not even listed.
    await row(TEST_SSH_HOST).locator('.codicon-vm-active').waitFor({ timeout: 10_000 });
    assert.equal(await thisMachine.locator('.codicon-vm-outline').count(), 1, 'This machine was listed');
    assert.doesNotMatch(await description(vs.treeItem(TEST_SSH_HOST)), /not connected/);
    await vs.screenshot('reload-after');
  },
);
