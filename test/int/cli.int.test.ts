import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkArgvUtf8, parseTimeout, printable, printableLines, printableTree } from '../../src/cli/output';

/** The CLI as a user runs it, from source (no build needed): `node --import tsx src/cli/main.ts …`. */
const CLI = ['--import', 'tsx', 'src/cli/main.ts'];

function cli(...argv: string[]) {
  return spawnSync(process.execPath, [...CLI, ...argv], { encoding: 'utf8', maxBuffer: 64 << 20 });
}

/** Runs the CLI with stdout into a reader that takes nothing for `stallMs`, then reads slowly: bytes received. */
function slowRead(argv: string[], stallMs: number): Promise<{ bytes: number; text: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
    const chunks: Buffer[] = [];
    child.stdout.pause();
    setTimeout(() => {
      child.stdout.on('data', (c: Buffer) => {
        chunks.push(c);
        // a slow reader: stop for a moment after every chunk
        child.stdout.pause();
        setTimeout(() => child.stdout.resume(), 2);
      });
      child.stdout.resume();
    }, stallMs);
    // 'close' comes after both the exit and the end of stdout, in whichever order those two came.
    child.on('close', (code) => {
      const buf = Buffer.concat(chunks);
      resolve({ bytes: buf.length, text: buf.toString('utf8'), code });
    });
    child.on('error', reject);
  });
}

void describe('CLI output reaches a pipe whole', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'kg-cli-'));
    for (let i = 0; i < 10_000; i++) mkdirSync(join(root, `run-${String(i).padStart(5, '0')}`));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  void it('exec: 3,000,001 bytes through a stalled, slow reader and through wc -c', async () => {
    const argv = ['exec', 'local', '--', 'python3', '-c', "print('x'*3000000)"];
    const r = await slowRead(argv, 1000);
    assert.equal(r.bytes, 3_000_001);
    assert.equal(r.code, 0);
    const wc = spawnSync(
      '/bin/sh',
      ['-c', `"$0" --import tsx src/cli/main.ts exec local -- python3 -c "print('x'*3000000)" | (sleep 1; wc -c)`],
      { encoding: 'utf8', argv0: process.execPath },
    );
    assert.equal(wc.stdout.trim(), '3000001', wc.stderr);
  });

  void it('ls --json of a root with 10,000 folders: the whole document, valid JSON', async () => {
    const r = await slowRead(['ls', `local:${root}`, '--json'], 1000);
    assert.equal(r.code, 0);
    assert.ok(r.bytes > 1_000_000, `${r.bytes} bytes`);
    const doc = JSON.parse(r.text) as { roots: { entries?: unknown[] }[] };
    assert.equal(doc.roots.length, 1);
  });
});

void describe('CLI refuses bad input with a clear message and exit status 2', () => {
  void it('--timeout must be seconds above 0 and at most a day', () => {
    for (const bad of ['abc', '0', '1e9', '-1', '90000', '', 'NaN', 'Infinity']) {
      const r = cli('exec', 'local', '--timeout', bad, '--', 'true');
      assert.equal(r.status, 2, `${bad}: ${r.stderr}`);
      assert.match(r.stderr, /--timeout .*: expected a number of seconds above 0 and at most 86400/);
      assert.doesNotMatch(r.stderr, /NaN s/);
    }
    assert.equal(cli('exec', 'local', '--timeout', '2.5', '--', 'true').status, 0);
    assert.equal(parseTimeout('2.5'), 2500);
    assert.equal(parseTimeout('86400'), 86_400_000);
  });

  void it('a word that is not valid UTF-8 is refused, not acted on as another path', () => {
    // printf makes the byte 0xff, which node turns into U+FFFD when it decodes argv
    const r = spawnSync(
      '/bin/sh',
      ['-c', `exec "$0" --import tsx src/cli/main.ts exec local -- ls "$(printf '/tmp/kg\\377dir')"`, process.execPath],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /argument 5 \(\/tmp\/kg\ufffddir\) is not valid UTF-8/);
    assert.throws(() => checkArgvUtf8(['ls', 'local:/a\ufffdb']), /argument 2 .* is not valid UTF-8/);
    checkArgvUtf8(['ls', 'local:/ünïcødé/🚀']);
  });
});

void describe('CLI text output shows control characters escaped', () => {
  void it('ls status lines of roots named with a newline and an escape sequence', () => {
    const base = mkdtempSync(join(tmpdir(), 'kg-cli-names-'));
    try {
      const nasty = join(base, 'a\nFAKE  ok\x1b[31mred\x07');
      mkdirSync(nasty);
      const missing = join(base, 'gone\r\x1b]0;title\x07');
      const r = cli('ls', 'local', nasty, missing);
      // eslint-disable-next-line no-control-regex
      assert.doesNotMatch(r.stdout, /[\x00-\x08\x0b-\x1f\x7f]/);
      assert.ok(r.stdout.includes('a\\nFAKE  ok\\x1b[31mred\\x07'), r.stdout);
      assert.ok(r.stdout.includes('gone\\r\\x1b]0;title\\x07'), r.stdout);
      assert.ok(!r.stdout.split('\n').some((l) => l.startsWith('FAKE')), 'no forged line');
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  void it('printable escapes C0, DEL, C1 and bidi overrides; printableTree walks values and keys', () => {
    assert.equal(printable('a\tb\nc\x1b[0m\x7f\x9b\u202eZ'), 'a\\tb\\nc\\x1b[0m\\x7f\\x9b\\u202eZ');
    assert.equal(printable('ünïcødé 🚀 /ok'), 'ünïcødé 🚀 /ok');
    assert.deepEqual(printableTree({ 'k\n': ['v\x1b', 1, null] }), { 'k\\n': ['v\\x1b', 1, null] });
    assert.equal(printableLines('no such file: /a\nb\n\nUsage:\n  x\ty'), 'no such file: /a\\nb\n\nUsage:\n  x\\ty');
  });
});
