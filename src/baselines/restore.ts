import type { RestoreOutcome } from '../api';
import { BaselineCommands } from '../constants';
import { formatRate } from '../core/bench/compare';
import type { TargetOf } from '../core/runs/targets';
import { envLabelOf, planDocument, planScript } from '../core/restore/plan';
import { guardedCommand } from '../core/actions/guard';
import { compareFreeze, freezeComparisonText, freezeOf, planOnHost, RESTORE_TIMEOUT_MS } from '../core/restore/run';
import { restoredSpeeds, restoredSpeedsText, type RestoredSpeeds } from '../core/restore/speeds';
import { TerminalRunner } from '../core/terminal/runner';
import { pickBenchmark } from '../shared/benchmark';
import { withCancellableProgress } from '../shared/progress';
import { showInfo } from '../window';
import { showInTerminal } from '../shared/terminal';
import type { HostBaseline } from './commands';
import type { BaselinesFeature } from './common';

/**
 * Restore Known Good… (tree: a baseline row; palette: pick one): the plan first, as a shell script document the
 * user reads or copies; Run then runs it in a terminal (each step echoed as it starts) and compares the restored
 * env's pip freeze with the baseline when it ends.
 */
export function registerRestoreCommand(
  f: BaselinesFeature,
  choose: (t: TargetOf<'baseline' | 'host'> | undefined) => Promise<HostBaseline | undefined>,
): void {
  f.command(
    BaselineCommands.restoreEnv,
    { kinds: ['baseline', 'host'] },
    async (t, call): Promise<RestoreOutcome | undefined> => {
      const b = await choose(t);
      if (!b) return undefined;
      const baseline = b.stored.baseline;
      const session = f.hosts.session(b.spec);
      const plan = await withCancellableProgress(`Planning the restore of "${baseline.label}"…`, (signal) =>
        planOnHost(session, baseline.snapshot, { label: envLabelOf(baseline.label) }, signal),
      );
      if (!plan) return undefined;
      const title = `baseline "${baseline.label}" on ${b.spec.name}`;
      const editor = await f.documents.show(`restore ${envLabelOf(baseline.label)}.sh`, planDocument(plan, title), {
        preview: false,
      });
      const outcome: RestoreOutcome = {
        envDir: plan.envDir,
        pins: plan.pins.length,
        notes: plan.notes.map((n) => `[${n.severity}] ${n.message}`),
        document: editor.document.uri.toString(),
      };
      const refused = plan.notes.filter((n) => n.kind === 'refused').length;
      const run =
        (call.extra as { run?: unknown } | undefined)?.run === true
          ? 'Run'
          : await showInfo(
              `Restore ${baseline.label}: ${plan.pins.length} packages into ${plan.envDir}` +
                (plan.notes.length ? ` (${plan.notes.length} note(s) in the plan)` : '') +
                (refused ? `; ${refused} value(s) of the baseline refused, listed in the plan` : ''),
              'Run',
            );
      if (run !== 'Run') return outcome;
      // Asked before the run starts, so a long install is not followed by a question nobody is there to answer.
      const extra = call.extra as { benchmark?: unknown } | undefined;
      const benchmark =
        extra?.benchmark === 'none'
          ? undefined
          : await pickBenchmark(
              f.settings,
              extra?.benchmark === 'builtin' || extra?.benchmark === 'custom' ? extra.benchmark : undefined,
            );
      let freeze: string | undefined;
      let speeds: RestoredSpeeds | undefined;
      const runner = new TerminalRunner(session.transport, {
        // under the guard: bounded, and stopped on the host when the terminal closes or the window goes
        argv: guardedCommand(b.spec.python, ['sh', '-c', planScript(plan, title)], { timeoutMs: RESTORE_TIMEOUT_MS })
          .argv,
        display: `restore ${baseline.label} → ${plan.envDir}`,
        epilogue: async (exit, r, signal) => {
          if (exit.exitCode !== 0) return undefined;
          freeze = freezeComparisonText(
            compareFreeze(baseline.snapshot.packages.packages, await freezeOf(session.transport, plan), plan),
          );
          if (!benchmark) return freeze;
          r.print(`\n${freeze}\n\n`);
          const key = f.storeKeyOf(b.spec);
          const [results, reference] = await Promise.all([f.store.listResults(key), f.store.reference(key)]);
          speeds = await restoredSpeeds(
            { ...session, python: b.spec.python },
            {
              envDir: plan.envDir,
              nowPython: b.spec.python,
              baseline,
              benchmark,
              results: results.results.map((x) => x.result),
              ...(reference ? { reference: reference.resultId } : {}),
              onText: (t) => r.print(t.endsWith('\n') ? t : `${t}\n`),
              signal,
            },
          );
          return restoredSpeedsText(speeds);
        },
      });
      const shown = showInTerminal(`Restore @ ${b.spec.name}`, runner);
      const exit = await shown.done;
      const report =
        freeze === undefined
          ? undefined
          : await f.documents.show(
              `restore ${envLabelOf(baseline.label)} report.md`,
              restoreReport(title, plan.envDir, freeze, speeds),
              { preview: false },
            );
      return {
        ...outcome,
        exitCode: exit.exitCode,
        ...(freeze !== undefined ? { freeze } : {}),
        ...(speeds ? { speeds: speedsOutcome(speeds) } : {}),
        ...(report ? { report: report.document.uri.toString(), reportText: report.document.getText() } : {}),
      };
    },
  );
}

const rate = (v: number | undefined) => (v === undefined ? '—' : formatRate(v));

/** The restore's report: where the env is, its pip freeze against the baseline, the benchmark three ways. */
function restoreReport(title: string, envDir: string, freeze: string, speeds: RestoredSpeeds | undefined): string {
  return [
    `# Restore of ${title}`,
    '',
    ...(speeds ? [`**${speeds.line}**`, ''] : []),
    `Restored env: \`${envDir}\``,
    '',
    '## Packages',
    '',
    '```',
    freeze,
    '```',
    '',
    ...(speeds
      ? [
          '## Benchmark',
          '',
          `- Benchmark: ${speeds.benchmark}`,
          `- Restored env: ${rate(speeds.restored)} ${speeds.unit}`,
          `- Baseline: ${rate(speeds.baseline)} ${speeds.unit} (${speeds.baselineFrom})`,
          `- Now: ${rate(speeds.now)} ${speeds.unit}`,
          ...speeds.errors.map((e) => `- ${e.side === 'restored' ? 'In the restored env' : 'Now'}: ${e.error}`),
          '',
        ]
      : ['No benchmark was run.', '']),
  ].join('\n');
}

function speedsOutcome(s: RestoredSpeeds): NonNullable<RestoreOutcome['speeds']> {
  return {
    line: s.line,
    ...(s.restored !== undefined ? { restored: s.restored } : {}),
    ...(s.now !== undefined ? { now: s.now } : {}),
    ...(s.baseline !== undefined ? { baseline: s.baseline } : {}),
    errors: s.errors.map((e) => `${e.side}: ${e.error}`),
  };
}
