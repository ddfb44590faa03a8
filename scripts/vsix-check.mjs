// `npm run package`'s last step: the .vsix holds what the extension needs and nothing else, and passes the checks
// Open VSX makes before it takes a package. Exit 1 with each problem named.
//
//   node scripts/vsix-check.mjs dist-vsix/known-good.vsix
//
// What it needs: the manifest, README, CHANGELOG and LICENSE; the extension host bundle and the dashboard webview's
// files; every probe in python/; and of media/ exactly the files package.json or the README names (icon, views,
// walkthrough pictures, screenshots). Not the CLI (dist/cli.js: its own package in packages/cli), no source maps.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inflateRawSync } from 'node:zlib';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const vsix = process.argv[2];
if (!vsix) {
  console.error('usage: node scripts/vsix-check.mjs PATH.vsix');
  process.exit(2);
}

/** The entries of a zip archive (name → its bytes), from its central directory. */
function unzip(buf) {
  const eocd = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd < 0) throw new Error(`${vsix}: not a zip archive`);
  const count = buf.readUInt16LE(eocd + 10);
  let at = buf.readUInt32LE(eocd + 16);
  const entries = new Map();
  for (let i = 0; i < count; i++) {
    const method = buf.readUInt16LE(at + 10);
    const size = buf.readUInt32LE(at + 20);
    const nameLen = buf.readUInt16LE(at + 28);
    const extraLen = buf.readUInt16LE(at + 30);
    const commentLen = buf.readUInt16LE(at + 32);
    const local = buf.readUInt32LE(at + 42);
    const name = buf.subarray(at + 46, at + 46 + nameLen).toString('utf8');
    const dataAt = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const raw = buf.subarray(dataAt, dataAt + size);
    entries.set(name, method === 0 ? raw : () => inflateRawSync(raw));
    at += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

const entries = unzip(readFileSync(vsix));
const bytes = (name) => {
  const e = entries.get(name);
  return typeof e === 'function' ? e() : e;
};
const manifest = JSON.parse(bytes('extension/package.json').toString('utf8'));
const readme = bytes('extension/readme.md')?.toString('utf8') ?? '';

// media/ files named by the manifest (icon, views, walkthrough) or the README (its pictures)
const named = new Set(
  [
    ...JSON.stringify(manifest).matchAll(/media\/[\w./-]+\.(?:png|svg)/g),
    ...readme.matchAll(/media\/[\w./-]+\.png/g),
  ].map((m) => `extension/${m[0]}`),
);
const probes = readdirSync(join(root, 'python'))
  .filter((n) => n.endsWith('.py'))
  .map((n) => `extension/python/${n}`);
const needed = new Set([
  '[Content_Types].xml',
  'extension.vsixmanifest',
  'extension/package.json',
  'extension/readme.md',
  'extension/changelog.md',
  'extension/LICENSE.txt',
  'extension/dist/extension.js',
  'extension/dist/webview/dashboard.js',
  'extension/dist/webview/dashboard.css',
  'extension/dist/webview/uPlot.min.css',
  ...probes,
  ...named,
]);

const problems = [];
for (const name of entries.keys())
  if (!needed.has(name)) problems.push(`ships ${name}, which the extension does not use`);
for (const name of needed) if (!entries.has(name)) problems.push(`lacks ${name}`);

// What Open VSX checks before it takes a package (ovsx publish: publisher, name and version; a license), and what
// the Marketplace shows on the extension's page.
for (const field of ['publisher', 'name', 'version', 'license', 'icon', 'displayName', 'description']) {
  if (!manifest[field]) problems.push(`package.json has no "${field}"`);
}
if (manifest.icon && !/\.png$/.test(manifest.icon)) problems.push(`the icon must be a PNG: ${manifest.icon}`);
const icon = manifest.icon && bytes(`extension/${manifest.icon}`);
if (icon && (icon.readUInt32BE(16) !== 128 || icon.readUInt32BE(20) !== 128)) {
  problems.push(`${manifest.icon} is ${icon.readUInt32BE(16)}×${icon.readUInt32BE(20)}, not 128×128`);
}
if (manifest.bin) problems.push('package.json has "bin": an extension cannot install a command (packages/cli does)');
if (/example\.(invalid|com)/.test(JSON.stringify(manifest))) problems.push('package.json links to a placeholder');

if (problems.length) {
  for (const p of problems) console.error(`vsix-check: ${p}`);
  process.exit(1);
}
console.log(`vsix-check: ${vsix} holds the ${entries.size} files the extension needs, nothing else`);
