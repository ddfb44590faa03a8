import { posix } from 'node:path';
import { z } from 'zod';
import { flattenArgs, sameArg } from '../args/diff';
import type { ArgValue } from '../args/argsProbe';
import { KnownGoodError } from '../errors';
import { shellQuote } from '../quote';
import type { LaunchRecord } from '../whatChanged/factsProbe';
import type { CheckpointFact, WhatChangedFacts } from '../whatChanged/facts';
import { flagValue, overrideValue, withFlag, withoutFlag, withOverride } from './argv';
import { RECORDED_MAX } from './changes';
import { launchText, launchWords } from './command';
import type { ReplayLaunch } from './replay';
import { STACKS, stackOf, type OverrideRole, type Stack } from './stacks';

/*
 * Where a replay's two launches come from (issue 33 item 2), first that holds:
 *   1. a command the person confirms (`--launch 'CMD …'`, `--cwd DIR`): the current launch, word by word;
 *   2. kg_record.py's launch records (the last two; one alone is the current launch);
 *   3. wandb's runs (wandb-metadata.json: its interpreter, script, args, folder: python/launch_sources.py);
 *   4. LightningCLI's versions (`python SCRIPT fit --config <version>/config.yaml`) and
 *   5. Hydra's outputs (`python SCRIPT k=v …` from .hydra/overrides.yaml, in hydra.runtime.cwd): neither records the
 *      script, so the setup says what it found and asks for it (`--script PATH`).
 * Where only the current launch is known, the known-good one is it with the differences between the reference
 * checkpoint's args and the newest checkpoint's taken back, each written as the stack's table writes a flag
 * (core/replay/stacks.ts). Every launch says where it came from, for the plan.
 */

export interface LaunchChoices {
  /** The current command, as the person typed it (`--launch`). */
  readonly launch?: string;
  /** Its folder, or the folder of a record that does not say (`--cwd`). */
  readonly cwd?: string;
  /** The script of a Hydra or LightningCLI launch (`--script`). */
  readonly script?: string;
  /** The interpreter that runs that script (default python3). */
  readonly python?: string;
  readonly names?: Partial<Record<OverrideRole, string>>;
  readonly stack?: Stack;
}

export interface LaunchSides {
  readonly good: ReplayLaunch;
  readonly now: ReplayLaunch;
  readonly stack: Stack;
  /** Where each launch came from, in words. */
  readonly from: { readonly good: string; readonly now: string };
  /** What was read or guessed on the way (flags taken back, a folder defaulted, a source passed over). */
  readonly notes: string[];
  /** The flags that give these launches again (`--launch … --cwd …`, `--script …`), when the person gave any. */
  readonly repeat?: string;
  /** The current launch's output folder where its record says (Hydra's output_dir, LightningCLI's root dir). */
  readonly outputDir?: string;
}

/** What other tools' records carry beyond the launch record's own fields (python/launch_sources.py). */
const extras = z.looseObject({
  job: z.string().nullable().optional(),
  outputDir: z.string().nullable().optional(),
  lightningConfig: z.string().nullable().optional(),
});

const MAX_PATH = 4096;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\0-\x1f\x7f]/;

function absPath(p: string, what: string): string {
  if (!p.startsWith('/') || p.length > MAX_PATH || CONTROL.test(p))
    throw new KnownGoodError('settings', `${what} ${JSON.stringify(p.slice(0, 200))}: an absolute path on the host`);
  return posix.normalize(p);
}

/** The script word: relative to the launch's folder where it is inside it (a state's copy of the code runs it). */
function scriptWord(script: string, cwd: string): string {
  if (!script || script.startsWith('-') || script.length > MAX_PATH || CONTROL.test(script))
    throw new KnownGoodError('settings', `--script ${JSON.stringify(script.slice(0, 200))}: a path to the script`);
  if (!script.startsWith('/')) return posix.normalize(script);
  const rel = posix.relative(cwd, posix.normalize(script));
  return rel && !rel.startsWith('..') ? rel : posix.normalize(script);
}

function checked(launch: ReplayLaunch, what: string): ReplayLaunch {
  if (launch.argv.find((w) => w.length >= RECORDED_MAX))
    throw new KnownGoodError(
      'usage',
      `the ${what} launch's command line was recorded cut (a word of ${RECORDED_MAX}+ characters): it cannot be replayed as it ran`,
    );
  return launch;
}

