import { envNameProblem, envValueProblem, type EnvMap } from '../actions/envMap';
import type { BisectChange } from '../bisect/engine';
import { argCategory, envCategory } from '../whatChanged/categories';
import { flagsOf, withFlag, withoutFlag, withOverride } from './argv';
import { STACKS, type OverrideRole, type Stack } from './stacks';

/*
 * Every kind of change a replay can prove, as the bisect engine's changes (it stays blind to kinds): a flag of the
 * launch, a variable of its environment, a file of its code (committed or not), a data path (a flag whose value is a
 * path: replayable only while the old one still exists), the restart itself (the resume from the reference checkpoint:
 * taken back, the run starts fresh). A state is the NOW launch with every change that is not applied taken back to
 * the known-good launch's value — as the environment bisect builds its states.
 */

export type ReplayChange =
  | (BisectChange & {
      readonly kind: 'arg' | 'data';
      readonly flag: string;
      readonly good: string | null;
      readonly now: string | null;
    })
  | (BisectChange & {
      readonly kind: 'env';
      readonly name: string;
      readonly good: string | null;
      readonly now: string | null;
    })
  | (BisectChange & { readonly kind: 'code'; readonly path: string; readonly how: CodeHow })
  | (BisectChange & { readonly kind: 'restart' });

/** The restart itself's change id: applied, a run resumes from the reference checkpoint; taken back, it starts fresh. */
export const RESTART_ID = 'restart';

/** The restart itself as a change: the resume from the reference, against a fresh start of the same launch. */
export function restartChange(reference: string): ReplayChange {
  return { id: RESTART_ID, kind: 'restart', label: `the resume from ${reference}` };
}

/** A file differs from the known-good commit by commits since, by an edit not committed, or by both. */
export type CodeHow = 'committed' | 'uncommitted' | 'both';

export interface Skipped {
  readonly id: string;
  readonly label: string;
  readonly why: string;
}

