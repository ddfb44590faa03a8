import {
  cpSync,
  existsSync,
  lstatSync,
  lutimesSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/*
 * The real runs of test/fixtures/real/runs/ and regressions/ (scripts/fixtures/real_runs.py, written on the GPU box),
 * as the runs left them: git keeps neither mtimes nor a nested .git, so a run's .git and .gitignore are committed as
 * dot-git and dot-gitignore and every mtime is listed in the set's mtimes.json. The TypeScript twin of
 * test/python/real_runs_fixture.py.
 */

export type RealRunSet = 'runs' | 'regressions';

export const REAL_RUNS = join(__dirname, '..', 'fixtures', 'real');

const COMMITTED_AS: Readonly<Record<string, string>> = { 'dot-git': '.git', 'dot-gitignore': '.gitignore' };

/** A path as the run wrote it, of a path as committed ('run/dot-git/HEAD' → 'run/.git/HEAD'). */
export function realPath(committed: string): string {
  const parts = committed.split('/');
  const renamed = parts[1] !== undefined ? COMMITTED_AS[parts[1]] : undefined;
  if (renamed !== undefined) parts[1] = renamed;
  return parts.join('/');
}

/** The runs of a set that have a truth.json. */
export function realRunNames(set: RealRunSet): string[] {
  const dir = join(REAL_RUNS, set);
  return readdirSync(dir)
    .filter((n) => existsSync(join(dir, n, 'truth.json')))
    .sort();
}

/**
 * A copy of the set with .git, .gitignore and every mtime back. The runs' args name their data as
 * /tmp/kg-real-runs/<set>/data/…: pass that as `dest` where a test needs those paths to resolve.
 */
export function materializeRealRuns(set: RealRunSet, dest?: string): string {
  const out = dest ?? join(mkdtempSync(join(tmpdir(), 'kg-real-')), set);
  cpSync(join(REAL_RUNS, set), out, { recursive: true, verbatimSymlinks: true });
  for (const run of readdirSync(out)) {
    for (const [committed, name] of Object.entries(COMMITTED_AS)) {
      if (existsSync(join(out, run, committed))) renameSync(join(out, run, committed), join(out, run, name));
    }
  }
  const manifest = JSON.parse(readFileSync(join(out, 'mtimes.json'), 'utf8')) as Record<string, number>;
  // Deepest first: a folder's own time is set after its files were.
  const paths = Object.keys(manifest).sort((a, b) => b.split('/').length - a.split('/').length);
  for (const rel of paths) {
    const p = join(out, ...realPath(rel).split('/'));
    // Nanoseconds in the manifest; Node sets times from seconds, so microseconds survive.
    const seconds = manifest[rel]! / 1e9;
    if (lstatSync(p, { throwIfNoEntry: false })) lutimesSync(p, seconds, seconds);
  }
  return out;
}
