// One esbuild config for the extension host bundle, the CLI and the dashboard webview.
import * as esbuild from 'esbuild';
import { mkdir, copyFile } from 'node:fs/promises';

const watch = process.argv.includes('--watch');
const production = process.argv.includes('--production');

/** ssh2 loads optional native addons inside try/catch; leaving them out makes it fall back to pure JS. */
const nodeExternals = ['vscode', 'cpu-features', './crypto/build/Release/sshcrypto.node'];

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: !production,
  minify: production,
  external: nodeExternals,
  logLevel: 'warning',
  loader: { '.py': 'text' },
};

const builds = [
  { ...common, entryPoints: { extension: 'src/extension.ts' }, outdir: 'dist' },
  { ...common, entryPoints: { cli: 'src/cli/main.ts' }, outdir: 'dist', banner: { js: '#!/usr/bin/env node' } },
];

async function webview() {
  const { existsSync } = await import('node:fs');
  if (!existsSync('webview/src/main.ts')) return [];
  await mkdir('dist/webview', { recursive: true });
  if (existsSync('node_modules/uplot/dist/uPlot.min.css')) {
    await copyFile('node_modules/uplot/dist/uPlot.min.css', 'dist/webview/uPlot.min.css');
  }
  return [
    {
      bundle: true,
      platform: 'browser',
      target: 'es2022',
      format: 'iife',
      sourcemap: !production,
      minify: production,
      logLevel: 'warning',
      entryPoints: { dashboard: 'webview/src/main.ts' },
      outdir: 'dist/webview',
    },
  ];
}

const all = [...builds, ...(await webview())];
if (watch) {
  for (const b of all) {
    const ctx = await esbuild.context(b);
    await ctx.watch();
  }
  console.log('esbuild: watching');
} else {
  await Promise.all(all.map((b) => esbuild.build(b)));
}
