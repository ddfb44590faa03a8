import * as assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after } from 'node:test';
import { repoRoot } from '../../scripts/vscode/server';
import { rowMenu, scenario } from './harness';

/*
 * What PyTorch Lightning really writes (test/fixtures/real/lightning: lightning_logs/version_N/ with
 * checkpoints/epoch=E-step=S.ckpt, metrics.csv, hparams.yaml, TensorBoard events), as a root of This machine: the
 * run with its versions and their .ckpt steps in the tree, the args diff of two checkpoints, the dashboard of a version.
 */

interface LightningTruth {
  versions: Record<
    string,
    {
      checkpoints: Record<string, { global_step: number; hyper_parameters: Record<string, unknown> }>;
      metrics_csv_rows: Record<string, string>[];
    }
  >;
}
const real = join(repoRoot, 'test', 'fixtures', 'real');
const truth = (JSON.parse(readFileSync(join(real, 'ground_truth.json'), 'utf8')) as { lightning: LightningTruth })
  .lightning;
const [v0, v1] = Object.values(truth.versions);
/** The checkpoints the diff compares: step 4 of version_0 and step 6 of version_1 (one version's hparams never differ). */
const left = Object.entries(v0!.checkpoints).find(([, c]) => c.global_step === 4)!;
const right = Object.entries(v1!.checkpoints).find(([, c]) => c.global_step === 6)!;
const hpLeft = left[1].hyper_parameters;
const hpRight = right[1].hyper_parameters;
const differing = Object.keys(hpLeft).filter((k) => JSON.stringify(hpLeft[k]) !== JSON.stringify(hpRight[k]));
const fileName = (p: string) => p.slice(p.lastIndexOf('/') + 1);
const series = Object.keys(v1!.metrics_csv_rows[0]!)
  .filter((k) => k !== 'step')
  .sort();
const wandbKey = String(hpLeft['wandb_api_key']);

// A checkpoints root holding the run folder `lightning` (Lightning's default_root_dir, with its lightning_logs/).
const localRoot = join(mkdtempSync(join(tmpdir(), 'kg-ui-real-')), 'checkpoints');
cpSync(join(real, 'lightning'), join(localRoot, 'lightning'), { recursive: true });
after(() => rmSync(dirname(localRoot), { recursive: true, force: true }));

/** Monaco renders spaces as no-break spaces. */
const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');

