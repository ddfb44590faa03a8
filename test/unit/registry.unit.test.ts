import { test } from 'node:test';
import assert from 'node:assert/strict';
import { localHost } from '../../src/core/hosts';
import { HostRegistry } from '../../src/core/registry';
import { recordingPrompts } from '../support/hosts';

void test('a changed command timeout reaches the sessions already built (same session, same helper) and new ones', () => {
  const ssh = { knownHostsFiles: [], connectTimeoutMs: 1000, prompts: recordingPrompts().prompts };
  const registry = new HostRegistry({ commandTimeoutMs: 60_000, ssh });
  try {
    const a = localHost(['/tmp']);
    const b = { ...localHost(['/var']), id: 'other', name: 'Other' };
    registry.setHosts([a, b]);
    const before = registry.session(a.id);
    assert.equal(before.probes.timeoutMs, 60_000);
    registry.setCommandTimeout(5_000);
    const after = registry.session(a.id);
    assert.equal(after, before, 'the session (and its resident helper) is kept');
    assert.equal(after.probes.timeoutMs, 5_000);
    assert.equal(registry.session(b.id).probes.timeoutMs, 5_000);
  } finally {
    registry.dispose();
  }
});
