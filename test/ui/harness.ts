// UI scenarios in real VS Code: the pinned VS Code server with the extension under development, driven by
// Playwright in headless Chromium. One scenario = one small `test/ui/<feature>.ui.ts` file:
//
//   import { scenario } from './harness';
//   scenario('expand a root lists its checkpoints', { sshHost: true, localRoots: ['<abs path>'] }, async (vs) => {
//     await vs.openView('Known Good');
//     await vs.expand('This machine');
//     await vs.treeItem('step_600').waitFor();
//     await vs.screenshot('tree-steps');
//   });
//
// Run one: `node --import tsx --test test/ui/<feature>.ui.ts` (after `npm run build`); all: `npm run test:vscode`.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { launchBrowser, type Browser } from '../../scripts/vscode/browser';
import { onInterrupt, repoRoot, startServer, type VsCodeServer } from '../../scripts/vscode/server';
import { startSshd, type TestSshd } from '../support/sshd';

export const artifactsDir = join(repoRoot, 'test-artifacts', 'ui');

/** Name of the settings host that points at the test sshd. */
export const TEST_SSH_HOST = 'test-sshd';

export interface ScenarioOptions {
  /** User settings for the window (knownGood.* and anything else). */
  settings?: Record<string, unknown>;
  /** Roots of "This machine" (knownGood.localRoots). */
  localRoots?: string[];
  /**
   * Start a real OpenSSH sshd on loopback and add it to knownGood.hosts as `test-sshd` (with these roots when an
   * object is given; default: one empty folder created for it). `entry` adds keys to its knownGood.hosts entry
   * (e.g. `slurm: { conf }` to make it a Slurm login node).
   */
  sshHost?:
    | boolean
    | {
        roots?: string[];
        /** More keys of the test host's settings entry (e.g. `slurm`), or a function of the scenario's temp folder. */
        entry?: Record<string, unknown> | ((tmp: string) => Record<string, unknown>);
        /**
         * false: start the sshd only (a scenario adds the host itself). 'workspace': the entry goes into the opened
         * folder's `.vscode/settings.json` (the known_hosts file stays in the user's settings).
         */
        inSettings?: false | 'workspace';
        /** Its name in knownGood.hosts (default `test-sshd`). */
        name?: string;
      };
  /** Folder the window opens (default: an empty one). */
  workspace?: string;
  /**
   * The opened folder's `.vscode/settings.json`, made from the scenario's temp folder and sshd (the folder is made
   * in that temp folder unless `workspace` names one).
   */
  workspaceSettings?: (ctx: { tmp: string; sshd: TestSshd | undefined }) => Record<string, unknown>;
  /** Workspace trust on and the folder not trusted: the window opens in Restricted Mode (default: trust off). */
  restrictedMode?: boolean;
  /**
   * The extension installed as a user has it (Production mode, as from the Marketplace) instead of loaded as the
   * extension under development: for what it does only when installed (opening Get Started on the first run).
   */
  installed?: boolean;
  /** Per-scenario time limit (default 120 s). */
  timeoutMs?: number;
}

export interface Workbench {
  readonly page: Page;
  readonly server: VsCodeServer;
  /** The test sshd, when `sshHost` was asked for. */
  readonly sshd: TestSshd | undefined;
  /** A temp folder deleted after the scenario: put fixtures here. */
  readonly tmp: string;
  /** Clicks the activity-bar entry and waits for its side bar. */
  openView(title: string): Promise<void>;
  /** A tree row in the side bar by its accessible name (label, then description). */
  treeItem(name: string | RegExp): Locator;
  /**
   * A tree row in the side bar by its visible label, exactly (`step_600`, not `step_6000`): for rows whose accessible
   * name is their tooltip (a full path) rather than their label.
   */
  row(this: void, label: string): Locator;
  /** Expands a tree row (no-op when already expanded) and waits until it is. */
  expand(name: string | RegExp): Promise<Locator>;
  /** Right-clicks a tree row and picks a context-menu entry by its title. */
  contextMenu(item: string | RegExp, command: string | RegExp): Promise<void>;
  /** Runs a command through the command palette (F1), picking the first entry that matches `text`. */
  commandPalette(text: string): Promise<void>;
  /** Saves test-artifacts/ui/<name>.png and returns its path. */
  screenshot(name: string): Promise<string>;
}

const exact = (name: string | RegExp): RegExp =>
  typeof name === 'string' ? new RegExp(`^${escapeRe(name)}(\\s|,|$)`) : name;
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Clicks a context-menu entry. On a loaded machine the menu can still be laying out when the click lands and the
 * click is lost (the menu stays open with the entry highlighted): then the keyboard activates it.
 */
export async function pickMenuItem(page: Page, entry: Locator, timeout = 30_000): Promise<number> {
  await entry.waitFor({ timeout });
  await entry.hover({ timeout });
  let clickedAt = Date.now();
  await entry.click({ timeout });
  await page.waitForTimeout(300);
  if (await entry.isVisible().catch(() => false)) {
    await entry.hover();
    clickedAt = Date.now();
    await page.keyboard.press('Enter');
  }
  return clickedAt;
}

