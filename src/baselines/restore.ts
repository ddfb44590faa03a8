import * as vscode from 'vscode';
import { z } from 'zod';
import type { RestoreOutcome } from '../api';
import { BaselineCommands } from '../constants';
import { formatRate } from '../core/bench/compare';
import { KnownGoodError, messageOf } from '../core/errors';
import type { TargetOf } from '../core/runs/targets';
import {
  envLabelOf,
  FAILED_PINS_EXIT,
  labelProblem,
  planDocument,
  planScript,
  type Existing,
  type RestorePlan,
} from '../core/restore/plan';
import { guardedCommand } from '../core/actions/guard';
import {
  compareFreeze,
  earlierEnv,
  failedPinsText,
  freezeComparisonText,
  freezeOf,
  planOnHost,
  RESTORE_TIMEOUT_MS,
  type EarlierEnv,
} from '../core/restore/run';
import { restoredSpeeds, restoredSpeedsText, type RestoredSpeeds } from '../core/restore/speeds';
import { TerminalRunner } from '../core/terminal/runner';
import { fromKeptDocUri } from '../core/util/keptDocs';
import { pickBenchmark } from '../shared/benchmark';
import { withCancellableProgress } from '../shared/progress';
import { activeEditorUri, executeCommand, showInfo, showInputBox, showModal } from '../window';
import { showInTerminal } from '../shared/terminal';
import type { HostBaseline } from './commands';
import type { BaselinesFeature } from './common';

/** What Restore Known Good… takes besides its target (tests, the plan document's Run): checked, never trusted. */
const restoreCallSchema = z
  .object({
    /** Run without asking (the plan is still shown). */
    run: z.boolean().optional(),
    benchmark: z.enum(['none', 'builtin', 'custom']).optional(),
    /** The env folder's label (default: the baseline's label as a folder name). */
    label: z.string().max(64).optional(),
    /** What to do with an env folder an earlier restore left (default: ask). */
    existing: z.enum(['resume', 'rebuild']).optional(),
  })
  .partial();
type RestoreCall = z.infer<typeof restoreCallSchema>;

/** The plan documents shown (by their kept id): what their Run runs, after a reload too. */
const PLAN_DOCS_KEY = 'knownGood.restore.planDocs';
const PLAN_DOCS_MAX = 20;
const planDocSchema = z.object({
  hostId: z.string().min(1),
  baselineId: z.string().min(1),
  label: z.string(),
  existing: z.enum(['resume', 'rebuild']).optional(),
  at: z.number(),
});

/**
 * Restore Known Good… (tree: a baseline row; palette: pick one): the plan first, as a read-only shell script
 * document whose editor title has Run (and a notification with Run); an env folder an earlier restore left is
 * resumed, rebuilt or restored under another label, as the person says. Run runs it in a terminal (each step echoed
 * as it starts) and compares the restored env's pip freeze with the baseline when it ends; packages the installer
 * could not install are named there and in the report.
 */