function fromRecord(r: LaunchRecord, what: string, cwd?: string): ReplayLaunch {
  const dir = r.cwd ?? cwd;
  if (r.argv.length === 0 || !dir)
    throw new KnownGoodError(
      'usage',
      `the ${what} launch (${r.source}${r.where ? ` in ${r.where}` : ''}) has no ${r.argv.length ? 'folder' : 'command line'}: ` +
        (r.argv.length ? 'give --cwd DIR (where it ran)' : 'it cannot be replayed'),
    );
  return checked({ argv: r.argv, env: r.env, cwd: dir, gitHead: r.gitHead }, what);
}

/** The known-good and current launches, or a usage error saying what was found and what to give. */
export function launchSides(
  facts: WhatChangedFacts,
  reference: (nowTime: number | null) => CheckpointFact,
  c: LaunchChoices = {},
): LaunchSides & { reference: CheckpointFact } {
  const run = facts.run!;
  const rec = facts.probe?.launches?.[0];
  const kg = (rec?.records ?? []).filter((r) => r.source === 'kg_record');
  const others = rec?.others ?? [];
  const of = (s: string) => others.filter((r) => r.source === s);
  const notes: string[] = [];
  const cwd = c.cwd !== undefined ? absPath(c.cwd, '--cwd') : undefined;
  const stackFor = (argv: readonly string[]) => c.stack ?? stackOf(argv);
  // the run's checkout: its commit now, and at the reference's time (the known-good code where no record says)
  const git = facts.probe?.git?.find((g) => g.path === run) ?? facts.probe?.git?.[0];

  if (c.launch !== undefined) {
    const words = launchWords(c.launch);
    if (kg.length) notes.push(`the run's ${kg.length} launch record(s) were passed over: --launch was given`);
    if (cwd === undefined) notes.push(`the command's folder is the run folder (give --cwd DIR if it ran elsewhere)`);
    const now: ReplayLaunch = { ...words, cwd: cwd ?? run, gitHead: git?.head ?? null };
    const ref = reference(null);
    const stack = stackFor(now.argv);
    const good = derivedGood(facts, ref, now, stack, c.names, notes, git?.base ?? git?.head ?? null);
    return {
      now,
      good: good.launch,
      stack,
      reference: ref,
      from: { now: 'the command confirmed with --launch', good: good.from },
      notes,
      repeat: `--launch ${shellQuote(launchText(now))} --cwd ${shellQuote(now.cwd)}`,
    };
  }
  // a pair a tool recorded beats one launch with the known-good side derived; kg_record's beat wandb's
  const pair = (
    recs: readonly LaunchRecord[],
    from: (g: LaunchRecord, n: LaunchRecord) => LaunchSides['from'],
  ): LaunchSides & { reference: CheckpointFact } => {
    const [g, n] = [recs[recs.length - 2]!, recs[recs.length - 1]!];
    return {
      good: fromRecord(g, 'known-good', cwd),
      now: fromRecord(n, 'latest', cwd),
      stack: stackFor(n.argv),
      reference: reference(n.time),
      from: from(g, n),
      notes,
    };
  };
  if (kg.length >= 2)
    return pair(kg, () => ({
      good: 'the launch record before the latest (kg_record.py)',
      now: 'the latest launch record (kg_record.py)',
    }));
  const wandb = of('wandb').filter((r) => r.argv.length && r.interpreter !== null);
  if (wandb.length >= 2)
    return pair(wandb, (g, n) => ({
      good: `wandb's run before the latest (${g.where ?? 'wandb-metadata.json'})`,
      now: `wandb's latest run (${n.where ?? 'wandb-metadata.json'})`,
    }));
  const lightning = of('lightning').filter((r) => extras.parse(r).lightningConfig);
  const hydra = of('hydra');
  const tool = lightning.length >= 2 ? 'lightning' : hydra.length >= 2 ? 'hydra' : undefined;
  if (tool) {
    const [g, n] = (tool === 'lightning' ? lightning : hydra).slice(-2) as [LaunchRecord, LaunchRecord];
    const [ge, ne] = [extras.parse(g), extras.parse(n)];
    const dir = cwd ?? n.cwd ?? (tool === 'lightning' ? (ne.outputDir ?? undefined) : undefined);
    const found =
      tool === 'lightning'
        ? `LightningCLI's configs of ${posix.basename(g.where ?? '')} and ${posix.basename(n.where ?? '')} (${n.where}/config.yaml)`
        : `Hydra's record of 2 launches (${g.where} and ${n.where}), overrides now: ${n.argv.join(' ') || '(none)'}` +
          `${n.cwd ? `, run in ${n.cwd} (hydra.runtime.cwd)` : ''}`;
    if (c.script === undefined) {
      const hint =
        tool === 'hydra' && ne.job ? ` (hydra.job.name says the app is "${ne.job}": --script ${ne.job}.py?)` : '';
      throw new KnownGoodError(
        'usage',
        `replay found ${found}, but ${tool === 'hydra' ? 'Hydra' : 'LightningCLI'} does not record the script it ran: ` +
          `give --script PATH${hint}, or the whole command with --launch 'CMD …' [--cwd DIR]`,
      );
    }
    if (!dir) throw new KnownGoodError('usage', `replay found ${found}, but not the folder it ran in: give --cwd DIR`);
    if (cwd === undefined && tool === 'lightning')
      notes.push(
        `the folder is where lightning_logs/ is (${dir}): LightningCLI records no folder; give --cwd if it ran elsewhere`,
      );
    const python = c.python ?? 'python3';
    const script = scriptWord(c.script, dir);
    const argvOf = (r: LaunchRecord, e: z.infer<typeof extras>) =>
      tool === 'lightning' ? [python, script, 'fit', '--config', e.lightningConfig!] : [python, script, ...r.argv];
    // neither records a commit: the checkout's at the reference's time for the known-good side, its head now
    const launchOf = (r: LaunchRecord, e: z.infer<typeof extras>, what: string, head: string | null): ReplayLaunch =>
      checked({ argv: argvOf(r, e), env: {}, cwd: dir, gitHead: r.gitHead ?? head }, what);
    notes.push(`the interpreter is ${python} (${c.python ? 'as given' : 'the host default: give --interpreter PATH'})`);
    return {
      good: launchOf(g, ge, 'known-good', git?.base ?? git?.head ?? null),
      now: launchOf(n, ne, 'latest', git?.head ?? null),
      stack: c.stack ?? tool,
      reference: reference(n.time),
      from:
        tool === 'lightning'
          ? {
              good: `LightningCLI's ${g.where}/config.yaml and --script`,
              now: `LightningCLI's ${n.where}/config.yaml and --script`,
            }
          : {
              good: `Hydra's ${g.where}/overrides.yaml and --script`,
              now: `Hydra's ${n.where}/overrides.yaml and --script`,
            },
      notes,
      repeat: `--script ${shellQuote(script)} --cwd ${shellQuote(dir)}${c.python ? ` --interpreter ${shellQuote(python)}` : ''}`,
      ...(ne.outputDir ? { outputDir: ne.outputDir } : {}),
    };
  }
  if (kg.length === 1) return single(kg[0]!, 'the launch record (kg_record.py)');
  if (wandb.length === 1) return single(wandb[0]!, `wandb's run (${wandb[0]!.where ?? 'wandb-metadata.json'})`);
  const seen = [
    ...(kg.length ? [`${kg.length} kg_record launch record(s)`] : []),
    ...[...new Set(others.map((r) => r.source))].map(
      (s) => `${of(s).length} ${s} record(s)${s === 'wandb' ? ' without an interpreter or command line' : ''}`,
    ),
  ];
  throw new KnownGoodError(
    'usage',
    `replay needs the run's current launch: ${run} has ${seen.length ? seen.join(', ') : 'no launch records'}. ` +
      `Give the command with --launch 'CMD …' [--cwd DIR], or put python/kg_record.py in front of the training ` +
      `command ("Record Launches of This Run…")`,
  );

  function single(r: LaunchRecord, from: string): LaunchSides & { reference: CheckpointFact } {
    const now = fromRecord(r, 'latest', cwd);
    const ref = reference(r.time);
    const stack = stackFor(now.argv);
    const good = derivedGood(facts, ref, now, stack, c.names, notes, git?.base ?? now.gitHead);
    return { now, good: good.launch, stack, reference: ref, from: { now: from, good: good.from }, notes };
  }
}

