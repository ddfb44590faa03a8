import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { pythonDir } from '../../src/core/probes/sources';
import { SshPool } from '../../src/core/transport/ssh';
import type { Transport } from '../../src/core/transport/types';
import { analyze } from '../../src/core/whatChanged/analyze';
import { gatherFacts } from '../../src/core/whatChanged/gather';
import { renderWhatChangedMarkdown } from '../../src/core/whatChanged/render';
import { installFakeSmi, type FakeSmi, type FakeSmiState, timelineLines } from '../support/fakeNvidiaSmi';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { waitUntil } from '../support/process';
import { startSshd, type TestSshd } from '../support/sshd';
import { noise } from '../support/whatChangedStory';

/*
 * Issue 34 item 3 end to end over a real sshd: a launch through kg_record.py records its GPU timeline with the real
 * sampler (python/kg_gpu_sampler.py); half-way a second process — a real one, not the run's — appears on the run's GPU;
 * the run's log slows from then on. What Changed? (the real probes, gathered over SSH) must lead with that neighbour,
 * named by its user and its name. No GPU is lent here: `nvidia-smi` is test/fixtures/nvidia-smi/fake_nvidia_smi.py,
 * answering with output WRITTEN in the format NVIDIA documents (not recorded), listing the processes the test says.
 */

const UUID0 = 'GPU-5f8e2c1a-3b4d-4e6f-8a9b-0c1d2e3f4a50';

interface Line {
  kind: string;
  t: number;
  pid?: number;
  processes?: { pid: number }[];
}

void describe('What Changed? with a recorded GPU timeline, over a real sshd', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let transport: Transport;
  let probes: ProbeRunner;
  let dir: string;
  let smi: FakeSmi;
  let neighbour: ChildProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-why-gpu-'));
    sshd = await startSshd();
    smi = installFakeSmi(sshd.binDir, dir, { driver: 'r580', gpu: 'r580-h200x8-steady.gpu.csv', apps: { rows: [] } });
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    transport = pool.transport(endpointOf(sshd), 'test-sshd');
    probes = new ProbeRunner(transport, { python: 'python3', timeoutMs: 60_000 });
  });
  after(async () => {
    neighbour?.stdin?.end();
    probes?.dispose();
    pool?.dispose();
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  void it('a process of another program appearing on the run’s GPU at the slowdown leads, with its user and name', async () => {
    const run = join(dir, 'run');
    mkdirSync(run);
    const file = join(run, '.known-good', 'gpu-timeline.jsonl');
    const lines = () => timelineLines<Line>(file);
    const withPid = (pid: number) =>
      lines().filter((l) => l.kind === 'sample' && l.processes?.some((p) => p.pid === pid));
    const state = (rows: string[]): FakeSmiState => ({
      driver: 'r580',
      gpu: 'r580-h200x8-steady.gpu.csv',
      apps: { rows },
    });

    // the launch runs until its stdin closes: the test decides when each phase ends
    const hold = 'import sys; sys.stdin.read()';
    const launch = await transport.spawn([
      'python3',
      join(pythonDir(), 'kg_record.py'),
      '--run',
      run,
      '--gpu-interval',
      '0.1',
      '--',
      'python3',
      '-c',
      hold,
    ]);
    launch.stdout.resume();
    launch.stderr.resume();
    assert.ok(await waitUntil(() => lines().some((l) => l.kind === 'header'), 60_000), 'no header');
    const runPid = lines().find((l) => l.kind === 'header')!.pid!;
    const runRow = `${UUID0}, ${runPid}, 71020, /usr/bin/python3`;
    smi.set(state([runRow]));
    assert.ok(await waitUntil(() => withPid(runPid).length >= 4, 60_000), 'the run never seen on GPU 0');

    // the neighbour: a real process of this host, not a child of the launch (`cat`, held by its stdin)
    neighbour = spawn('cat', [], { stdio: ['pipe', 'ignore', 'ignore'] });
    const other = neighbour.pid!;
    smi.set(state([runRow, `${UUID0}, ${other}, 20480, /usr/bin/cat`]));
    assert.ok(await waitUntil(() => withPid(other).length >= 4, 60_000), 'the neighbour never seen');
    launch.stdin.end();
    assert.deepEqual(await launch.exited, { exitCode: 0 });
    assert.ok(await waitUntil(() => lines().some((l) => l.kind === 'end'), 60_000), 'the sampler never ended');
    neighbour.stdin!.end();

    // the run's log, evenly spaced over the timeline on the host's clock, halving at the first step logged once the
    // neighbour was seen (the sampler and the loop share the host's clock)
    const samples = lines().filter((l) => l.kind === 'sample');
    const firstWith = samples.find((l) => l.processes?.some((p) => p.pid === other))!.t;
    const t0 = samples[0]!.t;
    const t1 = samples.at(-1)!.t;
    const n = 400;
    const g = noise(3);
    const log: string[] = [];
    let shiftStep = 0;
    for (let step = 1; step <= n; step++) {
      const time = t0 + ((t1 - t0) * (step - 1)) / (n - 1);
      const slow = time >= firstWith;
      if (slow && !shiftStep) shiftStep = step;
      const tok = (slow ? 6400 : 12800) * (1 + 0.04 * g());
      log.push(JSON.stringify({ step, time, loss: 2, tok_s: Math.round(tok) }));
    }
    writeFileSync(join(run, 'train_log.jsonl'), log.join('\n') + '\n');
    assert.ok(shiftStep > 40 && shiftStep < n - 40, `the neighbour came at step ${shiftStep} of ${n}`);

    const facts = await gatherFacts({ id: transport.id, label: 'test-sshd', probes }, run, {});
    const r = analyze(facts);
    assert.equal(r.verdict, 'regression', r.headline);
    const top = r.suspects[0]!;
    const user = userInfo().username;
    assert.equal(top.source, 'gpu', r.suspects.map((s) => s.title).join('; '));
    assert.match(
      top.title,
      new RegExp(`^another process on GPU 0: ${user}'s cat \\(PID ${other}, not this run\\) since \\d{4}-`),
    );
    assert.ok(top.coincides, JSON.stringify(top.reasons));
    assert.match(
      r.headline,
      new RegExp(`; changed at step \\d+: another process on GPU 0: ${user}'s cat \\(PID ${other}`),
    );
    assert.ok(top.evidence.some((e) => e.kind === 'file' && e.path === file));
    assert.match(renderWhatChangedMarkdown(r), /another process on GPU 0/);
  });
});
