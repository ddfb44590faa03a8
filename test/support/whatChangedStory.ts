import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TORCH_PYTHON } from './require';

/*
 * The story of issue 16 as files: real torch checkpoints step_100 … step_1000 of a run whose dataset arg changes
 * between step_600 and step_700, a train_log.jsonl whose tok/s falls from 12.8K to 4.3K after step 600, and the two
 * datasets on disk. Used by the integration test (over a real sshd) and the UI scenario (This machine).
 */

export const STEP_S = 10;

/** Deterministic noise: the same log on every run. */
export function noise(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}

export function writeCheckpoints(
  run: string,
  t0: number,
  dataset: (step: number) => string,
  dataDir: string,
  every = 100,
): void {
  const specs = [];
  for (let step = every; step <= 1000; step += every) {
    specs.push({ file: join(run, `step_${step}`, 'checkpoint.pt'), step, dataset: dataset(step) });
    mkdirSync(join(run, `step_${step}`), { recursive: true });
  }
  const r = spawnSync(
    TORCH_PYTHON,
    [
      '-c',
      `
import argparse, json, sys, torch
for s in json.loads(sys.argv[1]):
    args = argparse.Namespace(lr=3e-4, batch_size=32, seq_len=1024, dataset=s["dataset"], data_dir=sys.argv[2],
                              out_dir=sys.argv[3], seed=1234, num_workers=8)
    torch.save({"args": args, "step": s["step"], "model": torch.nn.Linear(4, 4).state_dict()}, s["file"])
`,
      JSON.stringify(specs),
      dataDir,
      run,
    ],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  for (const s of specs) {
    const t = t0 + s.step * STEP_S;
    utimesSync(s.file, t, t);
    utimesSync(join(run, `step_${s.step}`), t, t);
  }
}

/** train_log.jsonl: one line per step, tok/s 12.8K through step 600 and 4.3K after, ±3% noise. */
export function writeLog(run: string, t0: number): void {
  const g = noise(7);
  const lines: string[] = [];
  for (let step = 1; step <= 1000; step++) {
    const level = step <= 600 ? 12800 : 4300;
    const tok = level * (1 + 0.06 * g());
    const loss = 2 + 6 * Math.exp(-step / 300) + 0.05 * g();
    lines.push(JSON.stringify({ step, time: t0 + step * STEP_S, loss, lr: 3e-4, tok_s: Math.round(tok) }));
  }
  writeFileSync(join(run, 'train_log.jsonl'), lines.join('\n') + '\n');
}

export function writeData(dir: string, name: string, files: number, mtime: number): void {
  mkdirSync(join(dir, name), { recursive: true });
  for (let i = 0; i < files; i++) {
    const f = join(dir, name, `shard-${i}.bin`);
    writeFileSync(f, Buffer.alloc(1000 + i, i));
    utimesSync(f, mtime, mtime);
  }
  utimesSync(join(dir, name), mtime, mtime);
}

/**
 * The story's run (`<root>/runs/run-a`) and data (`<root>/data`): the dataset changes after step_600. A checkpoint
 * every `every` steps (10 by default; 50 with 20).
 */
export function writeStory(
  root: string,
  t0 = Math.floor(Date.now() / 1000) - 20000,
  every = 100,
): { run: string; data: string; t0: number } {
  const run = join(root, 'runs', 'run-a');
  const data = join(root, 'data');
  mkdirSync(run, { recursive: true });
  writeData(data, 'openwebtext-10k', 4, t0 - 1000);
  // the new dataset was written while training was stopped at step 600
  writeData(data, 'openwebtext-dedup-v2', 3, t0 + 600 * STEP_S + 5);
  writeCheckpoints(run, t0, (s) => (s <= 600 ? 'openwebtext-10k' : 'openwebtext-dedup-v2'), data, every);
  writeLog(run, t0);
  return { run, data, t0 };
}
