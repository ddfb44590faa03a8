import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { activated, rows, setSetting, settledRows, testSshHost, waitFor, type KnownGoodApi } from './helpers';

async function hostRow(api: KnownGoodApi, name: string) {
  const top = await rows(api);
  const row = top.find((r) => r.label === name);
  assert.ok(row, `no host row "${name}" in ${JSON.stringify(top.map((r) => r.label))}`);
  return row;
}

describe('Remote Runs tree', () => {
  let dir: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kg-tree-'));
    for (const r of ['runs-b', 'runs-a']) mkdirSync(join(dir, r, 'run-1', 'step_100'), { recursive: true });
    writeFileSync(join(dir, 'runs-a', 'run-1', 'step_100', 'checkpoint.pt'), 'not really a checkpoint');
  });
  after(async () => {
    await setSetting('localRoots', undefined);
    await setSetting('hosts', undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists This machine first with its roots in settings order', async () => {
    const api = await activated();
    const roots = [join(dir, 'runs-b'), join(dir, 'runs-a')];
    await setSetting('localRoots', roots);
    await waitFor('localRoots to be applied', () =>
      api.registry.hosts()[0]?.roots[0] === roots[0] ? true : undefined,
    );

    const top = await rows(api);
    assert.equal(top[0]?.label, 'This machine');
    assert.match(String(top[0]?.item.contextValue), /\bhost\b/);
    assert.match(String(top[0]?.item.contextValue), /\blocal\b/);

    const children = await settledRows(api, top[0]?.node);
    assert.deepEqual(
      children.map((c) => c.label),
      roots,
    );
    assert.ok(children.every((c) => c.node.kind === 'root'));
  });

  it('lists the test SSH host after This machine, with its roots listed over SSH', async () => {
    const api = await activated();
    const sshd = testSshHost();
    const root = join(dir, 'runs-a');
    await setSetting('hosts', [
      {
        name: 'test-sshd',
        host: '127.0.0.1',
        port: sshd.port,
        user: sshd.user,
        identityFile: sshd.identityFile,
        roots: [root],
      },
    ]);
    await waitFor('the SSH host', () => (api.registry.hosts().some((h) => h.name === 'test-sshd') ? true : undefined));

    const top = await rows(api);
    assert.deepEqual(
      top.map((r) => r.label),
      ['This machine', 'test-sshd'],
    );
    const host = top[1]!;
    assert.match(String(host.item.description), new RegExp(`^${sshd.user}@127\\.0\\.0\\.1:${sshd.port}\\b`));
    assert.match(String(host.item.contextValue), /\bssh\b/);
    const children = await settledRows(api, host.node);
    assert.deepEqual(
      children.map((c) => c.label),
      [root],
      `children: ${JSON.stringify(children.map((c) => [c.label, c.item.description]))}`,
    );
    // The root was really listed (one run with one checkpoint), not just echoed from the settings.
    assert.match(String(children[0]!.item.description), /1 checkpoint/);
  });

  it('gives every row of the expanded tree a unique id (VS Code refuses to render duplicates)', async () => {
    const api = await activated();
    const sshd = testSshHost();
    await setSetting('localRoots', [join(dir, 'runs-a'), join(dir, 'runs-b')]);
    await setSetting('hosts', [
      {
        name: 'test-sshd',
        host: '127.0.0.1',
        port: sshd.port,
        user: sshd.user,
        identityFile: sshd.identityFile,
        roots: [join(dir, 'runs-a')],
      },
    ]);
    await waitFor('the SSH host', () => (api.registry.hosts().some((h) => h.name === 'test-sshd') ? true : undefined));
    const seen = new Map<string, string>();
    const walk = async (node: Parameters<typeof rows>[1], path: string, depth: number): Promise<void> => {
      // Hosts list lazily: wait for the listing, then take every row (feature sections included) as VS Code would.
      if (depth === 1) await settledRows(api, node);
      for (const k of await rows(api, node)) {
        const id = k.item.id;
        const where = `${path}/${k.label}`;
        if (id !== undefined) {
          assert.ok(!seen.has(id), `id ${id} used by both ${seen.get(id)} and ${where}`);
          seen.set(id, where);
        }
        if (depth < 3 && k.item.collapsibleState !== vscode.TreeItemCollapsibleState.None)
          await walk(k.node, where, depth + 1);
      }
    };
    await walk(undefined, '', 0);
    assert.ok(seen.size >= 6, `walked only ${seen.size} rows`);
  });

  it('reaches the test SSH host over real SSH from the extension host', async () => {
    const api = await activated();
    const sshd = testSshHost();
    await setSetting('hosts', [
      { name: 'test-sshd', host: '127.0.0.1', port: sshd.port, user: sshd.user, identityFile: sshd.identityFile },
    ]);
    const spec = await waitFor('the SSH host', () => api.registry.hosts().find((h) => h.name === 'test-sshd'));
    const r = await api.registry.session(spec).transport.exec(['echo', 'known good over ssh']);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'known good over ssh');
  });

  it('shows an error node with Retry for a host that refuses the connection, and the others still list', async () => {
    const api = await activated();
    await setSetting('localRoots', [join(dir, 'runs-a')]);
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    await setSetting('hosts', [{ name: 'refusing', host: '127.0.0.1', port: 1, roots: ['/nowhere'] }]);
    await waitFor('the host', () => (api.registry.hosts().some((h) => h.name === 'refusing') ? true : undefined));

    const bad = await settledRows(api, (await hostRow(api, 'refusing')).node);
    assert.equal(bad.length, 1, JSON.stringify(bad.map((b) => b.label)));
    assert.equal(bad[0]!.node.kind, 'message');
    assert.ok(bad[0]!.label.length > 0);
    // a connection failure: a click opens Edit Host… (issue 25), Retry stays as the row's inline action
    assert.equal(bad[0]!.item.command?.command, 'knownGood.hosts.edit');
    assert.ok(String(bad[0]!.item.contextValue).split(';').includes('retry'), String(bad[0]!.item.contextValue));

    const good = await settledRows(api, (await hostRow(api, 'This machine')).node);
    assert.deepEqual(
      good.map((g) => g.label),
      [join(dir, 'runs-a')],
    );
  });

  it('a key fixed in settings.json takes effect without reload: the failed host lists with the new identityFile', async () => {
    const api = await activated();
    const sshd = testSshHost();
    const wrong = join(dir, 'id_wrong');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', wrong]);
    const entry = { name: 'keyed', host: '127.0.0.1', port: sshd.port, user: sshd.user, roots: [join(dir, 'runs-a')] };
    // As a user writes it in settings.json: the wrong key first.
    await setSetting('hosts', [{ ...entry, identityFile: wrong }]);
    await waitFor('the host', () => (api.registry.hosts().some((h) => h.name === 'keyed') ? true : undefined));
    const failed = await settledRows(api, (await hostRow(api, 'keyed')).node);
    assert.equal(failed.length, 1, JSON.stringify(failed.map((b) => b.label)));
    assert.equal(failed[0]!.node.kind, 'message');
    assert.match(failed[0]!.label, /auth|key|denied/i);

    // The key fixed in settings.json: no Retry, no reload; the host lists with the new key.
    await setSetting('hosts', [{ ...entry, identityFile: sshd.identityFile }]);
    const listed = await waitFor(
      'the host listed with the new key',
      async () => {
        const r = await settledRows(api, (await hostRow(api, 'keyed')).node);
        return r.some((x) => x.label === join(dir, 'runs-a')) ? r : undefined;
      },
      45_000,
    );
    assert.equal(listed.filter((x) => x.node.kind === 'message').length, 0, JSON.stringify(listed.map((x) => x.label)));
  });

  it('shows a "not found" root for a missing folder', async () => {
    const api = await activated();
    const missing = join(dir, 'does-not-exist');
    await setSetting('localRoots', [missing]);
    await waitFor('localRoots to be applied', () => (api.registry.hosts()[0]?.roots[0] === missing ? true : undefined));
    api.tree.reload();
    const children = await settledRows(api, (await hostRow(api, 'This machine')).node);
    assert.equal(children.length, 1);
    assert.equal(children[0]!.label, missing);
    assert.match(String(children[0]!.item.description), /not found/);
  });

  it('shows a message node for a host without roots', async () => {
    const api = await activated();
    // No local roots and no defaults to fall back on.
    await setSetting('defaultRoots', []);
    try {
      await setSetting('localRoots', []);
      await waitFor('empty roots', () => (api.registry.hosts()[0]?.roots.length === 0 ? true : undefined));
      api.tree.reload();
      const children = await settledRows(api, (await hostRow(api, 'This machine')).node);
      assert.equal(children.length, 1);
      assert.equal(children[0]!.node.kind, 'message');
      assert.match(children[0]!.label, /No checkpoint roots/);
    } finally {
      await setSetting('defaultRoots', undefined);
    }
  });
});
