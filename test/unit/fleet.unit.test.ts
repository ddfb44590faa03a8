import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { describe, it } from 'node:test';
import type { EnvSnapshot } from '../../src/core/baselines/envProbe';
import type { BenchResult } from '../../src/core/bench/benchProbe';
import { compareFleetWithBaseline, FleetBaselineStore, fleetBaselineSchema } from '../../src/core/fleet/baseline';
import { compareBench, renderBenchText } from '../../src/core/fleet/bench';
import { FLEET_SCHEME, FleetResults, fromFleetUri, toFleetUri, type FleetDoc } from '../../src/core/fleet/documents';
import { compareNodes, compareWithMajority, majorityNode, renderMatrixText } from '../../src/core/fleet/matrix';
import { FleetStreamParser, answerBudget, nodeResult, type NodeResult } from '../../src/core/fleet/run';
import { slurmSettings } from '../../src/core/fleet/settings';
import {
  checkJobId,
  expandHostlist,
  parseSinfo,
  parseSlurmDuration,
  parseSqueue,
  slurmArgv,
} from '../../src/core/fleet/slurm';
import { hostInfoProbe } from '../../src/core/probes/hostProbes';
import { parseHostsSetting } from '../../src/core/settings';
import { cloneSnapshot, h200KnownGood } from '../fixtures/env';
import benchFixture from '../fixtures/bench/throughput_bench.cpu.json';

void describe('Slurm text: hostlists, squeue and sinfo in their fixed formats', () => {
  void it('expands hostlists as scontrol show hostnames does, zero padding kept', () => {
    assert.deepEqual(expandHostlist('n[1-3]'), ['n1', 'n2', 'n3']);
    assert.deepEqual(expandHostlist('gpu[01-03,10],login1'), ['gpu01', 'gpu02', 'gpu03', 'gpu10', 'login1']);
    assert.deepEqual(expandHostlist('r[1-2]n[1-2]'), ['r1n1', 'r1n2', 'r2n1', 'r2n2']);
    assert.deepEqual(expandHostlist('a-[8-9]-ib'), ['a-8-ib', 'a-9-ib']);
    assert.equal(expandHostlist('c[0001-0512]').length, 512);
    assert.throws(() => expandHostlist('n[1-'), /no closing/);
    assert.throws(() => expandHostlist('n[3-1]'), /range/);
  });

  void it('parses squeue --me lines (a job name with | in it, a pending job without nodes)', () => {
    const jobs = parseSqueue(
      [
        '4242|RUNNING|16|1-02:03:04|2-00:00:00|gpu|ana|gpu[001-016]|None|train|llama 70b',
        '4243|PENDING|2|0:00|1:00:00|gpu|ana||Resources|eval',
        '',
      ].join('\n'),
    );
    assert.equal(jobs.length, 2);
    assert.equal(jobs[0]!.name, 'train|llama 70b');
    assert.equal(jobs[0]!.nodes.length, 16);
    assert.equal(jobs[0]!.nodes[15], 'gpu016');
    assert.equal(jobs[0]!.elapsedS, 93784);
    assert.deepEqual(jobs[1]!.nodes, []);
    assert.equal(jobs[1]!.reason, 'Resources');
    assert.equal(parseSlurmDuration('3:04'), 184);
    assert.equal(parseSlurmDuration('INVALID'), null);
    assert.throws(() => parseSqueue('garbage'), /squeue printed an unexpected line/);
  });

  void it('parses sinfo -N lines into one entry per node, every partition listed', () => {
    const nodes = parseSinfo(
      [
        'n2|debug*|idle|2|1000|0.01|(null)|none',
        'n2|long|idle|2|1000|0.01|(null)|none',
        'n10|debug*|down*|2|1000|N/A|gpu:h200:8|Not responding',
      ].join('\n'),
    );
    assert.deepEqual(
      nodes.map((n) => [n.name, n.partitions, n.state, n.load, n.gres, n.reason]),
      [
        ['n2', ['debug*', 'long'], 'idle', 0.01, '(null)', 'none'],
        ['n10', ['debug*'], 'down*', null, 'gpu:h200:8', 'Not responding'],
      ],
    );
  });

  void it('job ids are checked before they reach a command; SLURM_CONF and binDir shape the argv', () => {
    assert.equal(checkJobId(' 123_4 '), '123_4');
    assert.throws(() => checkJobId('12;reboot'), /not a Slurm job id/);
    assert.deepEqual(slurmArgv(slurmSettings({ conf: '/etc/x.conf', binDir: '/opt/slurm/bin' }), 'squeue', ['--me']), [
      'env',
      'SLURM_CONF=/etc/x.conf',
      '/opt/slurm/bin/squeue',
      '--me',
    ]);
    assert.deepEqual(slurmArgv(slurmSettings(), 'sinfo', []), ['sinfo']);
  });

  void it('knownGood.hosts[].slurm is validated like the rest of the entry', () => {
    const ok = parseHostsSetting([{ name: 'login', host: 'login1', slurm: { conf: '/etc/slurm/slurm.conf' } }]);
    assert.deepEqual(ok.problems, []);
    assert.equal(ok.hosts[0]!.slurm!.nodeTimeoutS, 120);
    assert.equal(ok.hosts[0]!.slurm!.allowNodesOutsideJobs, false);
    const bad = parseHostsSetting([
      { name: 'a', host: 'a', slurm: { nodeTimeoutS: -1 } },
      { name: 'b', host: 'b', slurm: { sruun: '/x' } },
      { name: 'c', host: 'c' },
    ]);
    assert.equal(bad.hosts.length, 1);
    assert.match(bad.problems[0]!, /knownGood\.hosts\[0\].*slurm\.nodeTimeoutS/);
    assert.match(bad.problems[1]!, /knownGood\.hosts\[1\].*sruun/);
  });
});

