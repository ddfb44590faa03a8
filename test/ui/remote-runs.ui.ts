import * as assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { scenario, TEST_SSH_HOST } from './harness';

const localRoot = join(process.env['TMPDIR'] ?? '/tmp', 'kg-ui-remote-runs', 'local-checkpoints');
mkdirSync(localRoot, { recursive: true });

scenario(
  'Known Good view lists This machine and the test SSH host with their roots',
  { localRoots: [localRoot], sshHost: true },
  async (vs) => {
    await vs.openView('Known Good');
    const hosts = vs.page.locator('#workbench\\.parts\\.sidebar').getByRole('treeitem');
    await vs.treeItem('This machine').waitFor();
    await vs.treeItem(TEST_SSH_HOST).waitFor();
    // Top-level order: This machine first, then the settings host.
    const top = await hosts.evaluateAll((els) =>
      els.filter((e) => e.getAttribute('aria-level') === '1').map((e) => e.textContent ?? ''),
    );
    assert.equal(top.length, 2, `top-level rows: ${JSON.stringify(top)}`);
    assert.match(top[0]!, /^This machine/);
    assert.match(top[1]!, new RegExp(`^${TEST_SSH_HOST}`));

    await vs.expand('This machine');
    await vs.treeItem(localRoot).waitFor();
    await vs.expand(TEST_SSH_HOST);
    const sshRoot = join(vs.tmp, 'ssh-runs');
    await vs.treeItem(sshRoot).waitFor();
    assert.equal(await vs.treeItem(sshRoot).getAttribute('aria-level'), '2');
    await vs.screenshot('remote-runs');
  },
);