export interface LaunchWords {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

const REDACTED = /<redacted sha256:[0-9a-f]+>/;
/** What a launch record keeps of a value (python/what_changed.py MAX_LINE): a value this long may have been cut. */
export const RECORDED_MAX = 200;
/** A login session's own variables: they differ between any two launches and move nothing. */
const SESSION_VAR =
  /^(SSH_\w*|PWD|OLDPWD|SHLVL|_|TERM|TERM_\w+|COLORTERM|DISPLAY|XDG_SESSION_\w+|XDG_RUNTIME_DIR|LS_COLORS|MAIL|MOTD_SHOWN|TMUX\w*|STY|WINDOW|KG_REPLAY_STATE)$/;
const PATHISH = /data|dataset|corpus|tokeni[sz]er|vocab|shard|train_file|val_file|eval_file|path|dir|root/i;
const MAX_SHOWN = 60;

function shown(v: string | null): string {
  if (v === null) return '(not set)';
  return v.length > MAX_SHOWN ? `${v.slice(0, MAX_SHOWN - 1)}…` : v;
}

/** Hydra's `key=value` words as flags, for the comparison. */
function overridesOf(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const w of argv) {
    const m = /^\+{0,2}([A-Za-z_][\w.]*)=(.*)$/s.exec(w);
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}

/** The flags (or Hydra keys) the replay sets itself: never a change, whatever the launches say. */
function ownNames(stack: Stack): Set<string> {
  const t = STACKS[stack];
  return new Set((['resume', 'output', 'steps'] as OverrideRole[]).flatMap((r) => [...t.names[r]]));
}

/**
 * What differs between the known-good launch and now: flags (a path-like one as data), then variables. The replay's
 * own flags (resume, output, steps) and variables recorded only as a hash (secrets) are left out and named.
 */
export function launchChanges(
  good: LaunchWords,
  now: LaunchWords,
  stack: Stack,
): { changes: ReplayChange[]; skipped: Skipped[] } {
  const changes: ReplayChange[] = [];
  const skipped: Skipped[] = [];
  const table = STACKS[stack];
  const flags = (a: readonly string[]) => (table.style === 'override' ? overridesOf(a) : flagsOf(a));
  const [g, n] = [flags(good.argv), flags(now.argv)];
  const own = ownNames(stack);
  for (const flag of [...new Set([...g.keys(), ...n.keys()])].sort()) {
    const a = g.get(flag) ?? null;
    const b = n.get(flag) ?? null;
    if (a === b) continue;
    const id = `arg:${flag}`;
    const label = `${flag}: ${shown(a)} → ${shown(b)}`;
    if (own.has(flag)) {
      skipped.push({ id, label, why: 'set by the replay itself (resume, output folder or step count)' });
      continue;
    }
    const key = flag.replace(/^-+/, '');
    const data = PATHISH.test(key.split('.').pop() ?? key) && argCategory(key, a, b) !== 'cosmetic';
    changes.push({ id, kind: data ? 'data' : 'arg', flag, good: a, now: b, label: data ? `data ${label}` : label });
  }
  let session = 0;
  for (const name of [...new Set([...Object.keys(good.env), ...Object.keys(now.env)])].sort()) {
    const a = good.env[name] ?? null;
    const b = now.env[name] ?? null;
    if (a === b) continue;
    if (SESSION_VAR.test(name) || envCategory(name) === 'cosmetic') {
      session++;
      continue;
    }
    const id = `env:${name}`;
    const label = `${name}: ${shown(a)} → ${shown(b)}`;
    const bad = envNameProblem(name) ?? [a, b].map((v) => (v === null ? undefined : envValueProblem(v))).find(Boolean);
    if (bad) skipped.push({ id, label: JSON.stringify(name), why: `refused: ${bad}` });
    else if ((a !== null && REDACTED.test(a)) || (b !== null && REDACTED.test(b)))
      skipped.push({ id, label: name, why: 'only a hash of its value was recorded (a secret): it cannot be replayed' });
    else if ([a, b].some((v) => v !== null && v.length >= RECORDED_MAX))
      skipped.push({
        id,
        label,
        why: `its recorded value was cut at ${RECORDED_MAX} characters: it cannot be replayed`,
      });
    else changes.push({ id, kind: 'env', name, good: a, now: b, label });
  }
  if (session)
    skipped.push({
      id: 'env:session',
      label: `${session} variable(s) of the login session or that do not move speed (SSH_*, PWD, TERM, WANDB_*…)`,
      why: 'as the host has them now in every state',
    });
  return { changes, skipped };
}

/** The code changes from the host's comparison of the known-good commit with the working tree now, one per file. */
export function codeChanges(files: readonly { path: string; how: CodeHow }[]): ReplayChange[] {
  return files.map((f) => ({
    id: `code:${f.path}`,
    kind: 'code' as const,
    path: f.path,
    how: f.how,
    label: `${f.path} (${f.how === 'committed' ? 'committed since' : f.how === 'uncommitted' ? 'edited, not committed' : 'committed since and edited'})`,
  }));
}

export interface StateLaunch {
  readonly argv: string[];
  readonly env: EnvMap;
  /** The files of the code that are at their known-good version in this state (relative to the repository). */
  readonly goodFiles: string[];
  /** The restart taken back: the run starts fresh (no resume) and makes the window's steps from step 0. */
  readonly fresh: boolean;
}

/** The state with `applied` taken from now: every other change back at its known-good value. */
export function stateOf(
  now: LaunchWords,
  changes: readonly ReplayChange[],
  applied: ReadonlySet<string>,
  stack: Stack,
): StateLaunch {
  const table = STACKS[stack];
  let argv = [...now.argv];
  const set: Record<string, string> = {};
  const unset: string[] = [];
  const goodFiles: string[] = [];
  let fresh = false;
  for (const c of changes) {
    const take = applied.has(c.id);
    if (c.kind === 'arg' || c.kind === 'data') {
      const value = take ? c.now : c.good;
      if (table.style === 'override')
        argv =
          value === null
            ? argv.filter((w) => !w.replace(/^\+*/, '').startsWith(`${c.flag}=`))
            : withOverride(argv, c.flag, value);
      else
        argv =
          value === null
            ? withoutFlag(argv, c.flag)
            : withFlag(argv, c.flag, value, table.style === 'eq' ? 'eq' : 'space');
    } else if (c.kind === 'env') {
      const value = take ? c.now : c.good;
      if (value === null) unset.push(c.name);
      else set[c.name] = value;
    } else if (c.kind === 'code' && !take) goodFiles.push(c.path);
    else if (c.kind === 'restart' && !take) fresh = true;
  }
  return { argv, env: { set, unset }, goodFiles, fresh };
}
