// Runs the plain-Node test tiers with node's own test runner (TypeScript through tsx).
// Usage: node scripts/run-node-tests.mjs [unit|int] [extra node --test flags]
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const tier = process.argv[2] && !process.argv[2].startsWith('-') ? process.argv[2] : undefined;
const extra = process.argv.slice(tier ? 3 : 2);

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== 'node_modules' && name !== 'vscode') out.push(...walk(p));
    } else if (/\.(unit|int)\.test\.ts$/.test(name) && (!tier || name.endsWith(`.${tier}.test.ts`))) {
      out.push(p);
    }
  }
  return out;
}

const files = walk('test').sort();
if (files.length === 0) {
  console.error(`no ${tier ?? ''} test files found under test/`);
  process.exit(1);
}
const r = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-timeout=900000', ...extra, ...files],
  { stdio: 'inherit' },
);
process.exit(r.status ?? 1);
