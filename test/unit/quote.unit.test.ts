import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { shellJoin, shellQuote } from '../../src/core/quote';

const NASTY = [
  'plain',
  'with space',
  "it's",
  '"double"',
  '$(touch /tmp/kg-pwned)',
  '`touch /tmp/kg-pwned`',
  '$HOME',
  'line\nbreak',
  'tab\there',
  'ünïcødé 🚀',
  '-n',
  '--flag=value',
  '',
  '*',
  '~',
  'a;b|c&d',
  '\\back\\slash',
  "'",
  "''",
  '!bang',
  '=start',
];

test('shellQuote keeps every word intact through a real POSIX shell', () => {
  // printf %s\0 prints each argument as received; split on NUL to compare word by word.
  for (const shell of ['/bin/sh', '/bin/bash']) {
    const out = execFileSync(shell, ['-c', `printf '%s\\0' ${shellJoin(NASTY)}`], { encoding: 'utf8' });
    assert.deepEqual(out.split('\0').slice(0, -1), NASTY, shell);
  }
});

test('shellQuote leaves plain words readable and quotes the rest', () => {
  assert.equal(shellQuote('python3'), 'python3');
  assert.equal(shellQuote('/usr/bin/python3'), '/usr/bin/python3');
  assert.equal(shellQuote("it's"), `'it'\\''s'`);
  assert.equal(shellQuote(''), `''`);
  assert.equal(shellQuote('-n'), `'-n'`);
  assert.equal(shellQuote('$(x)'), `'$(x)'`);
});

test('shellQuote refuses NUL, shellJoin refuses an empty command', () => {
  assert.throws(() => shellQuote('a\0b'), /NUL/);
  assert.throws(() => shellJoin([]), /empty/);
});