/**
 * Moves the mouse off a row's tooltip (VS Code's custom hover): one left open by the last row the mouse crossed can
 * lie over the row to click next, and Playwright, moving onto that row, lands on the hover and keeps it open.
 */
export async function dismissHover(page: Page): Promise<void> {
  const hover = page.locator('.context-view .hover-contents, .workbench-hover').first();
  if (!(await hover.isVisible().catch(() => false))) return;
  await page.mouse.move(1, 1);
  if (
    await hover.waitFor({ state: 'hidden', timeout: 3_000 }).then(
      () => true,
      () => false,
    )
  )
    return;
  await page.keyboard.press('Escape');
}

/**
 * Right-clicks `row` and picks `entry` from its context menu. A tree redraw (a listing arriving, ages ticking)
 * can close the menu before the pick lands; then it is opened again (three tries). A lost pick never ran the
 * command (Playwright throws only for a click it could not make). Returns when the entry was clicked (Date.now()):
 * "click to visible" timings start there, not at the right-click.
 */
export async function rowMenu(page: Page, row: Locator, entry: Locator): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    await dismissHover(page);
    await row.click({ button: 'right' });
    try {
      return await pickMenuItem(page, entry, 10_000);
    } catch (e) {
      if (attempt >= 3) throw e;
      await page.keyboard.press('Escape');
    }
  }
}

/**
 * Developer: Reload Window, as a person does it: the workbench shuts down properly (editors and webview states are
 * saved; a bare page reload can lose them), then loads again. Returns once the new workbench is up.
 */
export async function reloadWindow(vs: Workbench): Promise<void> {
  const old = await vs.page.evaluate(() => performance.timeOrigin);
  await vs.commandPalette('Developer: Reload Window');
  await vs.page.waitForFunction((t) => performance.timeOrigin !== t, old, { timeout: 60_000 });
  await vs.page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
}

/** Polls a locator's attribute (the element may be redrawn meanwhile; a handle would go stale). */
async function waitAttribute(locator: Locator, name: string, value: string, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if ((await locator.getAttribute(name, { timeout: 2_000 }).catch(() => null)) === value) return true;
    await locator.page().waitForTimeout(200);
  }
  return false;
}

/**
 * A checkpoint as the demo writes it (scripts/demo/write_checkpoint.py: a real torch zip-format checkpoint with
 * `args`), at `<dir>/checkpoint.pt`; returns the args as JSON.
 */
export function writeDemoCheckpoint(dir: string, step: number, args: Record<string, unknown>): string {
  mkdirSync(dir, { recursive: true });
  const json = JSON.stringify(args);
  execFileSync('python3', [
    join(repoRoot, 'scripts', 'demo', 'write_checkpoint.py'),
    join(dir, 'checkpoint.pt'),
    '--step',
    String(step),
    '--args-json',
    json,
  ]);
  return json;
}

export function scenario(name: string, options: ScenarioOptions, body: (vs: Workbench) => Promise<void>): void {
  void test(name, { timeout: options.timeoutMs ?? 120_000 }, async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'kg-ui-'));
    let sshd: TestSshd | undefined;
    let server: VsCodeServer | undefined;
    let browser: Browser | undefined;
    const consoleLines: string[] = [];
    try {
      const settings: Record<string, unknown> = { 'knownGood.includeSshConfigHosts': false, ...options.settings };
      const folderSettings: Record<string, unknown> = {};
      if (options.localRoots) settings['knownGood.localRoots'] = options.localRoots;
      if (options.sshHost) {
        const started = await startSshd();
        sshd = started;
        onInterrupt(() => started.stop());
        let roots: string[];
        const given = typeof options.sshHost === 'object' ? options.sshHost : undefined;
        if (given?.roots) roots = given.roots;
        else {
          roots = [join(tmp, 'ssh-runs')];
          mkdirSync(roots[0]!, { recursive: true });
        }
        const where = typeof options.sshHost !== 'object' ? 'user' : (options.sshHost.inSettings ?? 'user');
        const entry = {
          name: given?.name ?? TEST_SSH_HOST,
          host: '127.0.0.1',
          port: sshd.port,
          user: sshd.user,
          identityFile: sshd.identityFile,
          roots,
          ...(typeof given?.entry === 'function' ? given.entry(tmp) : given?.entry),
        };
        const into = where === 'workspace' ? folderSettings : where === 'user' ? settings : undefined;
        if (into) {
          const hosts = Array.isArray(into['knownGood.hosts']) ? (into['knownGood.hosts'] as unknown[]) : [];
          into['knownGood.hosts'] = [...hosts, entry];
          settings['knownGood.knownHostsFile'] = sshd.knownHostsFile;
        }
      }
      const own = options.workspaceSettings?.({ tmp, sshd }) ?? {};
      const ownHosts = Array.isArray(own['knownGood.hosts']) ? (own['knownGood.hosts'] as unknown[]) : [];
      const sshdHosts = Array.isArray(folderSettings['knownGood.hosts']) ? folderSettings['knownGood.hosts'] : [];
      Object.assign(folderSettings, own);
      if (ownHosts.length || sshdHosts.length) folderSettings['knownGood.hosts'] = [...ownHosts, ...sshdHosts];
      let workspace = options.workspace;
      if (Object.keys(folderSettings).length) {
        workspace ??= join(tmp, 'workspace');
        mkdirSync(join(workspace, '.vscode'), { recursive: true });
        writeFileSync(join(workspace, '.vscode', 'settings.json'), JSON.stringify(folderSettings, null, 2) + '\n');
      }
      server = await startServer({
        settings,
        ...(workspace ? { workspace } : {}),
        ...(options.restrictedMode ? { workspaceTrust: true } : {}),
        ...(options.installed ? { installExtension: repoRoot } : {}),
        log: () => undefined,
      });
      browser = await launchBrowser({ headless: process.env['KG_UI_HEADED'] !== '1' });
      const page = browser.page;
      page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
      page.on('pageerror', (e) => consoleLines.push(`[pageerror] ${e.message}`));
      await page.goto(server.url(options.installed ? {} : { extensionDevelopmentPath: repoRoot }));
      await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
      await body(makeWorkbench(page, server, sshd, tmp));
    } catch (e) {
      if (browser) await saveShot(browser.page, `FAILED-${slug(name)}`);
      mkdirSync(artifactsDir, { recursive: true });
      writeFileSync(join(artifactsDir, `FAILED-${slug(name)}.console.log`), consoleLines.join('\n') + '\n');
      throw e;
    } finally {
      await browser?.close();
      await server?.stop();
      await sshd?.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  });
}

