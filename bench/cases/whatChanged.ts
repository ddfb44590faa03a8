import { execFile, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, promises as fs, utimesSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BaselineStore } from '../../src/core/baselines/store';
import { captureSnapshot } from '../../src/core/baselines/capture';
import { shellQuote } from '../../src/core/quote';
import { whatChanged } from '../../src/core/whatChanged/gather';
import { median, timeIt, type BenchContext, type BenchResult } from '../context';

const run = promisify(execFile);
const TORCH_PY = '/usr/bin/python3';
const LINES = 1_000_000;
const CHECKPOINTS = 50;
const SHIFT = 600_000;
const USUAL_RUNS = 2;
const WARM_RUNS = 3;

/** 50 real torch checkpoints (argparse args, a small state dict); the dataset arg changes after step 600,000. */
function writeCheckpoints(runDir: string, t0: number): void {
  const specs = [];
  for (let i = 1; i <= CHECKPOINTS; i++) {
    const step = (i * LINES) / CHECKPOINTS;
    specs.push({
      dir: join(runDir, `step_${step}`),
      step,
      dataset: step <= SHIFT ? 'openwebtext-10k' : 'openwebtext-dedup-v2',
    });
  }
  const r = spawnSync(
    TORCH_PY,
    [
      '-c',
      `
import argparse, json, os, sys, torch
for s in json.loads(sys.argv[1]):
    os.makedirs(s["dir"], exist_ok=True)
    args = argparse.Namespace(lr=3e-4, batch_size=32, seq_len=1024, dataset=s["dataset"], num_workers=8, seed=1)
    torch.save({"args": args, "step": s["step"], "model": torch.nn.Linear(64, 64).state_dict()}, s["dir"] + "/checkpoint.pt")
`,
      JSON.stringify(specs),
    ],
    { encoding: 'utf8', timeout: 300_000 },
  );
  if (r.status !== 0) throw new Error(`writing checkpoints with ${TORCH_PY} failed: ${r.stderr || r.error?.message}`);
  for (const s of specs) {
    const t = t0 + s.step * 0.02;
    utimesSync(join(s.dir, 'checkpoint.pt'), t, t);
    utimesSync(s.dir, t, t);
  }
}

/** A 1,000,000-line train_log.jsonl: tok/s 12.8K through step 600,000, 4.3K after, ±3% noise; loss and lr. */
async function writeLog(path: string, t0: number): Promise<number> {
  const out = createWriteStream(path);
  let chunk: string[] = [];
  let s = 7;
  for (let step = 1; step <= LINES; step++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const n = s / 2 ** 32 - 0.5;
    const tok = (step <= SHIFT ? 12800 : 4300) * (1 + 0.06 * n);
    const loss = 2 + 6 * Math.exp(-step / 200_000) + 0.05 * n;
    chunk.push(
      `{"step": ${step}, "loss": ${loss.toFixed(5)}, "lr": 0.0003, "tok_s": ${Math.round(tok)}, "time": ${(t0 + step * 0.02).toFixed(2)}}`,
    );
    if (chunk.length >= 10_000) {
      if (!out.write(chunk.join('\n') + '\n')) await once(out, 'drain');
      chunk = [];
    }
  }
  if (chunk.length) out.write(chunk.join('\n') + '\n');
  out.end();
  await once(out, 'finish');
  return (await fs.stat(path)).size;
}

/** `ssh HOST cat LOG`, every line parsed here: how the log's tok/s is usually looked at. */
async function catLog(argv: string[]): Promise<number> {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  let rest = '';
  let lines = 0;
  child.stdout.setEncoding('utf8');
  for await (const chunk of child.stdout) {
    const parts = (rest + (chunk as string)).split('\n');
    rest = parts.pop() ?? '';
    for (const l of parts) if (l && typeof (JSON.parse(l) as { tok_s?: number }).tok_s === 'number') lines++;
  }
  const code = await new Promise<number | null>((r) =>
    child.exitCode !== null ? r(child.exitCode) : child.on('close', r),
  );
  if (code !== 0) throw new Error(`${argv.join(' ')} exited with ${code}`);
  return lines;
}

/**
 * Issue 16: "What changed?" on a run of 50 real torch checkpoints and a 1,000,000-line log over the loopback sshd,
 * end to end (the report, ranked), versus the usual way a person gathers the same facts: `ssh HOST python -c
 * 'torch.load(…)'` of the two checkpoints around the drop, `ssh HOST python -m torch.utils.collect_env`, and `ssh
 * HOST cat train_log.jsonl` parsed here. The usual way still leaves the person to find the step and compare.
 */