/** What python/kg_fleet.py prints for one node: its payload in chunks, then the end line. */
function nodeLines(nonce: string, node: string, doc: object, status = 'exit=0', chunk = 50): string[] {
  const payload = deflateSync(Buffer.from(JSON.stringify(doc))).toString('base64');
  const lines: string[] = [];
  let i = 0;
  for (; i * chunk < payload.length; i++)
    lines.push(`@@KG-FLEET ${nonce} ${node} ${i} ${payload.slice(i * chunk, (i + 1) * chunk)}`);
  lines.push(`@@KG-FLEET-END ${nonce} ${node} ${i} ${status}`);
  return lines;
}

function framed(nonce: string, result: unknown): string {
  const env = { ok: true, result, python: { executable: '/usr/bin/python3', version: '3.11.2' } };
  return `banner\n@@KNOWN-GOOD-BEGIN ${nonce}@@\n${JSON.stringify(env)}\n@@KNOWN-GOOD-END ${nonce}@@\n`;
}

void describe('one srun stream, many nodes: the tagged lines are put back together per node', () => {
  const info = {
    hostname: 'x',
    user: 'u',
    home: '/h',
    cwd: '/h',
    platform: 'linux',
    python: { executable: '/usr/bin/python3', version: '3.11.2' },
    pid: 1,
  };
  void it('interleaved lines of three nodes, in any order, with srun noise and another run’s lines', () => {
    const nonce = 'N0nce';
    const streams = ['n1', 'n2', 'n3'].map((n) =>
      nodeLines(nonce, n, { out: framed(nonce, { ...info, hostname: n }), err: '', seconds: 0.5 }),
    );
    const mixed: string[] = ['srun: warning: something', ...nodeLines('other', 'n1', { out: 'x' })];
    // Round robin, n3's chunks reversed: order within a node does not matter, only the end line comes last.
    const n3 = streams[2]!;
    streams[2] = [...n3.slice(0, -1).reverse(), n3[n3.length - 1]!];
    for (let i = 0; streams.some((s) => i < s.length); i++)
      for (const s of streams) if (i < s.length) mixed.push(s[i]!);
    const ended: string[] = [];
    const p = new FleetStreamParser(nonce, (n) => ended.push(n));
    for (const l of mixed) p.line(l);
    assert.deepEqual(ended.sort(), ['n1', 'n2', 'n3']);
    for (const n of ['n1', 'n2', 'n3']) {
      const r = nodeResult(hostInfoProbe(), n, p.nodes.get(n), nonce, n, '', 'ended');
      assert.ok(r.ok, JSON.stringify(r));
      assert.equal((r.outcome.value as { hostname: string }).hostname, n);
    }
  });

  void it('a lost chunk, a failed probe, a timeout and a silent node each say what happened', () => {
    const nonce = 'N';
    const p = new FleetStreamParser(nonce);
    const a = nodeLines(nonce, 'a', { out: framed(nonce, info), err: '' });
    for (const l of a.filter((_, i) => i !== 1)) p.line(l);
    for (const l of nodeLines(
      nonce,
      'b',
      { out: 'no frame', err: 'Traceback…\nImportError: no module named x\n', seconds: 1 },
      'exit=1',
    ))
      p.line(l);
    for (const l of nodeLines(nonce, 'c', { out: '', err: '', seconds: 4.01 }, 'timeout')) p.line(l);
    p.line(`@@KG-FLEET-BEAT ${nonce} d 0`);
    const call = hostInfoProbe();
    const r = (n: string, why: 'ended' | 'lost' = 'ended') =>
      nodeResult(call, n, p.nodes.get(n), nonce, n, 'srun: error: e: task 4: Exited with exit code 2\n', why, 20000);
    const msg = (n: string, why?: 'ended' | 'lost') => {
      const x = r(n, why);
      return x.ok ? 'ok' : `${x.error.code}: ${x.error.message}`;
    };
    assert.match(msg('a'), /^bad-output: host_info on a: its answer arrived incomplete/);
    assert.match(
      msg('b'),
      /^probe-failed: host_info on b printed no result \(exit=1\): .*ImportError: no module named x/,
    );
    assert.match(msg('c'), /^timeout: host_info on c was stopped after 4\.01 s/);
    assert.match(
      msg('d', 'lost'),
      /^connection-lost: host_info on d: the node stopped answering \(no heartbeat for 20 s\)/,
    );
    assert.match(
      msg('e'),
      /^connection-lost: host_info on e: no answer \(srun ended first\); srun: srun: error: e: task 4/,
    );
  });
});