scenario(
  'Lightning run (real fixture): one run with its version_N launches and .ckpt steps, args diff across versions, dashboard of the whole history',
  { localRoots: [localRoot], timeoutMs: 240_000 },
  async (vs) => {
    const { page } = vs;
    assert.deepEqual(differing.sort(), ['dataset', 'lr']);
    // Rows by their visible label: a row's accessible name is its tooltip (the full path) where it has one.
    const row = vs.row;
    const setExpanded = async (label: string, expanded: boolean) => {
      const r = row(label);
      await r.waitFor({ timeout: 30_000 });
      if ((await r.getAttribute('aria-expanded')) !== String(expanded)) await r.click();
      await page.waitForFunction(([el, want]) => el?.getAttribute('aria-expanded') === want, [
        await r.elementHandle(),
        String(expanded),
      ] as const);
    };
    const contextMenu = async (label: string, command: string) => {
      await rowMenu(page, row(label), page.getByRole('menuitem', { name: new RegExp(`^${command}`) }));
    };

    await vs.openView('Known Good');
    await vs.expand('This machine');
    // listing This machine starts a helper: slow on a loaded 2-core machine
    await row('lightning').waitFor({ timeout: 90_000 });
    // one run: its two versions (launches) inside it, their checkpoints counted together
    assert.match(plain(await row('lightning').textContent()), /2 versions · 6 checkpoints · last step 6/);
    await setExpanded('lightning', true);
    // the checkpoints of both versions in one order, newest step first; both versions saved each name, so each is
    // labelled with its version
    const ckpts = page.locator('#workbench\\.parts\\.sidebar [role=treeitem]').filter({ hasText: /\.ckpt/ });
    await ckpts.nth(5).waitFor({ timeout: 30_000 });
    const texts = (await ckpts.allTextContents()).map(plain);
    assert.deepEqual(
      texts.map((t) => /version_\d\/epoch=\d+-step=\d+\.ckpt/.exec(t)?.[0]),
      [6, 4, 2].flatMap((s) => [`version_1/epoch=0-step=${s}.ckpt`, `version_0/epoch=0-step=${s}.ckpt`]),
    );
    for (const t of texts) assert.match(t, /version_\d · epoch 0 · step \d · /);
    await setExpanded('lightning_logs', true);
    await setExpanded('version_0', true);
    assert.match(plain(await row('version_0').textContent()), /3 checkpoints · last step 6/);
    await row('metrics.csv').waitFor();
    await page.mouse.move(1100, 700);
    await vs.screenshot('real-stacks-lightning-tree');

    // step 4 of version_0 → Select for Compare; step 6 of version_1 → Compare with Selected
    await setExpanded('lightning_logs', false);
    await contextMenu(`version_0/${fileName(left[0])}`, 'Select for Compare');
    await contextMenu(`version_1/${fileName(right[0])}`, 'Compare with Selected');
    const title = `args: ${fileName(left[0]).replace(/\.ckpt$/, '')} ↔ ${fileName(right[0]).replace(/\.ckpt$/, '')}`;
    await page.locator('.tabs-container .tab', { hasText: title }).waitFor({ timeout: 60_000 });
    const diff = page.locator('.monaco-diff-editor').first();
    await diff.waitFor();
    const modified = diff.locator('.editor.modified .view-lines');
    const wantRight = String(hpRight['dataset']);
    await page.waitForFunction(
      ([el, want]) => el?.textContent?.includes(want) ?? false,
      [await modified.elementHandle(), wantRight] as const,
      { timeout: 30_000 },
    );
    await diff.locator('.editor.modified .line-insert, .editor.modified .char-insert').first().waitFor();
    const original = plain(await diff.locator('.editor.original .view-lines').textContent());
    const changed = plain(await modified.textContent());
    for (const k of differing) {
      assert.match(original, new RegExp(`"${k}":\\s*${JSON.stringify(hpLeft[k]).replace(/[.]/g, '\\.')}`), k);
      assert.match(changed, new RegExp(`"${k}":\\s*${JSON.stringify(hpRight[k]).replace(/[.]/g, '\\.')}`), k);
    }
    // the fake W&B key of the fixture shows only as its hash, on both sides
    for (const side of [original, changed]) {
      assert.ok(!side.includes(wandbKey), 'the wandb_api_key shows in clear');
      assert.match(side, /"wandb_api_key":\s*"<redacted sha256:[0-9a-f]+>"/);
    }
    // the lines marked as changed: the header's, and of the hyper_parameters only dataset and lr
    const marked = await diff.locator('.editor.modified').evaluate((ed: Element): string[] => {
      const tops = new Set(
        Array.from(ed.querySelectorAll<HTMLElement>('.view-overlays > div'))
          .filter((d) => d.querySelector('.line-insert, .char-insert'))
          .map((d) => d.style.top),
      );
      return Array.from(ed.querySelectorAll<HTMLElement>('.view-lines .view-line'))
        .filter((l) => tops.has(l.style.top))
        .map((l) => (l.textContent ?? '').replace(/\u00a0/g, ' '));
    });
    const markedArgs = marked.filter((l) => !l.startsWith('//')).map((l) => /"(\w+)":/.exec(l)?.[1]);
    assert.deepEqual(markedArgs.sort(), differing, marked.join('\n'));
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(300);
    await vs.screenshot('real-stacks-args-diff');

    // Open Dashboard on the run: its versions are one history, every version's metrics.csv read
    await contextMenu('lightning', 'Open Dashboard');
    const dash = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    const plots = dash.locator('.kg-plot');
    await plots.first().waitFor({ timeout: 60_000 });
    const keys = await plots.evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.series));
    assert.deepEqual([...keys].sort(), series);
    const inked = await dash.locator('.kg-plot canvas').evaluateAll((canvases) =>
      canvases.map((el) => {
        const c = el as HTMLCanvasElement;
        const ctx = c.getContext('2d');
        if (!ctx || c.width === 0 || c.height === 0) return 0;
        const d = ctx.getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3]! > 0) n++;
        return n;
      }),
    );
    assert.ok(
      inked.length >= series.length && inked.every((n) => n > 500),
      `painted pixels per canvas: ${inked.join(', ')}`,
    );
    await dash.locator('.kg-legend-item', { hasText: 'lightning' }).waitFor();
    // every row of both versions' metrics.csv read, none skipped
    const rows = String(v0!.metrics_csv_rows.length + v1!.metrics_csv_rows.length);
    await dash.locator('.kg-runs').getByText(rows, { exact: true }).first().waitFor();
    // the checkpoints of both versions, each by its own path
    for (const v of [v0!, v1!]) {
      for (const path of Object.keys(v.checkpoints)) {
        const tail = path.split('/').slice(-3).join('/');
        await dash.locator(`.kg-checkpoint[data-path$="${tail}"]`).waitFor();
      }
    }
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(800);
    await vs.screenshot('real-stacks-dashboard');

    // the same from metrics.csv itself (its context menu offers Open Dashboard)
    await vs.commandPalette('View: Close All Editors');
    await plots.first().waitFor({ state: 'detached' });
    await setExpanded('lightning_logs', true);
    await setExpanded('version_0', true);
    await contextMenu('metrics.csv', 'Open Dashboard');
    await plots.first().waitFor({ timeout: 60_000 });
    const again = await plots.evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.series));
    assert.deepEqual([...again].sort(), series);
    // opened on one version's file, it is still the run's whole history: both versions' rows
    await dash.locator('.kg-runs').getByText(rows, { exact: true }).first().waitFor();
    await page.locator('.tabs-container .tab', { hasText: /^Dashboard: / }).waitFor();
  },
);
