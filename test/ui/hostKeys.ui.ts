import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scenario, writeDemoCheckpoint } from './harness';

/*
 * Issue 36 item 4b: Add Host's key step offers the keys a person has, not only ~/.ssh/id_*: the key ~/.ssh/config
 * names (IdentityFile ~/keys/trainbox_key, outside ~/.ssh) and a private key in ~/.ssh with another name (work_key,
 * found by its first line). A path typed into the step and Enter is taken: a wrong one says there is no such file and
 * stays, the right one (~/elsewhere/typed_key, the key the sshd accepts) is used, and the host lists its runs.
 */

const sshRoot = mkdtempSync(join(tmpdir(), 'kg-ui-host-keys-'));
writeDemoCheckpoint(join(sshRoot, 'run-a', 'step_100'), 100, { lr: 3e-4 });

scenario(
  'Add Host: the key step lists ~/.ssh/config keys and any private key in ~/.ssh, and takes a typed path',
  { sshHost: { roots: [], inSettings: false }, timeoutMs: 240_000 },
  async (vs) => {
    const { page, sshd } = vs;
    assert.ok(sshd);
    const home = vs.server.home;
    for (const d of ['.ssh', 'keys', 'elsewhere']) mkdirSync(join(home, d), { recursive: true, mode: 0o700 });
    writeFileSync(
      join(home, '.ssh', 'config'),
      `Host trainbox\n  HostName 127.0.0.1\n  Port ${sshd.port}\n  User ${sshd.user}\n  IdentityFile ~/keys/trainbox_key\n`,
      { mode: 0o600 },
    );
    copyFileSync(sshd.identityFile, join(home, 'keys', 'trainbox_key'));
    copyFileSync(sshd.identityFile, join(home, 'elsewhere', 'typed_key'));
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(home, '.ssh', 'work_key')]);

    const widget = page.locator('.quick-input-widget');
    const input = widget.locator('.quick-input-box input');
    const step = async (title: RegExp, text?: string) => {
      await widget.locator('.quick-input-title', { hasText: title }).waitFor({ timeout: 30_000 });
      if (text !== undefined) await input.fill(text);
      if (await widget.locator('.quick-input-list').isVisible())
        await widget.locator('.quick-input-list .monaco-list-row').first().waitFor();
      await page.keyboard.press('Enter');
    };

    await vs.openView('Known Good');
    await vs.commandPalette('Known Good: Add Host');
    // an address, not the alias: the key typed below is the only one this host gets
    await step(/Add Host \(1\/6\)/, 'Enter user@host');
    await step(/Add Host \(1\/6\)/, `${sshd.user}@127.0.0.1:${sshd.port}`);
    await step(/Add Host \(2\/6\)/, 'gpu-box');
    await widget.locator('.quick-input-title', { hasText: /Add Host \(3\/6\): key/ }).waitFor({ timeout: 30_000 });
    const rows = widget.locator('.quick-input-list .monaco-list-row');
    await rows.filter({ hasText: join(home, 'keys', 'trainbox_key') }).waitFor({ timeout: 15_000 });
    await rows.filter({ hasText: join(home, '.ssh', 'work_key') }).waitFor();
    assert.equal(await rows.filter({ hasText: 'work_key.pub' }).count(), 0);
    // ~/.ssh/config itself is no key (the trainbox row's description names it: its label would be the path)
    assert.equal(await rows.filter({ hasText: join(home, '.ssh', 'config') }).count(), 0);
    await vs.screenshot('host-keys-1-offered');

    // a path that is no file: said on its entry, and the step stays
    await input.fill('~/elsewhere/typo_key');
    await rows.filter({ hasText: '~/elsewhere/typo_key' }).waitFor();
    await page.keyboard.press('Enter');
    await rows.filter({ hasText: `no file at ${join(home, 'elsewhere', 'typo_key')}` }).waitFor({ timeout: 15_000 });
    await vs.screenshot('host-keys-2-no-such-file');
    await input.fill('~/elsewhere/typed_key');
    await rows.filter({ hasText: 'the key file typed' }).waitFor();
    await page.keyboard.press('Enter');
    await step(/Add Host \(4\/6\)/);
    await step(/Add Host \(5\/6\)/);
    await step(/Add Host \(6\/6\)/, sshRoot);

    // the typed key is the host's: it connects (after its host key is accepted) and lists the run
    const host = vs.treeItem(/^gpu-box/);
    await host.waitFor({ timeout: 30_000 });
    await host.click();
    const accept = page.locator('.monaco-dialog-box').getByRole('button', { name: 'Accept and Remember' });
    await accept.waitFor({ timeout: 60_000 });
    await accept.click();
    await vs.expand(sshRoot);
    await vs.treeItem(/^run-a/).waitFor({ timeout: 60_000 });
    await vs.screenshot('host-keys-3-connected');
  },
);
