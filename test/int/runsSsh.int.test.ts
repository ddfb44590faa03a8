import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { listRunsProbe } from '../../src/core/runs/listRuns';
import { childrenOf, rootNode } from '../../src/core/runs/model';
import { ContainerTransport } from '../../src/core/transport/container';
import { SshPool } from '../../src/core/transport/ssh';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { startSshd, type TestSshd } from '../support/sshd';

describe('checkpoint listing through the real sshd and through the container wrapper', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  const root = mkdtempSync(join(tmpdir(), 'kg-runs-ssh-'));
  const nasty = "step_7 with 'quotes' $(touch x) ünï";
  before(async () => {
    for (const s of [9, 10, 100, 690]) {
      mkdirSync(join(root, 'run-a', `step_${s}`), { recursive: true });
      writeFileSync(join(root, 'run-a', `step_${s}`, 'checkpoint.pt'), Buffer.alloc(s));
    }
    mkdirSync(join(root, 'run-b', nasty), { recursive: true });
    writeFileSync(join(root, 'run-b', nasty, 'checkpoint.pt'), 'x');
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
  });

  const check = async (runner: ProbeRunner) => {
    const r = await runner.run(listRunsProbe([root, join(root, 'missing')], { depth: 3 }));
    const [ok, missing] = r.value.roots;
    assert.equal(ok!.status, 'ok');
    assert.equal(missing!.status, 'missing');
    const runs = childrenOf(rootNode('h', ok!), { newestFirst: false });
    const runA = runs.find((n) => n.label === 'run-a')!;
    assert.deepEqual(
      childrenOf(runA, { newestFirst: false }).map((n) => n.label),
      ['step_9', 'step_10', 'step_100', 'step_690'],
    );
    const runB = runs.find((n) => n.label === 'run-b')!;
    assert.deepEqual(
      childrenOf(runB).map((n) => n.label),
      [nasty],
    );
  };

  test('over SSH through the resident helper', async () => {
    const runner = new ProbeRunner(pool.transport(endpointOf(sshd), 'test-sshd'), {
      python: 'python3',
      timeoutMs: 60000,
    });
    await check(runner);
    runner.dispose();
  });

  test('inside a container (pct stand-in on the remote PATH) over SSH', async () => {
    const pct = join(sshd.binDir, 'pct');
    writeFileSync(
      pct,
      '#!/bin/sh\n[ "$1" = exec ] && [ "$2" = 200 ] && [ "$3" = -- ] || { echo "pct: bad args" >&2; exit 64; }\nshift 3\nexec "$@"\n',
    );
    chmodSync(pct, 0o755);
    const ct = new ContainerTransport(
      pool.transport(endpointOf(sshd), 'gpu-box'),
      { kind: 'pct', id: '200' },
      'gpu-box',
    );
    const runner = new ProbeRunner(ct, { python: 'python3', timeoutMs: 60000 });
    await check(runner);
    runner.dispose();
  });
});
