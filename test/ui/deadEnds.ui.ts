import * as assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scenario } from './harness';

/*
 * Issue 15, item 7: a dead end names the way forward. The benchmark on an interpreter without torch says which
 * command and which setting choose another one, in the terminal where it ran (not a bare "not installed").
 */

// Debian's python3 without its site-packages (-S): the interpreter a user picked by mistake, torch not importable.
const dir = mkdtempSync(join(tmpdir(), 'kg-ui-notorch-'));
const noTorch = join(dir, 'python3');
writeFileSync(noTorch, '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n');
chmodSync(noTorch, 0o755);

scenario(
  'Dead end: the benchmark on an interpreter without torch names Select Remote Python and the setting',
  {
    timeoutMs: 180_000,
    settings: {
      'terminal.integrated.gpuAcceleration': 'off',
      'knownGood.localPython': noTorch,
      'knownGood.localRoots': ['/tmp'],
    },
  },
  async (vs) => {
    await vs.openView('Known Good');
    await vs.treeItem('This machine').waitFor();
    await vs.commandPalette('Known Good: Run Throughput Benchmark');
    const input = vs.page.locator('.quick-input-widget input');
    // The only host is taken without asking; then the configuration.
    for (const [placeholder, text] of [[/Benchmark configuration/, 'Tiny (CPU)']] as const) {
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
    let text = '';
    for (let i = 0; i < 240 && !/Select Remote Python/.test(text); i++) {
      await vs.page.waitForTimeout(250);
      text = (await vs.page.locator('.xterm-rows > div').allTextContents()).join('\n');
    }
    assert.match(text, /torch is not installed for \/usr\/bin\/python3/, text);
    assert.match(text.replace(/\s+/g, ' '), /Known Good: Select Remote Python/, text);
    assert.match(text.replace(/\s+/g, ' '), /knownGood\.localPython/, text);
    await vs.screenshot('dead-end-no-torch');
  },
);
