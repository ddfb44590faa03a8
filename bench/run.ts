/**
 * `npm run bench [-- --json FILE] [-- --only WORD]`: each case side by side with the usual way, from one run, as a
 * ratio (this machine is noisy: ratios and medians, never single absolute times as pass/fail).
 */
import { writeFileSync } from 'node:fs';
import { BenchContext, takeRemotePeaks, takeRequestCosts, type BenchResult, type RequestCost } from './context';
import { benchHelperRequests } from './cases/helperRequests';
import { benchArgs } from './cases/args';
import { benchListing } from './cases/listing';
import { benchListingStacks } from './cases/listingStacks';
import { benchEnvCompareSsh, benchEnvSnapshot } from './cases/envSnapshot';
import { benchRestore } from './cases/restore';
import { benchLiveThroughput } from './cases/liveThroughput';
import { benchMetrics } from './cases/metrics';
import { benchMetricsSsh } from './cases/metricsSsh';
import { benchTensorboard } from './cases/tensorboard';
import { benchWhatChanged } from './cases/whatChanged';
import { benchRegressions } from './cases/regressions';
import { benchStitching } from './cases/stitching';
import { benchLaunchFacts } from './cases/launchFacts';
import { benchBisect } from './cases/bisect';
import { benchLinks } from './cases/links';
import { benchReplay } from './cases/replay';
import { benchGpuTimeline } from './cases/gpuTimeline';

type Case = { name: string; run: (ctx: BenchContext) => Promise<BenchResult | BenchResult[]> };

const cases: Case[] = [
  { name: 'helper', run: benchHelperRequests },
  { name: 'listing', run: benchListing },
  { name: 'stacks-listing', run: benchListingStacks },
  { name: 'metrics', run: benchMetrics },
  { name: 'metrics-ssh', run: benchMetricsSsh },
  { name: 'tensorboard', run: benchTensorboard },
  { name: 'args', run: benchArgs },
  { name: 'env', run: () => benchEnvSnapshot() },
  { name: 'env-compare-ssh', run: benchEnvCompareSsh },
  { name: 'restore', run: () => benchRestore() },
  { name: 'live', run: benchLiveThroughput },
  { name: 'what-changed', run: benchWhatChanged },
  { name: 'regressions', run: benchRegressions },
  { name: 'stitching', run: benchStitching },
  { name: 'launch-facts', run: () => benchLaunchFacts() },
  { name: 'bisect', run: () => benchBisect() },
  { name: 'links', run: benchLinks },
  { name: 'replay', run: () => benchReplay() },
  { name: 'gpu-timeline', run: () => benchGpuTimeline() },
];

function fmt(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const jsonAt = args.indexOf('--json');
  const jsonFile = jsonAt >= 0 ? args[jsonAt + 1] : undefined;
  const onlyAt = args.indexOf('--only');
  const only = onlyAt >= 0 ? args[onlyAt + 1] : undefined;
  const ctx = new BenchContext();
  const results: BenchResult[] = [];
  let failed = 0;
  try {
    for (const c of cases) {
      if (only && !c.name.includes(only)) continue;
      try {
        takeRemotePeaks();
        takeRequestCosts();
        const out = await c.run(ctx);
        const peaks = takeRemotePeaks();
        const costs = takeRequestCosts();
        for (const r of Array.isArray(out) ? out : [out]) {
          r.ratio = r.usual_ms / r.ours_ms;
          if (Object.keys(peaks).length) r.remote_rss_mb = peaks;
          // A case may give its own (the requests it timed alone, say): else every request it made.
          if (!r.request_ms && Object.keys(costs).length) r.request_ms = costs;
          results.push(r);
          const target =
            r.target_ms !== undefined
              ? `   target ≤ ${fmt(r.target_ms)}: ${r.ours_ms <= r.target_ms ? 'met' : 'MISSED'}`
              : '';
          console.log(
            `${r.case}\n  ours ${fmt(r.ours_ms).padStart(10)}   usual ${fmt(r.usual_ms).padStart(10)}   ${r.ratio.toFixed(1)}× faster${target}${r.note ? `   (${r.note})` : ''}`,
          );
        }
        // Where one request's time went: the helper's own phases, the rest is the client, ssh and the channel.
        const shown = (Array.isArray(out) ? out[0] : out)?.request_ms ?? costs;
        for (const [probe, c] of Object.entries(shown)) console.log(`  ${describeRequestCost(probe, c)}`);
        // What the probes took of the remote host: peak resident memory of each (the answers' footprint).
        if (Object.keys(peaks).length) {
          const rss = Object.entries(peaks).map(([probe, mb]) => `${probe} ${mb.toFixed(1)} MB`);
          console.log(`  remote peak RSS: ${rss.join(', ')}`);
        }
      } catch (e) {
        failed++;
        console.error(`${c.name}: FAILED: ${e instanceof Error ? e.stack : String(e)}`);
      }
    }
  } finally {
    await ctx.dispose();
  }
  if (jsonFile) {
    writeFileSync(
      jsonFile,
      JSON.stringify(
        results.map((r) => ({
          case: r.case,
          ours_ms: r.ours_ms,
          usual_ms: r.usual_ms,
          ratio: r.ratio,
          ...(r.note ? { note: r.note } : {}),
          ...(r.remote_rss_mb ? { remote_rss_mb: r.remote_rss_mb } : {}),
          ...(r.target_ms !== undefined ? { target_ms: r.target_ms } : {}),
          ...(r.request_ms ? { request_ms: r.request_ms } : {}),
          ...(r.rttMs !== undefined ? { rttMs: r.rttMs } : {}),
          ...(r.roundTrips !== undefined ? { roundTrips: r.roundTrips } : {}),
          ...(r.usualRoundTrips !== undefined ? { usualRoundTrips: r.usualRoundTrips } : {}),
          ...(r.targetRoundTrips !== undefined ? { targetRoundTrips: r.targetRoundTrips } : {}),
        })),
        null,
        2,
      ) + '\n',
    );
  }
  return failed ? 1 : 0;
}

function describeRequestCost(probe: string, c: RequestCost): string {
  const h = c.helper;
  const f = (x: number) => x.toFixed(2);
  const how = Object.entries(c.how)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  return (
    `one ${probe} request (median of ${c.n}${c.note ? `, ${c.note}` : ''}): ${f(c.wall)} ms = in ${f(c.wayIn)} (client, ssh2, sshd, helper woken) ` +
    `+ helper ${f(h.total)} [parse ${f(h.parse)}, compile ${f(h.compile)}, handoff ${f(h.handoff)}, exec ${f(h.exec)}, ` +
    `setup ${f(h.setup)}, run ${f(h.run)}, frame ${f(h.frame)}, pipe ${f(h.pipe)}; child: ${how}] ` +
    `+ out ${f(c.wayOut)} (sshd, ssh2, client parse)`
  );
}

void main().then((code) => process.exit(code));
