import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seriesFromReduction } from '../../src/core/dashboard/fromReduction';
import { metricsReduceProbe } from '../../src/core/metrics/metricsProbe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { shellQuote } from '../../src/core/quote';
import type { BenchContext, BenchResult } from '../context';
import { CountingTransport, generateMetricsLog } from './metrics';

/*
 * Issue 8's target as the dashboard meets it: a 1,000,000-line log on a host reached through the pooled ssh2
 * connection (the real loopback sshd of the bench). "Ours" is what Open Dashboard does: start the host's resident
 * helper on the already-open connection and run metrics_reduce there; then a zoom request on the warm helper.
 * "Usual" is `ssh HOST cat FILE` with OpenSSH and JSON.parse of every line here.
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

export async function benchMetricsSsh(ctx: BenchContext): Promise<BenchResult[]> {
  const dir = await fs.mkdtemp(join(tmpdir(), 'kg-bench-metrics-ssh-'));
  try {
    const path = join(dir, 'train_log.jsonl');
    const size = await generateMetricsLog(path, 1_000_000);
    const wire = new CountingTransport(await ctx.transport());
    // A runner of its own on the pooled connection, so its helper starts inside the measurement (as for a host
    // whose first use is Open Dashboard). Not disposed through the counting wrapper: that would close the pool's.
    const runner = new ProbeRunner(wire, { python: 'python3', timeoutMs: 300_000 });
    let first: {
      ms: number;
      bytes: number;
      probeMs: number;
      jobs: number;
      series: number;
      buckets: number;
      payload: number;
    };
    let zoom: { ms: number; bytes: number };
    try {
      const t0 = performance.now();
      const { value } = await runner.run(metricsReduceProbe({ path, x: 'step' }));
      // What the panel posts: the series as the webview draws them.
      const payload = Buffer.byteLength(JSON.stringify(value.series.map(seriesFromReduction)));
      first = {
        ms: performance.now() - t0,
        bytes: wire.bytesIn + wire.bytesOut,
        probeMs: value.elapsedMs,
        jobs: value.jobs,
        series: value.series.length,
        buckets: value.buckets,
        payload,
      };
      wire.reset();
      const t1 = performance.now();
      await runner.run(
        metricsReduceProbe({ path, x: 'step', window: { from: 400_000, to: 410_000 }, series: ['loss'] }),
      );
      zoom = { ms: performance.now() - t1, bytes: wire.bytesIn + wire.bytesOut };
    } finally {
      runner.dispose();
    }
    const t2 = performance.now();
    const usual = await catOverSsh(await ctx.sshArgv(`cat ${shellQuote(path)}`));
    const usualMs = performance.now() - t2;
    const pct = (b: number) => `${((100 * b) / size).toFixed(2)}%`;
    return [
      {
        case: 'metrics over the pooled ssh connection: first plot data of a 1,000,000-line log',
        ours_ms: Math.round(first.ms),
        usual_ms: Math.round(usualMs),
        note:
          `${(first.bytes / 1e3).toFixed(0)} kB crossed the channel (helper source included) = ${pct(first.bytes)} of the ` +
          `${(size / 1e6).toFixed(0)} MB file vs ${(usual.bytes / 1e6).toFixed(0)} MB by ssh cat; helper start included; probe ` +
          `${Math.round(first.probeMs)} ms with ${first.jobs} jobs; ${first.series} series ≤ ${first.buckets} buckets, ` +
          `${(first.payload / 1e3).toFixed(0)} kB posted to the webview`,
      },
      {
        case: 'metrics over the pooled ssh connection: zoom to 10,000 steps of one series (warm helper)',
        ours_ms: Math.round(zoom.ms),
        usual_ms: Math.round(usualMs),
        note: `${(zoom.bytes / 1e3).toFixed(1)} kB on the channel = ${pct(zoom.bytes)} of the file; the usual way reads the whole file again`,
      },
    ];
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
