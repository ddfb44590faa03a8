import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scenario, writeDemoCheckpoint } from './harness';

/*
 * Issue 23: "the tree's auto-refresh already polls; a new PID is a restart". A run of This machine whose training
 * process (a real process working in the run folder) runs: its row says "running" and its tooltip gives the process's
 * command line and environment; the process replaced by one with CUDA_LAUNCH_BLOCKING=1 that writes the log: the row
 * says "restarted" and its tooltip names both PIDs.
 */

const story = mkdtempSync(join(tmpdir(), 'kg-ui-live-'));
const run = join(story, 'runs', 'run-a');
writeDemoCheckpoint(join(run, 'step_100'), 100, { lr: 3e-4, dataset: 'owt' });
const log = join(run, 'train_log.jsonl');
writeFileSync(log, '{"step": 10, "loss": 2.5}\n{"step": 20, "loss": 2.4}\n');

function started(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const p = spawn('sh', ['-c', 'echo ready; exec sleep 600', 'train.py'], {
      cwd: run,
      env,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    p.stdout.once('data', () => resolve(p));
    p.once('error', reject);
  });
}

scenario(
  'A running run: its row says running, its tooltip the process; a new process after it ended is a restart',
  { localRoots: [join(story, 'runs')], settings: { 'knownGood.autoRefreshSeconds': 2 }, timeoutMs: 300_000 },
  async (vs) => {
    const { page } = vs;
    const env = { ...process.env };
    delete env['CUDA_LAUNCH_BLOCKING'];
    const procs: ChildProcess[] = [await started(env)];
    try {
      await vs.openView('Known Good');
      await vs.expand('This machine');
      const row = vs.row('run-a');
      await row.waitFor({ timeout: 90_000 });
      const description = row.locator('.label-description');
      await description.filter({ hasText: /^running · / }).waitFor({ timeout: 60_000 });
      await row.hover();
      const hover = page.locator('.monaco-hover, .workbench-hover').filter({ hasText: /Running now/ });
      await hover.first().waitFor({ timeout: 30_000 });
      assert.match((await hover.first().textContent()) ?? '', new RegExp(`PID ${procs[0]!.pid} \\(started`));
      await vs.screenshot('live-process-0-running');

      procs[0]!.kill('SIGKILL');
      procs.push(await started({ ...env, CUDA_LAUNCH_BLOCKING: '1' }));
      appendFileSync(log, '{"step": 30, "loss": 2.3}\n'); // the new process writes the log: the next tick looks
      await page.mouse.move(1100, 700);
      await description.filter({ hasText: /^running · restarted · / }).waitFor({ timeout: 60_000 });
      await row.hover();
      const restarted = page.locator('.monaco-hover, .workbench-hover').filter({ hasText: /Restarted: PID/ });
      await restarted.first().waitFor({ timeout: 30_000 });
      const text = (await restarted.first().textContent()) ?? '';
      assert.match(text, new RegExp(`Restarted: PID ${procs[0]!.pid} → PID ${procs[1]!.pid}`));
      assert.match(text, /CUDA_LAUNCH_BLOCKING=1/);
      await vs.screenshot('live-process-1-restarted');
    } finally {
      for (const p of procs) p.kill('SIGKILL');
    }
  },
);
