import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isKnownGoodError } from '../../src/core/errors';
import { compareFleetWithBaseline, FleetBaselineStore, renderFleetDriftText } from '../../src/core/fleet/baseline';
import { renderBenchText } from '../../src/core/fleet/bench';
import { benchFleet, captureFleet } from '../../src/core/fleet/fleet';
import { compareWithMajority, renderMatrixText } from '../../src/core/fleet/matrix';
import { runOnNodes } from '../../src/core/fleet/run';
import { slurmSettings } from '../../src/core/fleet/settings';
import { listJobs, listNodes, type FleetHost } from '../../src/core/fleet/slurm';
import { hostInfoProbe } from '../../src/core/probes/hostProbes';
import { defineProbe } from '../../src/core/probes/probe';
import { setProbeSource } from '../../src/core/probes/sources';
import { z } from 'zod';
import { SshPool } from '../../src/core/transport/ssh';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { waitUntil } from '../support/process';
import { requireTorch, TORCH_PYTHON } from '../support/require';
import { startSlurm, type TestSlurm } from '../support/slurm';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Fleet against a real Slurm cluster on this machine (test/support/slurm.ts: munged, slurmctld, slurmd n1..n3),
 * reached as a login node through the test sshd: every Slurm command goes over the pooled SSH connection.
 * n2 is made the odd one out the way sites do it: its tasks get a variable and a PYTHONPATH (with a package of its
 * own) through the cluster's TaskProlog.
 */

const N2_ENV = (site: string) => ({ NCCL_SOCKET_IFNAME: 'eth9', PYTHONPATH: site });

/**
 * A sitecustomize for a node's PYTHONPATH: once torch is imported, `before` (Python lines, with os, sys and time
 * imported) runs before every AdamW step, as a throttled GPU or a held step would.
 */
function aroundAdamWStep(before: readonly string[]): string {
  return [
    'import builtins, os, sys, time',
    '_import = builtins.__import__',
    'def _hooked_import(name, *args, **kwargs):',
    '    module = _import(name, *args, **kwargs)',
    '    torch = sys.modules.get("torch")',
    '    optim = getattr(torch, "optim", None)',
    '    if optim is not None and hasattr(optim, "AdamW") and not getattr(optim.AdamW, "_kg_hooked", False):',
    '        step = optim.AdamW.step',
    '        def hooked_step(self, *a, **k):',
    ...before.map((l) => `            ${l}`),
    '            return step(self, *a, **k)',
    '        optim.AdamW.step = hooked_step',
    '        optim.AdamW._kg_hooked = True',
    '    return module',
    'builtins.__import__ = _hooked_import',
    '',
  ].join('\n');
}

