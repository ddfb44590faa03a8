import { customBenchmarkOf } from '../core/bench/customBenchmark';
import type { BisectBenchmark } from '../core/bisect/envBisect';
import { showQuickPick } from '../window';
import type { SettingsAccess } from './settings';

/**
 * Which benchmark measures a state (the env bisect, the package bisect, a restored env): the built-in one with the
 * baseline's recorded shape, or the user's `knownGood.benchmark` command when one is set (then asked). `chosen`
 * (from a test or another command) skips the question.
 */
export async function pickBenchmark(
  settings: SettingsAccess,
  chosen?: 'builtin' | 'custom',
): Promise<BisectBenchmark | undefined> {
  const own = settings.current.benchmark.command;
  const custom = (): BisectBenchmark => ({ kind: 'custom', bench: customBenchmarkOf(settings.current.benchmark) });
  if (chosen) return chosen === 'custom' ? custom() : { kind: 'builtin' };
  if (!own) return { kind: 'builtin' };
  const pick = await showQuickPick(
    [
      {
        label: 'The built-in benchmark',
        detail: "python/throughput_bench.py with the baseline's recorded shape",
        own: false,
      },
      { label: 'Your benchmark command', detail: own, own: true },
    ],
    { placeHolder: 'Measure each state with…' },
  );
  if (!pick) return undefined;
  return pick.own ? custom() : { kind: 'builtin' };
}
