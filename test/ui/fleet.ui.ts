import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { onInterrupt } from '../../scripts/vscode/server';
import { TORCH_PYTHON } from '../support/require';
import { startSlurm, type TestSlurm } from '../support/slurm';
import { scenario, TEST_SSH_HOST } from './harness';

// A real 3-node Slurm cluster on this machine (test/support/slurm.ts), reached through the test sshd as the login
// node. n2 is the odd one out as sites make one: its tasks get an NCCL variable and a PYTHONPATH with a package of
// its own (the cluster's TaskProlog), as in test/int/fleet.int.test.ts.

let slurm: TestSlurm | undefined;
let job = '';
const dir = mkdtempSync(join(tmpdir(), 'kg-ui-fleet-'));
/** The test host's settings entry: filled in once the cluster is up (the scenario reads it when it starts). */
const entry: Record<string, unknown> = { python: TORCH_PYTHON };

before(async () => {
  const site = join(dir, 'n2-site');
  mkdirSync(join(site, 'fakepkg-2.0.dist-info'), { recursive: true });
  writeFileSync(
    join(site, 'fakepkg-2.0.dist-info', 'METADATA'),
    'Metadata-Version: 2.1\nName: fakepkg\nVersion: 2.0\n',
  );
  const started = await startSlurm({ nodes: 3, nodeEnv: { n2: { NCCL_SOCKET_IFNAME: 'eth9', PYTHONPATH: site } } });
  slurm = started;
  onInterrupt(() => started.stop());
  entry['slurm'] = { conf: started.conf };
  job = await started.submit(3, 900);
});

after(async () => {
  try {
    await slurm?.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

scenario(
  'Slurm under the login node lists the job; Compare Nodes on it opens the matrix that names n2 and its fields',
  { sshHost: { entry }, timeoutMs: 240_000 },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.expand(TEST_SSH_HOST);
    // The host re-renders when its listing arrives; a click that lands on the old row is lost: try once more.
    await vs.expand('Slurm').catch(() => vs.expand('Slurm'));
    const jobRow = new RegExp(`^${job} wrap, RUNNING · 3 nodes`);
    await vs
      .treeItem(jobRow)
      .waitFor({ timeout: 30_000 })
      .catch(async (e: unknown) => {
        const rows = await page
          .getByRole('treeitem')
          .evaluateAll((els) => els.map((el) => el.getAttribute('aria-label')));
        throw new Error(`no row for job ${job}; rows: ${JSON.stringify(rows)}`, { cause: e });
      });
    await vs.expand(jobRow);
    await vs.treeItem(/^n2, not compared yet/).waitFor();
    await vs.expand(/^Nodes, sinfo/);
    await vs.treeItem(/^n3, (mixed|allocated) · debug\*/).waitFor();

    await vs.contextMenu(jobRow, 'Compare Nodes');
    await page.getByRole('tab', { name: new RegExp(`job ${job} nodes`) }).waitFor({ timeout: 90_000 });
    const editor = page.locator('.editor-instance .monaco-editor .view-lines').first();
    // (Monaco draws spaces as U+00A0: \W matches both.)
    await editor.getByText(/odd\W+one\W+out:\W+n2\W+\(4\W+fields/).waitFor({ timeout: 30_000 });
    await editor.getByText(/@@\W+env\.NCCL_SOCKET_IFNAME\W+@@/).waitFor();
    await editor.getByText(/\+\W+eth9\W+1\/3\W+n2/).waitFor();
    const text = (await editor.textContent())?.replace(/\u00a0/g, ' ') ?? '';
    assert.match(text, new RegExp(`Compare Nodes: job ${job} on ${TEST_SSH_HOST}, 3 nodes answered`));
    assert.match(text, /packages\.fakepkg/);
    // The job's node rows now say where each stands.
    await vs.treeItem(/^n2, differs: env\.NCCL_SOCKET_IFNAME, env\.PYTHONPATH/).waitFor({ timeout: 15_000 });
    await vs.treeItem(/^n1, agrees with the majority/).waitFor();
    await vs.page.mouse.move(900, 700);
    await vs.screenshot('fleet-matrix');

    // An odd node's row opens the usual environment diff: the most typical node (the majority) ↔ n2.
    await vs.treeItem(/^n2, differs/).click();
    const diff = page.locator('.monaco-diff-editor');
    await diff.waitFor({ timeout: 30_000 });
    await page.getByRole('tab', { name: new RegExp(`job ${job}: n1 \\(majority\\) ↔ n2`) }).waitFor();
    // The diff opens at the first change: n2's own package.
    await diff
      .locator('.modified-in-monaco-diff-editor .view-lines')
      .getByText(/packages\.fakepkg\W+2\.0/)
      .first()
      .waitFor();
    await vs.page.mouse.move(900, 700);
    await vs.screenshot('fleet-node-vs-majority');

    // From the matrix's title bar: a quick pick of the job's nodes, the odd one first.
    await page.getByRole('tab', { name: new RegExp(`job ${job} nodes`) }).click();
    await page
      .locator('.editor-actions')
      .getByRole('button', { name: /Compare Node with Majority/ })
      .first()
      .click();
    const first = page.locator('.quick-input-list .monaco-list-row').first();
    await first.waitFor();
    assert.match((await first.textContent()) ?? '', /^n2.*differs: env\.NCCL_SOCKET_IFNAME/);
    await vs.screenshot('fleet-pick-node');
    await page.keyboard.press('Escape');
  },
);
