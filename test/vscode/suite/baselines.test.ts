import * as assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as vscode from 'vscode';
import type { CaptureOutcome, CompareOutcome } from '../../../src/api';
import { activated, rows, setSetting, testSshHost, waitFor, type KnownGoodApi } from './helpers';

async function baselineRows(api: KnownGoodApi, hostName: string) {
  const host = (await rows(api)).find((r) => r.label === hostName);
  assert.ok(host, `host ${hostName} in the tree`);
  const group = (await rows(api, host.node)).find((r) => r.label === 'Baselines');
  assert.ok(group, 'a Baselines node under the host');
  assert.equal(group.item.contextValue, 'baselines');
  return rows(api, group.node);
}

describe('environment baselines (extension host, real SSH)', function () {
  this.timeout(120_000);
  let dir: string;
  let hostId: string;
  let first: CaptureOutcome;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-vscode-baselines-'));
    mkdirSync(join(dir, 'runs'));
    const api = await activated();
    const sshd = testSshHost();
    await setSetting('hosts', [
      {
        name: 'baseline-sshd',
        host: '127.0.0.1',
        port: sshd.port,
        user: sshd.user,
        identityFile: sshd.identityFile,
        roots: [join(dir, 'runs')],
      },
    ]);
    const spec = await waitFor('the SSH host', () => api.registry.hosts().find((h) => h.name === 'baseline-sshd'));
    hostId = spec.id;
  });
  after(async () => {
    await setSetting('hosts', undefined);
    await setSetting('baselines.copyToRemote', undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('Capture Environment Baseline saves it, copies it to ~/.known-good/baselines/ when asked, and lists it under Baselines', async () => {
    const api = await activated();
    await setSetting('baselines.copyToRemote', true);
    const out = await vscode.commands.executeCommand<CaptureOutcome | undefined>(
      'knownGood.baselines.capture',
      { hostId },
      { label: 'suite known good' },
    );
    assert.ok(out, 'the command returned what it saved');
    first = out;
    assert.equal(out.remoteWarning, undefined);
    assert.ok(existsSync(out.file), out.file);
    assert.ok(out.remotePath?.startsWith('~/.known-good/baselines/env-'), out.remotePath);
    assert.ok(existsSync(join(testSshHost().home, (out.remotePath ?? '').slice(2))));
    assert.deepEqual(readdirSync(join(dir, 'runs')), [], 'nothing written in the checkpoint root');
    const listed = await baselineRows(api, 'baseline-sshd');
    const row = listed.find((r) => r.label === 'suite known good');
    assert.ok(row, `listed: ${listed.map((r) => r.label).join(', ')}`);
    assert.match(String(row.item.description), /^just now · (torch \S+|no torch)$/);
    assert.equal(row.item.contextValue, 'baseline');
    assert.equal(row.item.command?.command, 'knownGood.baselines.open');
  });

  it('a baseline file that fails validation is an error node naming it; the others still list', async () => {
    const api = await activated();
    const bad = join(dirname(first.file), 'broken-baseline.r0.json');
    writeFileSync(bad, '{"schema": 1, "id": "broken-baseline", "label": 3}');
    try {
      api.tree.refresh();
      const listed = await baselineRows(api, 'baseline-sshd');
      const err = listed.find((r) => r.label === 'broken-baseline.r0.json');
      assert.ok(err, `error node: ${listed.map((r) => r.label).join(', ')}`);
      assert.equal(err.item.contextValue, 'baselineProblem');
      assert.match(String(err.item.description), /not a valid baseline/);
      assert.ok(listed.some((r) => r.label === 'suite known good'));
    } finally {
      rmSync(bad);
    }
  });

  it('Compare Environment with Baseline opens a diff of knownGood-env documents with the summary on top', async () => {
    const out = await vscode.commands.executeCommand<CompareOutcome | undefined>('knownGood.baselines.compare', {
      hostId,
      baselineId: first.id,
    });
    assert.ok(out);
    const right = await vscode.workspace.openTextDocument(vscode.Uri.parse(out.right));
    const left = await vscode.workspace.openTextDocument(vscode.Uri.parse(out.left));
    assert.equal(right.uri.scheme, 'knownGood-env');
    assert.match(right.getText(), /^# (No drift:|\d+ differences? )/);
    assert.match(right.getText(), /\n\[packages\]\n/);
    // The same machine a few seconds later: nothing but volatile values moved, and those are not in the texts.
    assert.equal(out.unchanged, true, out.headline);
    assert.equal(left.getText(), right.getText());
    const diffTab = await waitFor('the diff tab', () =>
      vscode.window.tabGroups.all
        .flatMap((g) => g.tabs)
        .find(
          (t) => t.input instanceof vscode.TabInputTextDiff && t.input.modified.toString() === right.uri.toString(),
        ),
    );
    assert.match(diffTab.label, /baseline-sshd: "suite known good" ↔ now/);
  });

  it('Compare Two Baselines, Open, Rename; copyToRemote off (the default) writes no remote copy', async () => {
    const api = await activated();
    await setSetting('baselines.copyToRemote', undefined);
    const copies = join(testSshHost().home, '.known-good', 'baselines');
    const before = readdirSync(copies);
    const second = await vscode.commands.executeCommand<CaptureOutcome | undefined>(
      'knownGood.baselines.capture',
      { hostId },
      { label: 'second' },
    );
    assert.ok(second);
    assert.equal(second.remotePath, undefined);
    assert.deepEqual(readdirSync(copies), before);
    assert.deepEqual(readdirSync(join(dir, 'runs')), []);

    const two = await vscode.commands.executeCommand<CompareOutcome | undefined>(
      'knownGood.baselines.compareTwo',
      undefined,
      [
        { hostId, baselineId: second.id },
        { hostId, baselineId: first.id },
      ],
    );
    assert.ok(two);
    const leftText = (await vscode.workspace.openTextDocument(vscode.Uri.parse(two.left))).getText();
    assert.match(leftText, /"suite known good"/, 'the older baseline is on the left and named in the summary');

    const opened = await vscode.commands.executeCommand<string | undefined>('knownGood.baselines.open', {
      hostId,
      baselineId: first.id,
    });
    assert.ok(opened);
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(opened));
    assert.match(doc.getText(), /^# baseline "suite known good"/);
    assert.match(doc.getText(), /# Volatile values/);

    await vscode.commands.executeCommand(
      'knownGood.baselines.rename',
      { hostId, baselineId: second.id },
      { label: 'second, renamed' },
    );
    const listed = await baselineRows(api, 'baseline-sshd');
    assert.deepEqual(listed.map((r) => r.label).sort(), ['second, renamed', 'suite known good']);
  });

  it('Compare reads the host as it is now: variables and a package added while the helper is up show, no Disconnect', async () => {
    const api = await activated();
    const session = api.registry.session(hostId);
    const helper = (await session.probes.helperStatus()).pid;
    const bashEnv = join(dirname(testSshHost().home), 'bash_env');
    const saved = readFileSync(bashEnv, 'utf8');
    // The interpreter's user site (~/.local/…/site-packages of the sessions' HOME), where `pip install --user` goes.
    const userSite = (
      await session.transport.exec(['python3', '-c', 'import site; print(site.getusersitepackages())'])
    ).stdout.trim();
    const info = join(userSite, 'kg_suite_now-3.1.dist-info');
    writeFileSync(
      bashEnv,
      `${saved}\nexport NCCL_IB_DISABLE=1\nexport TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT=7\nexport HF_HUB_OFFLINE=1\n`,
    );
    mkdirSync(info, { recursive: true });
    writeFileSync(join(info, 'METADATA'), 'Metadata-Version: 2.1\nName: kg-suite-now\nVersion: 3.1\n');
    try {
      const out = await vscode.commands.executeCommand<CompareOutcome | undefined>('knownGood.baselines.compare', {
        hostId,
        baselineId: first.id,
      });
      assert.ok(out);
      assert.equal(out.unchanged, false);
      assert.match(
        out.headline,
        /^2 differences between baseline "suite known good" .* — packages, env of a new login on baseline-sshd$/,
      );
      const right = (await vscode.workspace.openTextDocument(vscode.Uri.parse(out.right))).getText();
      assert.match(
        right,
        /\n# {3}env of a new login on baseline-sshd: HF_HUB_OFFLINE=1 added, NCCL_IB_DISABLE=1 added, TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT=7 added\n/,
      );
      assert.match(right, /\n# {3}packages: added kg-suite-now 3\.1\n/);
      assert.match(
        right,
        /\n# Variables: baseline — a new login on baseline-sshd; now — a new login on baseline-sshd\n/,
      );
      assert.match(right, /\nenv\.NCCL_IB_DISABLE: 1\n/);
      assert.match(right, /\npackages\.kg-suite-now: 3\.1\n/);
      assert.equal((await session.probes.helperStatus()).pid, helper, 'the same helper: no reconnect');
    } finally {
      writeFileSync(bashEnv, saved);
      rmSync(info, { recursive: true, force: true });
    }
  });

  it("Compare on a run also reads its live training process's variables, labelled with its id and command", async () => {
    const session = (await activated()).registry.session(hostId);
    const run = join(dir, 'runs', 'live');
    mkdirSync(run, { recursive: true });
    writeFileSync(
      join(run, 'train.py'),
      'import os, sys\nlog = open(os.path.join(os.path.dirname(__file__), "train.log"), "a")\n' +
        'print(os.getpid(), flush=True)\nsys.stdin.read()\n',
    );
    const trainer = await session.transport.spawn(['env', 'NCCL_ALGO=Ring', 'python3', join(run, 'train.py')]);
    try {
      const pid = await new Promise<string>((resolve) => {
        let buf = '';
        trainer.stdout.on('data', (c: Buffer) => {
          buf += c.toString('utf8');
          if (buf.includes('\n')) resolve(buf.split('\n')[0]!);
        });
      });
      const out = await vscode.commands.executeCommand<CompareOutcome | undefined>(
        'knownGood.baselines.compare',
        { hostId, baselineId: first.id },
        { run },
      );
      assert.ok(out);
      assert.match(out.headline, new RegExp(`env of the training process ${pid} \\(python3 train\\.py\\)`));
      const right = (await vscode.workspace.openTextDocument(vscode.Uri.parse(out.right))).getText();
      assert.match(
        right,
        new RegExp(`\\n# {3}env of the training process ${pid} \\(python3 train\\.py\\): NCCL_ALGO=Ring added\\n`),
      );
    } finally {
      trainer.stdin.end();
      await trainer.exited;
    }
  });
});
