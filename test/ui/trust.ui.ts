import * as assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { scenario, TEST_SSH_HOST } from './harness';

/*
 * Issue 31, item 11: a folder the person has not trusted (VS Code's Restricted Mode) cannot make Known Good run
 * anything. Its .vscode/settings.json names a benchmark command, an interpreter for This machine, and a host whose
 * python and container prefix are programs: each writes a marker file when run. In Restricted Mode the extension is
 * active and browses (This machine and the folder's host list, listed with python3), Run My Benchmark Command refuses
 * and offers Manage Workspace Trust, and no marker is written. Once the folder is trusted, the same settings do run:
 * the markers appear (so the test would see them if Restricted Mode let them through). On the code before workspace
 * trust it fails at the first check: This machine's listing ran the folder's localPython. (The harness loads the
 * extension as one under development, which VS Code never disables for trust, so what an installed copy without
 * `capabilities.untrustedWorkspaces` did, being disabled, is not what this scenario sees; the unit test checks that.)
 */

/** A program that notes it ran in `marker`, then runs what it was given (an interpreter or a prefix). */
function markerScript(path: string, marker: string, then: string): string {
  writeFileSync(path, `#!/bin/sh\necho "$0 $*" >> '${marker}'\nexec ${then} "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

/** A run with one step, so a listed root shows a row that only a probe can have found. */
function runFolder(root: string, run: string): void {
  mkdirSync(join(root, run, 'step_100'), { recursive: true });
  writeFileSync(join(root, run, 'step_100', 'checkpoint.pt'), Buffer.alloc(2048));
}

const markers = (tmp: string) => ({
  bench: join(tmp, 'ran-benchmark-command'),
  localPython: join(tmp, 'ran-local-python'),
  hostPython: join(tmp, 'ran-host-python'),
  container: join(tmp, 'ran-container-prefix'),
});

async function waitForFile(page: Page, path: string): Promise<void> {
  for (let i = 0; i < 240 && !existsSync(path); i++) await page.waitForTimeout(250);
  assert.ok(existsSync(path), `${path} was never written`);
}

/** Answers the quick pick whose placeholder matches with the first item matching `text`. */
async function pick(page: Page, placeholder: RegExp, text: string): Promise<void> {
  await page.waitForFunction(
    (re) =>
      new RegExp(re).test(document.querySelector<HTMLInputElement>('.quick-input-widget input')?.placeholder ?? ''),
    placeholder.source,
    { timeout: 30_000 },
  );
  await page.locator('.quick-input-widget input').fill(text);
  await page.locator('.quick-input-list .monaco-list-row').first().waitFor();
  await page.keyboard.press('Enter');
}

/** Drags the side bar's edge so the host rows' descriptions (where Restricted Mode is said) show whole. */
async function widenSideBar(page: Page): Promise<void> {
  const box = await page.locator('#workbench\\.parts\\.sidebar').boundingBox();
  if (!box) return;
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width + 420, y, { steps: 5 });
  await page.mouse.up();
}

/** Lets finite animations (a toast sliding in) end, so a screenshot shows the toast, not its fade. */
async function settled(page: Page): Promise<void> {
  await page.evaluate(() =>
    Promise.all(
      document
        .getAnimations()
        .filter((a) => a.effect?.getComputedTiming().iterations !== Infinity)
        .map((a) => a.finished.catch(() => undefined)),
    ),
  );
}

scenario(
  "Restricted Mode: the extension browses, and runs nothing the folder's settings name until it is trusted",
  {
    timeoutMs: 240_000,
    restrictedMode: true,
    settings: { 'terminal.integrated.gpuAcceleration': 'off' },
    // the test sshd as a host of the folder's own list, with a python and a container prefix that mark
    sshHost: {
      inSettings: 'workspace',
      entry: (tmp) => {
        const m = markers(tmp);
        mkdirSync(join(tmp, 'bin'), { recursive: true });
        return {
          python: markerScript(join(tmp, 'bin', 'host-python'), m.hostPython, 'python3'),
          container: { kind: 'custom', command: markerScript(join(tmp, 'bin', 'prefix'), m.container, '') },
        };
      },
    },
    workspaceSettings: ({ tmp }) => {
      const m = markers(tmp);
      const localRoot = join(tmp, 'local-runs');
      runFolder(localRoot, 'run-local');
      runFolder(join(tmp, 'ssh-runs'), 'run-remote');
      return {
        'knownGood.localRoots': [localRoot],
        'knownGood.localPython': markerScript(join(tmp, 'bin', 'local-python'), m.localPython, 'python3'),
        'knownGood.benchmark.command': `echo ran >> '${m.bench}'; echo '1000 tok/s'`,
        'knownGood.benchmark.throughputRegex': '(\\d+) tok/s',
      };
    },
  },
  async (vs) => {
    const m = markers(vs.tmp);
    await vs.openView('Known Good');
    await vs.treeItem('This machine').waitFor();

    // Browsing works: both hosts list their roots, with python3 and no prefix, not the folder's programs.
    await vs.expand('This machine');
    await vs.treeItem(/^run-local/).waitFor();
    await vs.expand(TEST_SSH_HOST);
    await vs.treeItem(/^run-remote/).waitFor();
    for (const path of [m.localPython, m.hostPython, m.container]) assert.equal(existsSync(path), false, `${path} ran`);
    await widenSideBar(vs.page);
    await vs
      .treeItem(new RegExp(`^${TEST_SSH_HOST}, .*Restricted Mode: the folder's python, container not used`))
      .waitFor();

    // Running the folder's benchmark command is refused, with the way to trust the folder.
    await vs.commandPalette('Known Good: Run My Benchmark Command');
    const toast = vs.page.locator('.notification-toast', { hasText: 'Restricted Mode' });
    await toast.waitFor({ timeout: 30_000 });
    assert.match((await toast.textContent()) ?? '', /knownGood\.benchmark\.command/);
    const manage = toast.getByRole('button', { name: 'Manage Workspace Trust' });
    await manage.waitFor();
    await settled(vs.page);
    await vs.screenshot('trust-restricted-mode');
    // Everything the folder's settings name as a program was asked for above, and none of it ran.
    for (const path of Object.values(m)) assert.equal(existsSync(path), false, `${path} ran`);

    // Trusting the folder lets its settings apply: the same programs now run (the markers can be written).
    await manage.click();
    const editor = vs.page.locator('.workspace-trust-editor');
    await editor.waitFor({ timeout: 30_000 });
    await editor
      .getByRole('button', { name: /^Trust/ })
      .first()
      .click();
    // the host row now shows the folder's container and no Restricted Mode note
    await vs.treeItem(new RegExp(`^${TEST_SSH_HOST}, \\S+ · container(?!.*Restricted)`)).waitFor();
    await waitForFile(vs.page, m.hostPython);
    await waitForFile(vs.page, m.container);
    await vs.commandPalette('Known Good: Run My Benchmark Command');
    await pick(vs.page, /on which host/, 'This machine');
    await waitForFile(vs.page, m.bench);
    // knownGood.localPython is application-scoped: a folder never chooses this machine's interpreter, trusted or not
    assert.equal(existsSync(m.localPython), false);
    await settled(vs.page);
    await vs.screenshot('trust-trusted');
  },
);
