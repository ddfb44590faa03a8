import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isKnownGoodError } from '../../src/core/errors';
import { ProbeRunner } from '../../src/core/probes/runner';
import { setupFromFacts } from '../../src/core/replay/fromFacts';
import { planReplay, runReplay, type ReplayHost, type ReplaySetup } from '../../src/core/replay/replay';
import { SshPool } from '../../src/core/transport/ssh';
import { analyze } from '../../src/core/whatChanged/analyze';
import { gatherFacts } from '../../src/core/whatChanged/gather';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { TORCH_PYTHON, requireTorch } from '../support/require';
import { makeReplayRun } from '../support/replayRuns';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Replay on a node's free GPUs (issue 33 item 4, issue 37) over a real sshd — with a FAKE nvidia-smi: this machine has
 * no GPU. The fake (first on the sessions' PATH, the sshd's binDir) answers only the two queries of
 * python/gpu_status.py --slots, in the CSV nvidia-smi documents (--format=csv,noheader,nounits), from files the test
 * writes, and notes each call. The runs are the real CPU training loop (test/support/replay/train.py); it logs the
 * CUDA_VISIBLE_DEVICES it was given, so each run's GPU is read from what the run itself saw.
 */

const THRESHOLD = 0.25;
const STEPS = 12;
const GPU_QUERY = '--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits';
const APP_QUERY = '--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits';
const uuid = (i: number) => `GPU-${i}0c0ffee-0000-1111-2222-33334444555${i}`;

