import type { ReducedSeries } from '../../src/core/metrics/metricsProbe';
import type { WhatChangedFacts } from '../../src/core/whatChanged/facts';

/** One reduced series whose buckets each hold one point (min = max = last), as a short log reduces to. */
export function reducedSeries(key: string, x: number[], y: number[], t?: number[]): ReducedSeries {
  return {
    key,
    x,
    min: y,
    max: y,
    last: y,
    ...(t ? { t } : {}),
    count: x.length,
    lastX: x.at(-1)!,
    lastValue: y.at(-1)!,
  };
}

/** The facts a What Changed? unit test leaves empty: no environment, benchmark, marks, probe or data history. */
export const NO_OTHER_FACTS: Pick<
  WhatChangedFacts,
  'env' | 'bench' | 'marks' | 'probe' | 'dataHistory' | 'unknown' | 'gathered'
> = {
  env: { now: null, baselines: [] },
  bench: [],
  marks: {},
  probe: null,
  dataHistory: [],
  unknown: [],
  gathered: { roundTrips: 3, requests: 3, elapsedMs: 1 },
};
