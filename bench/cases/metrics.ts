import { spawn } from 'node:child_process';
import { createWriteStream, promises as fs } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { metricsReduceProbe, type MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { LocalTransport } from '../../src/core/transport/local';
import type { ExecOptions, ExecResult, ProcessHandle, SpawnOptions, Transport } from '../../src/core/transport/types';
import { MeasuredProbeRunner } from '../context';

/*
 * Issue 8's scale target: first plot data of a 1,000,000-line metrics log in under 1 s through the probe runner,
 * with under 1% of the file's bytes crossing the wire. "Usual" is what one does without a reduction on the host:
 * stream the whole file (as `cat` over ssh would) and JSON.parse every line in Node.
 */

/** Counts the bytes that cross a transport's channels in both directions (the "wire" of a local transport). */
export class CountingTransport implements Transport {
  bytesIn = 0;
  bytesOut = 0;
  readonly id: string;
  readonly label: string;

  constructor(private readonly inner: Transport = new LocalTransport()) {
    this.id = inner.id;
    this.label = inner.label;
  }

  async exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    const r = await this.inner.exec(argv, options);
    this.bytesIn += Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr);
    if (options.stdin !== undefined) this.bytesOut += Buffer.byteLength(options.stdin);
    return r;
  }

  async spawn(argv: readonly string[], options?: SpawnOptions): Promise<ProcessHandle> {
    const h = await this.inner.spawn(argv, options);
    const count = (c: Buffer) => {
      this.bytesIn += c.length;
    };
    h.stdout.on('data', count);
    h.stderr.on('data', count);
    const write = h.stdin.write.bind(h.stdin) as (chunk: unknown, ...rest: unknown[]) => boolean;
    h.stdin.write = ((chunk: unknown, ...rest: unknown[]) => {
      this.bytesOut += typeof chunk === 'string' ? Buffer.byteLength(chunk) : (chunk as Buffer).length;
      return write(chunk, ...rest);
    }) as typeof h.stdin.write;
    return h;
  }

  reset(): void {
    this.bytesIn = 0;
    this.bytesOut = 0;
  }

  dispose(): void {
    this.inner.dispose();
  }
}

/**
 * A training log like real ones: a line per step (loss, lr, grad norm, tok/s, wall time), an eval line every 1000
 * steps, a loss spike at 3/4 of the run, and one NaN loss. Written in chunks so memory stays small.
 */
export async function generateMetricsLog(path: string, lines: number): Promise<number> {
  const out = createWriteStream(path);
  let chunk: string[] = [];
  const t0 = 1_700_000_000;
  for (let i = 0; i < lines; i++) {
    let loss = 4 * Math.exp(-i / 200_000) + ((i * 7919) % 97) * 1e-4;
    if (i === Math.floor((lines * 3) / 4)) loss = 99;
    const lossText = i === Math.floor(lines / 3) ? 'NaN' : loss.toFixed(5);
    chunk.push(
      `{"step": ${i}, "loss": ${lossText}, "lr": 0.0003, "grad_norm": ${(1 + ((i * 31) % 17) / 10).toFixed(3)}, "tok_per_s": ${12800 + (i % 300)}, "time": ${(t0 + i * 0.35).toFixed(2)}}`,
    );
    if (i % 1000 === 999) chunk.push(`{"step": ${i}, "eval": {"loss": ${(loss + 0.1).toFixed(5)}, "acc": 0.5}}`);
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

/** The usual way: the whole file through a pipe, every line parsed, every numeric key collected. */
export async function readWholeLogUsualWay(path: string): Promise<{ points: number; bytes: number }> {
  const child = spawn('cat', [path], { stdio: ['ignore', 'pipe', 'inherit'] });
  const series = new Map<string, number[]>();
  let rest = '';
  let bytes = 0;
  let points = 0;
  const take = (line: string) => {
    if (!line) return;
    let doc: unknown;
    try {
      doc = JSON.parse(line.replace(/\bNaN\b/g, 'null'));
    } catch {
      return;
    }
    if (typeof doc !== 'object' || doc === null) return;
    for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
      if (typeof v !== 'number') continue;
      let arr = series.get(k);
      if (!arr) series.set(k, (arr = []));
      arr.push(v);
      points++;
    }
  };
  child.stdout.setEncoding('utf8');
  for await (const chunk of child.stdout) {
    const text = rest + (chunk as string);
    bytes += Buffer.byteLength(chunk as string);
    const lines = text.split('\n');
    rest = lines.pop() ?? '';
    for (const l of lines) take(l);
  }
  take(rest);
  return { points, bytes };
}

export interface MetricsBenchResult {
  reduction: MetricsReduction;
  ms: number;
  bytesOnWire: number;
}

/** First plot data through a fresh ProbeRunner (helper start included) on a counting local transport. */
export async function firstPlotThroughRunner(path: string, python = 'python3'): Promise<MetricsBenchResult> {
  const transport = new CountingTransport();
  const runner = new MeasuredProbeRunner(transport, { python, timeoutMs: 300_000 });
  try {
    const t0 = performance.now();
    const { value } = await runner.run(metricsReduceProbe({ path }));
    const ms = performance.now() - t0;
    return { reduction: value, ms, bytesOnWire: transport.bytesIn + transport.bytesOut };
  } finally {
    runner.dispose();
  }
}

export async function benchMetrics(): Promise<{ case: string; ours_ms: number; usual_ms: number; note?: string }> {
  const dir = await fs.mkdtemp(join(tmpdir(), 'kg-bench-metrics-'));
  try {
    const path = join(dir, 'train_log.jsonl');
    const size = await generateMetricsLog(path, 1_000_000);
    const ours = await firstPlotThroughRunner(path);
    const t0 = performance.now();
    const usual = await readWholeLogUsualWay(path);
    const usualMs = performance.now() - t0;
    const pct = (100 * ours.bytesOnWire) / size;
    return {
      case: 'metrics on This machine: exact plot data of a 1,000,000-line log (helper start included; preview first: see metrics over ssh)',
      ours_ms: Math.round(ours.ms),
      usual_ms: Math.round(usualMs),
      note:
        `${(ours.bytesOnWire / 1e3).toFixed(0)} kB on the wire vs ${(usual.bytes / 1e6).toFixed(1)} MB ` +
        `(${pct.toFixed(2)}% of the file; the usual way also moves the whole file over ssh, ` +
        `+${(usual.bytes / 12.5e6).toFixed(1)} s at 100 Mbit/s); probe itself ${Math.round(ours.reduction.elapsedMs)} ms ` +
        `with ${ours.reduction.jobs} jobs, ` +
        `${ours.reduction.series.length} series ≤ ${ours.reduction.buckets} buckets`,
    };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
