import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TORCH_PYTHON } from '../support/require';
import { scenario, type Workbench } from './harness';

// Issue 15 item 6, as the user met it: a baseline taken with the interpreter that has torch, then Select Remote
// Python picks a venv (no torch) whose launcher also sets NCCL_P2P_DISABLE and puts the venv first on PATH (as a
// site's module or conda activation does). Compare must say the interpreter switch first, show NCCL_P2P_DISABLE
// before the PATH entries (PATH as entries added, not one before/after block), say a compile cache that exists on
// both sides "grown", and count exactly the bullets it lists.

const dir = mkdtempSync(join(tmpdir(), 'kg-ui-drift-'));
const cache = join(dir, 'compile-cache');
mkdirSync(cache);
writeFileSync(join(cache, 'kernel-1.py'), '# compiled\n');

/** Types into the open quick input and accepts once a row with `rowText` is listed; returns when it pressed Enter. */
async function answer(vs: Workbench, text: string, rowText?: string): Promise<number> {
  const input = vs.page.locator('.quick-input-widget input');
  await input.waitFor();
  await input.fill(text);
  if (rowText)
    await vs.page
      .locator('.quick-input-list .monaco-list-row', { hasText: rowText })
      .first()
      .waitFor({ timeout: 120_000 });
  const at = Date.now();
  await vs.page.keyboard.press('Enter');
  return at;
}

/** A venv of Debian's python (no torch: no system site-packages) behind a launcher that sets what a site sets. */
function makeVenvWithLauncher(home: string): string {
  const venv = join(home, 'venv');
  execFileSync(TORCH_PYTHON, ['-m', 'venv', '--without-pip', venv]);
  const bin = join(venv, 'bin');
  const launcher = join(bin, 'python3');
  // python3 was a link to the base interpreter: keep it as python3-real; the launcher runs it (sys.executable is
  // then …/venv/bin/python3-real, the venv's own interpreter).
  renameSync(launcher, join(bin, 'python3-real'));
  writeFileSync(
    launcher,
    `#!/bin/sh\nexport NCCL_P2P_DISABLE=1\nexport PATH="${bin}:$PATH"\nexec "${bin}/python3-real" "$@"\n`,
  );
  chmodSync(launcher, 0o755);
  return launcher;
}

scenario(
  'Drift after Select Remote Python: the interpreter switch first, NCCL_P2P_DISABLE before PATH entries, a cache that grew, a count that matches the bullets',
  {
    localRoots: [dir],
    settings: { 'knownGood.localPython': TORCH_PYTHON, 'knownGood.env.cacheDirs': [cache] },
    timeoutMs: 300_000,
  },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.treeItem('This machine').waitFor();

    // Baseline with Debian's python3 (torch). This machine is the only host: no host pick.
    await vs.commandPalette('Known Good: Capture Environment Baseline');
    const input = page.locator('.quick-input-widget input');
    await page.waitForFunction(
      (el) => (el as HTMLInputElement | null)?.value.startsWith('baseline ') ?? false,
      await input.elementHandle(),
      { timeout: 30_000 },
    );
    await answer(vs, 'with torch');
    await page
      .getByText(/Saved baseline "with torch" of This machine/)
      .first()
      .waitFor({ timeout: 120_000 });

    // Select Remote Python: the venv under HOME is found (as ~/venv is on a GPU box) and picked.
    const launcher = makeVenvWithLauncher(vs.server.home);
    await vs.commandPalette('Known Good: Select Remote Python');
    await answer(vs, launcher, launcher);
    await page
      .getByText(new RegExp(`This machine now uses ${launcher.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`))
      .first()
      .waitFor({ timeout: 30_000 });
    writeFileSync(join(cache, 'kernel-2.py'), '# compiled again\n');

    await vs.commandPalette('Known Good: Compare Environment with Baseline');
    const picked = await answer(vs, 'with torch', 'with torch');
    const diff = page.locator('.monaco-diff-editor');
    await diff.waitFor({ timeout: 120_000 });
    await page.getByRole('tab', { name: /This machine: "with torch" ↔ now/ }).waitFor({ timeout: 60_000 });
    console.log(`[timing] compare environment (This machine): ${Date.now() - picked} ms`);
    await diff.locator('.modified-in-monaco-diff-editor .view-lines').click();
    await page.keyboard.press('Control+Home');
    await vs.screenshot('drift-1-diff-after-python-switch');

    await page.locator('.notifications-toasts').getByRole('button', { name: 'Show Summary' }).click();
    await page.getByRole('tab', { name: /Preview environment drift/ }).waitFor({ timeout: 30_000 });
    const preview = page.frameLocator('iframe.webview').last().frameLocator('iframe');
    await preview.getByRole('heading', { name: 'Environment drift' }).waitFor({ timeout: 30_000 });
    const bullets = (await preview.locator('li').allTextContents()).map((b) => b.replace(/\s+/g, ' ').trim());
    const head = ((await preview.locator('p strong').first().textContent()) ?? '').trim();
    await vs.screenshot('drift-2-summary-after-python-switch');

    // The headline counts exactly the bullets listed.
    const count = Number(/^(\d+) differences? between baseline "with torch"/.exec(head)?.[1]);
    assert.equal(count, bullets.length, `${head}\n${bullets.join('\n')}`);
    // The switch that explains the rest leads (torch's build did not swap: torch is simply gone).
    assert.match(bullets[0] ?? '', /^python: interpreter \/usr\/bin\/python3(\.\d+)? → .*\/venv\/bin\/python3-real/);
    // torch is gone with it: one fact, not each of its fields turned to "none".
    assert.match(bullets[1] ?? '', /^torch: not importable now \(was [\d.]+\S*\)$/, bullets.join('\n'));
    const pkgs = bullets.find((b) => b.startsWith('packages:')) ?? '';
    assert.match(pkgs, /removed .*torch/, bullets.join('\n'));
    // NCCL_P2P_DISABLE is said before the PATH entries, and PATH is shown as the entry it gained; the variables
    // say where they came from (a new process: not the resident helper's environment of the session's start).
    const env = bullets.find((b) => b.startsWith('env')) ?? '';
    assert.match(env, /^env of a new process on This machine: NCCL_P2P_DISABLE=1 added; PATH: \+\S*\/venv\/bin\b/, env);
    const sources = (await preview.locator('p', { hasText: /^Variables:/ }).textContent()) ?? '';
    assert.equal(
      sources.replace(/\s+/g, ' ').trim(),
      'Variables: baseline — a new process on This machine; now — a new process on This machine',
    );
    assert.ok(!/PATH: .*→/.test(env), `PATH shown as a before/after block: ${env}`);
    // The cache was on both sides: it has grown, it did not "appear".
    const caches = bullets.find((b) => b.startsWith('compile caches:')) ?? '';
    assert.match(caches, /custom1 grown \(1 → 2 files/, bullets.join('\n'));
  },
);
