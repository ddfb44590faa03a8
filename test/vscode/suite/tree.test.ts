import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { activated, rows, setSetting, testSshHost, waitFor } from './helpers';

describe('Remote Runs tree', () => {
  let dir: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kg-tree-'));
    for (const r of ['runs-b', 'runs-a']) mkdirSync(join(dir, r));
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
    await waitFor('localRoots to be applied', () => (api.registry.hosts()[0]?.roots[0] === roots[0] ? true : undefined));

    const top = await rows(api);
    assert.equal(top[0]?.label, 'This machine');
    assert.equal(top[0]?.item.description, 'local');
    assert.match(String(top[0]?.item.contextValue), /\bhost\b/);
    assert.match(String(top[0]?.item.contextValue), /\blocal\b/);

    const children = await rows(api, top[0]?.node);
    assert.deepEqual(
      children.map((c) => c.label),
      roots,
    );
    assert.ok(children.every((c) => c.node.kind === 'root'));
  });

  it('lists the test SSH host after This machine, with its roots', async () => {
    const api = await activated();
    const sshd = testSshHost();
    const root = join(dir, 'runs-a');
    await setSetting('hosts', [
      { name: 'test-sshd', host: '127.0.0.1', port: sshd.port, user: sshd.user, identityFile: sshd.identityFile, roots: [root] },
    ]);
    await waitFor('the SSH host', () => (api.registry.hosts().some((h) => h.name === 'test-sshd') ? true : undefined));

    const top = await rows(api);
    assert.deepEqual(
      top.map((r) => r.label),
      ['This machine', 'test-sshd'],
    );
    const host = top[1]!;
    assert.equal(host.item.description, `${sshd.user}@127.0.0.1:${sshd.port}`);
    assert.match(String(host.item.contextValue), /\bssh\b/);
    assert.deepEqual(
      (await rows(api, host.node)).map((c) => c.label),
      [root],
    );
  });

  it('reaches the test SSH host over real SSH from the extension host', async () => {
    const api = await activated();
    const sshd = testSshHost();
    await setSetting('hosts', [{ name: 'test-sshd', host: '127.0.0.1', port: sshd.port, user: sshd.user, identityFile: sshd.identityFile }]);
    const spec = await waitFor('the SSH host', () => api.registry.hosts().find((h) => h.name === 'test-sshd'));
    const r = await api.registry.session(spec).transport.exec(['echo', 'known good over ssh']);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'known good over ssh');
  });

  it('shows a message node for a host without roots', async () => {
    const api = await activated();
    await setSetting('defaultRoots', []);
    try {
      await setSetting('localRoots', []);
      await waitFor('empty roots', () => (api.registry.hosts()[0]?.roots.length === 0 ? true : undefined));
      const top = await rows(api);
      const children = await rows(api, top[0]?.node);
      assert.equal(children.length, 1);
      assert.equal(children[0]!.node.kind, 'message');
      assert.match(children[0]!.label, /No checkpoint roots/);
    } finally {
      await setSetting('defaultRoots', undefined);
    }
  });
});