void describe('a node answer is bounded when inflated, per node and per step, the bound named', () => {
  const nonce = 'B';
  const feed = (p: FleetStreamParser, node: string, doc: object, chunk = 60000) => {
    for (const l of nodeLines(nonce, node, doc, 'exit=0', chunk)) p.line(l);
  };
  const message = (r: NodeResult<unknown>) => (r.ok ? 'ok' : `${r.error.code}: ${r.error.message}`);

  void it('a deflate bomb from one node fails that node at 64 MiB; the next node still answers', () => {
    // ~65 KiB of base64 that inflates to 65 MiB: without maxOutputLength the whole of it was inflated
    const p = new FleetStreamParser(nonce);
    feed(p, 'bomb', { out: 'x'.repeat(65 * 1024 * 1024), err: '', seconds: 1 });
    const info = { hostname: 'good', user: 'u', home: '/h', cwd: '/h', platform: 'linux', pid: 1 };
    feed(p, 'good', { out: framed(nonce, { ...info, python: { executable: 'p', version: '3.11.2' } }), err: '' });
    const budget = answerBudget();
    const call = hostInfoProbe();
    assert.match(
      message(nodeResult(call, 'bomb', p.nodes.get('bomb'), nonce, 'bomb', '', 'ended', 0, budget)),
      /^bad-output: host_info on bomb: its answer inflates past 64 MiB \(the per-node bound\); dropped$/,
    );
    assert.ok(nodeResult(call, 'good', p.nodes.get('good'), nonce, 'good', '', 'ended', 0, budget).ok);
  });

  void it('answers each under the node bound end at the step bound together', () => {
    const p = new FleetStreamParser(nonce, undefined, answerBudget(1 << 20, 1.5 * (1 << 20)));
    const budget = answerBudget(1 << 20, 1.5 * (1 << 20));
    const big = { out: 'y'.repeat(900 * 1024), err: '', seconds: 1 };
    feed(p, 'a', big);
    feed(p, 'b', big);
    const call = hostInfoProbe();
    assert.match(
      message(nodeResult(call, 'a', p.nodes.get('a'), nonce, 'a', '', 'ended', 0, budget)),
      /printed no result/,
    );
    assert.match(
      message(nodeResult(call, 'b', p.nodes.get('b'), nonce, 'b', '', 'ended', 0, budget)),
      /^bad-output: host_info on b: its answer would take the step's answers past 1\.5 MiB inflated \(the per-step bound\)/,
    );
  });

  void it('base64 past the bound is dropped as it arrives, the node ended at once', () => {
    const ended: string[] = [];
    const budget = answerBudget(1024, 1 << 20);
    const p = new FleetStreamParser(nonce, (n) => ended.push(n), budget);
    const noise = randomBytes(200 * 1024).toString('base64');
    for (let i = 0; i * 50000 < noise.length; i++)
      p.line(`@@KG-FLEET ${nonce} n ${i} ${noise.slice(i * 50000, (i + 1) * 50000)}`);
    assert.deepEqual(ended, ['n']);
    assert.equal(p.nodes.get('n')!.chunks.length, 0);
    assert.match(
      message(nodeResult(hostInfoProbe(), 'n', p.nodes.get('n'), nonce, 'n', '', 'ended', 0, budget)),
      /^bad-output: host_info on n: its answer passed 65 KiB of base64 \(the per-node bound, 1 KiB inflated\); dropped$/,
    );
  });
});

