import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from '../../test/support/process';
import { installFakeSmi, timelineLines } from '../../test/support/fakeNvidiaSmi';
import type { BenchResult } from '../context';

/*
 * Issue 34: the GPU timeline's file size per hour, from a real run of kg_record.py's sampler (python/kg_gpu_sampler.py)
 * against the fake nvidia-smi of test/fixtures/nvidia-smi/ (8 H200s and two processes, in the documented format: no GPU
 * here). The sampler runs at 0.1 s to gather SAMPLES samples quickly; a line's size does not depend on the interval,
 * so the size per hour at the default 5 s (and at 1 s) is bytes per sample × samples per hour. `ours_ms`: the CPU a
 * sample costs (its end line's cpuS + childCpuS: the sampler's and nvidia-smi's, here the fake's Python, so an upper
 * bound); `usual_ms`: the default interval, so the ratio is the share of one core it leaves. The sampler's overhead on
 * a training loop needs the GPU box (docs/hardware.md).
 */

const SAMPLES = 60;
const DEFAULT_INTERVAL_S = 5;

interface Line {
  kind: string;
  samples?: number;
  cpuS?: number | null;
  childCpuS?: number | null;
}

export async function benchGpuTimeline(): Promise<BenchResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'kg-bench-gpu-'));
  try {
    const bin = join(dir, 'bin');
    const run = join(dir, 'run');
    for (const d of [bin, run]) mkdirSync(d);
    installFakeSmi(bin, dir, { driver: 'r580', gpu: 'r580-h200x8-steady.gpu.csv', apps: 'r580-h200x8.apps.csv' });
    const file = join(run, '.known-good', 'gpu-timeline.jsonl');
    const lines = () => timelineLines<Line>(file);
    const child = spawn(
      'python3',
      [
        join(__dirname, '..', '..', 'python', 'kg_record.py'),
        '--run',
        run,
        '--gpu-interval',
        '0.1',
        '--',
        'python3',
        '-c',
        'import sys; sys.stdin.read()',
      ],
      {
        env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` },
        stdio: ['pipe', 'ignore', 'ignore'],
      },
    );
    const ok = await waitUntil(() => lines().filter((l) => l.kind === 'sample').length >= SAMPLES, 300_000, 100);
    child.stdin.end();
    await waitUntil(() => lines().some((l) => l.kind === 'end'), 60_000, 100);
    if (!ok) throw new Error(`the sampler wrote fewer than ${SAMPLES} samples in 300 s`);
    const all = lines();
    const text = readFileSync(file, 'utf8').split('\n');
    const sampleBytes = text.filter((l) => l.startsWith('{"kind":"sample"')).map((l) => Buffer.byteLength(l) + 1);
    const perSample = sampleBytes.reduce((a, b) => a + b, 0) / sampleBytes.length;
    const end = all.find((l) => l.kind === 'end')!;
    const n = end.samples ?? sampleBytes.length;
    const mib = (x: number) => (x / (1 << 20)).toFixed(1);
    const perHour = (interval: number) => perSample * (3600 / interval);
    return [
      {
        case: 'gpu-timeline: sampler file size and CPU per sample (8 GPUs, 2 processes)',
        ours_ms: (((end.cpuS ?? 0) + (end.childCpuS ?? 0)) * 1000) / n,
        usual_ms: DEFAULT_INTERVAL_S * 1000,
        note:
          `${Math.round(perSample)} B a sample (file ${statSync(file).size} B for ${n} samples): ` +
          `${mib(perHour(DEFAULT_INTERVAL_S))} MiB an hour at the default ${DEFAULT_INTERVAL_S} s, ${mib(perHour(1))} MiB at 1 s; ` +
          `the 64 MiB cap holds ${(64 / Number(mib(perHour(DEFAULT_INTERVAL_S)))).toFixed(0)} h at 5 s. ` +
          `ours = CPU a sample (the sampler's own ${(((end.cpuS ?? 0) * 1000) / n).toFixed(1)} ms + nvidia-smi's, here ` +
          `the fake's Python: an upper bound); usual = the ${DEFAULT_INTERVAL_S} s interval (the ratio: one core's time ` +
          'over the CPU a sample takes)',
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
