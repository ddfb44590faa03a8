// The Get Started walkthrough's pictures (media/walkthrough/*-dark.png, *-light.png), taken from the real extension in
// the real VS Code: a host over the test sshd holding the demo's runs (run-a's lr and batch_size change at step 690,
// and its tokens/s drop there), in the dark and the light theme.
//
//   npm run build && node --import tsx --test scripts/vscode/walkthroughMedia.ts
//
// Not a test (it rewrites files in media/): run it again when a step's view changes, look at the pictures, commit them.
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trainLogLine, trainLogPoints } from '../demo/trainLog';
import { repoRoot } from './server';
import { rowMenu, scenario, writeDemoCheckpoint, type Workbench } from '../../test/ui/harness';

const HOST = 'gpu-box';
const media = join(repoRoot, 'media', 'walkthrough');
const fixture = join(tmpdir(), 'kg-walkthrough');
const root = join(fixture, 'checkpoints');
const scripts = join(fixture, 'scripts');

function writeRuns(): void {
  rmSync(fixture, { recursive: true, force: true });
  const base = { model: 'gpt-small', lr: 3e-4, batch_size: 32, warmup_steps: 100, dataset: 'openwebtext-10k' };
  const runs: { name: string; steps: Record<number, Record<string, unknown>>; log: number }[] = [
    { name: 'run-a', steps: { 600: base, 690: { ...base, lr: 1.5e-4, batch_size: 64 }, 780: {} }, log: 3000 },
    { name: 'run-b', steps: { 100: { ...base, seed: 7 }, 200: {} }, log: 400 },
  ];
  for (const run of runs) {
    let args: Record<string, unknown> = {};
    for (const [step, more] of Object.entries(run.steps)) {
      args = { ...args, ...more, max_steps: run.log };
      writeDemoCheckpoint(join(root, run.name, `step_${step}`), Number(step), args);
    }
    const lines = trainLogPoints({ steps: run.log, seed: 12345, changedAfter: run.name === 'run-a' ? 690 : undefined });
    writeFileSync(join(root, run.name, 'train_log.jsonl'), lines.map(trainLogLine).join('\n') + '\n');
  }
  mkdirSync(scripts, { recursive: true });
}
writeRuns();

/** Saves a picture of `clip` (default: the whole window) as media/walkthrough/<name>-<theme>.png. */
async function shoot(
  vs: Workbench,
  name: string,
  theme: string,
  clip?: { width: number; height: number },
): Promise<void> {
  const { page } = vs;
  await vs.commandPalette('Notifications: Clear All Notifications');
  // Below the tree's rows: no hover shows there.
  await page.mouse.move(200, 520);
  await page.waitForTimeout(600);
  mkdirSync(media, { recursive: true });
  const path = join(media, `${name}-${theme}.png`);
  await page.screenshot({ path, ...(clip ? { clip: { x: 0, y: 0, ...clip } } : {}) });
  process.stdout.write(`[media] ${path}: ${(statSync(path).size / 1024).toFixed(0)} KB\n`);
}

async function closeEditors(vs: Workbench): Promise<void> {
  await vs.commandPalette('View: Close All Editors');
  await vs.page.locator('.tabs-container .tab').first().waitFor({ state: 'detached', timeout: 10_000 });
}

async function answer(vs: Workbench, text: string): Promise<void> {
  const input = vs.page.locator('.quick-input-widget input');
  await input.waitFor();
  await input.fill(text);
  await vs.page.keyboard.press('Enter');
}

for (const [theme, colorTheme, css] of [
  ['dark', 'Default Dark Modern', 'vs-dark'],
  ['light', 'Default Light Modern', 'vs'],
] as const) {
  scenario(
    `walkthrough media, ${theme}`,
    {
      sshHost: { roots: [root], name: HOST },
      localRoots: [],
      settings: {
        'workbench.colorTheme': colorTheme,
        'knownGood.env.scriptGlobs': [join(scripts, '*.py')],
        'knownGood.baselines.copyToRemote': false,
        'workbench.tips.enabled': false,
      },
      timeoutMs: 400_000,
    },
    async (vs) => {
      const { page, row } = vs;
      // The script as it was when the run was good (the other theme's run edited it).
      writeFileSync(join(scripts, 'train.py'), 'lr = 3e-4\n');
      await page.setViewportSize({ width: 1100, height: 640 });
      // A resize that lands while the workbench first lays out can be missed: say it again until it took.
      for (let i = 0; ; i++) {
        await page.evaluate(() => window.dispatchEvent(new Event('resize')));
        const laidOut = await page
          .waitForFunction(() => document.querySelector('.monaco-workbench')?.clientWidth === 1100, undefined, {
            timeout: 2_000,
          })
          .then(() => true)
          .catch(() => false);
        if (laidOut) break;
        if (i >= 10) throw new Error('the workbench did not take the 1100×640 window');
      }
      await page.locator(`.monaco-workbench.${css}`).waitFor({ timeout: 30_000 });
      await vs.openView('Known Good');
      await vs.expand(HOST);
      await row('run-a').waitFor({ timeout: 90_000 });
      await row('run-a').click();
      await row('step_690').waitFor({ timeout: 30_000 });
      await shoot(vs, 'add-host', theme, { width: 560, height: 330 });

      const menu = (label: string, entry: string) =>
        rowMenu(page, row(label), page.getByRole('menuitem', { name: new RegExp(`^${entry}`) }));
      await menu('step_600', 'Select for Compare');
      await menu('step_690', 'Compare with Selected');
      const diff = page.locator('.monaco-diff-editor .editor.modified .line-insert').first();
      await diff.waitFor({ timeout: 60_000 });
      await shoot(vs, 'compare-args', theme);
      await closeEditors(vs);

      await vs.commandPalette('Known Good: Capture Environment Baseline');
      await answer(vs, HOST);
      // The label box offers a dated default; replace it.
      await page.waitForFunction(
        () =>
          document.querySelector<HTMLInputElement>('.quick-input-widget input')?.value.startsWith('baseline ') ?? false,
      );
      await answer(vs, 'known good');
      await row('Baselines').waitFor({ timeout: 90_000 });
      await row('Baselines').click();
      await vs.treeItem(/^known good/).waitFor({ timeout: 90_000 });
      writeFileSync(join(scripts, 'train.py'), 'lr = 1e-3  # a quick tweak\n');
      await vs.commandPalette('Known Good: Compare Environment with Baseline');
      await answer(vs, 'known good');
      await page.locator('.monaco-diff-editor').first().waitFor({ timeout: 90_000 });
      await page.keyboard.press('Escape');
      await page.waitForTimeout(1500);
      await shoot(vs, 'baseline', theme);
      await closeEditors(vs);

      await menu('run-a', 'Open Dashboard');
      const dash = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
      await dash.locator('.kg-plot canvas').first().waitFor({ timeout: 60_000 });
      await page.waitForTimeout(2000);
      await shoot(vs, 'dashboard', theme);
      await closeEditors(vs);

      await menu('run-a', 'What Changed\\?');
      const report = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
      await report.locator('h1.kg-headline').waitFor({ timeout: 120_000 });
      await page.waitForTimeout(1000);
      await shoot(vs, 'what-changed', theme);
    },
  );
}