/** Gone, or a zombie waiting for its reaper: it runs no more code. */
function exited(pid: number): boolean {
  try {
    return /^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

void describe('Fleet: the nodes of a Slurm job through the login node', () => {
  let dir: string;
  let site: string;
  let slurm: TestSlurm;
  let sshd: TestSshd;
  let pool: SshPool;
  let host: FleetHost;
  let job: string;

  before(async () => {
    requireTorch();
    dir = mkdtempSync(join(tmpdir(), 'kg-fleet-'));
    site = join(dir, 'n2-site');
    mkdirSync(join(site, 'fakepkg-2.0.dist-info'), { recursive: true });
    writeFileSync(
      join(site, 'fakepkg-2.0.dist-info', 'METADATA'),
      'Metadata-Version: 2.1\nName: fakepkg\nVersion: 2.0\n',
    );
    const t0 = Date.now();
    slurm = await startSlurm({ nodes: 3, nodeEnv: { n2: N2_ENV(site) } });
    console.log(`cluster up (munged, slurmctld, 3 slurmd) in ${Date.now() - t0} ms`);
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    host = {
      transport: pool.transport(endpointOf(sshd), 'login'),
      label: 'login',
      python: TORCH_PYTHON,
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

  void it('lists my jobs (state, nodes, elapsed) and the partitions’ nodes', async () => {
    const jobs = await listJobs(host);
    const mine = jobs.find((j) => j.id === job);
    assert.ok(mine, JSON.stringify(jobs));
    assert.equal(mine.state, 'RUNNING');
    assert.deepEqual(mine.nodes, ['n1', 'n2', 'n3']);
    assert.equal(mine.nodeCount, 3);
    assert.equal(mine.name, 'wrap');
    assert.ok(mine.elapsedS !== null && mine.elapsedS >= 0, mine.elapsed);
    const nodes = await listNodes(host);
    assert.deepEqual(
      nodes.map((n) => n.name),
      ['n1', 'n2', 'n3'],
    );
    assert.deepEqual(nodes[0]!.partitions, ['debug*']);
    assert.equal(nodes[0]!.cpus, 2);
    assert.match(nodes[0]!.state, /mixed|allocated/);
  });

  void it('Compare Nodes flags exactly n2, and exactly its variable, its PYTHONPATH and its package', async () => {
    const before = sshd.connectionCount();
    const t0 = Date.now();
    const cap = await captureFleet(host, { kind: 'job', jobId: job });
    console.log(
      `env on 3 nodes: ${Date.now() - t0} ms, ${cap.run.stdinBytes} bytes of program, ${cap.run.nodes.map((n) => `${n.node} ${n.bytes} B`).join(', ')}`,
    );
    assert.deepEqual(cap.failed, []);
    assert.deepEqual([...cap.snapshots.keys()], ['n1', 'n2', 'n3']);
    assert.equal(sshd.connectionCount() - before, 0, 'through the pooled connection');
    const m = cap.matrix;
    assert.deepEqual(m.outlierNodes, [
      { node: 'n2', fields: ['env.NCCL_SOCKET_IFNAME', 'env.PYTHONPATH', 'packages.count', 'packages.fakepkg'] },
    ]);
    const row = m.rows.find((r) => r.key === 'packages.fakepkg')!;
    assert.equal(row.majority, null);
    assert.equal(row.majorityCount, 2);
    assert.deepEqual(row.outliers, [{ node: 'n2', value: '2.0' }]);
    const nccl = m.rows.find((r) => r.key === 'env.NCCL_SOCKET_IFNAME')!;
    assert.deepEqual(
      nccl.values.map((v) => [v.value, v.count, v.nodes]),
      [
        [null, 2, ['n1', 'n3']],
        ['eth9', 1, ['n2']],
      ],
    );
    const text = renderMatrixText(m, { what: `job ${job} on login` });
    assert.match(text, /odd one out: n2 \(4 fields/);
    assert.match(text, /@@ env\.NCCL_SOCKET_IFNAME @@\n- \(absent\) +2\/3 +n1, n3\n\+ eth9 +1\/3 +n2/);

    const vs = compareWithMajority(cap.snapshots, 'n2', m)!;
    assert.equal(vs.majorityNode, 'n1');
    assert.deepEqual(vs.drift.packages.added, [{ name: 'fakepkg', from: null, to: '2.0' }]);
    assert.deepEqual(
      vs.drift.env.map((e) => [e.name, e.kind, e.to]),
      [
        ['NCCL_SOCKET_IFNAME', 'added', 'eth9'],
        ['PYTHONPATH', 'added', site],
      ],
    );
    assert.equal(compareWithMajority(cap.snapshots, 'n3', m)!.drift.unchanged, true);
  });

  void it('a fleet baseline, then the same job later: says that n3 drifted and nothing else', async () => {
    const store = new FleetBaselineStore(join(dir, 'fleet-baselines'));
    const cap = await captureFleet(host, { kind: 'job', jobId: job });
    const saved = await store.save({
      label: 'known good',
      host: host.transport.id,
      jobId: job,
      snapshots: cap.snapshots,
    });
    assert.equal((await store.find(host.transport.id, 'known good')).file, saved.file);
    const same = compareFleetWithBaseline(
      saved.baseline,
      (await captureFleet(host, { kind: 'job', jobId: job })).snapshots,
    );
    assert.deepEqual(same.drifted, []);
    slurm.setNodeEnv({ n2: N2_ENV(site), n3: { NCCL_DEBUG: 'INFO' } });
    try {
      const later = await captureFleet(host, { kind: 'job', jobId: job });
      const d = compareFleetWithBaseline(
        (await store.find(host.transport.id, saved.baseline.id)).baseline,
        later.snapshots,
      );
      assert.deepEqual(d.drifted, ['n3']);
      assert.deepEqual(
        d.nodes.map((n) => [n.node, n.status]),
        [
          ['n1', 'unchanged'],
          ['n2', 'unchanged'],
          ['n3', 'drifted'],
        ],
      );
      assert.match(renderFleetDriftText(d, 'later'), /drifted: n3\n[\s\S]*NCCL_DEBUG=INFO added/);
    } finally {
      slurm.setNodeEnv({ n2: N2_ENV(site) });
    }
  });

  void it('a job that does not exist: a clear error, before any srun', async () => {
    await assert.rejects(
      runOnNodes(host, hostInfoProbe(), { kind: 'job', jobId: '999999' }),
      (e: unknown) => isKnownGoodError(e, 'not-found') && /job 999999 is not known to Slurm on login/.test(e.message),
    );
    await assert.rejects(
      runOnNodes(host, hostInfoProbe(), { kind: 'job', jobId: '12; rm -rf /' }),
      (e: unknown) => isKnownGoodError(e, 'settings') && /not a Slurm job id/.test(e.message),
    );
  });

  void it('nodes outside a job: refused unless the host allows it, then srun -w runs on just those', async () => {
    await assert.rejects(
      runOnNodes(host, hostInfoProbe(), { kind: 'nodes', nodes: ['n1', 'n3'] }),
      (e: unknown) => isKnownGoodError(e, 'settings') && /allowNodesOutsideJobs/.test(e.message),
    );
    const open = { ...host, slurm: { ...host.slurm, allowNodesOutsideJobs: true } };
    const run = await runOnNodes(open, hostInfoProbe(), { kind: 'nodes', nodes: ['n3', 'n1'] });
    assert.deepEqual(
      run.nodes.map((n) => [n.node, n.ok]),
      [
        ['n1', true],
        ['n3', true],
      ],
    );
  });

  void it("a probe's modules travel to every node in the packed program; a changed module is what runs next", async () => {
    setProbeSource('kg_t_a', 'import kg_t_b\nWHO = "a1"\ndef both():\n    return WHO + "+" + kg_t_b.WHO\n');
    setProbeSource('kg_t_b', 'import kg_t_a\nWHO = "b1"\n');
    setProbeSource(
      'kg_t_probe',
      'import kg_common\nimport kg_t_a\ndef main(argv):\n    return {"got": kg_t_a.both()}\n' +
        'if __name__ == "__main__":\n    kg_common.run(main)\n',
    );
    const probe = defineProbe('kg_t_probe', z.object({ got: z.string() }), () => [], { modules: ['kg_t_a', 'kg_t_b'] });
    const open = { ...host, slurm: { ...host.slurm, allowNodesOutsideJobs: true } };
    const got = async () =>
      (await runOnNodes(open, probe(), { kind: 'nodes', nodes: ['n1', 'n2'] })).nodes.map((n) =>
        n.ok ? [n.node, n.outcome.value.got] : [n.node, n.error],
      );
    assert.deepEqual(await got(), [
      ['n1', 'a1+b1'],
      ['n2', 'a1+b1'],
    ]);
    setProbeSource('kg_t_b', 'import kg_t_a\nWHO = "b2"\n');
    assert.deepEqual(await got(), [
      ['n1', 'a1+b2'],
      ['n2', 'a1+b2'],
    ]);
  });

  void it('a node whose probe hangs (a stuck nvidia-smi) is stopped at the per-node timeout; the others answer', async () => {
    const bin = join(dir, 'stuck-bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'nvidia-smi'), '#!/bin/sh\nsleep 60\n', { mode: 0o755 });
    slurm.setNodeEnv({ n2: N2_ENV(site), n1: { PATH: `${bin}:/usr/local/bin:/usr/bin:/bin` } });
    try {
      const cap = await captureFleet(host, { kind: 'job', jobId: job }, { nodeTimeoutMs: 4000 });
      assert.deepEqual([...cap.snapshots.keys()], ['n2', 'n3']);
      assert.equal(cap.failed.length, 1);
      const n1 = cap.run.nodes[0]!;
      assert.ok(!n1.ok);
      assert.equal(n1.error.code, 'timeout');
      // On time, whatever the machine's speed: the per-node timeout is what stopped n1 (ignored, its nvidia-smi
      // would have answered after 60 s and n1 would be among the snapshots).
      assert.match(n1.error.message, /env_snapshot on n1 was stopped after 4(\.\d+)? s \(the per-node timeout\)/);
    } finally {
      slurm.setNodeEnv({ n2: N2_ENV(site) });
    }
  });

  void it('Benchmark every node: side by side against the median, the slow node flagged', async () => {
    // n3 is a slow node: a sitecustomize on its PYTHONPATH makes every optimizer step 200 ms longer once torch is
    // imported (sleeping, so the other "nodes" on this machine keep their CPU), as a throttled GPU would.
    const busy = join(dir, 'slow-site');
    mkdirSync(busy, { recursive: true });
    writeFileSync(join(busy, 'sitecustomize.py'), aroundAdamWStep(['time.sleep(0.2)']));
    slurm.setNodeEnv({ n2: N2_ENV(site), n3: { PYTHONPATH: busy } });
    try {
      const t0 = Date.now();
      const r = await benchFleet(
        host,
        { kind: 'job', jobId: job },
        { layers: 1, width: 32, heads: 2, seq: 16, batch: 2, vocab: 64, steps: 5, warmup: 1, device: 'cpu' },
      );
      console.log(
        `bench on 3 nodes: ${Date.now() - t0} ms; ${r.bench.rows.map((x) => `${x.node} ${Math.round(x.tokensPerSec)} tok/s`).join(', ')}`,
      );
      assert.deepEqual(r.bench.failed, []);
      assert.deepEqual(
        r.bench.rows.map((x) => x.node),
        ['n1', 'n2', 'n3'],
      );
      const rates = r.bench.rows.map((x) => x.tokensPerSec);
      assert.ok(rates.every((x) => x > 0));
      assert.equal(r.bench.medianTokensPerSec, [...rates].sort((a, b) => a - b)[1]);
      assert.equal(r.bench.slowest, 'n3');
      assert.deepEqual(r.bench.flagged, ['n3']);
      assert.deepEqual(r.bench.mismatched, []);
      assert.match(renderBenchText(r.bench, 'job'), /slow \(below 90% of the median\): n3/);
    } finally {
      slurm.setNodeEnv({ n2: N2_ENV(site) });
    }
  });

  void it('CLI: known-good fleet HOST --job J env --json, and a missing job exits with the message', () => {
    const base = [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'fleet',
      `${sshd.user}@127.0.0.1:${sshd.port}`,
      '--identity',
      sshd.identityFile,
      '--known-hosts',
      sshd.knownHostsFile,
      '--slurm-conf',
      slurm.conf,
      '--python',
      TORCH_PYTHON,
    ];
    const r = spawnSync(process.execPath, [...base, '--job', job, 'env', '--json'], { encoding: 'utf8' });
    assert.equal(r.status, 1, r.stderr);
    const doc = JSON.parse(r.stdout) as { matrix: { nodes: string[]; outlierNodes: { node: string }[] } };
    assert.deepEqual(doc.matrix.nodes, ['n1', 'n2', 'n3']);
    assert.deepEqual(
      doc.matrix.outlierNodes.map((o) => o.node),
      ['n2'],
    );
    const text = spawnSync(process.execPath, [...base, '--job', job, 'probe', 'host_info'], { encoding: 'utf8' });
    assert.equal(text.status, 0, text.stderr);
    assert.deepEqual(Object.keys(JSON.parse(text.stdout) as object), ['n1', 'n2', 'n3']);
    // --save keeps the fleet as a baseline (under HOME); --diff against it: nothing drifted, exit 0.
    const env = { ...process.env, HOME: join(dir, 'cli-home') };
    const saved = spawnSync(process.execPath, [...base, '--job', job, 'env', '--save', 'good'], {
      encoding: 'utf8',
      env,
    });
    assert.equal(saved.status, 1, saved.stderr);
    assert.match(saved.stdout, /odd one out: n2/);
    assert.match(saved.stderr, /saved fleet baseline \S+ \(3 nodes\)/);
    const diff = spawnSync(process.execPath, [...base, '--job', job, 'env', '--diff', 'good'], {
      encoding: 'utf8',
      env,
    });
    assert.equal(diff.status, 0, diff.stdout + diff.stderr);
    assert.match(diff.stdout, /no node drifted \(3 compared\)/);
    const bad = spawnSync(process.execPath, [...base, '--job', '999999', 'env'], { encoding: 'utf8' });
    assert.equal(bad.status, 255);
    assert.match(bad.stderr, /job 999999 is not known to Slurm/);
  });

  void it('a node stopped mid-run (slurmd and its step killed) is reported lost; the others answer', async () => {
    // Mid-run made certain, whatever the machine's speed: n3's benchmark holds at its first optimizer step (torch
    // imported, the heartbeat going) for as long as the hold file exists, and says so in a file of its own; the test
    // kills the node only once it is held there, and lifts the hold only after (the held process is gone by then).
    const holdSite = join(dir, 'hold-site');
    const hold = join(holdSite, 'hold');
    const held = join(holdSite, 'held');
    mkdirSync(holdSite, { recursive: true });
    writeFileSync(hold, '');
    writeFileSync(
      join(holdSite, 'sitecustomize.py'),
      aroundAdamWStep([
        `with open(${JSON.stringify(held)}, "w") as f:`,
        '    f.write(str(os.getpid()))',
        `while os.path.exists(${JSON.stringify(hold)}):`,
        '    time.sleep(0.05)',
      ]),
    );
    slurm.setNodeEnv({ n2: N2_ENV(site), n3: { PYTHONPATH: holdSite } });
    try {
      const run = runOnNodes(
        host,
        (await import('../../src/core/bench/benchProbe')).throughputBenchProbe({
          layers: 1,
          width: 32,
          heads: 2,
          seq: 16,
          batch: 2,
          vocab: 64,
          steps: 5,
          warmup: 1,
          device: 'cpu',
        }),
        { kind: 'job', jobId: job },
        { heartbeatMs: 1000 },
      );
      // A generous deadline: it fails only when n3 never reaches its first step (importing torch on a busy machine).
      assert.ok(await waitUntil(() => existsSync(held), 120000), 'n3 reached its first optimizer step and held');
      const pid = Number(readFileSync(held, 'utf8'));
      slurm.killNode('n3');
      assert.ok(await waitUntil(() => exited(pid), 30000), `the held benchmark (pid ${pid}) was killed with its node`);
      rmSync(hold);
      const t0 = Date.now();
      const r = await run;
      console.log(`after n3 was killed, the run ended in ${Date.now() - t0} ms`);
      assert.deepEqual(
        r.nodes.map((n) => [n.node, n.ok]),
        [
          ['n1', true],
          ['n2', true],
          ['n3', false],
        ],
        JSON.stringify(r.nodes.map((n) => (n.ok ? n.node : n.error))),
      );
      const n3 = r.nodes[2]!;
      assert.ok(!n3.ok);
      assert.equal(n3.error.code, 'connection-lost');
      assert.match(n3.error.message, /on n3: the node stopped answering \(no heartbeat for \d+ s\)/);
    } finally {
      rmSync(hold, { force: true });
      slurm.setNodeEnv({ n2: N2_ENV(site) });
    }
  });
});
