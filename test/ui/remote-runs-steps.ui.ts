import * as assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { scenario, TEST_SSH_HOST } from './harness';

const base = join(process.env['TMPDIR'] ?? '/tmp', `kg-ui-steps-${process.pid}`);
const root = join(base, 'checkpoints');
// step_9 < step_600 < step_690 < step_1000 as numbers, not as text; sizes differ so each row shows its own.
const steps = [9, 600, 690, 1000];
for (const s of steps) {
  mkdirSync(join(root, 'run-a', `step_${s}`), { recursive: true });
  writeFileSync(
    join(root, 'run-a', `step_${s}`, 'checkpoint.pt'),
    Buffer.alloc(1024 * (s === 1000 ? 300 : 20 + s / 10)),
  );
}
writeFileSync(join(root, 'run-a', 'train_log.jsonl'), '{"step": 1, "loss": 2.5}\n');

scenario(
  'Remote Runs: steps of an SSH root in numeric order with sizes; an unreachable host shows its error and Retry',
  {
    sshHost: { roots: [root] },
    settings: {
      'knownGood.connectTimeoutSeconds': 5,
      'knownGood.hosts': [
        { name: 'unreachable-box', host: '127.0.0.1', port: 1, user: 'nobody', roots: ['/workspace/checkpoints'] },
      ],
    },
  },
  async (vs) => {
    await vs.openView('Known Good');
    await vs.expand(TEST_SSH_HOST);
    await vs.treeItem(root).waitFor();
    await vs.expand(/^run-a/);
    const stepRow = (s: number) => vs.treeItem(new RegExp(`^step_${s}\\b`));
    for (const s of steps) await stepRow(s).waitFor();
    const labels = await vs.page
      .locator('#workbench\\.parts\\.sidebar')
      .getByRole('treeitem')
      .evaluateAll((els) => els.map((e) => e.getAttribute('aria-label') ?? e.textContent ?? ''));
    const order = labels.filter((l) => /^step_\d+/.test(l)).map((l) => Number(/^step_(\d+)/.exec(l)![1]));
    assert.deepEqual(order, [1000, 690, 600, 9], `rows: ${JSON.stringify(labels)}`);
    const text690 = (await stepRow(690).textContent()) ?? '';
    assert.match(text690, /step 690 · 89(\.0)? KB/, text690);
    assert.match((await stepRow(1000).textContent()) ?? '', /300(\.0)? KB/);

    await vs.expand('unreachable-box');
    const error = vs.treeItem(/refused the connection/);
    await error.waitFor({ timeout: 30_000 });
    await error.hover();
    await error.getByRole('button', { name: 'Retry' }).waitFor();
    await vs.screenshot('remote-runs-steps');
  },
);
