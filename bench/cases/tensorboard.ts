import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { metricsReduceProbe } from '../../src/core/metrics/metricsProbe';
import type { BenchContext, BenchResult } from '../context';

/*
 * Issue 13's TensorBoard target: first plot data of an event file of 1,000,000 scalars (4 tags, ~52 MB, written by
 * the project's own writer, scripts/fixtures/tfevents_writer.py, as torch's SummaryWriter writes them) in under 1 s,
 * through the resident helper over the loopback sshd. tensorboard's EventAccumulator takes 19.8 s and 699 MB on the
 * GPU box for such a file (docs/gpu-results.md); it is not installed here, so the usual way timed here is what a
 * reader without TensorFlow's C++ does: every record decoded one by one with its CRC-32C checked in Python
 * (metrics_reduce.py --no-fast --verify, the general decoder alone).
 */
export async function benchTensorboard(ctx: BenchContext): Promise<BenchResult[]> {
  const dir = await fs.mkdtemp(join(tmpdir(), 'kg-bench-tb-'));
  try {
    const path = join(dir, 'events.out.tfevents.1700000000.bench');
    execFileSync('python3', ['scripts/fixtures/tfevents_writer.py', path, '--steps', '250000', '--drop-at', '150000']);
    const size = (await fs.stat(path)).size;
    const runner = await ctx.probes();
    await runner.interpreter();
    const t0 = performance.now();
    const preview = await runner.run(metricsReduceProbe({ path, preview: true }));
    const previewMs = performance.now() - t0;
    const t1 = performance.now();
    const exact = await runner.run(metricsReduceProbe({ path }));
    const exactMs = performance.now() - t1;
    const t2 = performance.now();
    const usual = await runner.run(metricsReduceProbe({ path, noFast: true, verify: true }));
    const usualMs = performance.now() - t2;
    if (exact.value.lines !== usual.value.lines || exact.value.lines !== 1_000_000)
      throw new Error(`scalars read: ${exact.value.lines} exact vs ${usual.value.lines} one by one`);
    const rss = (o: { footprint?: { maxRssKb: number } | undefined }) =>
      o.footprint ? `${(o.footprint.maxRssKb / 1024).toFixed(0)} MB` : 'n/a';
    const mb = (size / 1e6).toFixed(1);
    return [
      {
        case: `tensorboard over ssh: first plot (sampled preview) of a ${mb} MB event file, 1,000,000 scalars`,
        ours_ms: Math.round(previewMs),
        usual_ms: Math.round(usualMs),
        note: `remote peak RSS ${rss(preview)}; ${preview.value.sample?.bytes ?? 0} bytes sampled; usual: every record decoded with its CRC checked, ${rss(usual)}; EventAccumulator on the GPU box: 19.8 s, 699 MB`,
      },
      {
        case: `tensorboard over ssh: exact plot data of the same file (block split + length CRCs)`,
        ours_ms: Math.round(exactMs),
        usual_ms: Math.round(usualMs),
        note: `remote peak RSS ${rss(exact)}, probe ${Math.round(exact.value.elapsedMs)} ms; ${exact.value.series.length} series ≤ ${exact.value.buckets} buckets`,
      },
    ];
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
