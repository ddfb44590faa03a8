import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after } from 'node:test';
import { repoRoot } from '../../scripts/vscode/server';
import { materializeRealRuns } from '../support/realRuns';
import { rowMenu, scenario } from './harness';

/*
 * The real HF Trainer run written on the GPU box (test/fixtures/real/runs/hf-trainer-workers: resumed from
 * checkpoint-600 with resume_from_checkpoint, one TensorBoard event file a launch, num_workers 4 → 0): Open Dashboard
 * on the run shows both halves as one history — its speed from wall time first, every event of both files read, the
 * restart marked — not the newest event file alone (issue 22).
 */

const runs = materializeRealRuns('runs');
after(() => rmSync(dirname(runs), { recursive: true, force: true }));
// A checkpoints root holding only the HF run (the other real runs are other scenarios' business).
const root = join(runs, 'hf-root');
execFileSync('mkdir', ['-p', root]);
execFileSync('mv', [join(runs, 'hf-trainer-workers'), join(root, 'hf-trainer-workers')]);
const run = join(root, 'hf-trainer-workers');
const truth = JSON.parse(readFileSync(join(run, 'truth.json'), 'utf8')) as {
  speed: { event_files: string[] };
  restarts: { step: number }[];
};
/** What the reducer counts as the lines of each event file (its records): the dashboard's Lines column, summed. */
const lines = truth.speed.event_files
  .map(
    (f) =>
      (
        JSON.parse(
          execFileSync('python3', [join(repoRoot, 'python', 'metrics_reduce.py'), join(run, f), '--x', 'step'], {
            encoding: 'utf8',
          }),
        ) as { lines: number }
      ).lines,
  )
  .reduce((a, b) => a + b, 0);

scenario(
  'HF Trainer run resumed with resume_from_checkpoint (real fixture): the dashboard shows both halves as one history, speed from wall time first',
  { localRoots: [root], timeoutMs: 480_000 },
  async (vs) => {
    const { page } = vs;
    await vs.openView('Known Good');
    await vs.expand('This machine');
    // listing This machine starts a helper: slow on a loaded 2-core machine
    await vs.row('hf-trainer-workers').waitFor({ timeout: 90_000 });
    await rowMenu(page, vs.row('hf-trainer-workers'), page.getByRole('menuitem', { name: /^Open Dashboard/ }));
    const dash = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    const plots = dash.locator('.kg-plot');
    await plots.first().waitFor({ timeout: 90_000 });
    // the run logs no speed: steps/s from the event wall times, plotted first
    const keys = await plots.evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.series));
    assert.match(String(keys[0]), /^(steps|tokens)\/s \(from wall time\)$/, keys.join(', '));
    assert.ok(keys.includes('train/loss'), keys.join(', '));
    // both event files read whole (the exact read replaces the preview): the Lines of both launches together
    await dash
      .locator('.kg-runs')
      .getByText(lines.toLocaleString('en-US'), { exact: true })
      .first()
      .waitFor({ timeout: 90_000 });
    // the first plot is drawn over both halves: ink left and right of the restart's x on its canvas
    const canvas = plots.first().locator('canvas').first();
    const halves = await canvas.evaluate((el) => {
      const c = el as HTMLCanvasElement;
      const ctx = c.getContext('2d');
      if (!ctx || !c.width) return [0, 0];
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      const ink = [0, 0];
      for (let i = 0; i < d.length; i += 4) if (d[i + 3]! > 0) ink[(i / 4) % c.width < c.width / 2 ? 0 : 1]!++;
      return ink;
    });
    assert.ok(halves[0]! > 300 && halves[1]! > 300, `ink left/right: ${halves.join(', ')}`);
    await page.mouse.move(1100, 700);
    await page.waitForTimeout(800);
    await vs.screenshot('whole-runs-hf-dashboard');
  },
);
