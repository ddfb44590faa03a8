import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TORCH_PYTHON } from './require';

/*
 * Runs for the replay tests (issue 33): the small real CPU training loop of test/support/replay/ in its own git
 * checkout, launched twice through python/kg_record.py (the known-good launch, then a resume from its step-48
 * checkpoint) with ONE change in the second launch. Shared by the int test (test/int/replay.int.test.ts) and the
 * VS Code scenario (test/ui/replay.ui.ts).
 */

const LOOP = join(__dirname, 'replay');
const RESUME_LOOP = join(__dirname, 'resumeRun', 'train.py');
const RECORD = join(__dirname, '..', '..', 'python', 'kg_record.py');

export type ReplayKind = 'arg' | 'env' | 'code' | 'uncommitted' | 'data';

/** The replay change id each kind's one change is, as the plan lists it. */
export const REPLAY_CHANGE_ID: Readonly<Record<ReplayKind, string>> = {
  arg: 'arg:--work',
  env: 'env:KG_REPLAY_SLOW',
  code: 'code:model.py',
  uncommitted: 'code:train.py',
  data: 'arg:--data',
};

function git(dir: string, ...args: string[]) {
  execFileSync('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', ...args], {
    cwd: dir,
    stdio: 'pipe',
  });
}

export interface ReplayRunOptions {
  /** The second launch also changes --lr (a change that costs nothing); with `kind` undefined, only that. */
  harmless?: boolean;
  /** The folder's name under `root` (default `run-<kind>[-lr]`). */
  name?: string;
  /** The interpreter that runs the loop (default Debian's python3 with torch). */
  python?: string;
  /** false: the run folder is no git checkout (only for kinds that change no code). */
  git?: boolean;
}

/**
 * A run folder under `root`: its own git checkout, two launches through kg_record.py (48 steps; then resumed from
 * ckpt/step_48.pt to 72), the second with one change of `kind`. Returns its path.
 */
export function makeReplayRun(root: string, kind: ReplayKind, o: ReplayRunOptions = {}): string {
  const python = o.python ?? TORCH_PYTHON;
  const dir = join(root, o.name ?? `run-${kind}${o.harmless ? '-lr' : ''}`);
  mkdirSync(join(dir, 'data'), { recursive: true });
  for (const f of readdirSync(LOOP)) cpSync(join(LOOP, f), join(dir, f));
  writeFileSync(join(dir, 'README.md'), '# a replay test run\n');
  writeFileSync(join(dir, '.gitignore'), 'data/\nckpt/\n*.jsonl\n__pycache__/\n');
  writeFileSync(join(dir, 'data', 'a.txt'), 'seq=32\n');
  writeFileSync(join(dir, 'data', 'b.txt'), 'seq=256\n');
  if (o.git !== false) {
    git(dir, 'init', '-q');
    git(dir, 'add', '.');
    git(dir, 'commit', '-q', '-m', 'a small loop');
  }
  const launch = (extra: string[], env: Record<string, string> = {}) =>
    execFileSync(
      python,
      [RECORD, '--run', dir, '--', python, 'train.py', '--log_every', '3', '--save_every', '24', ...extra],
      { cwd: dir, stdio: 'pipe', env: { ...process.env, ...env } },
    );
  launch(['--data', 'data/a.txt', '--steps', '48', '--lr', '0.0003']);
  const args = ['--steps', '72', '--resume', 'ckpt/step_48.pt'];
  let data = 'data/a.txt';
  const lr = o.harmless ? '0.0001' : '0.0003';
  let env: Record<string, string> = {};
  if (kind === 'arg') args.push('--work', '8');
  if (kind === 'env') env = { KG_REPLAY_SLOW: '1' };
  if (kind === 'data') data = 'data/b.txt';
  if (kind === 'code') {
    const model = readFileSync(join(dir, 'model.py'), 'utf8');
    writeFileSync(join(dir, 'model.py'), model.replace('for _ in range(work):', 'for _ in range(4 * work):'));
    git(dir, 'commit', '-q', '-am', 'Mix more');
  }
  if (kind === 'uncommitted') {
    const train = readFileSync(join(dir, 'train.py'), 'utf8');
    writeFileSync(join(dir, 'train.py'), train.replace('repeat = 3 if', 'repeat = 4 if not'));
  }
  launch(['--data', data, ...args, '--lr', lr], env);
  return dir;
}

/**
 * A run folder under `root` restarted with nothing changed but how it resumes (test/support/resumeRun/train.py, its
 * RESUME_MAP line: "cuda" stands in for AdamW's step counters loaded onto the GPU, a resume that costs speed; "cpu"
 * a harmless one), launched twice through kg_record.py (48 steps; then resumed from ckpt/step_48.pt to 72) with the
 * same flags. Not a git checkout. Returns its path.
 */
export function makeRestartRun(root: string, resumeMap: 'cpu' | 'cuda', name = `restart-${resumeMap}`): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const train = readFileSync(RESUME_LOOP, 'utf8');
  writeFileSync(join(dir, 'train.py'), train.replace(/^RESUME_MAP = "cpu"$/m, `RESUME_MAP = "${resumeMap}"`));
  const launch = (...extra: string[]) =>
    execFileSync(
      TORCH_PYTHON,
      [RECORD, '--run', dir, '--', TORCH_PYTHON, 'train.py', '--log_every', '3', '--save_every', '24', ...extra],
      { cwd: dir, stdio: 'pipe' },
    );
  launch('--steps', '48');
  launch('--steps', '72', '--resume', 'ckpt/step_48.pt');
  return dir;
}

/** Every entry under `dir`, sorted, as `path kind mode size sha256` (a link: its target): what "unchanged" is compared by. */
export function folderPrint(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(dir, r));
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isDirectory()) {
        out.push(`${r}/ dir ${mode}`);
        walk(r);
      } else if (st.isSymbolicLink()) out.push(`${r} link -> ${readlinkSync(join(dir, r))}`);
      else
        out.push(
          `${r} file ${mode} ${st.size} ${createHash('sha256')
            .update(readFileSync(join(dir, r)))
            .digest('hex')}`,
        );
    }
  };
  walk('');
  return out;
}
