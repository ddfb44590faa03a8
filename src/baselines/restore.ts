import type { RestoreOutcome } from '../api';
import { BaselineCommands } from '../constants';
import type { TargetOf } from '../core/runs/targets';
import { envLabelOf, planDocument, planScript } from '../core/restore/plan';
import { compareFreeze, freezeComparisonText, freezeOf, planOnHost } from '../core/restore/run';
import { TerminalRunner } from '../core/terminal/runner';
import { withCancellableProgress } from '../shared/progress';
import { showInfo, showUntitled } from '../window';
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
      const editor = await showUntitled(planDocument(plan, title), 'shellscript');
      const outcome: RestoreOutcome = {
        envDir: plan.envDir,
        pins: plan.pins.length,
        notes: plan.notes.map((n) => `[${n.severity}] ${n.message}`),
        document: editor.document.uri.toString(),
      };
      const run =
        (call.extra as { run?: unknown } | undefined)?.run === true
          ? 'Run'
          : await showInfo(
              `Restore ${baseline.label}: ${plan.pins.length} packages into ${plan.envDir}` +
                (plan.notes.length ? ` (${plan.notes.length} note(s) in the plan)` : ''),
              'Run',
            );
      if (run !== 'Run') return outcome;
      let freeze: string | undefined;
      const runner = new TerminalRunner(session.transport, {
        argv: ['sh', '-c', planScript(plan, title)],
        display: `restore ${baseline.label} → ${plan.envDir}`,
        epilogue: async (exit) => {
          if (exit.exitCode !== 0) return undefined;
          freeze = freezeComparisonText(
            compareFreeze(baseline.snapshot.packages.packages, await freezeOf(session.transport, plan), plan),
          );
          return freeze;
        },
      });
      const shown = showInTerminal(`Restore @ ${b.spec.name}`, runner);
      const exit = await shown.done;
      return { ...outcome, exitCode: exit.exitCode, ...(freeze !== undefined ? { freeze } : {}) };
    },
  );
}
