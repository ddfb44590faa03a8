import { posix } from 'node:path';
import type * as vscode from 'vscode';
import { z } from 'zod';
import type { ReplayRunOutcome } from '../api';
import { ReplayCommands } from '../constants';
import type { BaselineStore } from '../core/baselines/store';
import { budgetRuns } from '../core/bisect/engine';
import { bisectEventLine } from '../core/bisect/render';
import { KnownGoodError, messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { setupFromFacts, type SetupChoices } from '../core/replay/fromFacts';
import { planReplay, runReplay, type ReplayHost, type ReplayPlan, type ReplaySetup } from '../core/replay/replay';
import { RESTART_ID } from '../core/replay/changes';
import { roleName, STACKS, type OverrideRole } from '../core/replay/stacks';
import { changesOfSubject, culpritIdOf, proofOf, suspectSubjectSchema } from '../core/replay/suspects';
import type { TargetOf } from '../core/runs/targets';
import { analyze } from '../core/whatChanged/analyze';
import type { WhatChangedFacts } from '../core/whatChanged/facts';
import { gatherFacts } from '../core/whatChanged/gather';
import type { SuspectSubject, WhatChangedReport } from '../core/whatChanged/model';
import type { RegisterCommand } from '../shared/commands';
import type { Documents } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import { openLiveTerminal } from '../shared/liveTerminal';
import { withCancellableProgress } from '../shared/progress';
import type { SettingsAccess } from '../shared/settings';
import { showInputBox, showModal } from '../window';

/** What replay needs from the extension. */
export interface ReplayDeps {
  command: RegisterCommand;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'error'>;
  settings: SettingsAccess;
  store: BaselineStore;
  storeKeyOf(host: HostSpec): string;
  /** The plan and the report, as read-only documents (one of each per run, replaced by the next). */
  documents: Pick<Documents, 'showReplacing'>;
  /** The workspace's storage: what the person chose per run (steps, flag names), for the next replay of it. */
  kept: Pick<vscode.Memento, 'get' | 'update'>;
}

/** In words, for Restricted Mode's refusal: what a replay runs. */
const RUNS_CODE = "a replay runs the run's own training command (as its launch records name it) on its host";

/** What the person chose for a run: kept per host and run folder (the newest KEPT_MAX runs). */
const choicesSchema = z.object({
  steps: z.number().int().min(1).max(1_000_000).optional(),
  names: z
    .object({
      resume: z.string().max(200).optional(),
      output: z.string().max(200).optional(),
      steps: z.string().max(200).optional(),
    })
    .optional(),
  regex: z.string().max(500).optional(),
});
type Choices = z.infer<typeof choicesSchema>;
const KEPT_KEY = 'knownGood.replay.choices';
const KEPT_MAX = 50;

/** A flag name the person types: `--ckpt`, `-c`, or a Hydra key `trainer.max_steps`. */
const FLAG_NAME = /^(--?[A-Za-z][\w.-]*|[A-Za-z_][\w.]*)$/;

/** The command's own options (tests and the report's links): checked, never trusted. */
const callSchema = z
  .object({
    subject: suspectSubjectSchema.optional(),
    title: z.string().max(500).optional(),
    /** `run`: no question before it starts (tests); the plan is still shown. */
    confirm: z.literal('run').optional(),
  })
  .optional();

const ROLE_WHAT: Readonly<Record<OverrideRole, string>> = {
  resume: 'the checkpoint it resumes from',
  output: 'its output folder',
  steps: 'the step count it stops at',
};

export function registerReplay(d: ReplayDeps): void {
  d.command(ReplayCommands.prove, { kinds: ['run'], runsCode: RUNS_CODE }, async (t, call) => {
    if (!t) throw new KnownGoodError('usage', 'Prove by Replay: open What Changed? on a run and pick a suspect');
    const o = callSchema.safeParse(call.extra);
    if (!o.success || !o.data?.subject)
      throw new KnownGoodError('usage', 'Prove by Replay: no suspect was given (open it from a What Changed? report)');
    return replay(d, t, o.data.subject, o.data.title ?? 'the suspect', o.data.confirm === 'run');
  });
  d.command(ReplayCommands.all, { kinds: ['run'], runsCode: RUNS_CODE }, async (t, call) => {
    if (!t) throw new KnownGoodError('usage', 'Bisect All Changes: run it on a run (What Changed? on the run first)');
    const o = callSchema.safeParse(call.extra);
    return replay(d, t, null, 'every change', o.success && o.data?.confirm === 'run');
  });
}

function keptChoices(d: ReplayDeps, key: string): Choices {
  const all = d.kept.get<Record<string, unknown>>(KEPT_KEY) ?? {};
  const c = choicesSchema.safeParse((all[key] as { choices?: unknown } | undefined)?.choices);
  return c.success ? c.data : {};
}

function keepChoices(d: ReplayDeps, key: string, choices: Choices): void {
  const all = { ...(d.kept.get<Record<string, { at: number; choices: unknown }>>(KEPT_KEY) ?? {}) };
  all[key] = { at: Date.now(), choices };
  const newest = Object.keys(all)
    .sort((x, y) => (all[y]?.at ?? 0) - (all[x]?.at ?? 0))
    .slice(0, KEPT_MAX);
  d.kept
    .update(KEPT_KEY, Object.fromEntries(newest.map((k) => [k, all[k]])))
    .then(undefined, (e: unknown) => d.log.error(`Replay: could not keep the choices: ${messageOf(e)}`));
}

/** The setup and plan for the person's choices; for a suspect, only its own changes. */
async function planFor(
  host: ReplayHost,
  facts: WhatChangedFacts,
  report: WhatChangedReport,
  choices: Choices,
  subject: SuspectSubject | null,
  title: string,
  signal: AbortSignal,
): Promise<{ setup: ReplaySetup; plan: ReplayPlan }> {
  const c: SetupChoices = {
    ...(choices.steps !== undefined ? { steps: choices.steps } : {}),
    ...(choices.names ? { names: choices.names } : {}),
    ...(choices.regex !== undefined ? { regex: choices.regex } : {}),
  };
  const setup = setupFromFacts(facts, report, c);
  // never empty: launches that differ in nothing else replay the restart itself
  const all = await planReplay(host, setup, signal);
  if (subject === null) return { setup, plan: all };
  // the restart itself is offered only when asked for once the launches differ in more (core/replay/replay.ts)
  const ids = subject.kind === 'restart' ? [RESTART_ID] : changesOfSubject(subject, all, setup.now.cwd, title).ids;
  if (ids.length === all.changes.length) return { setup, plan: all };
  const only = { ...setup, only: ids };
  return { setup: only, plan: await planReplay(host, only, signal) };
}

/** The question's detail: short (the dialog has no scroll bar to its buttons); the whole plan is its document. */
function confirmText(setup: ReplaySetup, plan: ReplayPlan, name: string): string {
  const shown = plan.changes.slice(0, 8).map((c) => `  ${c.label}`);
  const more = plan.changes.length > 8 ? [`  and ${plan.changes.length - 8} more`] : [];
  const table = STACKS[plan.stack];
  const flags = (['resume', 'output', 'steps'] as const).map((role) => {
    const flag = setup.names?.[role] ?? roleName(table, setup.now.argv, role) ?? table.names[role][0]!;
    return plan.guessed.includes(role) && !setup.names?.[role] ? `${flag} (a guess)` : flag;
  });
  return [
    `Changes bisected (${plan.changes.length}):`,
    ...shown,
    ...more,
    ...(plan.skipped.length ? [`Left out: ${plan.skipped.length} (why: in the plan)`] : []),
    `Resumed from ${setup.reference.label} with ${flags.join(', ')}; at most ${budgetRuns(plan.changes.length, setup.repeats ?? 3)} runs, ${setup.repeats ?? 3} of each state a round, interleaved.`,
    `Both launches and every override: "replay ${name} plan.txt". Ctrl+C in the replay's terminal stops it.`,
  ].join('\n');
}

/** Edit Flags…: the step count and the script's own flag for each override, asked one by one (Escape keeps all). */
async function editChoices(choices: Choices, setup: ReplaySetup, plan: ReplayPlan): Promise<Choices | undefined> {
  const steps = await showInputBox({
    title: 'Replay: steps each run makes past the checkpoint',
    prompt: 'Enough for a few logging intervals past the warm-up: the speed is read from the later half',
    value: String(setup.steps),
    validateInput: (v) => (/^[1-9]\d{0,5}$/.test(v.trim()) ? undefined : 'a whole number from 1 to 999999'),
  });
  if (steps === undefined) return undefined;
  const table = STACKS[plan.stack];
  const names: NonNullable<Choices['names']> = { ...choices.names };
  for (const role of ['resume', 'output', 'steps'] as const) {
    const current = names[role] ?? roleName(table, setup.now.argv, role) ?? table.names[role][0]!;
    const v = await showInputBox({
      title: `Replay: the script's flag for ${ROLE_WHAT[role]}`,
      prompt: plan.guessed.includes(role)
        ? `The launch shows none of ${table.names[role].join(', ')}: ${current} is a guess; give the script's own`
        : `From the launch's own command line (${table.title})`,
      value: current,
      validateInput: (x) => (FLAG_NAME.test(x.trim()) ? undefined : 'a flag (--name) or a Hydra key (a.b)'),
    });
    if (v === undefined) return undefined;
    names[role] = v.trim();
  }
  return { ...choices, steps: Number(steps.trim()), names };
}

async function replay(
  d: ReplayDeps,
  t: TargetOf<'run'>,
  subject: SuspectSubject | null,
  title: string,
  noQuestion: boolean,
): Promise<ReplayRunOutcome | undefined> {
  const spec = d.hosts.get(t.hostId);
  const session = d.hosts.session(spec);
  const run = t.path;
  const name = posix.basename(run) || run;
  const host: ReplayHost = {
    transport: session.transport,
    probes: session.probes,
    label: spec.name,
    python: spec.python,
  };
  const key = JSON.stringify([spec.id, run]);
  let choices = keptChoices(d, key);
  const env = d.settings.current.baselines;
  const planned = await withCancellableProgress(`Replay of ${name}: reading the run's launches…`, async (signal) => {
    const facts = await gatherFacts({ id: d.storeKeyOf(spec), label: spec.name, probes: session.probes }, run, {
      store: d.store,
      scriptGlobs: env.scriptGlobs,
      extraVariables: env.extraVariables,
      keepData: false,
      signal,
    });
    return { facts, report: analyze(facts) };
  });
  if (!planned) return undefined;
  for (;;) {
    const p = await withCancellableProgress(`Replay of ${name}: planning…`, (signal) =>
      planFor(host, planned.facts, planned.report, choices, subject, title, signal),
    );
    if (!p) return undefined;
    await d.documents.showReplacing(`replay ${name} plan.txt`, p.plan.text, { preview: false });
    if (noQuestion) return start(d, spec, host, p.setup, p.plan, subject);
    const answer = await showModal(
      `Replay ${title === 'every change' ? 'every change' : title} of ${name}: ${p.plan.changes.length} change(s), ` +
        `${p.setup.steps} steps a run from ${p.setup.reference.label}`,
      confirmText(p.setup, p.plan, name),
      'Run',
      'Edit Flags…',
    );
    if (answer === 'Run') {
      keepChoices(d, key, choices);
      return start(d, spec, host, p.setup, p.plan, subject);
    }
    if (answer !== 'Edit Flags…') return undefined;
    const edited = await editChoices(choices, p.setup, p.plan);
    if (edited) {
      choices = edited;
      keepChoices(d, key, choices);
    }
  }
}

async function start(
  d: ReplayDeps,
  spec: HostSpec,
  host: ReplayHost,
  setup: ReplaySetup,
  plan: ReplayPlan,
  subject: SuspectSubject | null,
): Promise<ReplayRunOutcome> {
  const name = posix.basename(setup.run) || setup.run;
  const terminalName = `Known Good: Replay @ ${spec.name}`;
  const pty = openLiveTerminal(terminalName, 'debug-restart');
  const unit = setup.speed.kind === 'jsonl' ? setup.speed.key : 'per s';
  pty.write(
    `\x1b[1mReplay of ${setup.run}${subject ? '' : ': every change'}\x1b[0m (Ctrl+C stops it: the run in progress ` +
      `is stopped on ${spec.name})\n`,
  );
  const t0 = Date.now();
  try {
    const o = await runReplay(host, plan, setup, {
      signal: pty.abort.signal,
      onText: (text) => pty.write(text.endsWith('\n') ? text : `${text}\n`),
      onEvent: (e, changes) => {
        if (e.kind === 'sample') return; // each run prints its own line (onText)
        const line = bisectEventLine(e, changes, { unit });
        if (line) pty.write(e.kind === 'done' ? `\x1b[1m${line}\x1b[0m\n` : `${line}\n`);
      },
    });
    const wallS = (Date.now() - t0) / 1000;
    const proof = proofOf(o, unit, wallS);
    pty.write(`${o.runs.length} runs in ${wallS.toFixed(0)} s\n`);
    if (o.restart) pty.write(`${o.restart.text}\n`);
    const doc = await d.documents.showReplacing(`replay ${name}.md`, o.markdown, { preview: false });
    d.log.info(`replay ${spec.name} ${setup.run}: ${o.headline} (${o.runs.length} runs, ${wallS.toFixed(0)} s)`);
    return {
      hostId: spec.id,
      run: setup.run,
      terminalName,
      uri: doc.document.uri.toString(),
      markdown: o.markdown,
      headline: o.headline,
      proof,
      culpritId: culpritIdOf(o),
      plan: { changes: plan.changes, skipped: plan.skipped, checkout: plan.checkout, dir: plan.dir, text: plan.text },
      cwd: setup.now.cwd,
      screen: pty.screen,
    };
  } catch (e) {
    pty.write(
      pty.abort.signal.aborted ? `\x1b[33mStopped: ${messageOf(e)}\x1b[0m\n` : `\x1b[31m${messageOf(e)}\x1b[0m\n`,
    );
    if (pty.abort.signal.aborted) throw new KnownGoodError('cancelled', `replay of ${setup.run} stopped`);
    throw e;
  } finally {
    pty.end();
  }
}