void describe('replay on the free GPUs of a node (fake nvidia-smi, real sshd, real runs)', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let host: ReplayHost;
  let root: string;
  let smiDir: string;

  /** What the fake nvidia-smi shows: GPU rows `[util %, MiB used]` and the PIDs on each. */
  function showGpus(gpus: readonly [number, number][], apps: Record<number, number> = {}) {
    writeFileSync(
      join(smiDir, 'gpu.csv'),
      gpus.map(([util, mem], i) => `${i}, ${uuid(i)}, NVIDIA H200, ${util}, ${mem}, 143771\n`).join(''),
    );
    writeFileSync(
      join(smiDir, 'apps.csv'),
      Object.entries(apps)
        .map(([i, pid]) => `${uuid(Number(i))}, ${pid}, 40000\n`)
        .join(''),
    );
  }
  /** The fake, first on the sessions' PATH. */
  function installFakeSmi() {
    writeFileSync(
      join(sshd.binDir, 'nvidia-smi'),
      [
        '#!/bin/sh',
        '# FAKE nvidia-smi for the test (no GPU here): the two queries of gpu_status.py --slots, nothing else',
        `echo "$*" >> '${smiDir}/calls'`,
        'case "$*" in',
        `  "${GPU_QUERY}") exec cat '${smiDir}/gpu.csv' ;;`,
        `  "${APP_QUERY}") exec cat '${smiDir}/apps.csv' ;;`,
        '  *) echo "fake nvidia-smi: not a query it knows: $*" >&2; exit 9 ;;',
        'esac',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
  }
  const calls = () => (existsSync(join(smiDir, 'calls')) ? readFileSync(join(smiDir, 'calls'), 'utf8') : '');

  before(async () => {
    requireTorch();
    root = mkdtempSync(join(tmpdir(), 'kg-replay-gpus-'));
    smiDir = join(root, 'fake-smi');
    mkdirSync(smiDir);
    sshd = await startSshd();
    installFakeSmi();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const transport = pool.transport(endpointOf(sshd), 'test-sshd');
    const probes = new ProbeRunner(transport, { python: TORCH_PYTHON, timeoutMs: 120_000, resident: false });
    host = { transport, probes, label: 'test-sshd', python: TORCH_PYTHON };
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  async function setupOf(dir: string, only?: string[]): Promise<ReplaySetup> {
    const facts = await gatherFacts({ id: host.transport.id, label: 'test-sshd', probes: host.probes }, dir, {});
    return setupFromFacts(facts, analyze(facts), { steps: STEPS, threshold: THRESHOLD, ...(only ? { only } : {}) });
  }

  /** What each run saw: the CUDA_VISIBLE_DEVICES of its log's lines (one value a run). */
  function devicesOf(outDir: string): string[] {
    const lines = readFileSync(join(outDir, 'train_log.jsonl'), 'utf8').trim().split('\n');
    return [...new Set(lines.map((l) => String((JSON.parse(l) as { devices: unknown }).devices)))];
  }

  void it('4 GPUs, one with a process and one at 95 %: two states side by side on the free two, rotated; the culprit confirmed', async () => {
    showGpus(
      [
        [0, 1],
        [0, 40_000],
        [2, 300],
        [95, 900],
      ],
      { 1: 4242 },
    );
    const dir = makeReplayRun(root, 'arg');
    const setup = await setupOf(dir);
    const asked = calls().length;
    const plan = await planReplay(host, setup);
    assert.deepEqual(
      plan.gpus.slots.map((s) => s.index),
      [0, 2],
    );
    assert.match(plan.text, /GPUs: 2 free of 4 on test-sshd: GPU 0, GPU 2: 2 states side by side/);
    assert.match(plan.text, /not used \(busy\): GPU 1 \(a process is on it \(pid 4242\)\), GPU 3 \(95 % used/);
    assert.deepEqual(
      calls().slice(asked).trim().split('\n'),
      [GPU_QUERY, APP_QUERY],
      'the plan asks nvidia-smi the two queries',
    );

    const text: string[] = [];
    const o = await runReplay(host, plan, setup, { onText: (t) => text.push(t) });
    console.log(`${o.headline} (${o.runs.length} runs)`);
    assert.equal(o.report?.verdict.kind, 'culprit', o.markdown);
    assert.deepEqual(o.report?.verdict.ids, ['arg:--work']);
    assert.equal(o.report?.confirmation?.confirmed, true, o.markdown);
    assert.equal(o.report?.slots, 2);
    // every run on a free GPU, and it saw that GPU (by UUID) as its only one
    for (const run of o.runs) {
      assert.ok(run.gpu === 0 || run.gpu === 2, `${run.outDir}: GPU ${run.gpu}`);
      assert.deepEqual(devicesOf(run.outDir), [uuid(run.gpu)], run.outDir);
    }
    // every state of every round met both GPUs
    for (const round of o.report.rounds)
      for (const st of round.states)
        assert.deepEqual([...new Set(st.slots)].sort(), [0, 1], `round ${round.index} ${st.name}: ${String(st.slots)}`);
    // the lines say where each run went, the report too
    const lines = text.join('');
    assert.equal((lines.match(/^run \d+: .*: \S+ on GPU [02]$/gm) ?? []).length, o.runs.length, lines);
    assert.match(o.markdown, /\(GPU 0\).*\(GPU 2\)|\(GPU 2\).*\(GPU 0\)/);
  });

  void it('every GPU busy: the plan says so, nothing runs without the word; with it, one at a time on the least used', async () => {
    showGpus(
      [
        [80, 9000],
        [30, 2000],
      ],
      { 0: 777 },
    );
    const dir = makeReplayRun(root, 'arg', { harmless: true, name: 'run-busy' });
    const setup = await setupOf(dir, ['arg:--lr']);
    const plan = await planReplay(host, setup);
    assert.equal(plan.gpus.needsWord, true);
    assert.match(
      plan.text,
      /every GPU on test-sshd is busy: GPU 0 \(a process is on it \(pid 777\)\), GPU 1 \(30 % used/,
    );
    await assert.rejects(
      runReplay(host, plan, setup),
      (e) => isKnownGoodError(e, 'usage') && e.detail?.['needsWord'] === true && /nothing was run/.test(e.message),
    );
    assert.equal(existsSync(plan.dir), false, 'no run was started');

    const o = await runReplay(host, plan, setup, { allowBusy: true });
    assert.ok(o.runs.length >= 6);
    assert.equal(o.report?.slots, undefined, 'one at a time');
    for (const run of o.runs) {
      assert.equal(run.gpu, 1);
      assert.deepEqual(devicesOf(run.outDir), [uuid(1)]);
    }
  });

  void it('no nvidia-smi: the plan says the runs go one at a time on the CPU; --gpus none asks nothing of nvidia-smi', async () => {
    const dir = makeReplayRun(root, 'env', { name: 'run-cpu' });
    const setup = await setupOf(dir);
    const before = calls();
    const none = await planReplay(host, { ...setup, gpus: 'none' });
    assert.equal(calls(), before);
    assert.deepEqual(none.gpus.slots, []);
    rmSync(join(sshd.binDir, 'nvidia-smi'));
    const cpu = await planReplay(host, setup);
    assert.deepEqual(cpu.gpus.slots, []);
    assert.equal(
      (cpu.text.match(/GPUs: no nvidia-smi on test-sshd \(CPU only\): the runs go one at a time \(slots = 1\)/g) ?? [])
        .length,
      1,
    );
    await assert.rejects(planReplay(host, { ...setup, gpus: [0] }), (e) => isKnownGoodError(e, 'usage'));
  });

  void it('CLI: `known-good replay … --gpus` — a bad value is a usage error (exit 2); the plan names the GPUs', () => {
    showGpus([
      [0, 1],
      [0, 1],
    ]);
    installFakeSmi();
    const dir = join(root, 'run-cpu');
    const cli = (...words: string[]) =>
      spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          'src/cli/main.ts',
          'replay',
          `${sshd.user}@127.0.0.1:${sshd.port}`,
          dir,
          '--identity',
          sshd.identityFile,
          '--known-hosts',
          sshd.knownHostsFile,
          '--python',
          TORCH_PYTHON,
          '--dry-run',
          ...words,
        ],
        { encoding: 'utf8', env: { ...process.env, HOME: root } },
      );
    const bad = cli('--gpus', '0;rm');
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /--gpus 0;rm: auto, none, or GPU indexes/);
    const named = cli('--gpus', '1');
    assert.equal(named.status, 0, named.stderr);
    assert.match(named.stdout, /GPUs: GPU 1 as named \(--gpus\): one run at a time/);
    const auto = cli();
    assert.equal(auto.status, 0, auto.stderr);
    assert.match(auto.stdout, /GPUs: 2 free of 2 on .*: GPU 0, GPU 1: 2 states side by side/);
  });
});