export async function benchWhatChanged(ctx: BenchContext): Promise<BenchResult[]> {
  const dir = await fs.mkdtemp(join(tmpdir(), 'kg-bench-why-'));
  try {
    const runDir = join(dir, 'run');
    await fs.mkdir(runDir);
    const t0 = Math.floor(Date.now() / 1000) - 30_000;
    writeCheckpoints(runDir, t0);
    const bytes = await writeLog(join(runDir, 'train_log.jsonl'), t0);
    const runner = await ctx.probes('python3');
    const transport = await ctx.transport();
    const store = new BaselineStore(join(dir, 'store'));
    const snap = await captureSnapshot(
      { spec: { name: 'bench-sshd', roots: [] }, transport, probes: runner },
      { scriptGlobs: [], extraVariables: [], cacheDirs: [] },
    );
    await store.save({
      label: 'before',
      host: transport.id,
      snapshot: snap,
      capturedAt: new Date((t0 + 100) * 1000).toISOString(),
    });
    const host = { id: transport.id, label: 'bench-sshd', probes: runner };

    // cold: the helper has never read the log (it is up: "once connected", as the other cases)
    let report: Awaited<ReturnType<typeof whatChanged>> | undefined;
    const cold = await timeIt(async () => {
      report = await whatChanged(host, runDir, { store, keepData: false });
    });
    const first = report!.suspects[0];
    if (
      !first ||
      !first.title.startsWith('dataset openwebtext-10k → openwebtext-dedup-v2') ||
      !/\(0\.34×\)/.test(report!.headline)
    )
      throw new Error(`the report did not find the dataset change: ${report!.headline}`);
    const warm: number[] = [];
    for (let i = 0; i < WARM_RUNS; i++)
      warm.push(await timeIt(() => whatChanged(host, runDir, { store, keepData: false })));

    const refCk = join(runDir, `step_${SHIFT}`, 'checkpoint.pt');
    const nowCk = join(runDir, `step_${LINES}`, 'checkpoint.pt');
    const py = `import torch; a=torch.load(${JSON.stringify(refCk)}, weights_only=False)["args"]; b=torch.load(${JSON.stringify(nowCk)}, weights_only=False)["args"]; print({k: (v, vars(b).get(k)) for k, v in vars(a).items() if vars(b).get(k) != v})`;
    const argsArgv = await ctx.sshArgv(`${TORCH_PY} -c ${shellQuote(py)}`);
    const envArgv = await ctx.sshArgv(`${TORCH_PY} -m torch.utils.collect_env`);
    const catArgv = await ctx.sshArgv(`cat ${shellQuote(join(runDir, 'train_log.jsonl'))}`);
    const usual: number[] = [];
    for (let i = 0; i < USUAL_RUNS; i++) {
      usual.push(
        await timeIt(async () => {
          const a = await run(argsArgv[0]!, argsArgv.slice(1), { maxBuffer: 1 << 20, timeout: 300_000 });
          if (!a.stdout.includes('openwebtext-dedup-v2'))
            throw new Error(`torch.load printed ${a.stdout.slice(0, 200)}`);
          const e = await run(envArgv[0]!, envArgv.slice(1), { maxBuffer: 1 << 22, timeout: 300_000 });
          if (!e.stdout.includes('PyTorch version')) throw new Error('collect_env printed no PyTorch version');
          const lines = await catLog(catArgv);
          if (lines !== LINES) throw new Error(`cat gave ${lines} lines`);
        }),
      );
    }
    const g = report!.gathered;
    return [
      {
        case: `what changed: 1,000,000-line log + ${CHECKPOINTS} torch checkpoints over ssh (report, ranked) vs ssh torch.load ×2 + collect_env + cat log`,
        ours_ms: cold,
        usual_ms: median(usual),
        note: `${(bytes / 1e6).toFixed(0)} MB log; cold (log never read by the helper); warm median ${median(warm).toFixed(0)} ms; ${g.roundTrips} round trips (${(g.roundMs ?? []).join(' + ')} ms), ${g.requests} requests; usual median of ${USUAL_RUNS}, and it ranks nothing`,
      },
    ];
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
