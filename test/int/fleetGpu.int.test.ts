import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gpuFleet } from '../../src/core/fleet/fleet';
import { renderGpuText } from '../../src/core/fleet/gpu';
import { slurmSettings } from '../../src/core/fleet/settings';
import type { FleetHost } from '../../src/core/fleet/slurm';
import { SshPool } from '../../src/core/transport/ssh';
import { installFakeSmi } from '../support/fakeNvidiaSmi';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { startSlurm, type TestSlurm } from '../support/slurm';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 34 item 4 on a real Slurm cluster on this machine (test/support/slurm.ts), through the test sshd as the login
 * node: gpu_health.py on every node of a job at once. No GPU is lent: each node's `nvidia-smi` is
 * test/fixtures/nvidia-smi/fake_nvidia_smi.py on that node's PATH (set by the cluster's TaskProlog, as a site sets
 * per-node variables), answering with output WRITTEN in the format NVIDIA documents: n1 and n2 the steady H200 box,
 * n3 the same box with a GPU in thermal slowdown, a link trained down and ECC errors.
 */

void describe('Fleet: GPU health on every node of a Slurm job', () => {
  let dir: string;
  let slurm: TestSlurm;
  let sshd: TestSshd;
  let pool: SshPool;
  let host: FleetHost;
  let job: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-fleet-gpu-'));
    const nodeEnv: Record<string, Record<string, string>> = {};
    for (const [node, gpu] of [
      ['n1', 'r580-h200x8-steady.gpu.csv'],
      ['n2', 'r580-h200x8-steady.gpu.csv'],
      ['n3', 'r580-h200x8-faults.gpu.csv'],
    ] as const) {
      const bin = join(dir, node);
      mkdirSync(bin);
      installFakeSmi(bin, bin, { driver: 'r580', gpu, apps: { rows: [] } });
      nodeEnv[node] = { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` };
    }
    slurm = await startSlurm({ nodes: 3, nodeEnv });
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    host = {
      transport: pool.transport(endpointOf(sshd), 'login'),
      label: 'login',
      python: 'python3',
      slurm: slurmSettings({ conf: slurm.conf, nodeTimeoutS: 120 }),
    };
    job = await slurm.submit(3);
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
    await slurm?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  void it('names n3, the node with a GPU in thermal slowdown, a link trained down and ECC errors', async () => {
    const r = await gpuFleet(host, { kind: 'job', jobId: job });
    assert.deepEqual(r.gpu.failed, []);
    assert.deepEqual(
      r.gpu.rows.map((x) => [x.node, x.gpus]),
      [
        ['n1', '8 × NVIDIA H200'],
        ['n2', '8 × NVIDIA H200'],
        ['n3', '8 × NVIDIA H200'],
      ],
    );
    assert.equal(r.gpu.oddest, 'n3');
    assert.deepEqual(r.gpu.odd, ['n3']);
    const n3 = r.gpu.rows.find((x) => x.node === 'n3')!.odd.join('\n');
    assert.match(n3, /GPU 5 throttling: hw_thermal_slowdown/);
    assert.match(n3, /GPU 2 PCIe link at gen 3 x8 under load \(of gen 5 x16\)/);
    assert.match(n3, /GPU 6 memory errors: 2 uncorrected ECC errors/);
    // the steady box's GPU 3 at its power cap is the same on every node: a finding there, but no node stands out by it
    const text = renderGpuText(r.gpu, `job ${job} on login`);
    assert.match(text, /^# the odd node: n3 \(/m);
    assert.match(text, /^# on most nodes: GPU 3 throttling: sw_power_cap/m);
  });
});
