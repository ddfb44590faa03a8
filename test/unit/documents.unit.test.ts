import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ARGS_SCHEME } from '../../src/core/args/uri';
import { ENV_SCHEME } from '../../src/core/baselines/uri';
import { FLEET_SCHEME } from '../../src/core/fleet/documents';
import { REMOTE_FILE_SCHEME } from '../../src/core/remote/readFile';
import type { UriParts } from '../../src/core/util/docUri';
import {
  fromKeptDocUri,
  GONE_TEXT,
  KEPT_DOC_SCHEME,
  keptDocId,
  KeptDocuments,
  toKeptDocUri,
  type KeptStorage,
} from '../../src/core/util/keptDocs';
import { EVIDENCE_SCHEME, fromEvidenceUri, toEvidenceUri } from '../../src/core/whatChanged/dataEvidence';

/** What VS Code does to a URI when it becomes a string and back: every component percent-encoded, then decoded. */
function viaString(u: UriParts): UriParts {
  const s = `${u.scheme}://${encodeURIComponent(u.authority)}${u.path.split('/').map(encodeURIComponent).join('/')}?${encodeURIComponent(u.query)}`;
  const m = /^([^:]+):\/\/([^/]*)([^?]*)\?(.*)$/s.exec(s)!;
  return {
    scheme: m[1]!,
    authority: decodeURIComponent(m[2]!),
    path: decodeURIComponent(m[3]!),
    query: decodeURIComponent(m[4]!),
  };
}

const NASTY_PATHS = [
  '/data/owt-128-padded',
  '/data/run 1/it\'s "quoted"/',
  '/data/#hash/?query=1&x=%20/100%',
  '/data/ünï/日本語/🚀',
  '/data/new\nline/tab\there',
  '-starts-with-dash',
  'relative/path',
];

/** A workspaceState as VS Code keeps it between windows: values go through JSON. */
class JsonStorage implements KeptStorage {
  readonly data = new Map<string, string>();
  get<T>(key: string): T | undefined {
    const v = this.data.get(key);
    return v === undefined ? undefined : (JSON.parse(v) as T);
  }
  update(key: string, value: unknown): Promise<void> {
    this.data.set(key, JSON.stringify(value));
    return Promise.resolve();
  }
}

void describe('knownGood-doc URIs', () => {
  it('round-trip the id and the name, also through a string; the path is one segment that ends in the extension', () => {
    for (const name of ['bisect.md', 'gpu box packages bisect.md', 'a#b?c=%20&d.diff', 'ünï 🚀 commits.diff']) {
      const ref = { id: keptDocId(name, 'text'), name };
      const u = toKeptDocUri(ref);
      assert.equal(u.scheme, KEPT_DOC_SCHEME);
      assert.deepEqual(fromKeptDocUri(u), ref);
      assert.deepEqual(fromKeptDocUri(viaString(u)), ref);
      assert.equal(u.path, `/${name}`);
    }
    // a name is a tab title: slashes and control characters become spaces, never a second path segment
    const u = toKeptDocUri({ id: keptDocId('x', ''), name: 'a/b\nc.txt' });
    assert.equal(u.path, '/a b c.txt');
    assert.equal(fromKeptDocUri(u)?.name, 'a b c.txt');
  });

  it('name no document for another scheme, a missing or malformed id', () => {
    const u = toKeptDocUri({ id: keptDocId('x', 'y'), name: 'x.md' });
    assert.equal(fromKeptDocUri({ ...u, scheme: 'knownGood-bisect' }), undefined);
    assert.equal(fromKeptDocUri({ ...u, query: '' }), undefined);
    assert.equal(fromKeptDocUri({ ...u, query: 'id=../../etc' }), undefined);
    // the in-memory evidence documents of before (`knownGood-evidence:/x?n=3`) are not kept documents
    assert.equal(fromKeptDocUri({ scheme: KEPT_DOC_SCHEME, path: '/x', query: 'n=3' }), undefined);
  });

  it('the same name and text are the same document; another text or name another', () => {
    assert.equal(keptDocId('a.md', 'text'), keptDocId('a.md', 'text'));
    assert.notEqual(keptDocId('a.md', 'text'), keptDocId('a.md', 'text!'));
    assert.notEqual(keptDocId('a.md', 'text'), keptDocId('b.md', 'text'));
    // the separator keeps a name's end from passing for the text's start
    assert.notEqual(keptDocId('ab', 'c'), keptDocId('a', 'bc'));
  });
});

