import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { captureSnapshot } from '../../src/core/baselines/capture';
import { envSnapshotProbe } from '../../src/core/baselines/envProbe';
import { LocalTransport } from '../../src/core/transport/local';
import { idlePause, MeasuredProbeRunner, timeIt, type BenchContext, type BenchResult } from '../context';

const run = promisify(execFile);

/*
 * The environment snapshot probe versus `python -m torch.utils.collect_env`, the usual way, on the same interpreter
 * (Debian's python3-torch here; set KG_BENCH_PYTHON to a venv's python on a GPU box). Both start a fresh
 * interpreter each run (the probe one-shot, piped as the CLI does), so the comparison is process start to result.
 */

const RUNS = 3;
const RUNS_SSH = 7;

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function collectEnv(python: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn(python, ['-m', 'torch.utils.collect_env'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString()));
    p.stderr.resume();
    p.once('error', reject);
    p.once('close', (code) => {
      const ms = performance.now() - t0;
      if (code !== 0 || !out.includes('PyTorch version')) reject(new Error(`collect_env exited ${code}`));
      else resolve(ms);
    });
  });
}

export async function benchEnvSnapshot(): Promise<{ case: string; ours_ms: number; usual_ms: number; note: string }> {
  const python = process.env['KG_BENCH_PYTHON'] ?? '/usr/bin/python3';
  const runner = new MeasuredProbeRunner(new LocalTransport(), { python, timeoutMs: 120_000, resident: false });
  const ours: number[] = [];
  const usual: number[] = [];
  let tookMs = 0;
  let packages = 0;
  try {
    // one warm-up of each (page cache), then alternate so load on a shared machine hits both alike
    await runner.runOnce(envSnapshotProbe({}));
    await collectEnv(python);
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const r = await runner.runOnce(envSnapshotProbe({}));
      ours.push(performance.now() - t0);
      tookMs = r.value.tookMs ?? 0;
      packages = r.value.packages.count ?? 0;
      usual.push(await collectEnv(python));
    }
  } finally {
    runner.dispose();
  }
  return {
    case: `env snapshot (${python}) vs collect_env`,
    ours_ms: median(ours),
    usual_ms: median(usual),
    note: `median of ${RUNS}; probe's own time ${tookMs} ms, ${packages} packages; fresh interpreter each run`,
  };
}

/**
 * Issue 32 item 5: Compare Environment's capture of "now" over the loopback sshd (the user's own HOME and
 * ~/.bashrc, as a real host's login), in a new login as it runs now, against the same capture through the resident
 * helper as it ran before (stale: the environment, interpreter and sys.path of the connection's start) and against
 * the usual `ssh HOST python3 -m torch.utils.collect_env`. Alternated, medians.
 */
export async function benchEnvCompareSsh(ctx: BenchContext): Promise<BenchResult> {
  const python = process.env['KG_BENCH_PYTHON'] ?? '/usr/bin/python3';
  const runner = await ctx.probes(python);
  const transport = await ctx.transport();
  const host = { spec: { name: 'bench-sshd', roots: [] }, transport, probes: runner };
  const opts = { scriptGlobs: [], extraVariables: [], cacheDirs: [] };
  const usualArgv = await ctx.sshArgv(`${python} -m torch.utils.collect_env`);
  const collectEnvSsh = async () => {
    const { stdout } = await run(usualArgv[0]!, usualArgv.slice(1), { maxBuffer: 1 << 24 });
    if (!stdout.includes('PyTorch version')) throw new Error('collect_env over ssh printed no PyTorch version');
  };
  const fresh: number[] = [];
  const helper: number[] = [];
  const usual: number[] = [];
  // warm-up of each: the helper up with the probe's module prepared, the page cache
  await runner.run(envSnapshotProbe({}));
  await captureSnapshot(host, opts);
  await collectEnvSsh();
  for (let i = 0; i < RUNS_SSH; i++) {
    await idlePause();
    helper.push(await timeIt(() => runner.run(envSnapshotProbe({}))));
    await idlePause();
    fresh.push(await timeIt(() => captureSnapshot(host, opts)));
    usual.push(await timeIt(collectEnvSsh));
  }
  return {
    case: `Compare Environment's capture over sshd, in a new login (${python}) vs ssh HOST collect_env`,
    ours_ms: median(fresh),
    usual_ms: median(usual),
    note:
      `median of ${RUNS_SSH}; the same snapshot through the resident helper (stale: the connection's start, as ` +
      `before issue 32) ${median(helper).toFixed(0)} ms`,
  };
}