/** The replay's own names for a stack (never taken back: the replay sets them itself). */
function ownKeys(stack: Stack, names: Partial<Record<OverrideRole, string>> = {}): Set<string> {
  const t = STACKS[stack];
  const all = [...(['resume', 'output', 'steps'] as const).flatMap((r) => [...t.names[r]]), ...Object.values(names)];
  return new Set(all.map((n) => n.replace(/^-+/, '')));
}

/** A checkpoint arg's value as a flag's word, or why it cannot be one. */
function wordOf(v: ArgValue): string | { why: string } {
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : { why: 'not a finite number' };
  if (typeof v === 'string')
    return v.length >= RECORDED_MAX || /[\0\r\n]/.test(v) ? { why: 'a long or multi-line text' } : v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  return { why: 'a list or an object' };
}

/**
 * The known-good launch from the current one: each arg that differs between the reference checkpoint and the newest
 * checkpoint set back to the reference's value, as the stack's table writes it (`--k v`, `--k=v`, `k=v`). A key the
 * command does not name is added in the same style (a script's checkpoint args are its argparse dests); one that
 * cannot be a word (a list, an object, a boolean given as a bare flag) is named and left as now.
 */
export function derivedGood(
  facts: WhatChangedFacts,
  ref: CheckpointFact,
  now: ReplayLaunch,
  stack: Stack,
  names: Partial<Record<OverrideRole, string>> | undefined,
  notes: string[],
  gitHead: string | null,
): { launch: ReplayLaunch; from: string } {
  const refArgs = facts.args.find((a) => a.label === ref.label)?.args;
  const newest = [...facts.args].reverse().find((a) => a.step > ref.step && a.args !== null);
  const base = { ...now, gitHead };
  if (gitHead !== now.gitHead && gitHead !== null)
    notes.push(`the known-good code is commit ${gitHead.slice(0, 12)}, the checkout's at the reference's time`);
  if (refArgs === undefined || refArgs === null || !newest)
    return {
      launch: base,
      from: `the current command as is: ${
        refArgs == null
          ? `the args of ${ref.label} were not read`
          : `no checkpoint since ${ref.label} holds the current launch's args`
      }, so no argument can be taken back`,
    };
  const table = STACKS[stack];
  const own = ownKeys(stack, names);
  const [a, b] = [flattenArgs(refArgs), flattenArgs(newest.args)];
  let argv = [...now.argv];
  const taken: string[] = [];
  const left: string[] = [];
  for (const key of [...new Set([...a.keys(), ...b.keys()])].sort()) {
    const [va, vb] = [a.get(key), b.get(key)];
    if (sameArg(va, vb) || own.has(key) || key === '(args)') continue;
    if (table.style !== 'override' && key.includes('.') && stack !== 'lightning') {
      left.push(`${key} (nested: no flag of its own)`);
      continue;
    }
    const flag =
      table.style === 'override'
        ? key
        : ([`--${key}`, `--${key.replace(/_/g, '-')}`].find((f) => flagValue(argv, f) !== undefined) ?? `--${key}`);
    const has =
      table.style === 'override' ? overrideValue(argv, flag) !== undefined : flagValue(argv, flag) !== undefined;
    if (va === undefined || va === null) {
      if (has)
        argv =
          table.style === 'override'
            ? argv.filter((w) => !w.replace(/^\+*/, '').startsWith(`${flag}=`))
            : withoutFlag(argv, flag);
      if (has) taken.push(`${flag} removed (unset at ${ref.label})`);
      else if (vb !== null && vb !== undefined) left.push(`${key} (unset at ${ref.label}, not on the command line)`);
      continue;
    }
    const word = wordOf(va);
    if (typeof word !== 'string') {
      left.push(`${key} (${word.why})`);
      continue;
    }
    if (typeof va === 'boolean' && table.style === 'space') {
      // argparse's store_true: a bare flag is true, its absence false
      const bare = flagValue(argv, flag) === 'true' && !argv.includes(`${flag}=true`);
      if (va && !has) argv = [...argv, flag];
      else if (!va && bare) argv = withoutFlag(argv, flag);
      else {
        left.push(`${key} (a boolean the command gives as a value)`);
        continue;
      }
      taken.push(`${flag} ${va ? 'added' : 'removed'} (${key}=${String(va)} at ${ref.label})`);
      continue;
    }
    argv =
      table.style === 'override'
        ? withOverride(argv, flag, word)
        : withFlag(argv, flag, word, table.style === 'eq' ? 'eq' : 'space');
    taken.push(`${flag} ${word}${has ? '' : ' (added: the command does not name it)'}`);
  }
  if (left.length) notes.push(`checkpoint args that differ but are left as now: ${left.join('; ')}`);
  return {
    launch: { ...base, argv },
    from: taken.length
      ? `the current command with the args of ${ref.label} taken back (checkpoint args): ${taken.join(', ')}`
      : `the current command: the args of ${ref.label} and ${newest.label} differ in no flag`,
  };
}

/** The two launches and where they came from, for the plan (`known-good replay --dry-run`). */
export function launchesText(s: LaunchSides): string {
  const side = (what: string, l: ReplayLaunch, from: string) => [
    `${what}: ${from}`,
    `  in ${l.cwd}${l.gitHead ? ` at commit ${l.gitHead.slice(0, 12)}` : ''}`,
    `  ${launchText(l)}`,
  ];
  return [
    ...side('Known-good launch', s.good, s.from.good),
    ...side('Current launch', s.now, s.from.now),
    ...s.notes.map((n) => `  (${n})`),
  ].join('\n');
}
