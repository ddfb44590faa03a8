import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { hostAddress, sshAddress } from '../../src/core/hosts';
import { defineDocUri, docFileName } from '../../src/core/util/docUri';
import { formatBytes, naturalCompare } from '../../src/core/util/format';
import { newNonce } from '../../src/core/util/nonce';
import { describeIssues } from '../../src/core/util/zod';

void describe('core/util: one helper for each small thing', () => {
  void it('formatBytes: one format for the tree, baselines and archives; unknown and nonsense said so', () => {
    assert.equal(formatBytes(24.3 * 1024 ** 3), '24.3 GB');
    assert.equal(formatBytes(null), 'unknown');
    assert.equal(formatBytes(undefined), 'unknown');
    assert.equal(formatBytes(-1), '?');
  });

  void it('formatBytes: the vectors python/kg_common.py format_bytes is tested against too (test_kg_common.py)', () => {
    const { cases } = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'format', 'bytes.json'), 'utf8')) as {
      cases: [number | string | null, string][];
    };
    assert.ok(cases.length > 40);
    for (const [n, want] of cases) assert.equal(formatBytes(typeof n === 'string' ? Number(n) : n), want, String(n));
  });

  void it('naturalCompare: numbers as numbers in tree names and snapshot keys alike', () => {
    assert.deepEqual(['gpu.10.name', 'gpu.2.name', 'step_9', 'step_10'].sort(naturalCompare), [
      'gpu.2.name',
      'gpu.10.name',
      'step_9',
      'step_10',
    ]);
  });

  void it('newNonce: base64url of the asked number of bytes, different each time', () => {
    assert.match(newNonce(), /^[A-Za-z0-9_-]{12}$/);
    assert.match(newNonce(24), /^[A-Za-z0-9_-]{32}$/);
    assert.notEqual(newNonce(), newNonce());
  });

  void it('user@host[:port] is written one way', () => {
    assert.equal(sshAddress({ user: 'me', host: 'gpu', port: 22 }), 'me@gpu');
    assert.equal(sshAddress({ user: 'me', host: 'gpu', port: 2222 }), 'me@gpu:2222');
    assert.equal(hostAddress({}), 'local');
  });

  void it('describeIssues names each field', () => {
    const r = z.object({ port: z.number() }).safeParse({ port: 'x' });
    assert.ok(!r.success);
    assert.match(describeIssues(r.error), /^port: /);
  });

  void it('defineDocUri: round-trips through what VS Code does to a query, rejects other schemes and bad fields', () => {
    const codec = defineDocUri<{ host: string; n: number; name: string }>('kg-test', {
      schema: z.object({ host: z.string().min(1), n: z.number().int(), name: z.string() }),
      encode: (d) => ({ path: `/${docFileName(d.name, 'doc')}.txt`, fields: { host: d.host, n: String(d.n) } }),
      decode: (f, path) => ({ host: f.get('host'), n: Number(f.get('n')), name: path.slice(1, -4) }),
    });
    const doc = { host: 'settings:gpu box&x=1#?', n: 3, name: 'a b' };
    const parts = codec.to(doc);
    assert.equal(parts.path, '/a b.txt');
    assert.deepEqual(codec.parse(parts), doc);
    const reencoded = new URL(`x:/?${parts.query}`).search.slice(1);
    assert.deepEqual(codec.parse({ ...parts, query: reencoded }), doc);
    assert.equal(codec.parse({ ...parts, scheme: 'file' }), undefined);
    assert.equal(codec.parse({ ...parts, query: 'n=1.5&host=h' }), undefined);
    assert.equal(docFileName('a/b\nc', 'doc'), 'a b c');
  });
});
