#!/usr/bin/env node
// Runs independent npm scripts at the same time, for `npm test` on a 2-core machine: two tiers that do not depend on
// each other (typecheck and lint; the Python tests and the Node unit tests) take the time of the longer one instead of
// the sum. The first script's output streams as it comes; each later one's is held and printed whole once it ends, so
// two logs never interleave. Every script runs to its end (all failures are shown); the exit status is the first
// non-zero one.
//   node scripts/both.mjs <npm script> <npm script> …
import { spawn } from 'node:child_process';

const scripts = process.argv.slice(2);
if (scripts.length === 0) {
  process.stderr.write('usage: node scripts/both.mjs <npm script> <npm script> …\n');
  process.exit(2);
}
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const started = Date.now();
const secs = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

const runs = scripts.map(
  (name, i) =>
    new Promise((resolve) => {
      const child = spawn(npm, ['run', '--silent', name], { stdio: i === 0 ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
      const held = [];
      child.stdout?.on('data', (b) => held.push(b));
      child.stderr?.on('data', (b) => held.push(b));
      child.on('error', (e) => resolve({ name, code: 127, held: [Buffer.from(`${e.message}\n`)] }));
      child.on('close', (code, signal) => resolve({ name, code: code ?? (signal ? 128 : 1), held }));
    }),
);

let status = 0;
for (const [i, run] of runs.entries()) {
  const { name, code, held } = await run;
  if (i > 0) {
    process.stdout.write(`\n[both] npm run ${name} (ran beside ${scripts[0]}):\n`);
    for (const b of held) process.stdout.write(b);
  }
  process.stdout.write(`[both] npm run ${name} ${code === 0 ? 'passed' : `FAILED (exit ${code})`}; ${secs()} so far\n`);
  if (code !== 0 && status === 0) status = code;
}
process.exit(status);
