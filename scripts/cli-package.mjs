// Stages the `known-good` npm package in packages/cli (run by its `prepack`, so `npm pack` there is the one step):
// the CLI bundled whole (its dependencies inside: installing the tarball fetches nothing), the Python probes beside
// it (src/core/probes/sources.ts finds python/ above the bundle), and the LICENSE. The version must be the
// extension's: one release, one number.
import * as esbuild from 'esbuild';
import { chmod, copyFile, mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliBundle } from './bundles.mjs';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const pkgDir = join(root, 'packages', 'cli');

const version = async (dir) => JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')).version;
const [extension, cli] = [await version(root), await version(pkgDir)];
if (extension !== cli) {
  console.error(`packages/cli/package.json has version ${cli}, the extension ${extension}: make them the same`);
  process.exit(1);
}

await rm(join(pkgDir, 'dist'), { recursive: true, force: true });
await rm(join(pkgDir, 'python'), { recursive: true, force: true });
await esbuild.build({ ...cliBundle(join(pkgDir, 'dist'), true), absWorkingDir: root });
await chmod(join(pkgDir, 'dist', 'cli.js'), 0o755);
await mkdir(join(pkgDir, 'python'));
for (const name of await readdir(join(root, 'python'))) {
  if (name.endsWith('.py')) await copyFile(join(root, 'python', name), join(pkgDir, 'python', name));
}
await copyFile(join(root, 'LICENSE'), join(pkgDir, 'LICENSE'));
