import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fromRemoteFileUri, readFileProbe, renderFileText, toRemoteFileUri } from '../../src/core/remote/readFile';

test('remote file URI codec round-trips nasty paths and keeps the file name for the tab', () => {
  for (const path of ['/w/train_log.jsonl', "/w/run a/it's $(x) #1?.log", '/w/ünï 🚀/stdout.log', '/w/new\nline.log']) {
    const parts = toRemoteFileUri({ hostId: 'settings:gpu box', path, maxBytes: 4096 });
    assert.equal(parts.scheme, 'knownGood-remote');
    assert.ok(parts.path.endsWith(path.split('/').pop()!));
    // What VS Code's Uri gives back: path and query as plain strings.
    assert.deepEqual(fromRemoteFileUri({ path: parts.path, query: parts.query }), {
      hostId: 'settings:gpu box',
      path,
      maxBytes: 4096,
    });
  }
  const b = toRemoteFileUri({
    hostId: 'local',
    path: '/w/\ufffd.log',
    pathB64: Buffer.from('/w/\xff.log', 'latin1').toString('base64'),
    maxBytes: 10,
  });
  assert.equal(fromRemoteFileUri(b).pathB64, Buffer.from('/w/\xff.log', 'latin1').toString('base64'));
  assert.throws(() => fromRemoteFileUri({ path: '/x', query: 'host=a' }), /not a Known Good remote file URI/);
});

test('a large log is read from its end: the header says how much was left out, the text starts at a whole line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-readfile-'));
  const file = join(dir, 'train_stdout.log');
  const lines = Array.from({ length: 5000 }, (_, i) => `step ${i} loss ${(1 / (i + 1)).toFixed(6)}`);
  writeFileSync(file, lines.join('\n') + '\n');
  const call = readFileProbe({ text: file }, { maxBytes: 4096 });
  const raw = execFileSync('python3', ['python/read_file.py', ...call.args], { encoding: 'utf8' });
  const r = call.parse(JSON.parse(raw));
  assert.equal(r.end, r.size);
  assert.equal(r.end - r.start, 4096);
  const text = renderFileText(r, 'Load more.');
  const [header, first] = text.split('\n');
  assert.match(header!, /^\[Known Good\] The first .* of .* are not shown\. Load more\.$/);
  assert.match(first!, /^step \d+ loss /, 'starts at a whole line');
  assert.ok(text.endsWith('step 4999 loss 0.000200\n'));
  // A small file comes back whole, without a header.
  const small = join(dir, 'small.log');
  writeFileSync(small, 'one\ntwo\n');
  const c2 = readFileProbe({ text: small }, { maxBytes: 4096 });
  assert.equal(
    renderFileText(
      c2.parse(JSON.parse(execFileSync('python3', ['python/read_file.py', ...c2.args], { encoding: 'utf8' }))),
      'x',
    ),
    'one\ntwo\n',
  );
});
