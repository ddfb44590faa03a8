import type { Baseline, BaselineStore, ThroughputResult } from '../baselines/store';
import { resultLabel, sampleOf } from './records';
import { compareThroughput } from './compare';

/*
 * Which kept result a new one is compared with: the reference choice, shared by the extension's benchmark commands
 * (and by anything else that keeps results with a host's baselines).
 */

export interface BenchReference {
  result: ThroughputResult;
  label: string;
  isBaseline: boolean;
}

/** Every result of a host a new one can be compared with, newest first; those kept with a baseline first. */
export async function benchReferences(store: BaselineStore, key: string): Promise<BenchReference[]> {
  const baselines: Baseline[] = (await store.list(key)).baselines.map((b) => b.baseline);
  const out: BenchReference[] = [];
  const seen = new Set<string>();
  for (const b of baselines) {
    for (const t of [...(b.throughput ?? [])].reverse()) {
      if (seen.has(t.id) || !sampleOf(t)) continue;
      seen.add(t.id);
      out.push({ result: t, label: b.label, isBaseline: true });
    }
  }
  const results = (await store.listResults(key)).results.map((r) => r.result).reverse();
  for (const r of results) {
    if (seen.has(r.id) || !sampleOf(r)) continue;
    seen.add(r.id);
    out.push({
      result: r,
      label: resultLabel(r, baselines),
      isBaseline: r.baselineId !== null && baselines.some((b) => b.id === r.baselineId),
    });
  }
  return out.sort((a, b) => Number(b.isBaseline) - Number(a.isBaseline));
}

/**
 * Keeps a result with the host's baselines (under `key`) and compares it with the reference: the newest result kept
 * with a baseline, else none.
 */
export async function keepResult(
  store: BaselineStore,
  key: string,
  record: Parameters<BaselineStore['appendResult']>[1],
): Promise<{ kept: { file: string; result: ThroughputResult }; comparison?: string }> {
  const kept = await store.appendResult(key, record);
  const ref = (await benchReferences(store, key)).find((r) => r.result.id !== kept.result.id && r.isBaseline);
  if (!ref) return { kept };
  return {
    kept,
    comparison: compareThroughput(sampleOf(kept.result)!, { ...sampleOf(ref.result)!, label: ref.label }).text,
  };
}
