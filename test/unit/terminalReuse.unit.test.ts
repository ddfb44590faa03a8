import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chooseTerminal, type KnownTerminal } from '../../src/core/terminal/reuse';

const name = 'Known Good: GPU probe @ gpu-box';
const of = (m: Record<string, KnownTerminal>) => (n: string) => m[n];

void test('one terminal per host and kind: an ended one runs the next probe, a running one is left alone', () => {
  assert.deepEqual(chooseTerminal(name, of({})), { kind: 'new', name });
  assert.deepEqual(chooseTerminal(name, of({ [name]: { closed: false, ended: true } })), { kind: 'reuse', name });
  assert.deepEqual(chooseTerminal(name, of({ [name]: { closed: true, ended: true } })), { kind: 'new', name });
  assert.deepEqual(chooseTerminal(name, of({ [name]: { closed: false, ended: false } })), {
    kind: 'new',
    name: `${name} (2)`,
  });
  assert.deepEqual(
    chooseTerminal(
      name,
      of({ [name]: { closed: false, ended: false }, [`${name} (2)`]: { closed: false, ended: false } }),
    ),
    { kind: 'new', name: `${name} (3)` },
  );
  assert.deepEqual(
    chooseTerminal(
      name,
      of({ [name]: { closed: false, ended: false }, [`${name} (2)`]: { closed: false, ended: true } }),
    ),
    { kind: 'reuse', name: `${name} (2)` },
  );
});
