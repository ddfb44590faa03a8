// The esbuild settings the extension host bundle and the CLI share (scripts/build.mjs, scripts/cli-package.mjs).

/** ssh2 loads optional native addons inside try/catch; leaving them out makes it fall back to pure JS. */
export const nodeExternals = ['vscode', 'cpu-features', './crypto/build/Release/sshcrypto.node'];

/** A self-contained Node bundle: ssh2, ssh-config and zod are inside, so what ships needs no `npm install`. */
export function nodeBundle(production) {
  return {
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
}

/** The `known-good` command line, written to `outdir/cli.js` with the shebang npm's bin link needs. */
export function cliBundle(outdir, production) {
  return {
    ...nodeBundle(production),
    entryPoints: { cli: 'src/cli/main.ts' },
    outdir,
    banner: { js: '#!/usr/bin/env node' },
  };
}