function makeWorkbench(page: Page, server: VsCodeServer, sshd: TestSshd | undefined, tmp: string): Workbench {
  const sideBar = page.locator('#workbench\\.parts\\.sidebar');
  const treeItem = (name: string | RegExp) => sideBar.getByRole('treeitem', { name: exact(name) });
  return {
    page,
    server,
    sshd,
    tmp,
    async openView(title) {
      const tab = page.getByRole('tab', { name: exact(title) });
      // The extension's entry appears once the extension host has read the manifest (~5 s on 2 cores).
      await tab.waitFor({ timeout: 60_000 });
      const heading = sideBar.locator('.composite.title').getByText(title, { exact: false }).first();
      // After Reload Window the tab can say selected while the side bar is still hidden (its title there, hidden):
      // click only while the title is not visible, and read again, since a click on a shown container hides it.
      for (let attempt = 1; ; attempt++) {
        if (await heading.isVisible()) return;
        if ((await tab.getAttribute('aria-selected')) !== 'true' || attempt > 1) await tab.click();
        const shown = await heading.waitFor({ timeout: 10_000 }).then(
          () => true,
          () => false,
        );
        if (shown) return;
        if (attempt >= 4) throw new Error(`the ${title} view did not show after ${attempt} tries`);
      }
    },
    treeItem,
    row: (label) =>
      sideBar
        .locator('[role=treeitem]')
        .filter({ has: page.locator('.label-name', { hasText: new RegExp(`^${escapeRe(label)}$`) }) }),
    async expand(name) {
      const row = treeItem(name);
      // A click selects and toggles in VS Code trees; a redraw (a listing arriving) can swallow it: click again
      // (three tries), reading the state each time so an expanded row is never toggled shut.
      for (let attempt = 1; ; attempt++) {
        await row.waitFor();
        if ((await row.getAttribute('aria-expanded')) === 'true') return row;
        await dismissHover(page);
        await row.click();
        if (await waitAttribute(row, 'aria-expanded', 'true', 10_000)) return row;
        if (attempt >= 3) throw new Error(`tree row ${String(name)} did not expand after ${attempt} clicks`);
      }
    },
    async contextMenu(item, command) {
      await rowMenu(page, treeItem(item), page.getByRole('menuitem', { name: exact(command) }));
    },
    async commandPalette(text) {
      const input = page.locator('.quick-input-widget input');
      // F1 can be lost while focus moves (a terminal taking it), and the palette of the last command, still closing,
      // can show for a moment and then hide with the keys meant for the new one: let it close first, and start over
      // when the typing finds no open palette.
      for (let attempt = 1; ; attempt++) {
        const last = attempt >= 4;
        await input.waitFor({ state: 'hidden', timeout: 5_000 }).catch(() => undefined);
        await page.keyboard.press('F1');
        try {
          await input.waitFor({ timeout: last ? 15_000 : 5_000 });
          await input.fill(`>${text}`, { timeout: last ? 30_000 : 5_000 });
          break;
        } catch (e) {
          if (last) throw e;
        }
      }
      await page.locator('.quick-input-list .monaco-list-row').first().waitFor();
      await page.keyboard.press('Enter');
    },
    screenshot: (name) => saveShot(page, name),
  };
}

async function saveShot(page: Page, name: string): Promise<string> {
  mkdirSync(artifactsDir, { recursive: true });
  const path = join(artifactsDir, `${slug(name)}.png`);
  await page.screenshot({ path, timeout: 15_000 }).catch(() => undefined);
  return path;
}

const slug = (s: string) => s.replace(/[^a-zA-Z0-9_.-]+/g, '-').slice(0, 80);
