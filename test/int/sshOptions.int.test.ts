import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isKnownGoodError } from '../../src/core/errors';
import type { HostSpec } from '../../src/core/hosts';
import { HostRegistry } from '../../src/core/registry';
import { SshPool } from '../../src/core/transport/ssh';
import { startSshd, type TestSshd } from '../support/sshd';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { waitUntil } from '../support/process';

/** A key sshd does not accept. */
function strangerKey(dir: string): string {
  const file = join(dir, 'id_stranger');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', file]);
  return file;
}

const authFailed = (e: unknown) => isKnownGoodError(e, 'auth-failed');

describe('a fixed key takes effect: SSH connections are pooled by all their options', () => {
  let sshd: TestSshd;
  let dir: string;
  before(async () => {
    sshd = await startSshd();
    dir = mkdtempSync(join(tmpdir(), 'kg-sshopts-'));
  });
  after(async () => {
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('no key, then the right identityFile: the next call on the same pool logs in', async () => {
    const pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    try {
      await assert.rejects(pool.transport({ ...endpointOf(sshd), identityFiles: [] }, 'h').exec(['true']), authFailed);
      const r = await pool.transport(endpointOf(sshd), 'h').exec(['echo', 'in']);
      assert.equal(r.stdout, 'in\n');
    } finally {
      pool.dispose();
    }
  });

  test('wrong key, then the right identityFile: the next call succeeds, the failed connection is gone', async () => {
    const pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    try {
      const wrong = strangerKey(dir);
      await assert.rejects(pool.transport(endpointOf(sshd, wrong), 'h').exec(['true']), (e: unknown) => {
        assert.ok(authFailed(e), String(e));
        assert.match((e as Error).message, /id_stranger/);
        return true;
      });
      const r = await pool.transport(endpointOf(sshd), 'h').exec(['echo', 'fixed']);
      assert.equal(r.stdout, 'fixed\n');
      assert.notEqual(pool.connection(endpointOf(sshd)), pool.connection(endpointOf(sshd, wrong)));
    } finally {
      pool.dispose();
    }
  });

  test('the key file fixed in place (same path, new contents): the same transport logs in next time', async () => {
    const pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    try {
      const file = join(dir, 'id_in_place');
      copyFileSync(strangerKey(mkdtempSync(join(dir, 'k-'))), file);
      const t = pool.transport(endpointOf(sshd, file), 'h');
      const before = pool.connection(endpointOf(sshd, file));
      await assert.rejects(t.exec(['true']), authFailed);
      rmSync(file);
      copyFileSync(sshd.identityFile, file);
      const r = await t.exec(['echo', 'in place']);
      assert.equal(r.stdout, 'in place\n');
      assert.notEqual(pool.connection(endpointOf(sshd, file)), before, 'a new connection for the new key');
      assert.equal(pool.size, 1, 'the connection made with the old key is not kept');
    } finally {
      pool.dispose();
    }
  });

  test('a host changed in settings (wrong key → right key) connects with the new options on the same registry', async () => {
    const wrong = strangerKey(mkdtempSync(join(dir, 'r-')));
    const spec = (identityFile: string): HostSpec => ({
      id: 'settings:box',
      name: 'box',
      source: 'settings',
      ssh: endpointOf(sshd, identityFile),
      python: 'python3',
      roots: [],
    });
    const registry = new HostRegistry({ ssh: sshOptions(sshd, recordingPrompts().prompts), commandTimeoutMs: 20000 });
    try {
      registry.setHosts([spec(wrong)]);
      await assert.rejects(registry.session('settings:box').transport.exec(['true']), authFailed);
      registry.setHosts([spec(sshd.identityFile)]);
      const r = await registry.session('settings:box').transport.exec(['echo', 'registry']);
      assert.equal(r.stdout, 'registry\n');
    } finally {
      registry.dispose();
    }
  });

  test('a working connection replaced by new options is closed once idle', async () => {
    const pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    try {
      const copy = join(dir, 'id_copy');
      copyFileSync(sshd.identityFile, copy);
      const first = pool.transport(endpointOf(sshd), 'h');
      await first.exec(['true']);
      const old = pool.connection(endpointOf(sshd));
      assert.ok(old.connected);
      // Same file contents under another path: an option changed, so a new connection.
      await pool.transport(endpointOf(sshd, copy), 'h').exec(['true']);
      pool.release(endpointOf(sshd));
      assert.ok(await waitUntil(() => !old.connected, 30_000), 'the replaced connection is still open');
      assert.equal(pool.size, 1);
    } finally {
      pool.dispose();
    }
  });
});
