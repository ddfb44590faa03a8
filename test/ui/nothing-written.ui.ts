import * as assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { scenario, TEST_SSH_HOST, writeDemoCheckpoint } from './harness';

/** Every path under `dir` with its size and mtime: what "unchanged" means for a checkpoint root. */
function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p);
      out.push(`${relative(dir, p)} ${st.isDirectory() ? 'dir' : st.size} ${st.mtimeMs}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

/** A root served by the test sshd: one run, and the tooling folders a real one holds (a checkout, bytecode). */
const root = mkdtempSync(join(tmpdir(), 'kg-ui-nothing-written-'));
writeDemoCheckpoint(join(root, 'run-a', 'step_100'), 100, { batch_size: 32, model: 'gpt-small', lr: 3e-4 });
for (const d of ['.git/objects/12', '__pycache__', 'run-a/.hydra']) mkdirSync(join(root, d), { recursive: true });
writeFileSync(join(root, '.git', 'HEAD'), 'ref: refs/heads/main\n');
writeFileSync(join(root, '__pycache__', 'train.cpython-311.pyc'), '');

scenario(
  'Capture with default settings writes nothing in the checkpoint root; .git and __pycache__ are no runs; the … menu',
  { sshHost: { roots: [root] }, timeoutMs: 180_000 },
  async (vs) => {
    const { page, sshd } = vs;
    assert.ok(sshd);
    await vs.openView('Known Good');

    // The view's "…" menu: the useful entries, in groups.
    await page.locator('#workbench\\.parts\\.sidebar .composite.title .codicon-toolbar-more').first().click();
    const menu = page.getByRole('menu');
    for (const entry of [
      'Add Host…',
      'Refresh',
      'Capture Environment Baseline',
      'Open Dashboard',
      'What Changed?',
      'Show Log',
    ])
      await menu.getByRole('menuitem', { name: entry }).first().waitFor({ timeout: 15_000 });
    await vs.screenshot('nothing-written-0-view-menu');
    await page.keyboard.press('Escape');

    await vs.expand(TEST_SSH_HOST);
    await vs.expand(root);
    await vs.treeItem(/^run-a/).waitFor({ timeout: 60_000 });
    // Listed: the run; never listed: the checkout and the bytecode folders.
    assert.equal(await vs.row('.git').count(), 0, '.git is listed');
    assert.equal(await vs.row('__pycache__').count(), 0, '__pycache__ is listed');
    await vs.screenshot('nothing-written-1-tree');

    const before = snapshot(root);
    await vs.commandPalette('Known Good: Capture Environment Baseline');
    const widget = page.locator('.quick-input-widget');
    await widget.locator('.quick-input-list .monaco-list-row', { hasText: TEST_SSH_HOST }).first().click();
    await widget.locator('.quick-input-title', { hasText: /Capture Environment Baseline/ }).waitFor();
    await widget.locator('.quick-input-box input').fill('ui default settings');
    await page.keyboard.press('Enter');
    // Saved: listed under the host's Baselines (the local store).
    await vs.expand('Baselines');
    await vs.treeItem(/^ui default settings/).waitFor({ timeout: 90_000 });
    await vs.screenshot('nothing-written-2-captured');

    // The root, listed over the real sshd before and after, is the same file for file; the host's home got nothing.
    assert.deepEqual(snapshot(root), before);
    assert.equal(existsSync(join(sshd.home, '.known-good')), false, 'a copy was written in the host home unasked');
  },
);
