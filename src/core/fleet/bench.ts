import type { BenchResult } from '../bench/benchProbe';
import { describeBenchConfig } from '../bench/benchProbe';
import { formatRate } from '../bench/compare';
import { median } from '../bench/customBenchmark';
import { naturalCompare } from '../util/format';

/**
 * Benchmark every node: python/throughput_bench.py on each node at once, side by side, each node's median
 * tokens/s against the median of all nodes. A node well below it (a throttled GPU, a slow link, a busy CPU) is
 * flagged; the slowest is named.
 */

export interface FleetBenchRow {
  node: string;
  tokensPerSec: number;
  stepMs: number;
  tflops: number;
  /** Its tokens/s over the median node's. */
  ratio: number;
  /** Below `slowBelow` × the median. */
  slow: boolean;
  config: string;
  device: string;
}

export interface FleetBench {
  rows: FleetBenchRow[];
  medianTokensPerSec: number | null;
  /** The slowest node (flagged or not), null with no results. */
  slowest: string | null;
  flagged: string[];
  /** Nodes that ran a different configuration or device than most: their numbers are not comparable. */
  mismatched: string[];
  failed: { node: string; message: string }[];
}

export const SLOW_BELOW = 0.9;

export function compareBench(
  results: ReadonlyMap<string, BenchResult>,
  failed: readonly { node: string; message: string }[] = [],
  slowBelow = SLOW_BELOW,
): FleetBench {
  const entries = [...results.entries()].sort((a, b) => naturalCompare(a[0], b[0]));
  const med = entries.length ? median(entries.map(([, r]) => r.tokensPerSec.median)) : null;
  const configCount = new Map<string, number>();
  for (const [, r] of entries) {
    const c = describeBenchConfig(r.config);
    configCount.set(c, (configCount.get(c) ?? 0) + 1);
  }
  const usual = [...configCount.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  const rows = entries.map(([node, r]): FleetBenchRow => {
    const ratio = med ? r.tokensPerSec.median / med : 1;
    return {
      node,
      tokensPerSec: r.tokensPerSec.median,
      stepMs: r.stepMs.median,
      tflops: r.tflops,
      ratio,
      slow: ratio < slowBelow,
      config: describeBenchConfig(r.config),
      device: r.config.device,
    };
  });
  const slowest = rows.length ? rows.reduce((a, b) => (b.tokensPerSec < a.tokensPerSec ? b : a)).node : null;
  return {
    rows,
    medianTokensPerSec: med,
    slowest,
    flagged: rows.filter((r) => r.slow).map((r) => r.node),
    mismatched: rows.filter((r) => r.config !== usual).map((r) => r.node),
    failed: [...failed],
  };
}

export function renderBenchText(b: FleetBench, what: string): string {
  const out = [`# Benchmark every node: ${what}, ${b.rows.length} node${b.rows.length === 1 ? '' : 's'} answered`];
  if (b.medianTokensPerSec !== null) out.push(`# median ${formatRate(b.medianTokensPerSec)} tokens/s`);
  if (b.flagged.length) {
    out.push(`# slow (below ${Math.round(SLOW_BELOW * 100)}% of the median): ${b.flagged.join(', ')}`);
  } else if (b.slowest)
    out.push(`# slowest: ${b.slowest} (within ${Math.round((1 - SLOW_BELOW) * 100)}% of the median)`);
  if (b.mismatched.length) out.push(`# ran another configuration (not comparable): ${b.mismatched.join(', ')}`);
  const w = Math.max(4, ...b.rows.map((r) => r.node.length));
  out.push(
    '',
    `${'node'.padEnd(w)}  ${'tokens/s'.padStart(10)}  ${'step ms'.padStart(9)}  ${'TFLOP/s'.padStart(8)}  vs median`,
  );
  for (const r of b.rows) {
    const mark = r.slow ? '  SLOW' : r.node === b.slowest ? '  slowest' : '';
    out.push(
      `${r.node.padEnd(w)}  ${formatRate(r.tokensPerSec).padStart(10)}  ${r.stepMs.toFixed(1).padStart(9)}  ${r.tflops
        .toFixed(3)
        .padStart(8)}  ${`${Math.round(r.ratio * 100)}%`.padStart(9)}${mark}`,
    );
  }
  for (const f of b.failed) out.push(`${f.node.padEnd(w)}  failed: ${f.message}`);
  if (b.rows[0]) out.push('', `config: ${b.rows[0].config}`);
  return out.join('\n') + '\n';
}
