import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envSnapshotProbe } from '../../src/core/baselines/envProbe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { planScript, restorePlan } from '../../src/core/restore/plan';
import { runScript } from '../../src/core/restore/run';
import { LocalTransport } from '../../src/core/transport/local';
import { bundledWheels, writeWheel } from '../../test/support/wheels';
import type { BenchResult } from '../context';

/*
 * Restore time from a warm wheel cache (issue 26): a baseline venv of 30 pure-Python packages rebuilt from a local
 * wheel folder by our plan (venv, one `pip install --no-deps` of every pin) versus the usual way (venv, then
 * `pip install -r` of the baseline's pip freeze, the resolver on), both `--no-index --find-links` the same folder,
 * alternated so a neighbour's load hits both.
 */

const RUNS = 2;
const PACKAGES = 30;

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export async function benchRestore(): Promise<BenchResult> {
  const dir = mkdtempSync(join(tmpdir(), 'kg-bench-restore-'));
  try {
    const wheels = join(dir, 'wheels');
    mkdirSync(wheels);
    const names = Array.from({ length: PACKAGES }, (_, i) => `kg-p${String(i).padStart(2, '0')}`);
    for (const n of names) writeWheel(wheels, n, '1.0', 10);
    for (const w of bundledWheels()) cpSync(w, join(wheels, w.split('/').pop()!));
    const base = execFileSync('python3', ['-c', 'import os, sys; print(os.path.realpath(sys.executable))'], {
      encoding: 'utf8',
    }).trim();
    const good = join(dir, 'good');
    execFileSync(base, ['-m', 'venv', good]);
    const pip = ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--no-index', '--find-links', wheels];
    execFileSync(join(good, 'bin/python'), [...pip, ...names.map((n) => `${n}==1.0`)]);
    const freeze = join(dir, 'freeze.txt');
    writeFileSync(freeze, execFileSync(join(good, 'bin/python'), ['-m', 'pip', 'freeze'], { encoding: 'utf8' }));
    const transport = new LocalTransport();
    const runner = new ProbeRunner(transport, {
      python: join(good, 'bin/python'),
      timeoutMs: 120_000,
      resident: false,
    });
    const snapshot = (await runner.runOnce(envSnapshotProbe({}))).value;
    const ours: number[] = [];
    const usual: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const plan = restorePlan(snapshot, {
        label: `r${i}`,
        home: dir,
        useUv: false,
        source: { noIndex: true, findLinks: [wheels] },
      });
      let t0 = performance.now();
      const code = await runScript(transport, planScript(plan, 'bench'), () => undefined);
      ours.push(performance.now() - t0);
      if (code !== 0) throw new Error(`the restore script exited ${code}`);
      t0 = performance.now();
      const env = join(dir, `usual${i}`);
      execFileSync(base, ['-m', 'venv', env]);
      execFileSync(join(env, 'bin/python'), [...pip, '-r', freeze]);
      usual.push(performance.now() - t0);
      rmSync(plan.envDir, { recursive: true, force: true });
      rmSync(env, { recursive: true, force: true });
    }
    return {
      case: `restore: a ${PACKAGES}-package venv from a warm wheel folder (plan run vs venv + pip install -r freeze)`,
      ours_ms: median(ours),
      usual_ms: median(usual),
      note: `median of ${RUNS}; ours also checks the interpreter and prints pip freeze --all`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
