import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { TORCH_PYTHON } from './require';

/*
 * Short real CPU runs (issue 32, item 8), written at test time by test/support/shortRun/train.py with Debian's
 * python3-torch: a first launch to `restartAt` steps, then a second resumed from the checkpoint there with another
 * `--work` (each step that much more costly), to `steps`. Real steps, real wall times, real torch.save checkpoints
 * with their args inside.
 */

export const SHORT_TRAIN = join(__dirname, 'shortRun', 'train.py');

export interface ShortRunOptions {
  /** The step the first launch stops at and the second resumes from (a multiple of 50: a checkpoint is there). */
  restartAt: number;
  /** The step the second launch stops at. */
  steps: number;
  workBefore: number;
  workAfter: number;
  /**
   * How the restart shows in the log. `unseen`: the second launch is started first and held, once torch is imported
   * and its model built, on its stdin until the first launch has exited, so it resumes after a checkpoint load: a
   * pause no clock tells from a slow window (the run: its restart is in no file). `new-file`: it starts a new
   * log file (train_log.jsonl.1 is the first launch's), a restart the run's history knows.
   */
  restart: 'unseen' | 'new-file';
}

/** The exit of a child; rejects with its stderr's end when it failed. */
function exited(child: ChildProcess, what: string): Promise<void> {
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${what} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

/** The first line a child writes to stdout (its "ready"); rejects if it exits before. */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    child.on('close', (code) => reject(new Error(`exited ${code} before it was ready`)));
  });
}

/** Writes the run into `dir` (created): both launches, one after the other. */
export async function writeShortRun(dir: string, o: ShortRunOptions): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const launch = (args: string[], env: { SHORT_RUN_HOLD?: '1'; SHORT_RUN_ROTATE?: '1' } = {}) =>
    spawn(TORCH_PYTHON, [SHORT_TRAIN, '--out_dir', dir, ...args], {
      env: { ...process.env, ...env },
      stdio: [env.SHORT_RUN_HOLD ? 'pipe' : 'ignore', env.SHORT_RUN_HOLD ? 'pipe' : 'ignore', 'pipe'],
    });
  const first = ['--steps', String(o.restartAt), '--work', String(o.workBefore)];
  const second = ['--steps', String(o.steps), '--work', String(o.workAfter)];
  second.push('--resume', join(dir, 'ckpt', `step_${o.restartAt}.pt`));
  if (o.restart === 'new-file') {
    await exited(launch(first), 'the first launch');
    await exited(launch(second, { SHORT_RUN_ROTATE: '1' }), 'the second launch');
    return;
  }
  const resumed = launch(second, { SHORT_RUN_HOLD: '1' });
  const resumedDone = exited(resumed, 'the second launch');
  // a launch that fails before it is ready rejects with its stderr
  const ready = await Promise.race([firstLine(resumed), resumedDone.then(() => 'exited')]);
  if (ready !== 'ready') throw new Error(`the second launch said ${JSON.stringify(ready)}, not ready`);
  // told to go whatever became of the first launch: without its checkpoint it fails, and says so
  const firstDone = exited(launch(first), 'the first launch').finally(() => resumed.stdin!.end('go\n'));
  const [a, b] = await Promise.allSettled([firstDone, resumedDone]);
  if (a.status === 'rejected') throw a.reason;
  if (b.status === 'rejected') throw b.reason;
}
