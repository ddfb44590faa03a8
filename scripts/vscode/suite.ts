// Compiles the extension-host mocha suite (test/vscode/suite/*.ts) to out/test/vscode/suite/*.js, the folder both
// runners hand to VS Code as extensionTestsPath. One bundle per test file (helpers are bundled into each) so
// index.js can add them to mocha by name;
// `vscode` comes from the extension host and mocha from the repo's node_modules at run time.
import * as esbuild from 'esbuild';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './server';

export const suiteSrc = join(repoRoot, 'test', 'vscode', 'suite');
export const suiteOut = join(repoRoot, 'out', 'test', 'vscode', 'suite');

export async function buildSuite(): Promise<string> {
  const entries = readdirSync(suiteSrc)
    .filter((f) => f === 'index.ts' || f.endsWith('.test.ts'))
    .map((f) => join(suiteSrc, f));
  rmSync(suiteOut, { recursive: true, force: true });
  await esbuild.build({
    entryPoints: entries,
    outdir: suiteOut,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    sourcemap: 'inline',
    external: ['vscode', 'mocha', 'cpu-features', './crypto/build/Release/sshcrypto.node'],
    loader: { '.py': 'text' },
    logLevel: 'warning',
  });
  return suiteOut;
}
