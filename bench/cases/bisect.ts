import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bisect, budgetRuns } from '../../src/core/bisect/engine';
import { builtinMeasure, envChangeId, type EnvChange } from '../../src/core/bisect/env';
import { bisectHeadline } from '../../src/core/bisect/render';
import { LocalTransport } from '../../src/core/transport/local';
import type { BenchResult } from '../context';
import { TINY_CPU_BENCH } from '../../test/support/tinyBench';

/*
 * The environment bisect (issue 26) on this machine with the real CPU benchmark (python/throughput_bench.py, tiny
 * shape, Debian's python3-torch or KG_BENCH_PYTHON):
 * - the benchmark's own spread: 8 runs of one state, interleaved as two "states" A and B that are the same, so the
 *   A/A difference of medians and the runs' range say how large a difference noise makes here — what the 5 %
 *   threshold and the spread rule (docs/bisect.md) must stand above;
 * - one bisect of six env changes, one of them a GIL-starving agent's sitecustomize on PYTHONPATH (as in
 *   test/int/bisect.int.test.ts): rounds, runs, wall time and verdict; "usual" is reverting one change at a time by
 *   hand with as many runs each (3 per state, plus the baseline), timed at this bisect's own median run.
 */

const TINY = TINY_CPU_BENCH;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export async function benchBisect(): Promise<BenchResult[]> {
  const python = process.env['KG_BENCH_PYTHON'] ?? '/usr/bin/python3';
  const dir = mkdtempSync(join(tmpdir(), 'kg-bench-bisect-'));
  try {
    mkdirSync(join(dir, 'agent'));
    writeFileSync(
      join(dir, 'agent', 'sitecustomize.py'),
      'import sys\nimport threading\n\n\ndef _spin():\n    n = 0\n    while True:\n        n += 1\n\n\n' +
        'sys.setswitchinterval(0.02)\nthreading.Thread(target=_spin, daemon=True).start()\n',
    );
    const vars: [string, string][] = [
      ['HF_HUB_OFFLINE', '1'],
      ['NCCL_DEBUG', 'WARN'],
      ['PYTHONPATH', join(dir, 'agent')],
      ['TOKENIZERS_PARALLELISM', 'false'],
      ['TORCH_HOME', join(dir, 'torch-home')],
      ['WANDB_MODE', 'disabled'],
    ];
    // Now = the changes set: the measure starts from `env` words that set them, then reverts the unapplied ones.
    const changes: EnvChange[] = vars.map(([name, value]) => ({
      id: envChangeId(name),
      kind: 'env',
      name,
      good: null,
      now: value,
      label: `${name}=${value} (added)`,
    }));
    const nowEnv = vars.map(([n, v]) => `${n}=${v}`);
    const transport = new LocalTransport();
    const withNow = {
      id: 'local',
      label: 'This machine',
      exec: (argv: readonly string[], o?: Parameters<LocalTransport['exec']>[1]) =>
        transport.exec(['env', ...nowEnv, ...argv], o),
      spawn: transport.spawn.bind(transport),
      dispose: () => transport.dispose(),
    };
    const runMs: number[] = [];
    const inner = builtinMeasure({ transport: withNow, label: 'This machine' }, changes, python, TINY);
    const measure: typeof inner = async (applied, signal) => {
      const t0 = performance.now();
      const v = await inner(applied, signal);
      runMs.push(performance.now() - t0);
      return v;
    };

    // A/A: the same state (all reverted) run 8 times, alternately labelled A and B
    const same = new Set<string>();
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < 8; i++) (i % 2 ? b : a).push(await measure(same));
    const all = [...a, ...b];
    const mAll = median(all);
    const aa = Math.abs(median(a) - median(b)) / median(a);
    const spreadNote =
      `8 runs of one state: median ${mAll.toFixed(0)} tok/s, range ${Math.min(...all).toFixed(0)}–${Math.max(...all).toFixed(0)} ` +
      `(${(((Math.max(...all) - Math.min(...all)) / mAll) * 100).toFixed(0)} % of the median); A/A medians differ by ` +
      `${(aa * 100).toFixed(1)} %`;
    const aaRun = median(runMs);

    runMs.length = 0;
    const t0 = performance.now();
    const report = await bisect(changes, measure);
    const ms = performance.now() - t0;
    const perRun = median(runMs);
    const byHand = (changes.length + 1) * 3 * perRun;
    return [
      {
        case: 'bisect: the benchmark’s own spread here (A/A, tiny CPU shape)',
        ours_ms: aaRun,
        usual_ms: aaRun,
        note: `${spreadNote}; one run ${(aaRun / 1000).toFixed(1)} s (mostly interpreter + torch import)`,
      },
      {
        case: 'bisect: 6 env changes, one real slowdown (PYTHONPATH agent) vs one-at-a-time by hand',
        ours_ms: ms,
        usual_ms: byHand,
        note:
          `${report.rounds.length} rounds (budget ${report.budget.rounds}), ${report.runs} runs (budget ` +
          `${budgetRuns(changes.length)} before extensions), ${(ms / 1000).toFixed(0)} s; ${bisectHeadline(report)}`,
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
