import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { repoRoot } from '../../scripts/vscode/server';
import { pickMenuItem, scenario } from './harness';

/** A run with one checkpoint (step_100/checkpoint.pt with its args), as the demo lays them out. */
function writeRun(root: string, steps: [number, number][] = [[100, 3e-4]]): void {
  for (const [step, lr] of steps) {
    const dir = join(root, 'run-a', `step_${step}`);
    mkdirSync(dir, { recursive: true });
    const args = JSON.stringify({ batch_size: 32, model: 'gpt-small', lr });
    execFileSync('python3', [
      join(repoRoot, 'scripts', 'demo', 'write_checkpoint.py'),
      join(dir, 'checkpoint.pt'),
      '--step',
      String(step),
      '--args-json',
      args,
    ]);
  }
}

/** The quick input (wizard steps, pickers): waits for a step by its title, then types and presses Enter. */
function quickInput(page: Page) {
  const widget = page.locator('.quick-input-widget');
  return {
    async step(title: RegExp, text?: string, shot?: () => Promise<unknown>) {
      await widget.locator('.quick-input-title', { hasText: title }).waitFor({ timeout: 30_000 });
      const input = widget.locator('.quick-input-box input');
      await shot?.();
      if (text !== undefined) await input.fill(text);
      // a picker filters as one types: wait for the row before Enter takes the first
      if (await widget.locator('.quick-input-list').isVisible())
        await widget.locator('.quick-input-list .monaco-list-row').first().waitFor();
      await page.keyboard.press('Enter');
    },
  };
}

const widget = (page: Page) => page.locator('.quick-input-widget');

const sshRoot = mkdtempSync(join(tmpdir(), 'kg-ui-first-contact-'));
writeRun(sshRoot);

scenario(
  'First contact: Add Host from an ~/.ssh/config alias with a key, accept the host key, fix the key with Edit Host',
  { sshHost: { roots: [], inSettings: false }, timeoutMs: 240_000 },
  async (vs) => {
    const { page, sshd } = vs;
    assert.ok(sshd);
    // The extension host's HOME: an alias for the test sshd (no IdentityFile), its key and a key it does not accept.
    const ssh = join(vs.server.home, '.ssh');
    mkdirSync(ssh, { recursive: true, mode: 0o700 });
    writeFileSync(
      join(ssh, 'config'),
      `Host trainbox\n  HostName 127.0.0.1\n  Port ${sshd.port}\n  User ${sshd.user}\n`,
      { mode: 0o600 },
    );
    copyFileSync(sshd.identityFile, join(ssh, 'id_test'));
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(ssh, 'id_other')]);

    const q = quickInput(page);
    await vs.openView('Known Good');
    // Nothing configured: the view's welcome, with Add Host… as a button.
    const welcome = page.locator('#workbench\\.parts\\.sidebar .welcome-view-content');
    await welcome.getByText('No hosts yet').waitFor({ timeout: 30_000 });
    await vs.screenshot('first-contact-0-welcome');
    await welcome.getByRole('button', { name: 'Add Host…' }).click();
    await q.step(/Add Host \(1\/5\)/, 'trainbox', () =>
      widget(page).locator('.monaco-list-row', { hasText: 'trainbox' }).waitFor(),
    );
    await q.step(/Add Host \(2\/5\): key/, 'id_other', async () => {
      await widget(page).locator('.monaco-list-row', { hasText: 'Use the SSH agent' }).waitFor();
      await vs.screenshot('first-contact-0-key-step');
    });
    await q.step(/Add Host \(3\/5\)/);
    await q.step(/Add Host \(4\/5\)/);
    await q.step(/Add Host \(5\/5\)/, sshRoot);

    // One short name, the address once beside it.
    const host = vs.treeItem(`trainbox, ${sshd.user}@127.0.0.1:${sshd.port}`);
    await host.waitFor({ timeout: 30_000 });
    const t0 = Date.now();
    await host.click();
    // The first connection asks about the unknown host key (known_hosts in HOME is empty).
    const accept = page.locator('.monaco-dialog-box').getByRole('button', { name: 'Accept and Remember' });
    await accept.waitFor({ timeout: 60_000 });
    await vs.screenshot('first-contact-1-host-key');
    await accept.click();
    // id_other is not authorized: the error row names what was tried.
    const error = vs.treeItem(/authentication as .* failed/);
    await error.waitFor({ timeout: 60_000 });
    await vs.screenshot('first-contact-2-wrong-key');

    // Edit Host… on the error row: the wizard again, filled in; pick the right key.
    await error.click({ button: 'right' });
    await pickMenuItem(page, page.getByRole('menuitem', { name: /^Edit Host/ }));
    await q.step(/Edit Host \(1\/5\)/);
    await q.step(/Edit Host \(2\/5\): key/, 'id_test');
    await q.step(/Edit Host \(3\/5\)/);
    await q.step(/Edit Host \(4\/5\)/);
    await q.step(/Edit Host \(5\/5\)/);
    // No reload: the host connects again with the new key and lists its root.
    await vs.treeItem(sshRoot).waitFor({ timeout: 90_000 });
    console.log(`[timing] first contact to listed root, wrong key fixed by Edit Host (sshd): ${Date.now() - t0} ms`);
    await vs.expand(sshRoot);
    await vs.treeItem(/^run-a/).waitFor({ timeout: 30_000 });
    assert.equal(await error.count(), 0);
    await vs.screenshot('first-contact-3-listed');
  },
);
