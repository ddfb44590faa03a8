import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import * as constants from '../../src/constants';

/*
 * Command ids live in src/constants.ts only, and package.json contributes exactly those: a command registered under
 * an id package.json lacks has no title and no menu; one package.json names but nobody registers fails when clicked.
 */

interface Manifest {
  activationEvents: string[];
  contributes: {
    commands: { command: string }[];
    menus: Record<string, { command: string }[]>;
    views: Record<string, { id: string }[]>;
  };
}
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as Manifest;
const contributed = manifest.contributes.commands.map((c) => c.command);

/** Every command id of src/constants.ts: the values of its exported `…Commands` tables. */
function constantIds(): string[] {
  return Object.entries(constants)
    .filter(([name]) => name.endsWith('Commands'))
    .flatMap(([, table]) => Object.values(table as Record<string, string>));
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

void test('package.json contributes exactly the command ids of src/constants.ts, each once', () => {
  const ids = constantIds();
  assert.ok(ids.length >= 40, `only ${ids.length} ids found: are the tables still exported from constants.ts?`);
  assert.equal(new Set(ids).size, ids.length, 'an id is in two tables');
  assert.equal(new Set(contributed).size, contributed.length, 'package.json contributes a command twice');
  assert.deepEqual([...ids].sort(), [...contributed].sort());
});

void test('every menu entry names a contributed command; views and webview types match constants.ts', () => {
  for (const [menu, entries] of Object.entries(manifest.contributes.menus)) {
    for (const e of entries) assert.ok(contributed.includes(e.command), `${menu}: ${e.command} is not contributed`);
  }
  const views = Object.values(manifest.contributes.views).flatMap((v) => v.map((x) => x.id));
  assert.ok(views.includes(constants.VIEW_REMOTE_RUNS));
  for (const type of [constants.DASHBOARD_VIEW_TYPE, constants.WHAT_CHANGED_VIEW_TYPE]) {
    assert.ok(manifest.activationEvents.includes(`onWebviewPanel:${type}`), type);
  }
});

void test('no file under src/ but constants.ts spells a command id', () => {
  const ids = new Set(contributed);
  const found: string[] = [];
  for (const file of sources('src')) {
    if (file === join('src', 'constants.ts')) continue;
    // quoted as code ('…' or "…"); doc comments name ids in backticks, and may
    for (const m of readFileSync(file, 'utf8').matchAll(/(['"])(knownGood\.[\w.]+)\1/g)) {
      if (ids.has(m[2]!)) found.push(`${file}: ${m[2]!}`);
    }
  }
  assert.deepEqual(found, []);
});
