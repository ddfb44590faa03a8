import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { trainLogLine, trainLogPoints } from '../../scripts/demo/trainLog';
import { rowMenu, scenario, TEST_SSH_HOST, writeDemoCheckpoint } from './harness';

/** A run with one checkpoint (step_100/checkpoint.pt with its args), as the demo lays them out. */
function writeRun(root: string, steps: [number, number][] = [[100, 3e-4]]): void {
  for (const [step, lr] of steps) {
    writeDemoCheckpoint(join(root, 'run-a', `step_${step}`), step, { batch_size: 32, model: 'gpt-small', lr });
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
    await q.step(/Add Host \(1\/6\)/, 'trainbox', () =>
      widget(page).locator('.monaco-list-row', { hasText: 'trainbox' }).waitFor(),
    );
    // The name step offers the alias.
    await q.step(/Add Host \(2\/6\): name/, undefined, async () => {
      assert.equal(await widget(page).locator('.quick-input-box input').inputValue(), 'trainbox');
    });
    await q.step(/Add Host \(3\/6\): key/, 'id_other', async () => {
      await widget(page).locator('.monaco-list-row', { hasText: 'Use the SSH agent' }).waitFor();
      await vs.screenshot('first-contact-0-key-step');
    });
    await q.step(/Add Host \(4\/6\)/);
    await q.step(/Add Host \(5\/6\)/);
    await q.step(/Add Host \(6\/6\)/, sshRoot);

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
    const error = vs.treeItem(/refused (the|every) key offered/);
    await error.waitFor({ timeout: 60_000 });
    await vs.screenshot('first-contact-2-wrong-key');

    // Edit Host… on the error row: the wizard again, filled in; pick the right key.
    await rowMenu(page, error, page.getByRole('menuitem', { name: /^Edit Host/ }));
    await q.step(/Edit Host \(1\/6\)/);
    await q.step(/Edit Host \(2\/6\): name/);
    await q.step(/Edit Host \(3\/6\): key/, 'id_test');
    await q.step(/Edit Host \(4\/6\)/);
    await q.step(/Edit Host \(5\/6\)/);
    await q.step(/Edit Host \(6\/6\)/);
    // No reload: the host connects again with the new key and lists its root.
    await vs.treeItem(sshRoot).waitFor({ timeout: 90_000 });
    console.log(`[timing] first contact to listed root, wrong key fixed by Edit Host (sshd): ${Date.now() - t0} ms`);
    await vs.expand(sshRoot);
    await vs.treeItem(/^run-a/).waitFor({ timeout: 30_000 });
    assert.equal(await error.count(), 0);
    await vs.screenshot('first-contact-3-listed');
  },
);

/** Two runs with a step_600 each (run-a's lr differs at step_690), run-a with a training log for the dashboard. */
const tabsRoot = mkdtempSync(join(tmpdir(), 'kg-ui-tabs-'));
writeRun(tabsRoot, [
  [600, 3e-4],
  [690, 1.5e-4],
]);
mkdirSync(join(tabsRoot, 'run-b'));
renameSync(join(tabsRoot, 'run-a', 'step_600'), join(tabsRoot, 'run-b', 'step_600'));
writeRun(tabsRoot, [[600, 3e-4]]);
writeFileSync(
  join(tabsRoot, 'run-a', 'train_log.jsonl'),
  trainLogPoints({ steps: 800, seed: 7, changedAfter: 690 }).map(trainLogLine).join('\n') + '\n',
);

