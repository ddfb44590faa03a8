// npm run lint (Python part): ruff's lint rules (pycodestyle E/W, pyflakes F) on python/ through ruff's WebAssembly
// build from npm (no PyPI needed), for the Python 3.8 the probes promise. Prints each problem as FILE:LINE:COL CODE
// message and exits 1 if there is any. Type checking is pyright's (pyrightconfig.json), run beside it.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Workspace } from '@astral-sh/ruff-wasm-nodejs';

const dir = join(import.meta.dirname, '..', 'python');
const workspace = new Workspace(
  { 'line-length': 120, 'target-version': 'py38', lint: { select: ['E', 'F', 'W'] } },
  0, // PositionEncoding.Utf16
);
let problems = 0;
for (const name of readdirSync(dir)
  .filter((n) => n.endsWith('.py'))
  .sort()) {
  const file = join('python', name);
  for (const d of workspace.check(readFileSync(join(dir, name), 'utf8'))) {
    problems++;
    console.log(`${file}:${d.start_location.row}:${d.start_location.column} ${d.code ?? ''} ${d.message}`);
  }
}
if (problems) {
  console.log(`ruff: ${problems} problem(s) in python/`);
  process.exit(1);
}
