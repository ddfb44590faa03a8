import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { isKnownGoodError } from '../../src/core/errors';
import { HELPER_SHRINK_AFTER_MS, helperArgv } from '../../src/core/probes/runner';
import { HELPER_LOADER } from '../../src/core/probes/sources';
import { DEFAULT_HELPER_SPARES, helperSparesSchema, parseSettings } from '../../src/core/settings';

// knownGood.helper.spares: how many processes the resident helper keeps made ahead on a host (python/kg_pool.py).

test('knownGood.helper.spares: a whole number from 1 to 8, else the default and a problem naming the key', () => {
  assert.equal(parseSettings(() => undefined).helperSpares, DEFAULT_HELPER_SPARES);
  assert.equal(parseSettings((k) => (k === 'helper.spares' ? 2 : undefined)).helperSpares, 2);
  for (const bad of [0, 9, 2.5, '4', -1, null]) {
    const s = parseSettings((k) => (k === 'helper.spares' ? bad : undefined));
    assert.equal(s.helperSpares, DEFAULT_HELPER_SPARES, String(bad));
    if (bad !== null) assert.match(s.problems.join('\n'), /^knownGood\.helper\.spares: expected a whole number/m);
  }
});

test("the helper's argv: the loader, then the pool's numbers as words of their own", () => {
  assert.deepEqual(helperArgv('python3'), [
    'python3',
    '-u',
    '-c',
    HELPER_LOADER,
    '--spares',
    String(DEFAULT_HELPER_SPARES),
    '--shrink-after-ms',
    String(HELPER_SHRINK_AFTER_MS),
  ]);
  assert.deepEqual(helperArgv('/opt/py', 2, 0).slice(4), ['--spares', '2', '--shrink-after-ms', '0']);
  for (const [spares, ms] of [
    [0, 1],
    [9, 1],
    [1.5, 1],
    [NaN, 1],
    [2, -1],
    [2, 0.5],
    [2, 1e12],
  ] as const) {
    assert.throws(
      () => helperArgv('python3', spares, ms),
      (e: unknown) => isKnownGoodError(e, 'internal'),
    );
  }
});

test('the pool numbers are the same in python/kg_pool.py, the settings schema and package.json', () => {
  const py = JSON.parse(
    execFileSync(
      'python3',
      ['-c', 'import json, kg_pool as p; print(json.dumps([p.MAX_SPARES, p.SPARES_DEFAULT, p.SHRINK_S]))'],
      { cwd: 'python', encoding: 'utf8' },
    ),
  ) as [number, number, number];
  assert.deepEqual(py, [8, DEFAULT_HELPER_SPARES, HELPER_SHRINK_AFTER_MS / 1000]);
  assert.ok(helperSparesSchema.safeParse(8).success && !helperSparesSchema.safeParse(9).success);
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
    contributes: {
      configuration: { properties: Record<string, { default: number; minimum: number; maximum: number }> };
    };
  };
  const entry = pkg.contributes.configuration.properties['knownGood.helper.spares'];
  assert.deepEqual([entry?.default, entry?.minimum, entry?.maximum], [DEFAULT_HELPER_SPARES, 1, 8]);
});
