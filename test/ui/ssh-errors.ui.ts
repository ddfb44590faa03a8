import * as assert from 'node:assert/strict';
import { scenario, TEST_SSH_HOST } from './harness';

scenario(
  'A host with no usable key: the whole message in the tooltip and a notification, a click on the row opens Edit Host…',
  // No identityFile, no ssh-agent, and the extension host's HOME has no ~/.ssh/id_*: nothing to offer.
  { sshHost: { entry: { identityFile: undefined } }, timeoutMs: 180_000 },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.expand(TEST_SSH_HOST);
    const error = vs.treeItem(/^no key offered to /);
    await error.waitFor({ timeout: 60_000 });
    const label = (await error.getAttribute('aria-label')) ?? '';
    assert.match(label, /no ssh-agent is running .* and ~\/\.ssh has no id_ed25519, id_ecdsa or id_rsa — Edit Host…/);

    // The notification says it whole, with the actions.
    const toast = page.locator('.notification-toast', { hasText: /no key offered to/ });
    await toast.waitFor({ timeout: 30_000 });
    await toast.getByRole('button', { name: 'Edit Host…' }).waitFor();
    await toast.getByRole('button', { name: 'Show Log' }).waitFor();

    // The row's tooltip holds the whole message, the tried list included (the row itself is cut by the side bar).
    await error.hover();
    const hover = page.locator('.monaco-hover, .workbench-hover').filter({ hasText: /Tried: nothing\./ });
    await hover.first().waitFor({ timeout: 30_000 });
    assert.match((await hover.first().textContent()) ?? '', /Edit Host… to choose a key/);
    await vs.screenshot('ssh-errors-0-no-key');

    // A click on the failed row opens the host's wizard.
    await error.click();
    await page
      .locator('.quick-input-widget .quick-input-title', { hasText: /Edit Host \(1\/6\): address/ })
      .waitFor({ timeout: 30_000 });
    await vs.screenshot('ssh-errors-1-edit-host');
    await page.keyboard.press('Escape');
  },
);
