// The Marketplace / Open VSX icon (media/icon.png, 128×128): the activity bar's mark (media/known-good.svg, its own
// paths unchanged) drawn large on a tile, rendered by the Chromium the UI tests use. Not part of the build: run it
// again when the mark changes, look at the picture, commit it.
//
//   node scripts/icon.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
/** The tile's colour, also package.json's galleryBanner.color: the Marketplace page's header matches the icon. */
const TILE = '#1f2937';
const CHECK = '#4ade80';

const mark = readFileSync(join(root, 'media', 'known-good.svg'), 'utf8');
const inner = /<svg[^>]*>([\s\S]*)<\/svg>/.exec(mark)?.[1];
if (!inner) throw new Error('media/known-good.svg: no <svg> element');
// The check mark (the last path) in green; the chart and its baseline in white.
const parts = inner.match(/<(path|circle)[^>]*\/>/g) ?? [];
const check = parts.at(-1);
const chart = parts.slice(0, -1).join('');

// The mark's strokes span about x 3-21, y 4.6-21 of its 24×24 box: ×5 and centred on the 128 tile.
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="128" height="128" viewBox="0 0 128 128">
  <rect x="0" y="0" width="128" height="128" rx="26" fill="${TILE}"/>
  <g transform="translate(4 0) scale(5)" fill="none" stroke-width="1.6" stroke-linecap="round" stroke-linejoin="round">
    <g stroke="#ffffff" color="#ffffff">${chart}</g>
    <g stroke="${CHECK}" color="${CHECK}">${check}</g>
  </g>
</svg>`;

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({ viewport: { width: 128, height: 128 }, deviceScaleFactor: 1 });
  await page.setContent(`<html><body style="margin:0;background:transparent">${svg}</body></html>`);
  writeFileSync(join(root, 'media', 'icon.png'), await page.locator('svg').screenshot({ omitBackground: true }));
} finally {
  await browser.close();
}
