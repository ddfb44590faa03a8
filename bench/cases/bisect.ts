import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { throughputBenchProbe, type BenchConfig } from '../../src/core/bench/benchProbe';
import { bisect, budgetRuns, DEFAULT_THRESHOLD as THRESHOLD } from '../../src/core/bisect/engine';
import { parseFramedResult } from '../../src/core/probes/catalogue';
import { extractFramed } from '../../src/core/probes/runner';
import { probeTerminalCommand } from '../../src/core/terminal/command';
import { newNonce } from '../../src/core/util/nonce';
import { builtinMeasure, envChangeId, type EnvChange } from '../../src/core/bisect/env';
import { bisectHeadline } from '../../src/core/bisect/render';
import { LocalTransport } from '../../src/core/transport/local';
import type { BenchResult } from '../context';
import { ANOMALY_AGENT, TINY_CPU_BENCH } from '../../test/support/tinyBench';

/*
 * The environment bisect (issue 26) on this machine with the real CPU benchmark (python/throughput_bench.py,
 * Debian's python3-torch or KG_BENCH_PYTHON):
 * - the benchmark's own A/A spread: 9 runs of one env for the built-in CPU preset and for the tiny shape, each read
 *   on the wall clock and on the process's CPU clock — what the 5 % threshold and the spread rule (docs/bisect.md)
 *   stand against, and the smallest slowdown the rule would trust here at 3 runs each;
 * - one bisect of six env changes, one of them an anomaly-detecting sitecustomize on PYTHONPATH (as in
 *   test/int/bisect.int.test.ts, CPU clock, 50 %): rounds, runs, wall time and verdict; "usual" is reverting one
 *   change at a time by hand with as many runs each (3 per state, plus the baseline), timed at this bisect's median run.
 */

const TINY = TINY_CPU_BENCH;

const AA_RUNS = 9;

/**
 * What the rule makes of this spread: min/median/max of the runs, the spread (range / median), and the smallest
 * slowdown the engine would trust between two states of 3 runs each here. A slowdown is trusted when the medians
 * differ by at least the threshold AND the slower state's highest run is below the other's lowest; two 3-run states
 * whose runs spread r (range / median, the median of every 3 of the runs) pass that at a slowdown of r / (1 + r / 2),
 * so the smaller of the two bounds is the threshold only when r stays under ~5 %.
 */
function aaText(xs: readonly number[]): string {
  const m = median(xs);
  const triples: number[] = [];
  for (let i = 0; i < xs.length; i++)
    for (let j = i + 1; j < xs.length; j++)
      for (let k = j + 1; k < xs.length; k++) {
        const t = [xs[i]!, xs[j]!, xs[k]!];
        triples.push((Math.max(...t) - Math.min(...t)) / median(t));
      }
  const r3 = median(triples);
  const trusted = Math.max(THRESHOLD, r3 / (1 + r3 / 2));
  const pct = (v: number) => `${(v * 100).toFixed(v < 0.1 ? 1 : 0)} %`;
  return (
    `min ${Math.min(...xs).toFixed(0)}, median ${m.toFixed(0)}, max ${Math.max(...xs).toFixed(0)} tok/s, spread ` +
    `${pct((Math.max(...xs) - Math.min(...xs)) / m)}; a 3-run state spans ${pct(r3)} (median of all triples), so the ` +
    `smallest slowdown trusted at 3 runs each is ~${pct(trusted)}${trusted > THRESHOLD ? ' (the spread rule decides, not the 5 % threshold)' : ''}`
  );
}

/** One run of the built-in benchmark: its median tokens/s on the wall clock and on the process's CPU clock. */
async function runOnce(python: string, config: BenchConfig): Promise<{ wall: number; cpu?: number }> {
  const transport = new LocalTransport();
  const call = throughputBenchProbe(config);
  const nonce = newNonce();
  const r = await transport.exec(probeTerminalCommand(python, call, nonce).argv);
  const framed = extractFramed(r.stdout, nonce);
  if (framed === undefined) throw new Error(`the benchmark failed: ${r.stderr.slice(-500)}`);
  const v = parseFramedResult(call, framed, 'This machine').value;
  return { wall: v.tokensPerSec.median, ...(v.cpuTokensPerSec ? { cpu: v.cpuTokensPerSec.median } : {}) };
}

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
    writeFileSync(join(dir, 'agent', 'sitecustomize.py'), ANOMALY_AGENT);
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
      spawn: (argv: readonly string[], o?: Parameters<LocalTransport['spawn']>[1]) =>
        transport.spawn(['env', ...nowEnv, ...argv], o),
      dispose: () => transport.dispose(),
    };
    const runMs: number[] = [];
    // the CPU clock at the int test's 50 % threshold (test/int/bisect.int.test.ts says why)
    const inner = builtinMeasure(
      { transport: withNow, label: 'This machine', python },
      changes,
      python,
      TINY,
      undefined,
      'cpu',
    );
    const measure: typeof inner = async (applied, signal) => {
      const t0 = performance.now();
      const v = await inner(applied, signal);
      runMs.push(performance.now() - t0);
      return v;
    };

    // A/A: the same state (all reverted) run N times, per shape: the built-in CPU preset and the tiny shape, each run
    // read on both clocks (wall tokens/s, and tokens per CPU-second of the process)
    const aaCases: BenchResult[] = [];
    for (const [shape, config] of [
      ['built-in CPU preset', { device: 'cpu' as const }],
      ['tiny CPU shape', TINY],
    ] as const) {
      const wall: number[] = [];
      const cpu: number[] = [];
      const ms: number[] = [];
      for (let i = 0; i < AA_RUNS; i++) {
        const t = performance.now();
        const r = await runOnce(python, config);
        ms.push(performance.now() - t);
        wall.push(r.wall);
        if (r.cpu !== undefined) cpu.push(r.cpu);
      }
      aaCases.push({
        case: `bisect: the benchmark's own A/A spread here (${shape}, ${AA_RUNS} runs of one env)`,
        ours_ms: median(ms),
        usual_ms: median(ms),
        note: `wall: ${aaText(wall)}; CPU clock: ${cpu.length ? aaText(cpu) : 'not reported'}`,
      });
    }

    runMs.length = 0;
    const t0 = performance.now();
    const report = await bisect(changes, measure, { threshold: 0.5 });
    const ms = performance.now() - t0;
    const perRun = median(runMs);
    const byHand = (changes.length + 1) * 3 * perRun;
    return [
      ...aaCases,
      {
        case: 'bisect: 6 env changes, one real slowdown (PYTHONPATH anomaly agent, CPU clock, 50 %) vs one-at-a-time by hand',
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
