import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seriesFromReduction } from '../../src/core/dashboard/fromReduction';
import { metricsReduceProbe, type MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { shellQuote } from '../../src/core/quote';
import { MeasuredProbeRunner, type BenchContext, type BenchResult } from '../context';
import { CountingTransport, generateMetricsLog } from './metrics';

/*
 * Issue 8's target as the dashboard meets it: a 1,000,000-line log on a host reached through the pooled ssh2
 * connection (the real loopback sshd of the bench). "Ours" is what Open Dashboard does: a sampled preview drawn at
 * once, then the exact read; then what the resident helper keeps (reopen, zoom). "Usual" is `ssh HOST cat FILE`
 * with OpenSSH and JSON.parse of every line here.
 */

/** The whole log through `ssh HOST cat`, every line parsed: the usual way to plot a remote log. */
async function catOverSsh(argv: string[]): Promise<{ bytes: number; points: number }> {
  const [cmd, ...rest] = argv;
  const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'inherit'] });
  let rest_ = '';
  let bytes = 0;
  let points = 0;
  const take = (line: string) => {
    if (!line) return;
    try {
      const doc = JSON.parse(line.replace(/\bNaN\b/g, 'null')) as Record<string, unknown>;
      for (const v of Object.values(doc)) if (typeof v === 'number') points++;
    } catch {
      /* a malformed line: skipped, as the probe does */
    }
  };
  child.stdout.setEncoding('utf8');
  for await (const chunk of child.stdout) {
    bytes += Buffer.byteLength(chunk as string);
    const lines = (rest_ + (chunk as string)).split('\n');
    rest_ = lines.pop() ?? '';
    for (const l of lines) take(l);
  }
  take(rest_);
  const code = await new Promise<number | null>((resolve) =>
    child.exitCode !== null ? resolve(child.exitCode) : child.on('close', resolve),
  );
  if (code !== 0) throw new Error(`${argv.join(' ')} exited with ${code}`);
  return { bytes, points };
}

interface Timed {
  ms: number;
  bytes: number;
  value: MetricsReduction;
}

export async function benchMetricsSsh(ctx: BenchContext): Promise<BenchResult[]> {
  const dir = await fs.mkdtemp(join(tmpdir(), 'kg-bench-metrics-ssh-'));
  try {
    const path = join(dir, 'train_log.jsonl');
    const size = await generateMetricsLog(path, 1_000_000);
    const wire = new CountingTransport(await ctx.transport());
    // A runner of its own on the pooled connection, so its helper starts inside the first measurement (a host
    // whose first use is Open Dashboard). Not disposed through the counting wrapper: that would close the pool's.
    const runner = new MeasuredProbeRunner(wire, { python: 'python3', timeoutMs: 300_000 });
    const timed = async (o: Parameters<typeof metricsReduceProbe>[0]): Promise<Timed> => {
      wire.reset();
      const t0 = performance.now();
      const { value } = await runner.run(metricsReduceProbe(o));
      // What the panel posts is built from it too: part of the time to a plot.
      JSON.stringify(value.series.map(seriesFromReduction));
      return { ms: performance.now() - t0, bytes: wire.bytesIn + wire.bytesOut, value };
    };
    const medianOf = async (n: number, o: Parameters<typeof metricsReduceProbe>[0]): Promise<Timed> => {
      const runs: Timed[] = [];
      for (let i = 0; i < n; i++) runs.push(await timed(o));
      return runs.sort((a, b) => a.ms - b.ms)[Math.floor(n / 2)]!;
    };
    let cold: Timed, preview: Timed, exact: Timed, reopen: Timed, zoom: Timed, zoomCold: Timed;
    try {
      // What Open Dashboard does: a preview (evenly spaced windows), drawn at once, then the exact read.
      cold = await timed({ path, x: 'step', preview: true });
      preview = await medianOf(3, { path, x: 'step', preview: true });
      // --fresh: each exact read reads the whole file, as the first one does.
      exact = await medianOf(3, { path, x: 'step', fresh: true });
      reopen = await medianOf(3, { path, x: 'step', preview: true });
      const window = { path, x: 'step' as const, window: { from: 400_000, to: 410_000 }, series: ['loss'] };
      zoom = await medianOf(3, window);
      zoomCold = await timed({ ...window, fresh: true });
    } finally {
      runner.dispose();
    }
    if (!preview.value.sample || reopen.value.source !== 'cache' || zoom.value.source !== 'cache') {
      throw new Error('metrics-ssh: the preview was not sampled, or the helper kept nothing between requests');
    }
    const t2 = performance.now();
    const usual = await catOverSsh(await ctx.sshArgv(`cat ${shellQuote(path)}`));
    const usualMs = performance.now() - t2;
    const pct = (b: number) => `${((100 * b) / size).toFixed(2)}%`;
    const kb = (b: number) => `${(b / 1e3).toFixed(0)} kB`;
    const sampled = preview.value.sample;
    const usualNote = `usual: ssh cat of the ${(size / 1e6).toFixed(0)} MB file (${(usual.bytes / 1e6).toFixed(0)} MB on the wire) + JSON.parse of every line`;
    return [
      {
        case: 'metrics over ssh: first plot data of a 1,000,000-line log (Open Dashboard; helper already up)',
        ours_ms: Math.round(preview.ms),
        usual_ms: Math.round(usualMs),
        note:
          `preview from ${sampled.windows} evenly spaced windows = ${pct(sampled.bytes)} of the file read on the host, ` +
          `${kb(preview.bytes)} on the wire (${pct(preview.bytes)}), probe ${Math.round(preview.value.elapsedMs)} ms, median of 3; ` +
          `the exact plot replaces it after the full read below; ${usualNote}`,
      },
      {
        case: 'metrics over ssh: first plot data, first contact (resident helper start included)',
        ours_ms: Math.round(cold.ms),
        usual_ms: Math.round(usualMs),
        note: `${kb(cold.bytes)} on the wire with the helper's source (${pct(cold.bytes)})`,
      },
      {
        case: 'metrics over ssh: exact plot data (whole file read on the host)',
        ours_ms: Math.round(exact.ms),
        usual_ms: Math.round(usualMs),
        note:
          `probe ${Math.round(exact.value.elapsedMs)} ms with ${exact.value.jobs} jobs; ${kb(exact.bytes)} on the wire = ` +
          `${pct(exact.bytes)}; ${exact.value.series.length} series ≤ ${exact.value.buckets} buckets; median of 3`,
      },
      {
        case: 'metrics over ssh: open the same log again (the helper kept the exact reduction)',
        ours_ms: Math.round(reopen.ms),
        usual_ms: Math.round(usualMs),
        note: `exact at once: ${reopen.value.bytesRead ?? 0} bytes of the file read (only what was appended), ${kb(reopen.bytes)} on the wire`,
      },
      {
        case: 'metrics over ssh: zoom to 10,000 steps of one series (zone map kept by the helper)',
        ours_ms: Math.round(zoom.ms),
        usual_ms: Math.round(zoomCold.ms),
        note:
          `${pct(zoom.value.bytesRead ?? 0)} of the file read, ${(zoom.bytes / 1e3).toFixed(1)} kB on the wire; ` +
          `usual here: the same window reading the whole file (--fresh)`,
      },
    ];
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
