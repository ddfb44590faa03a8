import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { actionFailure, runAction } from '../actions/runner';
import { bisect, budgetRounds, budgetRuns, type BisectEvent, type BisectReport } from '../bisect/engine';
import { bisectHeadline, renderBisectMarkdown } from '../bisect/render';
import { throughputFromOutput, throughputValuesFromJsonl } from '../bench/customBenchmark';
import { KnownGoodError } from '../errors';
import { medianOf } from '../whatChanged/seriesStats';
import type { ProbeRunnerLike } from '../probes/probe';
import { redactText } from '../redact';
import { displayWord } from '../terminal/command';
import { remoteHome } from '../restore/run';
import type { Transport } from '../transport/types';
import { flagValue, overrideValue } from './argv';
import {
  codeChanges,
  launchChanges,
  restartChange,
  RESTART_ID,
  stateOf,
  type LaunchWords,
  type ReplayChange,
  type Skipped,
} from './changes';
import { gpuListOf, gpuListProbe, gpuSlotLabel, planGpus, withGpu, type GpuChoice, type GpuPlan } from './gpus';
import { replayCleanProbe, replayInspectProbe, replayRunDirProbe, replayStateProbe, type ReplayInspect } from './prep';
import { applyOverrides, overridesFor, STACKS, stackOf, withoutName, type OverrideRole, type Stack } from './stacks';

/*
 * Replay (issue 33): the user's own run, resumed from its known-good checkpoint for a short window, in the known-good
 * launch and in the current one and in states between, interleaved, with the bisect engine's trust rules. Every kind
 * of change is one of the engine's changes (core/replay/changes.ts); a state's run is the launch as recorded with the
 * changes not applied taken back, three overrides of the stack's table (resume, output, steps:
 * core/replay/stacks.ts), its code folder a copy of the checkout with the known-good version of the files not
 * applied (python/replay_prep.py), run under the guard (core/actions) in ~/.known-good/replays/<run>/<id>/ — never in
 * the run folder. Its speed is read from the run's own log in the replay's output folder, or its stdout.
 */

export interface ReplayHost {
  readonly transport: Transport;
  readonly probes: ProbeRunnerLike;
  readonly label: string;
  /** The host's interpreter: it runs the guard and the probes. */
  readonly python: string;
}

export interface ReplayLaunch extends LaunchWords {
  readonly cwd: string;
  readonly gitHead: string | null;
}

/** Where a run's speed is read: a key of its jsonl log (path relative to the run's output folder or its cwd), or a
 * regex over what it prints. */
export type SpeedSource =
  | { readonly kind: 'jsonl'; readonly rel: string; readonly key: string }
  | { readonly kind: 'regex'; readonly regex: string };

export interface ReplaySetup {
  readonly run: string;
  readonly good: ReplayLaunch;
  readonly now: ReplayLaunch;
  /** The known-good checkpoint both sides resume from. */
  readonly reference: { readonly path: string; readonly step: number; readonly label: string };
  /** Optimizer steps each run makes after the reference. */
  readonly steps: number;
  readonly speed: SpeedSource;
  /** Flag names the person gave for a role (a plain script's own `--ckpt`). */
  readonly names?: Partial<Record<OverrideRole, string>>;
  readonly stack?: Stack;
  /** Only these change ids are bisected (`--change`); the rest stay as now. */
  readonly only?: readonly string[];
  /** The limit on each run, its start-up included (default RUN_TIMEOUT_MS). */
  readonly runTimeoutMs?: number;
  readonly repeats?: number;
  readonly threshold?: number;
  /** The run's own speed before the restart, for the restart-itself comparison. */
  readonly before?: { readonly level: number; readonly key: string };
  /** Which GPUs the runs go to (core/replay/gpus.ts; default `auto`: the free ones, side by side). */
  readonly gpus?: GpuChoice;
}