void describe('knownGood-evidence URIs (a data path)', () => {
  it('round-trip the host and any path, also through a string, with the last part as the tab title', () => {
    for (const path of NASTY_PATHS) {
      for (const hostId of ['local', 'ssh:ü ser@gpu box:22/custom:lxc-attach -n 200 -- ?&=#%+']) {
        const u = toEvidenceUri({ hostId, path });
        assert.equal(u.scheme, EVIDENCE_SCHEME);
        assert.deepEqual(fromEvidenceUri(u), { hostId, path });
        assert.deepEqual(fromEvidenceUri(viaString(u)), { hostId, path });
        assert.ok(u.path.startsWith('/') && !u.path.slice(1).includes('/'), u.path);
        assert.ok(!/[\n\t]/.test(u.path), u.path);
        assert.ok(u.path.endsWith(' (data).txt'), u.path);
      }
    }
    assert.equal(toEvidenceUri({ hostId: 'local', path: '/data/owt-128/' }).path, '/owt-128 (data).txt');
  });

  it('an evidence URI of the version before (an in-memory text by number) is no data evidence', () => {
    assert.equal(fromEvidenceUri({ scheme: EVIDENCE_SCHEME, path: '/commits.diff', query: 'n=3' }), undefined);
    const u = toEvidenceUri({ hostId: 'local', path: '/d' });
    assert.equal(fromEvidenceUri({ ...u, query: u.query.replace('v=1', 'v=2') }), undefined);
    assert.equal(fromEvidenceUri({ ...u, scheme: KEPT_DOC_SCHEME }), undefined);
  });
});

void describe('KeptDocuments: texts kept in the workspace storage', () => {
  it('a new window on the same storage (Reload Window) gives every kept text back by its URI', async () => {
    const storage = new JsonStorage();
    const before = new KeptDocuments(storage);
    const diff = before.add('run commits.diff', '+ last_loss = loss.item()\n');
    const plan = before.add('restore good.sh', '#!/bin/sh\npip install torch==2.5.1\n');
    await before.flushed();
    const after = new KeptDocuments(storage);
    const back = fromKeptDocUri(viaString(toKeptDocUri(diff)))!;
    assert.equal(after.text(back), '+ last_loss = loss.item()\n');
    assert.equal(after.text(plan), '#!/bin/sh\npip install torch==2.5.1\n');
    assert.equal(after.text({ id: keptDocId('other', 'x'), name: 'other' }), GONE_TEXT);
  });

  it('keeps the newest documents opened, an old one opened again counting as new', async () => {
    const storage = new JsonStorage();
    const kept = new KeptDocuments(storage, { docs: 3, chars: 1_000_000 });
    const refs = ['a', 'b', 'c'].map((n) => kept.add(`${n}.txt`, n));
    kept.add('a.txt', 'a'); // opened again: the newest now
    const d = kept.add('d.txt', 'd');
    await kept.flushed();
    const after = new KeptDocuments(storage);
    assert.equal(after.text(refs[0]!), 'a');
    assert.equal(after.text(refs[1]!), GONE_TEXT, 'b, the oldest opened, made room');
    assert.equal(after.text(refs[2]!), 'c');
    assert.equal(after.text(d), 'd');
  });

  it('keeps no more text than its limit: one too large alone lasts the window, the ones before stay', async () => {
    const storage = new JsonStorage();
    const kept = new KeptDocuments(storage, { docs: 10, chars: 100 });
    const small = kept.add('s.txt', 'x'.repeat(40));
    const big = kept.add('big.txt', 'y'.repeat(500));
    assert.equal(kept.text(big), 'y'.repeat(500), 'this window still shows it');
    const small2 = kept.add('s2.txt', 'z'.repeat(40));
    await kept.flushed();
    const after = new KeptDocuments(storage);
    assert.equal(after.text(big), GONE_TEXT);
    assert.equal(after.text(small), 'x'.repeat(40));
    assert.equal(after.text(small2), 'z'.repeat(40));
    assert.ok(storage.data.get('knownGood.documents')!.length < 400);
  });

  it('storage that is not what it wrote (another version, hand-edited) is taken as nothing kept', () => {
    const storage = new JsonStorage();
    storage.data.set('knownGood.documents', JSON.stringify({ v: 9, docs: 'x' }));
    const kept = new KeptDocuments(storage);
    assert.equal(kept.text({ id: keptDocId('a', 'b'), name: 'a' }), GONE_TEXT);
    const ref = kept.add('a.txt', 'fresh');
    assert.equal(kept.text(ref), 'fresh');
  });

  it('a failed write is reported, not thrown: the window still shows the text', async () => {
    const errors: string[] = [];
    const kept = new KeptDocuments(
      { get: () => undefined, update: () => Promise.reject(new Error('disk full')) },
      undefined,
      (m) => errors.push(m),
    );
    const ref = kept.add('report.md', '# report');
    await kept.flushed();
    assert.equal(kept.text(ref), '# report');
    assert.deepEqual(errors, ['could not keep "report.md" for after a reload: disk full']);
  });
});

void it('VS Code activates Known Good for every document scheme it restores after a reload', () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    activationEvents: string[];
  };
  for (const scheme of [ARGS_SCHEME, ENV_SCHEME, REMOTE_FILE_SCHEME, FLEET_SCHEME, KEPT_DOC_SCHEME, EVIDENCE_SCHEME])
    assert.ok(pkg.activationEvents.includes(`onFileSystem:${scheme}`), scheme);
});
