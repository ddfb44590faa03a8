// Headless Debian Chromium through playwright-core, with a throwaway profile (no downloads: Playwright's own
// browsers are not installed on these machines).
import { existsSync, rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { onInterrupt } from './server';

export const chromiumPath = process.env['KG_CHROMIUM'] ?? '/usr/bin/chromium';

export interface Browser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

/** Headless Chromium as root on a machine without network: no sandbox, GPU, background traffic or sync. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-dev-shm-usage',
];

export async function launchBrowser(
  opts: { headless?: boolean; viewport?: { width: number; height: number } } = {},
): Promise<Browser> {
  if (!existsSync(chromiumPath))
    throw new Error(`${chromiumPath} is missing: apt-get install chromium (or set KG_CHROMIUM)`);
  const profile = await mkdtemp(join(tmpdir(), 'kg-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: opts.headless ?? true,
    viewport: opts.viewport ?? { width: 1280, height: 800 },
    // Chromium writes into XDG_CONFIG_HOME even with a user-data-dir; keep it inside the profile.
    env: { ...process.env, XDG_CONFIG_HOME: join(profile, 'xdg-config'), XDG_CACHE_HOME: join(profile, 'xdg-cache') },
    args: CHROMIUM_ARGS,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    unregister();
    await context.close().catch(() => undefined);
    rmSync(profile, { recursive: true, force: true });
  };
  const unregister = onInterrupt(close);
  return { context, page, close };
}
