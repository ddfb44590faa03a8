import * as assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scenario } from './harness';

/*
 * Issue 36 item 4e: a benchmark result the terminal says is "kept with the baselines" shows under Baselines in
 * Remote Runs, without a refresh. Run My Benchmark Command on This machine (its throughput read from the output by
 * the regex): the host's open Baselines, empty before, lists the result with its tokens/s.
 */

const root = mkdtempSync(join(tmpdir(), 'kg-ui-bench-results-'));

scenario(
  'A benchmark result kept with the baselines shows under Baselines',
  {
    localRoots: [root],
    settings: {
      'knownGood.benchmark.command': "echo 'step 1: 1234 tok/s'",
      'knownGood.benchmark.throughputRegex': '(\\d+) tok/s',
      'terminal.integrated.gpuAcceleration': 'off',
    },
    timeoutMs: 180_000,
  },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.expand('This machine');
    await vs.expand('Baselines');
    await vs.treeItem(/^No baselines yet/).waitFor({ timeout: 60_000 });

    await vs.commandPalette('Known Good: Run My Benchmark Command');
    // asked for a host only when there is a choice
    const input = page.locator('.quick-input-widget input');
    if (await input.isVisible()) {
      const placeholder = (await input.getAttribute('placeholder')) ?? '';
      if (/on which host/.test(placeholder)) {
        await input.fill('This machine');
        await page.locator('.quick-input-list .monaco-list-row').first().waitFor();
        await page.keyboard.press('Enter');
      }
    }
    await page.waitForFunction(
      () => /kept with the baselines of This machine/.test(document.querySelector('.xterm-rows')?.textContent ?? ''),
      undefined,
      { timeout: 90_000 },
    );
    const result = vs.treeItem(/^1\.2K tok\/s \(own command\)/);
    await result.waitFor({ timeout: 30_000 });
    assert.match((await result.locator('.label-description').textContent()) ?? '', /^1\.2K tok\/s · /);
    assert.equal(await vs.treeItem(/^No baselines yet/).count(), 0);
    await vs.screenshot('bench-result-under-baselines');
  },
);
