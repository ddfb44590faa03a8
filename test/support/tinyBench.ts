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

/**
 * A sitecustomize.py that slows the benchmark by a real, load-independent CPU cost: it turns on autograd anomaly
 * detection as torch finishes importing (a debugging leftover on PYTHONPATH), so every op records a Python traceback
 * in the benchmark's own thread. On this 2-core test machine its tiny-shape speed on the CPU clock is 3–5x lower.
 * Attached after the import: anomaly mode during torch's own import would only slow the interpreter's start.
 */
export const ANOMALY_AGENT = [
  'import importlib.util',
  'import sys',
  '',
  '',
  'class _AttachAfterTorch:',
  '    def find_spec(self, name, path=None, target=None):',
  '        if name != "torch":',
  '            return None',
  '        sys.meta_path.remove(self)',
  '        spec = importlib.util.find_spec(name)',
  '        run = spec.loader.exec_module',
  '',
  '        def exec_module(module):',
  '            run(module)',
  '            module.autograd.set_detect_anomaly(True)',
  '',
  '        spec.loader.exec_module = exec_module',
  '        return spec',
  '',
  '',
  'sys.meta_path.insert(0, _AttachAfterTorch())',
  '',
].join('\n');
