import * as assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { scenario, TEST_SSH_HOST, type Workbench } from './harness';

/*
 * Run Probe… and the throughput benchmark as a person uses them: palette, quick picks, the terminal's text (the
 * DOM renderer, so the rows are readable), the comparison document.
 */

async function pick(vs: Workbench, placeholder: RegExp, text: string): Promise<void> {
  const input = vs.page.locator('.quick-input-widget input');
  await vs.page.waitForFunction(
    (re) =>
      new RegExp(re).test(document.querySelector<HTMLInputElement>('.quick-input-widget input')?.placeholder ?? ''),
    placeholder.source,
    { timeout: 30_000 },
  );
  await input.fill(text);
  await vs.page.locator('.quick-input-list .monaco-list-row').first().waitFor();
  await vs.page.keyboard.press('Enter');
}

/** The text of the terminals' rows (each row of xterm's DOM renderer is one element). */
async function terminalText(page: Page): Promise<string> {
  return (await page.locator('.xterm-rows > div').allTextContents()).join('\n');
}

async function waitForTerminal(page: Page, re: RegExp, timeoutMs = 90_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  let text = '';
  while (Date.now() < until) {
    text = await terminalText(page);
    if (re.test(text)) return text;
    await page.waitForTimeout(250);
  }
  throw new Error(`terminal never showed ${re}; it shows:\n${text}`);
}

scenario(
  'Run Probe… shows a probe in a terminal named after it; the benchmark result is kept and compared',
  {
    sshHost: true,
    timeoutMs: 300_000,
    settings: {
      // The DOM renderer: xterm's rows are then elements whose text can be read.
      'terminal.integrated.gpuAcceleration': 'off',
      // Debian's torch for the benchmark on This machine.
      'knownGood.localPython': '/usr/bin/python3',
      'knownGood.localRoots': ['/tmp'],
    },
  },
  async (vs) => {
    await vs.openView('Known Good');
    await vs.treeItem(TEST_SSH_HOST).waitFor();

    await vs.commandPalette('Known Good: Run Probe');
    await pick(vs, /on which host/, TEST_SSH_HOST);
    await pick(vs, /Run which probe/, 'GPU status');
    await vs.page.getByText(`Known Good: GPU status @ ${TEST_SSH_HOST}`).first().waitFor({ timeout: 30_000 });
    const probeText = await waitForTerminal(vs.page, /Process exited with code 0/);
    assert.match(probeText, /\$ python3 -u -c <loader> <python\/gpu_status\.py/);
    assert.match(probeText, /nvidia-smi not found/);
    assert.match(probeText, /result captured: \d+ B of JSON/);
    assert.match(probeText, /── GPU status ──/);
    assert.doesNotMatch(probeText, /KNOWN-GOOD-BEGIN/);
    await vs.screenshot('terminal-run-probe');
    await vs.commandPalette('View: Toggle Maximized Panel');

    for (let i = 0; i < 2; i++) {
      await vs.commandPalette('Known Good: Run Throughput Benchmark');
      await pick(vs, /on which host/, 'This machine');
      await pick(vs, /Benchmark configuration/, 'Tiny (CPU)');
      const text = await waitForTerminal(vs.page, /kept with the baselines of This machine/, 150_000);
      // Step lines may have scrolled out of the rendered rows; the extension-host test checks them in the buffer.
      assert.match(text, /── throughput ──\n[\d.]+K? tok\/s \(median/);
      assert.match(text, /Press any key to close this terminal/);
      if (i === 1) break;
      await vs.screenshot('terminal-bench');
      // One result kept: Compare says there is nothing to compare it with yet, as information, not as an error.
      await vs.commandPalette('Notifications: Clear All Notifications');
      await vs.commandPalette('Known Good: Compare Throughput with Baseline');
      await pick(vs, /of which host/, 'This machine');
      const toast = vs.page.locator('.notification-toast', { hasText: /Only one benchmark result for This machine/ });
      await toast.waitFor({ timeout: 30_000 });
      assert.equal(await toast.locator('.codicon-error').count(), 0, 'shown as an error');
      assert.equal(await toast.locator('.codicon-info').count(), 1, 'not shown as information');
      // (Toasts stack: the notification centre shows it whole, with its icon.)
      await vs.commandPalette('Notifications: Show Notifications');
      await vs.page
        .locator('.notifications-center .notification-list-item', { hasText: /Only one benchmark result/ })
        .waitFor({ timeout: 15_000 });
      await vs.screenshot('terminal-bench-only-one');
      await vs.page.keyboard.press('Escape');
      // A key after the end closes the terminal: the next run's text is then the only "kept" on screen.
      await vs.page.locator('.xterm:visible').last().click();
      await vs.page.keyboard.press('x');
      await vs.page.waitForFunction(() => !/kept with the baselines/.test(document.body.innerText), undefined, {
        timeout: 15_000,
      });
    }
    await vs.screenshot('terminal-bench-second');

    await vs.commandPalette('Known Good: Compare Throughput with Baseline');
    await pick(vs, /of which host/, 'This machine');
    await pick(vs, /Compare ".*" \(.* tok\/s\) with/, 'tok/s');
    const editor = vs.page.locator('.editor-instance .view-lines').first();
    let docText = '';
    for (let i = 0; i < 120 && !/tok\/s now vs .* tok\/s at baseline/.test(docText); i++) {
      await vs.page.waitForTimeout(250);
      docText = ((await editor.textContent().catch(() => '')) ?? '').replace(/\u00a0/g, ' ');
    }
    assert.match(docText, /tok\/s now vs [\d.]+K? tok\/s at baseline ".*" \(\d+\.\d+×\)/);
    await vs.screenshot('terminal-bench-compare');
  },
);
