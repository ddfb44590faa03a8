import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gpuHealthProbe } from '../../src/core/hardware/gpuProbe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { pythonDir } from '../../src/core/probes/sources';
import { SshPool } from '../../src/core/transport/ssh';
import { installFakeSmi, type FakeSmi } from '../support/fakeNvidiaSmi';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { waitUntil } from '../support/process';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 34 item 1: the GPUs now, read by python/gpu_health.py through the resident helper of a real sshd, parsed by
 * the zod schema of core/hardware/gpuProbe.ts. No GPU here: `nvidia-smi` on the host's PATH is
 * test/fixtures/nvidia-smi/fake_nvidia_smi.py, answering with output WRITTEN in the format NVIDIA documents, not
 * recorded (the GPU box's real outputs are for a later session: docs/hardware.md).
 */

void describe('the GPUs now, over SSH (a fake nvidia-smi answering in the documented format)', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let probes: ProbeRunner;
  let dir: string;
  let smi: FakeSmi;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-gpu-health-'));
    sshd = await startSshd();
    smi = installFakeSmi(sshd.binDir, dir, { driver: 'r580', gpu: 'r580-h200x8-faults.gpu.csv' });
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    probes = new ProbeRunner(pool.transport(endpointOf(sshd), 'test-sshd'), { python: 'python3', timeoutMs: 60_000 });
  });
  after(async () => {
    probes?.dispose();
    pool?.dispose();
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  void it("a throttled GPU, a link trained down, ECC errors, and a neighbour's process with its user", async () => {
    // this test's own process stands for a process on GPU 1: /proc on the host knows its user and parent
    smi.set({
      driver: 'r580',
      gpu: 'r580-h200x8-faults.gpu.csv',
      apps: { rows: [`GPU-5f8e2c1a-3b4d-4e6f-8a9b-0c1d2e3f4a51, ${process.pid}, 20480, ${process.execPath}`] },
    });
    const { value } = await probes.run(gpuHealthProbe());
    assert.equal(value.said, null);
    const now = value.now!;
    const gpu = new Map(now.gpus.map((g) => [g.index, g]));
    assert.deepEqual(gpu.get(5)!.reasons, ['hw_thermal_slowdown', 'sw_thermal_slowdown']);
    assert.deepEqual([gpu.get(5)!.smClock, gpu.get(5)!.smClockMax], [1215, 1980]);
    assert.deepEqual([gpu.get(2)!.pcieGen, gpu.get(2)!.pcieGenMax, gpu.get(2)!.pcieWidth], [3, 5, 8]);
    assert.deepEqual([gpu.get(6)!.eccUncorrected, gpu.get(6)!.remappedPending], [2, true]);
    assert.equal(gpu.get(0)!.retiredSbe, null); // [N/A] on Hopper
    assert.equal(now.fields['power'], 'power.draw.instant');
    assert.equal(now.processes.length, 1);
    const p = now.processes[0]!;
    assert.deepEqual([p.gpu, p.pid, p.user, p.seen, p.memMiB], [1, process.pid, userInfo().username, true, 20480]);
    assert.equal(p.ancestors[0], process.ppid);
  });

  void it("an older driver's names (clocks_throttle_reasons, power.draw) read the same", async () => {
    smi.set({ driver: 'r470', gpu: 'r470-a100x2.gpu.csv', apps: { rows: [] } });
    const { value } = await probes.run(gpuHealthProbe());
    assert.deepEqual(
      value.now!.gpus.map((g) => [g.index, g.smClock, g.power, g.reasons]),
      [
        [0, 1410, 398.51, []],
        [1, 1095, 388.51, ['sw_power_cap']],
      ],
    );
    assert.equal(value.now!.fields['reason:sw_power_cap'], 'clocks_throttle_reasons.sw_power_cap');
  });

  void it("a run's recorded timeline comes back oldest first with its launch's header", async () => {
    const run = join(dir, 'run');
    mkdirSync(join(run, '.known-good'), { recursive: true });
    const header = {
      kind: 'header',
      t: 1000,
      pid: 4242,
      intervalS: 5,
      capBytes: 67108864,
      fields: { util: 'utilization.gpu' },
      gpus: [{ index: 0, uuid: 'GPU-x', name: 'NVIDIA H200', memTotal: 143771 }],
    };
    const reading = { index: 0, util: 100, smClock: 1980, smClockMax: 1980, memClock: 3201, memClockMax: 3201 };
    const rest = { power: 600, powerLimit: 700, temp: 60, memUsed: 1, memTotal: 143771, reasons: [] };
    const link = { pcieGen: 5, pcieGenMax: 5, pcieWidth: 16, pcieWidthMax: 16, eccUncorrected: 0 };
    const pages = { retiredSbe: null, retiredDbe: null, retiredPending: null, remappedCorrectable: 0 };
    const rows = { remappedUncorrectable: 0, remappedPending: false, remappedFailure: false };
    const sample = (t: number) => ({
      kind: 'sample',
      t,
      gpus: [{ ...reading, ...rest, ...link, ...pages, ...rows }],
      processes: [],
    });
    writeFileSync(
      join(run, '.known-good', 'gpu-timeline.jsonl'),
      [header, sample(1001), sample(1006)].map((l) => JSON.stringify(l)).join('\n') + '\n',
    );
    const { value } = await probes.run(gpuHealthProbe({ timeline: run, noNow: true }));
    assert.equal(value.now, null);
    assert.deepEqual(
      value.timeline!.samples.map((s) => s.t),
      [1001, 1006],
    );
    assert.equal(value.timeline!.headers[0]!.pid, 4242);
  });

  void it('a launch through kg_record over SSH records a timeline the probe reads back through the schema', async () => {
    smi.set({ driver: 'r580', gpu: 'r580-h200x8-faults.gpu.csv', apps: 'r580-h200x8.apps.csv' });
    const run = join(dir, 'recorded');
    mkdirSync(run);
    const file = join(run, '.known-good', 'gpu-timeline.jsonl');
    const kgRecord = join(pythonDir(), 'kg_record.py');
    const hold = 'import sys; print("ready", flush=True); sys.stdin.read()';
    // the command runs until its stdin closes: the test decides when the launch ends
    const launch = await pool
      .transport(endpointOf(sshd), 'test-sshd')
      .spawn(['python3', kgRecord, '--run', run, '--gpu-interval', '0.1', '--', 'python3', '-c', hold]);
    let said = '';
    launch.stdout.resume();
    launch.stderr.on('data', (c: Buffer) => (said += c.toString('utf8')));
    const samples = () =>
      existsSync(file)
        ? readFileSync(file, 'utf8')
            .split('\n')
            .filter((l) => l.startsWith('{"kind":"sample"'))
        : [];
    await waitUntil(() => samples().length >= 2, 30_000);
    const during = (await probes.run(gpuHealthProbe({ timeline: run, noNow: true }))).value.timeline!;
    assert.equal(during.headers.length, 1);
    assert.ok(during.samples.length >= 2);
    assert.deepEqual(during.samples[0]!.gpus[5]!.reasons, ['hw_thermal_slowdown', 'sw_thermal_slowdown']);
    assert.equal(during.headers[0]!.gpus[5]!.name, 'NVIDIA H200');
    launch.stdin.end();
    assert.deepEqual(await launch.exited, { exitCode: 0 });
    assert.equal(said, '');
    await waitUntil(() => readFileSync(file, 'utf8').includes('{"kind":"end"'), 30_000);
    const after = (await probes.run(gpuHealthProbe({ timeline: run, noNow: true }))).value.timeline!;
    assert.equal(after.ends[0]!.why, `the launch (PID ${after.headers[0]!.pid}) ended`);
    assert.equal(after.ends[0]!.samples, after.total);
  });

  void it('without nvidia-smi it says so once and reads nothing', async () => {
    renameSync(smi.path, `${smi.path}.away`);
    try {
      const { value } = await probes.run(gpuHealthProbe());
      assert.equal(value.said, 'no nvidia-smi on this host');
      assert.equal(value.now, null);
      assert.equal(value.nvidiaSmi, null);
    } finally {
      renameSync(`${smi.path}.away`, smi.path);
    }
  });
});
