/*
 * Restarted runs written on disk as the real libraries lay them out (issue 22), read back with the real probes
 * (python/list_runs.py, python/metrics_reduce.py) run locally: an HF Trainer run (a TensorBoard event file per launch
 * under runs/<date>_<host>/, checkpoint-N folders) and a Lightning run (lightning_logs/version_N/metrics.csv with
 * ThroughputMonitor's columns). The speeds come from test/support/realLoop.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { metricsReductionSchema, type MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { runsListingSchema, type RunEntry } from '../../src/core/runs/listRuns';
import type { LoopLog } from './realLoop';

const REPO = join(__dirname, '..', '..');

export interface EventPoint {
  step: number;
  time: number;
  tags: Record<string, number>;
}

/** A TensorBoard event file as SummaryWriter writes scalars (scripts/fixtures/tfevents_writer.py). */
export function writeEvents(path: string, t0: number, points: readonly EventPoint[]): void {
  const script = [
    'import json, sys',
    `sys.path.insert(0, ${JSON.stringify(join(REPO, 'scripts', 'fixtures'))})`,
    'import tfevents_writer as w',
    'd = json.load(sys.stdin)',
    "with open(d['path'], 'wb') as f:",
    "    f.write(w.record(w.header_event(d['t0'])))",
    "    for p in d['points']:",
    "        for tag, v in p['tags'].items():",
    "            f.write(w.record(w.scalar_event(p['time'], p['step'], tag, v)))",
  ].join('\n');
  execFileSync('python3', ['-c', script], { input: JSON.stringify({ path, t0, points }) });
}

/** The run folder's listing entry, as the extension gets it. */
export function listRun(dir: string): RunEntry {
  const out = execFileSync('python3', [join(REPO, 'python', 'list_runs.py'), dir], { encoding: 'utf8' });
  return runsListingSchema.parse(JSON.parse(out)).roots[0]!.entry!;
}

export function reduce(path: string): MetricsReduction {
  const out = execFileSync('python3', [join(REPO, 'python', 'metrics_reduce.py'), path, '--x', 'step'], {
    encoding: 'utf8',
  });
  return metricsReductionSchema.parse(JSON.parse(out));
}

/** The points of a loop from `from` to `to` steps (inclusive), as one launch logged them. */
function slice(l: LoopLog, from: number, to: number): number[] {
  return l.step.map((s, i) => (s >= from && s <= to ? i : -1)).filter((i) => i >= 0);
}

/**
 * An HF Trainer run restarted from checkpoint-`resume`: the first launch (`a`, a loop that never restarted) logged up
 * to `killedAt` (its steps after the checkpoint are logged again by the second launch, which wins), the second (`b`,
 * the loop with its restart) from the checkpoint on.
 */
export function writeHfRun(dir: string, a: LoopLog, b: LoopLog, resume: number, killedAt: number): void {
  const launch = (name: string, l: LoopLog, idx: number[]) => {
    const d = join(dir, 'runs', name);
    mkdirSync(d, { recursive: true });
    const t0 = Math.floor(l.time[idx[0]!]! - 5);
    const points = idx.map((i) => ({
      step: l.step[i]!,
      time: l.time[i]!,
      tags: {
        'train/loss': 2 + 100 / l.step[i]!,
        'train/grad_norm': 1.5,
        'train/learning_rate': 5e-5,
        'train/epoch': l.step[i]! / 500,
      },
    }));
    writeEvents(join(d, `events.out.tfevents.${t0}.vm.${name.length}.0`), t0, points);
  };
  launch('Dec01_10-00-00_vm', a, slice(a, 0, killedAt));
  launch('Dec01_10-40-00_vm', b, slice(b, resume + 1, Infinity));
  for (const step of [200, 400, 600, 800, 1000, 1200].filter((s) => s <= b.step.at(-1)!)) {
    const c = join(dir, `checkpoint-${step}`);
    mkdirSync(c, { recursive: true });
    writeFileSync(join(c, 'trainer_state.json'), JSON.stringify({ global_step: step, log_history: [] }));
  }
}

/** A Lightning run with CSVLogger and ThroughputMonitor, resumed with ckpt_path into version_1 (as writeHfRun). */
export function writeLightningRun(
  dir: string,
  a: LoopLog,
  b: LoopLog,
  resume: number,
  killedAt: number,
  batch = 8,
): void {
  const parts: [string, LoopLog, number[]][] = [
    ['version_0', a, slice(a, 0, killedAt)],
    ['version_1', b, slice(b, resume + 1, Infinity)],
  ];
  for (const [name, l, idx] of parts) {
    const d = join(dir, 'lightning_logs', name);
    mkdirSync(join(d, 'checkpoints'), { recursive: true });
    const t0 = l.time[idx[0]!]! - 1;
    const rows = idx.map((i) => {
      const bps = l.stepsPerSec[i]!;
      return `${bps},${l.step[i]! / 500},${bps * batch},${l.step[i]!},${(l.time[i]! - t0).toFixed(3)},${2 + 100 / l.step[i]!}`;
    });
    writeFileSync(
      join(d, 'metrics.csv'),
      ['batches_per_sec,epoch,samples_per_sec,step,time,train_loss', ...rows].join('\n') + '\n',
    );
    writeFileSync(join(d, 'hparams.yaml'), 'lr: 0.001\n');
    const last = l.step[idx[idx.length - 1]!]!;
    for (const step of [200, 400, 600, 800, 1000, 1200].filter(
      (s) => s <= last && (name === 'version_0') === s <= resume,
    ))
      writeFileSync(join(d, 'checkpoints', `epoch=0-step=${step}.ckpt`), '');
  }
}