export interface ReplayPlan {
  readonly id: string;
  /** ~/.known-good/replays/<run>/<id> on the host. */
  readonly dir: string;
  readonly stack: Stack;
  readonly overrides: readonly string[];
  /** Roles whose flag name the launch does not show: the table's usual one is used (the plan says so). */
  readonly guessed: readonly OverrideRole[];
  readonly changes: readonly ReplayChange[];
  readonly skipped: readonly Skipped[];
  readonly checkout: { readonly repo: string | null; readonly cwdRel: string; readonly good: string | null };
  /** Relative words of the launches that name something in the launch's folder, made absolute: with no checkout a
   * run starts in a folder of its own under `dir`, so its script and data are named by their absolute paths. */
  readonly local: readonly string[];
  /** Where the runs go: a GPU per slot, or none; `needsWord` when every GPU is busy. */
  readonly gpus: GpuPlan;
  /** What the person reads before the first run. */
  readonly text: string;
}

export interface ReplayRun {
  readonly state: readonly string[];
  readonly speed: number;
  readonly outDir: string;
  readonly message: string;
  /** The GPU it ran on (its nvidia-smi index), or null when the runs have none of their own. */
  readonly gpu: number | null;
}

export interface ReplayOutcome {
  readonly plan: ReplayPlan;
  readonly report?: BisectReport;
  readonly runs: readonly ReplayRun[];
  /** The restart itself: the known-good launch resumed with nothing changed, against the log's level before. */
  readonly restart?: {
    readonly replayed: number;
    readonly before: number;
    readonly change: number;
    readonly text: string;
  };
  readonly headline: string;
  readonly markdown: string;
}

/** Each run's limit unless the person gives another: a real resumed run, its imports and checkpoint load included. */
export const RUN_TIMEOUT_MS = 30 * 60_000;

/** `30 min`, `90 s`, `1 h 5 min`: a run's limit in words, for the plan. */
export function durationText(ms: number): string {
  const s = Math.round(ms / 1000);
  const [h, m, sec] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return [h ? `${h} h` : '', m ? `${m} min` : '', sec || s === 0 ? `${sec} s` : ''].filter(Boolean).join(' ');
}

/** A folder name for a run on the host: its last part and a hash of its path. */
export function runKey(run: string): string {
  const base =
    posix
      .basename(run.replace(/\/+$/, ''))
      .replace(/[^A-Za-z0-9._-]+/g, '-')
      .slice(0, 40) || 'run';
  return `${base}-${createHash('sha256').update(run).digest('hex').slice(0, 8)}`;
}

function newId(now = new Date()): string {
  return now.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
}

const absolute = (cwd: string, p: string) => (p.startsWith('/') ? posix.normalize(p) : posix.join(cwd, p));

/** Words of a launch that may be paths relative to its folder (positionals and flag values, not flags). */
function relativeWords(argv: readonly string[]): string[] {
  return argv.slice(1).filter((w) => !w.startsWith('-') && !w.startsWith('/') && !w.includes('=') && /[\w.]/.test(w));
}

/**
 * The plan: which stack, the overrides, the changes of every kind (data whose old path is gone, and the replay's own
 * flags, left out with why), the checkout. Reads the host once (its home, and the checkout through replay_prep).
 */
