import * as assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { rowMenu, scenario, writeDemoCheckpoint } from './harness';

const root = mkdtempSync(join(tmpdir(), 'kg-ui-host-name-'));
writeDemoCheckpoint(join(root, 'run-a', 'step_100'), 100, { batch_size: 32, model: 'gpt-small', lr: 3e-4 });

/** Waits for the wizard step titled `title`, checks the value it offers, types `text` if given, and goes on. */
async function step(
  page: Page,
  title: RegExp,
  opts: { offers?: string; text?: string; shot?: () => Promise<unknown> } = {},
): Promise<void> {
  const widget = page.locator('.quick-input-widget');
  await widget.locator('.quick-input-title', { hasText: title }).waitFor({ timeout: 30_000 });
  const input = widget.locator('.quick-input-box input');
  if (opts.offers !== undefined) assert.equal(await input.inputValue(), opts.offers, String(title));
  if (opts.text !== undefined) await input.fill(opts.text);
  await opts.shot?.();
  if (await widget.locator('.quick-input-list').isVisible())
    await widget.locator('.quick-input-list .monaco-list-row').first().waitFor();
  await page.keyboard.press('Enter');
}

scenario(
  'Add Host asks for a name (offering user@host), Edit Host renames, and the baseline stays with the host',
  { sshHost: { roots: [], inSettings: false }, timeoutMs: 240_000 },
  async (vs) => {
    const { page, sshd } = vs;
    assert.ok(sshd);
    const ssh = join(vs.server.home, '.ssh');
    mkdirSync(ssh, { recursive: true, mode: 0o700 });
    copyFileSync(sshd.identityFile, join(ssh, 'id_test'));
    const address = `${sshd.user}@127.0.0.1:${sshd.port}`;

    await vs.openView('Known Good');
    await vs.commandPalette('Known Good: Add Host…');
    await step(page, /Add Host \(1\/6\): address/, { text: address });
    await step(page, /Add Host \(2\/6\): name/, {
      offers: `${sshd.user}@127.0.0.1`,
      shot: () => vs.screenshot('host-name-0-name-step'),
    });
    await step(page, /Add Host \(3\/6\): key/, { text: 'id_test' });
    await step(page, /Add Host \(4\/6\)/);
    await step(page, /Add Host \(5\/6\)/);
    await step(page, /Add Host \(6\/6\)/, { text: root });
    // The host key is new: accept it once.
    const host = vs.treeItem(new RegExp(`^${sshd.user}@127\\.0\\.0\\.1, ${address.replace(/\./g, '\\.')}`));
    await host.waitFor({ timeout: 30_000 });
    await vs.expand(new RegExp(`^${sshd.user}@127\\.0\\.0\\.1, `));
    const accept = page.locator('.monaco-dialog-box').getByRole('button', { name: 'Accept and Remember' });
    await accept.waitFor({ timeout: 60_000 });
    await accept.click();
    await vs.treeItem(root).waitFor({ timeout: 60_000 });

    // A baseline of the host, then a rename: the baseline is still its own (kept by the address, not the name).
    await vs.commandPalette('Known Good: Capture Environment Baseline');
    const widget = page.locator('.quick-input-widget');
    await widget
      .locator('.quick-input-list .monaco-list-row', { hasText: `${sshd.user}@127.0.0.1` })
      .first()
      .click();
    await widget.locator('.quick-input-title', { hasText: /Capture Environment Baseline/ }).waitFor();
    await widget.locator('.quick-input-box input').fill('before the rename');
    await page.keyboard.press('Enter');
    await vs.expand('Baselines');
    await vs.treeItem(/^before the rename/).waitFor({ timeout: 90_000 });

    await rowMenu(page, host, page.getByRole('menuitem', { name: /^Edit Host/ }));
    await step(page, /Edit Host \(1\/6\)/);
    await step(page, /Edit Host \(2\/6\): name/, { offers: `${sshd.user}@127.0.0.1`, text: 'trainbox' });
    await step(page, /Edit Host \(3\/6\): key/);
    await step(page, /Edit Host \(4\/6\)/);
    await step(page, /Edit Host \(5\/6\)/);
    await step(page, /Edit Host \(6\/6\)/);
    const renamed = vs.treeItem(new RegExp(`^trainbox, ${address.replace(/\./g, '\\.')}`));
    await renamed.waitFor({ timeout: 30_000 });
    assert.equal(await host.count(), 0, 'the old name is still shown');
    await vs.expand(/^trainbox, /);
    await vs.expand('Baselines');
    await vs.treeItem(/^before the rename/).waitFor({ timeout: 60_000 });
    await vs.screenshot('host-name-1-renamed');
  },
);
