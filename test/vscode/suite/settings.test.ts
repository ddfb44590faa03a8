import * as assert from 'node:assert/strict';
import { userInfo } from 'node:os';
import { activated, rows, setSetting, waitFor } from './helpers';

describe('settings', () => {
  afterEach(async () => {
    await setSetting('hosts', undefined);
  });

  it('reports a bad host entry in one clear message and still loads the other hosts', async () => {
    const api = await activated();
    await setSetting('hosts', [
      { name: 'good-a', host: '127.0.0.1', port: 2201, roots: ['/srv/a'] },
      { name: 'broken', port: 'twenty-two' },
      { name: 'good-b', host: 'gpu-b.example', user: 'ml' },
    ]);
    const s = await waitFor('the hosts setting to be applied', () =>
      api.settings().hosts.length === 2 ? api.settings() : undefined,
    );

    assert.deepEqual(
      s.hosts.map((h) => h.name),
      ['good-a', 'good-b'],
    );
    assert.equal(s.problems.length, 1, `expected one message, got: ${JSON.stringify(s.problems)}`);
    const problem = s.problems[0]!;
    assert.match(problem, /knownGood\.hosts\[1\]/, 'names the setting and the entry');
    assert.match(problem, /broken/, 'names the host');
    assert.match(problem, /host/, 'names the missing field');
    assert.match(problem, /port/, 'names the wrong field');

    // The tree shows the good hosts in settings order after This machine, then the problem as an error node.
    const top = await rows(api);
    assert.deepEqual(
      top.map((r) => r.label),
      ['This machine', 'good-a', 'good-b', problem],
    );
    assert.notEqual(top[3]!.node.kind, 'host', 'the problem is a message row, not a host');
    assert.match(String(top[1]!.item.description), new RegExp(`^${userInfo().username}@127\\.0\\.0\\.1:2201\\b`));
    assert.match(String(top[2]!.item.description), /^ml@gpu-b\.example\b/);
  });

  it('drops the message once the entry is fixed', async () => {
    const api = await activated();
    await setSetting('hosts', [{ name: 'broken' }]);
    await waitFor('the problem', () => (api.settings().problems.length === 1 ? true : undefined));
    await setSetting('hosts', [{ name: 'fixed', host: 'h.example' }]);
    await waitFor('the fix', () => (api.settings().problems.length === 0 ? true : undefined));
    assert.deepEqual(
      (await rows(api)).map((r) => r.label),
      ['This machine', 'fixed'],
    );
  });
});