// ------------------------------------------------------------------------------------------------ fleets

/** A node of a healthy fleet: the fixture with its own hostname and GPU UUIDs, and `extraPackages` packages. */
function nodeSnapshot(node: string, extraPackages = 0): EnvSnapshot {
  const s = cloneSnapshot(h200KnownGood);
  s.host.hostname = node;
  s.gpus.gpus.forEach((g, i) => (g.uuid = `GPU-${node}-${i}`));
  for (let i = 0; i < extraPackages; i++) s.packages.packages[`pkg-${i}`] = `1.${i}.0`;
  s.packages.count = Object.keys(s.packages.packages).length;
  return s;
}

void describe('Compare Nodes: the matrix of what differs, the odd ones out, node vs majority', () => {
  void it('flags exactly the odd node and fields; hostnames and GPU UUIDs differ by nature and are left out', () => {
    const snaps = new Map(['n1', 'n2', 'n3', 'n4'].map((n) => [n, nodeSnapshot(n)]));
    snaps.get('n3')!.env.vars['NCCL_IB_HCA'] = 'mlx5_1';
    snaps.get('n3')!.packages.packages['numpy'] = '1.0.0';
    const m = compareNodes(snaps);
    assert.deepEqual(m.outlierNodes, [{ node: 'n3', fields: ['env.NCCL_IB_HCA', 'packages.numpy'] }]);
    assert.ok(m.ignoredFields.includes('host.hostname'));
    assert.ok(m.ignoredFields.some((f) => /^gpu\.0\.uuid$/.test(f)));
    const numpy = m.rows.find((r) => r.key === 'packages.numpy')!;
    assert.equal(numpy.majorityCount, 3);
    assert.deepEqual(numpy.outliers, [{ node: 'n3', value: '1.0.0' }]);
    assert.equal(majorityNode(m, 'n3'), 'n1');
    const vs = compareWithMajority(snaps, 'n3', m)!;
    assert.deepEqual(
      vs.drift.env.map((e) => e.name),
      ['NCCL_IB_HCA'],
    );
    assert.equal(vs.drift.packages.changed[0]!.name, 'numpy');
    assert.match(
      renderMatrixText(m, { what: 'job 1' }),
      /^# Compare Nodes: job 1, 4 nodes answered\n# 2 of \d+ fields differ\.\n# odd one out: n3 \(2 fields/,
    );
  });

  void it('two against two is a tie, said so; identical nodes give an empty matrix', () => {
    const snaps = new Map(['a', 'b', 'c', 'd'].map((n) => [n, nodeSnapshot(n)]));
    snaps.get('c')!.env.vars['OMP_NUM_THREADS'] = '1';
    snaps.get('d')!.env.vars['OMP_NUM_THREADS'] = '1';
    const m = compareNodes(snaps);
    assert.equal(m.rows.length, 1);
    assert.equal(m.rows[0]!.tie, true);
    assert.match(renderMatrixText(m, { what: 'x' }), /@@ env\.OMP_NUM_THREADS @@ \(no majority\)/);
    const same = compareNodes(new Map(['a', 'b'].map((n) => [n, nodeSnapshot(n)])));
    assert.deepEqual(same.rows, []);
    assert.match(renderMatrixText(same, { what: 'x' }), /All \d+ fields agree on every node/);
  });

  void it('a fleet baseline says which node drifted, which is missing, and compares a new node with the majority', () => {
    const then = new Map(['n1', 'n2', 'n3'].map((n) => [n, nodeSnapshot(n)]));
    const baseline = fleetBaselineSchema.parse({
      schema: 1,
      kind: 'fleet',
      id: 'x',
      label: 'good',
      host: 'h',
      capturedAt: '2030-01-01T00:00:00Z',
      nodes: Object.fromEntries(then),
    });
    const now = new Map(['n1', 'n2', 'n4'].map((n) => [n, nodeSnapshot(n)]));
    now.get('n2')!.packages.packages['torch'] = '9.9.9';
    const d = compareFleetWithBaseline(baseline, now);
    assert.deepEqual(
      d.nodes.map((n) => [n.node, n.status, n.against]),
      [
        ['n1', 'unchanged', 'n1'],
        ['n2', 'drifted', 'n2'],
        ['n3', 'missing', 'n3'],
        ['n4', 'new', 'n1'],
      ],
    );
    assert.deepEqual(d.drifted, ['n2']);
    assert.deepEqual(d.missing, ['n3']);
  });

  void it('8 and 64 nodes replayed: the matrix time grows linearly', () => {
    for (const N of [8, 64]) {
      const snaps = new Map(Array.from({ length: N }, (_, i) => [`n${i + 1}`, nodeSnapshot(`n${i + 1}`, 300)]));
      snaps.get('n2')!.env.vars['NCCL_KG_ODD'] = 'mlx5_1';
      const t = performance.now();
      const m = compareNodes(snaps);
      const text = renderMatrixText(m, { what: `${N} nodes` });
      console.log(`${N} nodes: matrix + text ${(performance.now() - t).toFixed(0)} ms`);
      assert.deepEqual(m.outlierNodes, [{ node: 'n2', fields: ['env.NCCL_KG_ODD'] }]);
      assert.match(text, new RegExp(`- \\(absent\\) +${N - 1}/${N}`));
    }
  });

  void it('512 nodes replayed: matrix, text and node-vs-majority; times and bytes per node measured', () => {
    const N = 512;
    const nodes = Array.from({ length: N }, (_, i) => `gpu${String(i + 1).padStart(3, '0')}`);
    const t0 = performance.now();
    const snaps = new Map(nodes.map((n) => [n, nodeSnapshot(n, 300)]));
    const built = performance.now() - t0;
    snaps.get('gpu017')!.env.vars['NCCL_IB_HCA'] = 'mlx5_1';
    snaps.get('gpu300')!.packages.packages['pkg-7'] = '0.0.1';
    snaps.get('gpu511')!.gpus.gpus[3]!['pcie.link.width.max'] = 8;
    const bytes = JSON.stringify(snaps.get('gpu001')).length;
    const compressed = deflateSync(JSON.stringify(snaps.get('gpu001'))).length;
    const t1 = performance.now();
    const m = compareNodes(snaps);
    const tMatrix = performance.now() - t1;
    const t2 = performance.now();
    const text = renderMatrixText(m, { what: `${N} nodes` });
    const vs = compareWithMajority(snaps, 'gpu300', m)!;
    const tRest = performance.now() - t2;
    console.log(
      `512 nodes: ${m.comparedFields} fields, ${bytes} B JSON per node (${compressed} B compressed, ~${Math.round((compressed * 4) / 3)} B on the wire); build ${built.toFixed(0)} ms, matrix ${tMatrix.toFixed(0)} ms, text + node-vs-majority ${tRest.toFixed(0)} ms, text ${text.length} B`,
    );
    assert.deepEqual(
      m.outlierNodes.map((o) => [o.node, o.fields]),
      [
        ['gpu017', ['env.NCCL_IB_HCA']],
        ['gpu300', ['packages.pkg-7']],
        ['gpu511', ['gpu.3.pcie.link.gen.max'.replace('gen', 'width')]],
      ],
    );
    assert.deepEqual(vs.drift.packages.changed, [{ name: 'pkg-7', from: '1.7.0', to: '0.0.1' }]);
  });
});