export async function planReplay(host: ReplayHost, s: ReplaySetup, signal?: AbortSignal): Promise<ReplayPlan> {
  const stack = s.stack ?? stackOf(s.now.argv);
  const table = STACKS[stack];
  const { changes: launch, skipped } = launchChanges(s.good, s.now, stack);
  const goodData = launch.filter((c) => c.kind === 'data' && c.good !== null);
  const candidates = [...new Set([...relativeWords(s.now.argv), ...relativeWords(s.good.argv)])].map((w) =>
    absolute(s.now.cwd, w),
  );
  const opts = signal ? { signal, timeoutMs: 120_000 } : { timeoutMs: 120_000 };
  const [home, inspect, gpuList] = await Promise.all([
    remoteHome(host.transport, signal),
    host.probes
      .run(
        replayInspectProbe({
          cwd: s.now.cwd,
          good: s.good.gitHead,
          paths: [
            ...goodData.map((c) => absolute(s.good.cwd, (c as { good: string }).good)),
            ...candidates,
            s.reference.path,
          ],
        }),
        opts,
      )
      .then((o) => o.value),
    s.gpus === 'none' ? undefined : host.probes.run(gpuListProbe(), opts).then((o) => gpuListOf(o.value)),
  ]);
  const gpus = planGpus(gpuList, s.gpus ?? 'auto', host.label);
  const exists = new Map(inspect.paths.map((p) => [p.path, p]));
  if (!exists.get(s.reference.path)?.exists)
    throw new KnownGoodError('not-found', `the reference checkpoint ${s.reference.path} is not on ${host.label}`);
  const changes: ReplayChange[] = [];
  for (const c of launch) {
    if (c.kind === 'data' && c.good !== null && !exists.get(absolute(s.good.cwd, c.good))?.exists) {
      skipped.push({
        id: c.id,
        label: c.label,
        why: `the old data is gone: ${c.good} is no longer on ${host.label}, so it cannot be replayed`,
      });
      continue;
    }
    changes.push(c);
  }
  const code = codeOf(inspect, s);
  changes.push(...code.changes);
  skipped.push(...code.skipped);
  // The restart itself is replayed when asked for, or when the launches differ in nothing else: bisected beside other
  // changes unasked, its fresh-start states would double every state's start-up cost for a change no one suspects.
  const others = changes.length;
  changes.push(restartChange(s.reference.label));
  const chosen = s.only?.length
    ? changes.filter((c) => s.only!.includes(c.id))
    : others
      ? changes.filter((c) => c.kind !== 'restart')
      : changes;
  for (const id of s.only ?? [])
    if (!changes.some((c) => c.id === id))
      throw new KnownGoodError(
        'usage',
        `replay: no change ${id} (the plan's changes: ${changes.map((c) => c.id).join(', ') || 'none'})`,
      );
  const dir = `${home}/.known-good/replays/${runKey(s.run)}/${newId()}`;
  const { overrides, guessed } = overridesFor(
    table,
    s.now.argv,
    {
      resume: s.reference.path,
      output: `${dir}/runs/N`,
      steps: String(s.reference.step + s.steps),
    },
    s.names,
  );
  const plan: Omit<ReplayPlan, 'text'> = {
    id: posix.basename(dir),
    dir,
    stack,
    overrides: overrides.map((o) => o.text),
    guessed,
    changes: chosen,
    skipped: [
      ...skipped,
      ...changes
        .filter((c) => !chosen.includes(c))
        .map((c) => ({
          id: c.id,
          label: c.label,
          why:
            c.kind === 'restart'
              ? `not asked for (--change ${RESTART_ID}): every state resumes from ${s.reference.label}`
              : 'not asked for (--change): kept as now in every state',
        })),
    ],
    checkout: { repo: inspect.repo, cwdRel: inspect.cwdRel ?? '', good: inspect.good },
    local: candidates.filter((p) => exists.get(p)?.exists),
    gpus,
  };
  return { ...plan, text: planText(plan, s, table.title) };
}

function codeOf(inspect: ReplayInspect, s: ReplaySetup): { changes: ReplayChange[]; skipped: Skipped[] } {
  if (inspect.repo === null)
    return {
      changes: [],
      skipped: [{ id: 'code', label: 'the code', why: `not replayed: ${inspect.error ?? 'no git checkout'}` }],
    };
  const skipped: Skipped[] = [];
  if (s.good.gitHead === null)
    skipped.push({ id: 'code', label: 'committed code', why: 'the known-good launch recorded no git commit' });
  else if (inspect.good === null)
    skipped.push({ id: 'code', label: 'committed code', why: inspect.error ?? `commit ${s.good.gitHead} not found` });
  if (inspect.error && inspect.good !== null)
    skipped.push({ id: 'code', label: 'uncommitted edits', why: inspect.error });
  return { changes: codeChanges(inspect.files), skipped };
}