export function registerRestoreCommand(
  f: BaselinesFeature,
  choose: (t: TargetOf<'baseline' | 'host'> | undefined) => Promise<HostBaseline | undefined>,
): void {
  f.command(
    BaselineCommands.restoreEnv,
    { kinds: ['baseline', 'host'] },
    async (t, call): Promise<RestoreOutcome | undefined> => {
      const parsed = restoreCallSchema.safeParse(call.extra ?? {});
      const extra: RestoreCall = parsed.success ? parsed.data : {};
      const b = await choose(t);
      if (!b) return undefined;
      const baseline = b.stored.baseline;
      const session = f.hosts.session(b.spec);
      const planned = await planWithEarlier(f, b, extra);
      if (!planned) return undefined;
      const { plan, earlier } = planned;
      const title = `baseline "${baseline.label}" on ${b.spec.name}`;
      const editor = await f.documents.showReplacing(`restore ${plan.label}.sh`, planDocument(plan, title), {
        preview: false,
      });
      rememberPlanDoc(f, editor.document.uri, {
        hostId: b.spec.id,
        baselineId: baseline.id,
        label: plan.label,
        ...(plan.existing ? { existing: plan.existing } : {}),
      });
      const outcome: RestoreOutcome = {
        envDir: plan.envDir,
        pins: plan.pins.length,
        notes: plan.notes.map((n) => `[${n.severity}] ${n.message}`),
        document: editor.document.uri.toString(),
        ...(plan.existing ? { existing: plan.existing } : {}),
        ...(earlier?.failed.length ? { earlierFailed: earlier.failed } : {}),
      };
      const refused = plan.notes.filter((n) => n.kind === 'refused').length;
      const run =
        extra.run === true
          ? 'Run'
          : await showInfo(
              `Restore ${baseline.label}: ${plan.pins.length} packages into ${plan.envDir}` +
                (plan.notes.length ? ` (${plan.notes.length} note(s) in the plan)` : '') +
                (refused ? `; ${refused} value(s) of the baseline refused, listed in the plan` : '') +
                ' (Run is also on the plan’s editor title)',
              'Run',
            );
      if (run !== 'Run') return outcome;
      // Asked before the run starts, so a long install is not followed by a question nobody is there to answer.
      const benchmark =
        extra.benchmark === 'none'
          ? undefined
          : await pickBenchmark(
              f.settings,
              extra.benchmark === 'builtin' || extra.benchmark === 'custom' ? extra.benchmark : undefined,
            );
      let freeze: string | undefined;
      let failed: string[] | undefined;
      let speeds: RestoredSpeeds | undefined;
      const runner = new TerminalRunner(session.transport, {
        // under the guard: bounded, and stopped on the host when the terminal closes or the window goes
        argv: guardedCommand(b.spec.python, ['sh', '-c', planScript(plan, title)], { timeoutMs: RESTORE_TIMEOUT_MS })
          .argv,
        display: `restore ${baseline.label} → ${plan.envDir}`,
        epilogue: async (exit, r, signal) => {
          const compared = async () =>
            freezeComparisonText(
              compareFreeze(baseline.snapshot.packages.packages, await freezeOf(session.transport, plan, signal), plan),
            );
          if (exit.exitCode === FAILED_PINS_EXIT) {
            // the rest is in: say which pins failed, and what the folder holds, so a retry knows what it resumes
            failed = (await earlierEnv(session.transport, plan, signal)).failed;
            freeze = await compared();
            return `${failedPinsText(failed)}.\nRestore Known Good… again offers Resume (install what is missing), Rebuild or another label.\n\n${freeze}`;
          }
          if (exit.exitCode !== 0) return undefined;
          freeze = await compared();
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
          : await f.documents.showReplacing(
              `restore ${plan.label} report.md`,
              restoreReport(title, plan.envDir, freeze, speeds, failed),
              { preview: false },
            );
      return {
        ...outcome,
        exitCode: exit.exitCode,
        ...(freeze !== undefined ? { freeze } : {}),
        ...(failed ? { failedPins: failed } : {}),
        ...(speeds ? { speeds: speedsOutcome(speeds) } : {}),
        ...(report ? { report: report.document.uri.toString(), reportText: report.document.getText() } : {}),
      };
    },
  );

  // Run on the plan document's editor title: the restore that document plans, planned again on the host (what
  // runs is what the host holds now) with the same label and choice; a changed plan replaces the document.
  f.command(BaselineCommands.runRestorePlan, null, async (_t, call) => {
    const arg = call.args[0];
    const uri = arg instanceof vscode.Uri ? arg : activeEditorUri();
    const ref = uri ? fromKeptDocUri(uri) : undefined;
    const all = f.kept.get<Record<string, unknown>>(PLAN_DOCS_KEY) ?? {};
    const doc = ref ? planDocSchema.safeParse(all[ref.id]) : undefined;
    if (!doc?.success)
      throw new KnownGoodError(
        'usage',
        'Run This Restore: this plan is no longer known (plans of an older window are forgotten): run Restore Known Good… on the baseline again',
      );
    const d = doc.data;
    // a test or another command may say which benchmark follows (the editor title's own argument parses as none)
    const more = restoreCallSchema.safeParse(call.extra ?? {});
    const benchmark = more.success ? more.data.benchmark : undefined;
    return executeCommand(
      BaselineCommands.restoreEnv,
      { hostId: d.hostId, baselineId: d.baselineId },
      {
        run: true,
        label: d.label,
        ...(d.existing ? { existing: d.existing } : {}),
        ...(benchmark ? { benchmark } : {}),
      },
    );
  });
}

/**
 * The plan, with what to do about an env folder an earlier restore left: asked (Resume, Rebuild, Another Label…)
 * unless the call says; undefined when the person cancels.
 */
async function planWithEarlier(
  f: BaselinesFeature,
  b: HostBaseline,
  extra: RestoreCall,
): Promise<{ plan: RestorePlan; earlier?: EarlierEnv } | undefined> {
  const baseline = b.stored.baseline;
  const session = f.hosts.session(b.spec);
  let label = extra.label ?? envLabelOf(baseline.label);
  const bad = labelProblem(label);
  if (bad) throw new KnownGoodError('usage', `restore: "${label}" is no env folder name: ${bad}`);
  let existing: Existing | undefined = extra.existing;
  for (;;) {
    const r = await withCancellableProgress(`Planning the restore of "${baseline.label}"…`, async (signal) => {
      const plan = await planOnHost(session, baseline.snapshot, { label, ...(existing ? { existing } : {}) }, signal);
      return { plan, earlier: await earlierEnv(session.transport, plan, signal) };
    });
    if (!r) return undefined;
    if (existing || !r.earlier.exists) return r;
    const e = r.earlier;
    const state = !e.venv
      ? 'it stopped before its venv was made'
      : e.failed.length
        ? `its venv is there; ${failedPinsText(e.failed)}`
        : 'its venv is there (finished or stopped: Resume installs only what it lacks)';
    const choice = await showModal(
      `${r.plan.envDir} exists: an earlier restore of "${baseline.label}" left it.`,
      `${state}.\n\nResume keeps it and installs what it lacks; Rebuild removes it and restores again; ` +
        'Another Label restores into a new folder beside it.',
      'Resume',
      'Rebuild',
      'Another Label…',
    );
    if (choice === 'Resume') existing = 'resume';
    else if (choice === 'Rebuild') existing = 'rebuild';
    else if (choice === 'Another Label…') {
      const next = await showInputBox({
        title: `Restore "${baseline.label}" under another label`,
        prompt: `The env goes to ~/.known-good/envs/<label> on ${b.spec.name}`,
        value: `${label}-2`,
        validateInput: (v) => labelProblem(v.trim()),
      });
      if (next === undefined) return undefined;
      label = next.trim();
    } else return undefined;
  }
}

function rememberPlanDoc(f: BaselinesFeature, uri: vscode.Uri, doc: Omit<z.infer<typeof planDocSchema>, 'at'>): void {
  const ref = fromKeptDocUri(uri);
  if (!ref) return;
  const all = { ...(f.kept.get<Record<string, { at?: number }>>(PLAN_DOCS_KEY) ?? {}) };
  all[ref.id] = { ...doc, at: Date.now() };
  const newest = Object.keys(all)
    .sort((x, y) => (all[y]?.at ?? 0) - (all[x]?.at ?? 0))
    .slice(0, PLAN_DOCS_MAX);
  f.kept
    .update(PLAN_DOCS_KEY, Object.fromEntries(newest.map((k) => [k, all[k]])))
    .then(undefined, (e: unknown) => f.log.error(`Restore: could not keep the plan's Run: ${messageOf(e)}`));
}

const rate = (v: number | undefined) => (v === undefined ? '—' : formatRate(v));

/** The restore's report: where the env is, what could not be installed, its pip freeze, the benchmark three ways. */
function restoreReport(
  title: string,
  envDir: string,
  freeze: string,
  speeds: RestoredSpeeds | undefined,
  failed: readonly string[] | undefined,
): string {
  return [
    `# Restore of ${title}`,
    '',
    ...(speeds ? [`**${speeds.line}**`, ''] : []),
    ...(failed?.length
      ? [
          `**${failedPinsText(failed)}**`,
          '',
          'The other packages are installed. Once the package source has these, Restore Known Good… again offers ' +
            '**Resume** (install only what is missing), **Rebuild** (start over) or another label.',
          '',
          ...failed.map((p) => `- \`${p}\``),
          '',
        ]
      : []),
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
      : [failed?.length ? 'No benchmark was run: the env is not whole.' : 'No benchmark was run.', '']),
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
