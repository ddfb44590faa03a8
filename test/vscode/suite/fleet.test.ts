import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { FleetOutcome } from '../../../src/api';
import { FleetCommands } from '../../../src/constants';
import { TORCH_PYTHON } from '../../support/require';
import { startSlurm, type TestSlurm } from '../../support/slurm';
import { activated, rows, setSetting, testSshHost, waitFor, type KnownGoodApi } from './helpers';

/** The Slurm node under a host, and its children (jobs, then Nodes). */
async function slurmRows(api: KnownGoodApi, hostName: string) {
  const host = (await rows(api)).find((r) => r.label === hostName);
  assert.ok(host, `host ${hostName} in the tree`);
  const under = await rows(api, host.node);
  const slurm = under.find((r) => r.label === 'Slurm');
  return { under, slurm, children: slurm ? await rows(api, slurm.node) : [] };
}

const entry = (name: string, extra: Record<string, unknown>) => {
  const sshd = testSshHost();
  return { name, host: '127.0.0.1', port: sshd.port, user: sshd.user, identityFile: sshd.identityFile, ...extra };
};

describe('Fleet: Slurm under a login node (extension host, real SSH, real Slurm)', function () {
  this.timeout(180_000);
  let api: KnownGoodApi;
  let slurm: TestSlurm;
  let dir: string;
  let job: string;
  let hostId: string;

  before(async () => {
    api = await activated();
    dir = mkdtempSync(join(tmpdir(), 'kg-vscode-fleet-'));
    const site = join(dir, 'n2-site');
    mkdirSync(join(site, 'fakepkg-2.0.dist-info'), { recursive: true });
    writeFileSync(
      join(site, 'fakepkg-2.0.dist-info', 'METADATA'),
      'Metadata-Version: 2.1\nName: fakepkg\nVersion: 2.0\n',
    );
    slurm = await startSlurm({ nodes: 3, nodeEnv: { n2: { NCCL_SOCKET_IFNAME: 'eth9', PYTHONPATH: site } } });
    job = await slurm.submit(3, 900);
    await setSetting('hosts', [
      entry('fleet-login', { python: TORCH_PYTHON, slurm: { conf: slurm.conf } }),
      entry('fleet-broken', { slurm: { binDir: '/nonexistent-slurm/bin' } }),
      entry('fleet-plain', {}),
    ]);
    hostId = (await waitFor('the login node', () => api.registry.hosts().find((h) => h.name === 'fleet-login'))).id;
  });

  after(async () => {
    await setSetting('hosts', undefined);
    try {
      await slurm?.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('only a host with `slurm` gets the Slurm node; a failure to list is a row that says why, not an empty list', async () => {
    await waitFor('the hosts in the tree', async () => ((await rows(api)).length >= 4 ? true : undefined));
    assert.equal((await slurmRows(api, 'fleet-plain')).slurm, undefined);
    const broken = await slurmRows(api, 'fleet-broken');
    assert.ok(broken.slurm);
    assert.deepEqual(
      broken.children.map((r) => r.label),
      ['Could not list jobs', 'Nodes'],
    );
    assert.match(String(broken.children[0]!.item.description), /squeue not found on fleet-broken.*binDir/);
    const nodes = await rows(api, broken.children[1]!.node);
    assert.equal(nodes[0]!.label, 'Could not list nodes');
    assert.match(String(nodes[0]!.item.description), /sinfo not found/);
  });

  it('lists the job (state, nodes, elapsed) and its nodes, and the partitions’ nodes', async () => {
    const { children } = await slurmRows(api, 'fleet-login');
    const jobRow = children.find((r) => r.label === `${job} wrap`);
    assert.ok(jobRow, JSON.stringify(children.map((r) => r.label)));
    assert.match(String(jobRow.item.description), /^RUNNING · 3 nodes · \d+:\d\d$/);
    assert.match(String(jobRow.item.contextValue), /\bslurmJob\b/);
    const jobNodes = await rows(api, jobRow.node);
    assert.deepEqual(
      jobNodes.map((r) => [r.label, r.item.description]),
      [
        ['n1', 'not compared yet'],
        ['n2', 'not compared yet'],
        ['n3', 'not compared yet'],
      ],
    );
    const nodes = await rows(api, children.find((r) => r.label === 'Nodes')!.node);
    assert.deepEqual(
      nodes.map((r) => r.label),
      ['n1', 'n2', 'n3'],
    );
  });

  it('Compare Nodes returns the matrix naming n2 and its four fields; node vs majority; the job’s node rows', async () => {
    const m = await vscode.commands.executeCommand<FleetOutcome>(FleetCommands.compareNodes, { hostId, jobId: job });
    assert.ok(m);
    assert.equal(m.view, 'matrix');
    assert.deepEqual(m.nodes, ['n1', 'n2', 'n3']);
    assert.deepEqual(m.failed, []);
    assert.deepEqual(m.outliers, [
      { node: 'n2', fields: ['env.NCCL_SOCKET_IFNAME', 'env.PYTHONPATH', 'packages.count', 'packages.fakepkg'] },
    ]);
    assert.match(m.text, /odd one out: n2 \(4 fields/);
    assert.ok(vscode.window.activeTextEditor?.document.uri.toString() === m.uri, 'the matrix is the active editor');
    assert.equal(vscode.window.activeTextEditor?.document.getText(), m.text);

    const vs = await vscode.commands.executeCommand<FleetOutcome>(FleetCommands.compareNode, {
      hostId,
      jobId: job,
      node: 'n2',
    });
    assert.ok(vs);
    assert.equal(vs.view, 'node');
    assert.match(vs.text, /differ/);

    const { children } = await slurmRows(api, 'fleet-login');
    const jobNodes = await rows(api, children.find((r) => r.label === `${job} wrap`)!.node);
    assert.deepEqual(
      jobNodes.map((r) => [r.label, r.item.description]),
      [
        ['n1', 'agrees with the majority'],
        ['n2', 'differs: env.NCCL_SOCKET_IFNAME, env.PYTHONPATH, packages.count, packages.fakepkg'],
        ['n3', 'agrees with the majority'],
      ],
    );
  });

  it('Save Fleet Baseline, then n3 changes: Compare Fleet with Baseline names n3', async () => {
    const saved = await vscode.commands.executeCommand<FleetOutcome>(
      FleetCommands.saveBaseline,
      { hostId, jobId: job },
      { label: 'ui fleet' },
    );
    assert.ok(saved?.file, 'saved');
    slurm.setNodeEnv({
      n2: { NCCL_SOCKET_IFNAME: 'eth9', PYTHONPATH: join(dir, 'n2-site') },
      n3: { NCCL_DEBUG: 'INFO' },
    });
    const d = await vscode.commands.executeCommand<FleetOutcome>(
      FleetCommands.compareBaseline,
      { hostId, jobId: job },
      { baseline: 'ui fleet' },
    );
    assert.ok(d);
    assert.equal(d.view, 'drift');
    assert.deepEqual(d.outliers, [{ node: 'n3', fields: [] }]);
    assert.match(d.text, /# drifted: n3\n/);
  });

  it('Benchmark Every Node: the tiny CPU configuration on each node, side by side', async () => {
    const b = await vscode.commands.executeCommand<FleetOutcome>(FleetCommands.benchmark, { hostId, jobId: job });
    assert.ok(b);
    assert.equal(b.view, 'bench');
    assert.deepEqual(b.nodes, ['n1', 'n2', 'n3']);
    assert.match(b.text, /# Benchmark every node: job \d+ on fleet-login, 3 nodes answered/);
    assert.match(b.text, /config: .* cpu /);
  });
});