scenario(
  'Tabs: Select for Compare marks its row, Show Changed Args Only opens beside the diff, same-named compares get two titles; a settings write keeps rows open',
  { localRoots: [tabsRoot], sshHost: { roots: [tabsRoot] }, timeoutMs: 300_000 },
  async (vs) => {
    const { page } = vs;
    const side = page.locator('#workbench\\.parts\\.sidebar');
    const row = vs.row;
    // A redraw (a listing arriving) can swallow a click: click again (three tries), reading the state each time so
    // an expanded row is never toggled shut (as the harness's expand does).
    const open = async (label: string) => {
      const r = row(label);
      await r.waitFor({ timeout: 90_000 });
      for (let attempt = 1; ; attempt++) {
        if ((await r.getAttribute('aria-expanded')) === 'true') return;
        await r.locator('.label-name').click();
        const expanded = await page
          .waitForFunction((el) => el?.getAttribute('aria-expanded') === 'true', await r.elementHandle(), {
            timeout: 10_000,
          })
          .then(
            () => true,
            () => false,
          );
        if (expanded) return;
        if (attempt >= 3) throw new Error(`tree row ${label} did not expand after ${attempt} clicks`);
      }
    };
    const menu = (label: string, command: RegExp, nth = 0) =>
      rowMenu(page, row(label).nth(nth), page.getByRole('menuitem', { name: command }));
    const tab = (text: string) => page.locator('.tabs-container .tab', { hasText: text });
    /** From the click (a row's, or a menu entry's: `action` returns when it clicked) to the document on screen. */
    const timed = async (what: string, action: () => Promise<unknown>, visible: () => Promise<unknown>) => {
      const before = Date.now();
      const clicked = await action();
      const t0 = typeof clicked === 'number' ? clicked : before;
      await visible();
      console.log(`[timing] ${what}: ${Date.now() - t0} ms`);
    };

    await vs.openView('Known Good');
    for (const [where, host] of [
      ['This machine', 'This machine'],
      ['sshd', TEST_SSH_HOST],
    ] as const) {
      await open(host);
      await open(tabsRoot);
      await open('run-a');
      await open('run-b');
      await timed(
        `open args (${where})`,
        () => row('step_690').click(),
        () => tab('step_690 args').first().waitFor({ timeout: 60_000 }),
      );
      await menu('step_600', /^Select for Compare/);
      // The selected row says so (and only it).
      await row('step_600').filter({ hasText: 'selected for compare' }).waitFor({ timeout: 15_000 });
      const hostName = where === 'sshd' ? TEST_SSH_HOST : 'This machine';
      await timed(
        `compare with selected (${where})`,
        () => menu('step_690', /^Compare with Selected/),
        () => tab(`args: step_600 ↔ step_690 (${hostName}/run-a)`).waitFor({ timeout: 60_000 }),
      );
      if (where === 'This machine') {
        // run-b's step_600 against run-a's: one checkpoint name, so the runs name the sides (and the tab)
        await menu('step_600', /^Select for Compare/, 1);
        await row('step_600').nth(1).filter({ hasText: 'selected for compare' }).waitFor({ timeout: 15_000 });
        assert.equal(await row('step_600').filter({ hasText: 'selected for compare' }).count(), 1);
        await menu('step_600', /^Compare with Selected/, 0);
        await tab(`args: run-b/step_600 ↔ run-a/step_600 (${hostName})`).waitFor({ timeout: 60_000 });
      }
      if (where === 'This machine') await vs.screenshot('tabs-1-selected-and-diff');
      await timed(
        `first plot of the dashboard (${where})`,
        () => menu('run-a', /^Open Dashboard/),
        () =>
          page
            .frameLocator('iframe.webview.ready >> nth=-1')
            .frameLocator('#active-frame')
            .locator('.kg-plot canvas')
            .first()
            .waitFor({ timeout: 90_000 }),
      );
      // collapse the host for the next one: the same labels are under both
      await side.locator('[role=treeitem][aria-level="1"]', { hasText: host }).first().locator('.label-name').click();
    }

    // Show Changed Args Only from the diff: a tab of its own, the diff stays open.
    await open('This machine');
    await open('run-a');
    await menu('step_690', /^Show Changed Args Only/);
    await tab('changed args').first().waitFor({ timeout: 60_000 });
    assert.equal(
      (await tab('↔ run-a/step_690').or(tab('step_600 ↔ step_690 (')).count()) > 0,
      true,
      'the diff tab was replaced',
    );
    await vs.screenshot('tabs-2-changed-beside-diff');

    // A settings write for the sshd (Add Checkpoint Root) keeps This machine's expanded rows open.
    await menu(TEST_SSH_HOST, /^Add Checkpoint Root/);
    await page.locator('.quick-input-widget .quick-input-box input').fill(join(tabsRoot, 'run-b'));
    await page.keyboard.press('Enter');
    await side.locator('[role=treeitem][aria-level="1"]', { hasText: TEST_SSH_HOST }).first().waitFor();
    await page.waitForTimeout(2000);
    assert.equal(
      await row('run-a').first().getAttribute('aria-expanded'),
      'true',
      'run-a collapsed after a settings write',
    );
    await row('step_690').first().waitFor();
    await vs.screenshot('tabs-3-expanded-after-settings-write');
  },
);

scenario(
  'Terminals: a second probe of the same kind on the same host runs in the terminal of the first once it has ended',
  {
    localRoots: [tabsRoot],
    settings: { 'terminal.integrated.gpuAcceleration': 'off', 'knownGood.localPython': '/usr/bin/python3' },
  },
  async (vs) => {
    const { page } = vs;
    const rows = () => page.locator('.xterm-rows > div').allTextContents();
    await vs.openView('Known Good');
    for (let i = 1; i <= 2; i++) {
      await vs.commandPalette('Known Good: Run Probe');
      await widget(page).locator('.monaco-list-row', { hasText: 'GPU status' }).first().waitFor();
      await widget(page).locator('.quick-input-box input').fill('GPU status');
      await page.keyboard.press('Enter');
      // the second run: under a rule drawn below the first run's output, in the same terminal
      const done = i === 1 ? 'Process exited with code 0' : '─{20,}[\\s\\S]*Process exited with code 0';
      await page.waitForFunction(
        (re) => new RegExp(re).test(document.querySelector('.xterm-rows')?.textContent ?? ''),
        done,
        { timeout: 90_000 },
      );
    }
    // one terminal for GPU status @ This machine: no "(2)" beside it
    assert.equal(await page.getByText('Known Good: GPU status @ This machine (2)').count(), 0);
    assert.match((await rows()).join('\n'), /Press any key to close this terminal/);
    await vs.screenshot('terminal-reused');
  },
);