function planText(p: Omit<ReplayPlan, 'text'>, s: ReplaySetup, title: string): string {
  const words = (l: ReplayLaunch) => l.argv.map(displayWord).join(' ');
  const lines = [
    `Replay of ${s.run} from ${s.reference.label} (step ${s.reference.step}), ${s.steps} steps a run, in ${p.dir}`,
    `Known-good launch (in ${s.good.cwd}${s.good.gitHead ? `, commit ${s.good.gitHead.slice(0, 10)}` : ''}):`,
    `  ${words(s.good)}`,
    `Now (in ${s.now.cwd}${s.now.gitHead ? `, commit ${s.now.gitHead.slice(0, 10)}` : ''}): each state is this launch with the changes not applied taken back`,
    `  ${words(s.now)}`,
    `Launch: ${title}; overrides:`,
    ...p.overrides.map((o) => `  ${o}`),
  ];
  if (p.guessed.length)
    lines.push(
      `  (the launch shows no ${p.guessed.join(', ')} flag: the table's usual name is used; give the script's own if it differs)`,
    );
  lines.push(
    `Speed: ${s.speed.kind === 'jsonl' ? `${s.speed.key} in ${s.speed.rel}` : `regex ${s.speed.regex} over its output`}`,
    `Changes (${p.changes.length}):`,
    ...p.changes.map((c) => `  ${c.id}  ${c.label}`),
    ...p.skipped.map((c) => `  left out: ${c.label}: ${c.why}`),
  );
  if (p.changes.some((c) => c.kind === 'restart'))
    lines.push(
      `The restart (${RESTART_ID}): the launch started fresh (no resume, steps 0→${s.steps}) against it resumed from ` +
        `${s.reference.label} (steps ${s.reference.step}→${s.reference.step + s.steps}), interleaved; every other change as the state has it`,
      s.before
        ? `  for reference, not a state: the run's own ${s.before.key} before the restart was ${s.before.level.toPrecision(4)} (its log)`
        : "  (the run's log gives no speed before the restart to show beside it)",
    );
  lines.push(p.gpus.text);
  if (p.changes.length)
    lines.push(
      `Budget: ${budgetRounds(p.changes.length)} rounds (⌈log₂ ${p.changes.length}⌉ + 2), at most ` +
        `${budgetRuns(p.changes.length, s.repeats ?? 3)} runs (${s.repeats ?? 3} of each state per round, interleaved)`,
    );
  lines.push(
    `Each run is stopped after ${durationText(s.runTimeoutMs ?? RUN_TIMEOUT_MS)}, its start-up included (--run-timeout SECONDS)`,
  );
  return redactText(lines.join('\n')) + '\n';
}

export interface ReplayOptions {
  readonly signal?: AbortSignal;
  readonly onEvent?: (e: BisectEvent, changes: readonly ReplayChange[]) => void;
  /** Free text for the live view: the plan, each run's state, its output's last lines. */
  readonly onText?: (text: string) => void;
  /** The person's word to run although every GPU is busy (`plan.gpus.needsWord`): one at a time on the least used. */
  readonly allowBusy?: boolean;
}

