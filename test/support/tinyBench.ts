/** The smallest CPU shape of python/throughput_bench.py: a run in about a second, for tests and bench cases. */
export const TINY_CPU_BENCH = {
  device: 'cpu',
  layers: 1,
  width: 32,
  heads: 2,
  seq: 16,
  batch: 1,
  vocab: 64,
  steps: 4,
  warmup: 1,
} as const;