void describe('Benchmark every node: side by side, the slow one flagged against the median', () => {
  const withRate = (rate: number, device = 'cpu'): BenchResult => {
    const r = JSON.parse(JSON.stringify(benchFixture)) as BenchResult;
    r.tokensPerSec = { median: rate, min: rate, max: rate };
    r.config.device = device;
    return r;
  };
  void it('flags the node below 90% of the median, names the slowest, and sets apart another configuration', () => {
    const b = compareBench(
      new Map([
        ['n1', withRate(1000)],
        ['n2', withRate(980)],
        ['n3', withRate(600)],
        ['n4', withRate(1010)],
        ['n5', withRate(5000, 'cuda')],
      ]),
      [{ node: 'n6', message: 'timed out' }],
    );
    assert.equal(b.medianTokensPerSec, 1000);
    assert.deepEqual(b.flagged, ['n3']);
    assert.equal(b.slowest, 'n3');
    assert.deepEqual(b.mismatched, ['n5']);
    const text = renderBenchText(b, 'job 7');
    assert.match(text, /slow \(below 90% of the median\): n3/);
    assert.match(text, /\nn3 +600 .* 60% +SLOW\n/);
    assert.match(text, /\nn6 +failed: timed out/);
  });
});

void describe('Fleet documents: a pure URI codec and the session’s results', () => {
  void it('round-trips every document kind and refuses what it did not write', () => {
    const docs: FleetDoc[] = [
      { view: 'matrix', capture: 'c1', name: 'job 7 on login' },
      { view: 'bench', run: 'r-2', name: 'bench job 7' },
      { view: 'drift', capture: 'c1', hostId: 'settings:cluster', baseline: 'b_3', name: 'drift' },
    ];
    for (const d of docs) assert.deepEqual(fromFleetUri(toFleetUri(d)), d);
    assert.match(toFleetUri(docs[0]!).path, /^\/job 7 on login\.diff$/);
    assert.equal(fromFleetUri({ scheme: 'knownGood-env', path: '/x', query: 'view=matrix&capture=c1' }), undefined);
    assert.equal(fromFleetUri({ scheme: FLEET_SCHEME, path: '/x', query: 'view=matrix&capture=../../etc' }), undefined);
    assert.equal(
      fromFleetUri({ scheme: FLEET_SCHEME, path: '/x', query: 'view=drift&capture=c1&baseline=b' }),
      undefined,
    );
  });

  void it('serves the matrix and bench texts it holds, and says so once a result was dropped', async () => {
    const results = new FleetResults(2);
    const snaps = new Map(['n1', 'n2', 'n3'].map((n) => [n, nodeSnapshot(n)]));
    snaps.get('n2')!.env.vars['NCCL_KG_ODD'] = '1';
    const capture = { run: undefined as never, snapshots: snaps, failed: [], matrix: compareNodes(snaps) };
    const first = results.addCapture(capture, 'job 7 on login');
    assert.match(await results.text({ view: 'matrix', capture: first, name: 'x' }), /odd one out: n2/);
    const bench = results.addBench(
      compareBench(new Map([['n1', JSON.parse(JSON.stringify(benchFixture)) as BenchResult]])),
      'job 7',
    );
    assert.match(
      await results.text({ view: 'bench', run: bench, name: 'x' }),
      /Benchmark every node: job 7, 1 node answered/,
    );
    results.addCapture(capture, 'again');
    results.addCapture(capture, 'and again');
    assert.match(await results.text({ view: 'matrix', capture: first, name: 'x' }), /no longer held/);
  });

  void it('the drift document names a node that did not answer, with why', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-fleet-docs-'));
    try {
      const store = new FleetBaselineStore(dir);
      const then = new Map(['n1', 'n2', 'n3'].map((n) => [n, nodeSnapshot(n)]));
      const saved = await store.save({ label: 'good', host: 'h', snapshots: then });
      const now = new Map(['n1', 'n2'].map((n) => [n, nodeSnapshot(n)]));
      const failed = [{ node: 'n3', message: 'stopped after 4 s' }];
      const results = new FleetResults();
      const key = results.addCapture(
        { run: undefined as never, snapshots: now, failed, matrix: compareNodes(now) },
        'job 7 on login',
      );
      const text = await results.text(
        { view: 'drift', capture: key, hostId: 'h', baseline: saved.baseline.id, name: 'x' },
        store,
      );
      assert.match(text, /^# job 7 on login against fleet baseline "good"\n# no answer from n3: stopped after 4 s\n/);
      assert.match(text, /# in the baseline but not answering now: n3/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
