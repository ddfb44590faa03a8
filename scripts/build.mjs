// The esbuild builds of a checkout: the extension host bundle, the CLI and the dashboard webview.
import * as esbuild from 'esbuild';
import { mkdir, copyFile } from 'node:fs/promises';
import { cliBundle, nodeBundle } from './bundles.mjs';

const watch = process.argv.includes('--watch');
const production = process.argv.includes('--production');

const builds = [
  { ...nodeBundle(production), entryPoints: { extension: 'src/extension.ts' }, outdir: 'dist' },
  // the CLI of a checkout (`node dist/cli.js`); the npm package's copy is built by scripts/cli-package.mjs
  cliBundle('dist', production),
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