/** Runs the plan: the states interleaved under the engine, each a real resumed run; then its checkpoints removed. */
export async function runReplay(
  host: ReplayHost,
  plan: ReplayPlan,
  s: ReplaySetup,
  o: ReplayOptions = {},
): Promise<ReplayOutcome> {
  const runs: ReplayRun[] = [];
  const table = STACKS[plan.stack];
  const codeDirs = new Map<string, Promise<string>>();
  let n = 0;
  const codeDir = (goodFiles: readonly string[]) => {
    const key = [...goodFiles].sort().join('\n');
    let dir = codeDirs.get(key);
    if (!dir) {
      const name = createHash('sha256').update(key).digest('hex').slice(0, 12);
      dir = host.probes
        .run(
          replayStateProbe({
            replay: plan.dir,
            name,
            repo: plan.checkout.repo!,
            good: plan.checkout.good,
            goodFiles,
          }),
          { timeoutMs: 300_000, ...(o.signal ? { signal: o.signal } : {}) },
        )
        .then((r) => r.value.dir);
      codeDirs.set(key, dir);
    }
    return dir;
  };
  const measure = async (applied: ReadonlySet<string>, signal?: AbortSignal, slot = 0): Promise<number> => {
    const state = stateOf(s.now, plan.changes, applied, plan.stack);
    const run = ++n;
    const out = `${plan.dir}/runs/${run}`;
    const gpu = plan.gpus.slots[slot];
    const on = gpu ? ` on GPU ${gpu.index}` : '';
    const { overrides } = overridesFor(
      table,
      state.argv,
      { resume: s.reference.path, output: out, steps: String(state.fresh ? s.steps : s.reference.step + s.steps) },
      s.names,
    );
    // the restart taken back: the same launch started fresh, without its resume flag, for the window's steps
    const resume = overrides.find((x) => x.role === 'resume')!;
    let argv = state.fresh
      ? applyOverrides(
          table,
          withoutName(table, state.argv, resume.name),
          overrides.filter((x) => x !== resume),
        )
      : applyOverrides(table, state.argv, overrides);
    // Never in the run folder: a copy of the checkout, else an empty folder of the run's own under the replay's
    let cwd: string;
    let env = state.env;
    if (plan.checkout.repo !== null) {
      const dir = await codeDir(state.goodFiles);
      cwd = plan.checkout.cwdRel ? `${dir}/${plan.checkout.cwdRel}` : dir;
      argv = absolutizeData(argv, s.now.cwd, plan.checkout.repo);
    } else {
      const made = await host.probes.run(replayRunDirProbe({ replay: plan.dir, run }), {
        timeoutMs: 120_000,
        ...(signal ? { signal } : {}),
      });
      cwd = made.value.dir;
      argv = absolutizeLocal(argv, s.now.cwd, plan.local);
      // the script and its modules stay in the run folder: their bytecode goes to the replay's folder, not beside them
      env = { ...env, set: { ...env.set, PYTHONPYCACHEPREFIX: `${plan.dir}/pycache` } };
    }
    const names = applied.size ? [...applied].join(', ') : 'known-good';
    o.onText?.(`run ${run}: ${names}${on}\n`);
    const r = await runAction(
      host.transport,
      { argv, env: withGpu(env, gpu), cwd, timeoutMs: s.runTimeoutMs ?? RUN_TIMEOUT_MS, tailBytes: 256 * 1024 },
      { python: host.python, ...(signal ? { signal } : {}) },
    );
    const failed = actionFailure(r, `replay run ${run}${on}`, host.label);
    if (failed) throw failed;
    const speed = await speedOf(host, s.speed, plan.dir, [out, cwd], r.stdout + r.stderr, signal);
    if (speed === undefined)
      throw new KnownGoodError(
        'bad-output',
        `replay run ${run}${on} gave no speed (${s.speed.kind === 'jsonl' ? `no ${s.speed.key} in ${out}/${s.speed.rel}` : `nothing matched ${s.speed.regex}`}): ${r.stdout.trim().split('\n').slice(-3).join(' | ')}`,
      );
    runs.push({ state: [...applied], speed, outDir: out, message: r.message, gpu: gpu ? gpu.index : null });
    o.onText?.(`run ${run}: ${names}: ${speed.toPrecision(4)}${on}\n`);
    return speed;
  };
  o.onText?.(plan.text);
  const slotLabel = gpuSlotLabel(plan.gpus);
  try {
    if (plan.changes.length === 0) {
      const headline = 'Nothing to replay: the known-good launch and now differ in nothing a replay can take back';
      return { plan, runs, headline, markdown: `# Replay\n\n**${headline}**\n\n${plan.text}` };
    }
    if (plan.gpus.needsWord && !o.allowBusy)
      throw new KnownGoodError(
        'usage',
        `replay: every GPU on ${host.label} is busy; nothing was run. Run anyway (one at a time on GPU ` +
          `${plan.gpus.slots[0]?.index ?? '?'}, the least used), or name the GPUs to use (--gpus 0,1)`,
        { needsWord: true },
      );
    const report = await bisect(plan.changes, measure, {
      ...(s.repeats !== undefined ? { repeats: s.repeats } : {}),
      ...(s.threshold !== undefined ? { threshold: s.threshold } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
      // every GPU busy and run anyway: one at a time, on the least used
      slots: plan.gpus.needsWord ? 1 : Math.max(1, plan.gpus.slots.length),
      onEvent: (e) => o.onEvent?.(e, plan.changes),
    });
    // with the restart among the changes the bisect itself compares resumed and fresh runs; else the history check
    const restart =
      s.before && !plan.changes.some((c) => c.kind === 'restart') ? restartCheck(report, s.before) : undefined;
    const headline = replayHeadline(report);
    const md = [
      renderBisectMarkdown(report, {
        subject: `replay of ${s.run} from ${s.reference.label}`,
        ...(slotLabel ? { slotLabel } : {}),
      }),
      ...(restart ? ['', '## The restart itself', '', restart.text] : []),
      '',
      '## The plan',
      '',
      '```',
      plan.text.trimEnd(),
      '```',
      '',
    ].join('\n');
    return { plan, report, runs, ...(restart ? { restart } : {}), headline, markdown: md };
  } finally {
    await host.probes.run(replayCleanProbe({ replay: plan.dir }), { timeoutMs: 120_000 }).catch(() => undefined);
  }
}

/** The headline, as a bisect's: "Not reproduced by replay: …" for a difference the replay did not see. */
export function replayHeadline(report: BisectReport): string {
  return bisectHeadline(report, 'replay');
}

/**
 * The known-good launch resumed from the reference with nothing changed, against the run's own level before the
 * restart: a replayed good state as slow as now says the restart itself (the resume path) costs the speed. Not an
 * interleaved comparison (the level before is history): said so.
 */
function restartCheck(report: BisectReport, before: { level: number; key: string }): ReplayOutcome['restart'] {
  const replayed = report.good;
  const change = (replayed - before.level) / before.level;
  const pct = `${change >= 0 ? '+' : '−'}${Math.abs(change * 100).toFixed(1)} %`;
  const slower = change <= -report.threshold;
  const text = slower
    ? `The known-good launch, resumed from the reference with nothing changed, ran ${pct} against the run's own ${before.key} before the restart (${replayed.toPrecision(4)} vs ${before.level.toPrecision(4)}): the restart itself (how the run resumes) reproduces a drop. This compares a replay with the run's history, not two interleaved states.`
    : `The known-good launch, resumed from the reference with nothing changed, ran ${pct} against the run's own ${before.key} before the restart: resuming alone does not cost the speed.`;
  return { replayed, before: before.level, change, text };
}

/** A relative word that names something outside the checkout's tracked files (data) made absolute: the run's cwd is
 * a copy of the code, not the run folder. The checkout's own files stay relative (they are in the copy). */
function absolutizeData(argv: readonly string[], cwd: string, repo: string): string[] {
  return argv.map((w, i) => {
    if (i === 0 || w.startsWith('-') || w.startsWith('/') || w.includes('=') || !/^[\w.][\w./-]*$/.test(w)) return w;
    const abs = absolute(cwd, w);
    return abs.startsWith(`${repo}/`) && !/(^|\/)(data|datasets?)(\/|$)/.test(w) ? w : abs;
  });
}

/** Words naming something in the launch's folder (`local`, checked on the host by the plan) made absolute. */
function absolutizeLocal(argv: readonly string[], cwd: string, local: readonly string[]): string[] {
  const there = new Set(local);
  return argv.map((w, i) => {
    if (i === 0 || w.startsWith('-') || w.startsWith('/') || w.includes('=')) return w;
    const abs = absolute(cwd, w);
    return there.has(abs) ? abs : w;
  });
}

/** A run's speed from what it printed, or its log under one of `bases` — only ever inside the replay's folder. */
async function speedOf(
  host: ReplayHost,
  speed: SpeedSource,
  replayDir: string,
  bases: readonly string[],
  printed: string,
  signal?: AbortSignal,
): Promise<number | undefined> {
  if (speed.kind === 'regex') {
    const all = throughputFromOutput(printed, speed.regex, 1_000_000);
    if (!all) return undefined;
    return throughputFromOutput(printed, speed.regex, laterHalf(all.found))?.tokensPerSec;
  }
  for (const base of bases) {
    if (!base.startsWith(`${replayDir}/`)) continue;
    const r = await host.transport.exec(['tail', '-c', '4194304', '--', `${base}/${speed.rel}`], {
      timeoutMs: 60_000,
      ...(signal ? { signal } : {}),
    });
    if (r.exitCode !== 0) continue;
    const values = throughputValuesFromJsonl(r.stdout, speed.key);
    if (values.length === 0) continue;
    return medianOf(values.slice(values.length - laterHalf(values.length)));
  }
  return undefined;
}

/** The points a run's speed is read from: its later half (the first half is the resume's warm-up), at least one. */
function laterHalf(found: number): number {
  return Math.max(1, Math.floor(found / 2));
}

/** The flag value a launch gives its output folder, for reading where its log is. */
export function outputOf(
  stack: Stack,
  argv: readonly string[],
  names?: Partial<Record<OverrideRole, string>>,
): string | undefined {
  const t = STACKS[stack];
  const name =
    names?.output ??
    t.names.output.find((x) => (t.style === 'override' ? overrideValue(argv, x) : flagValue(argv, x)) !== undefined);
  if (!name) return undefined;
  return t.style === 'override' ? overrideValue(argv, name) : flagValue(argv, name);
}
