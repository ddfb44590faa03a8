import { posix } from 'node:path';
import { KnownGoodError } from '../errors';
import type { ReplayProof, SuspectSubject } from '../whatChanged/model';
import type { ReplayChange, Skipped } from './changes';
import type { ReplayOutcome, ReplayPlan } from './replay';

/*
 * What Changed?'s suspects as replay changes (Prove by Replay, issue 33): a suspect says what changed (its `subject`:
 * an arg key, a variable, files of the code, a data path, the restart itself) and the plan lists what the two
 * recorded launches differ in; this finds the plan's changes that are the suspect's, and words what the replay said
 * of it.
 */

/** `--lr`, `--optimizer.lr`, `lr`, `optimizer.lr` → `lr`; `--max-steps` → `max_steps`: how args and flags meet. */
export function argName(key: string): string {
  return (
    key
      .replace(/^[-+]+/, '')
      .split('.')
      .pop() ?? key
  ).replace(/-/g, '_');
}

const absolute = (cwd: string, p: string) => (p.startsWith('/') ? posix.normalize(p) : posix.join(cwd, p));

/** Whether a change (or a skipped one, by its id) is the subject's. `cwd` is the launch's folder, `repo` the
 * checkout's root (for a code subject whose files are absolute, a training script the baseline hashed). */
function matches(
  subject: SuspectSubject,
  c: { id: string; change?: ReplayChange },
  where: { cwd: string; repo: string | null },
): boolean {
  const [kind, ...rest] = c.id.split(':');
  const name = rest.join(':');
  switch (subject.kind) {
    case 'arg':
      return kind === 'arg' && argName(name) === argName(subject.key);
    case 'env':
      return kind === 'env' && name === subject.name;
    case 'data': {
      const ch = c.change;
      if (!ch || (ch.kind !== 'data' && ch.kind !== 'arg')) return false;
      return [ch.good, ch.now].some((v) => v !== null && absolute(where.cwd, v) === posix.normalize(subject.path));
    }
    case 'code': {
      const ch = c.change;
      if (kind !== 'code' || !ch || ch.kind !== 'code') return false;
      if (subject.uncommitted && ch.how === 'committed') return false;
      if (subject.files.length === 0) return true;
      return subject.files.some((f) =>
        f.startsWith('/')
          ? where.repo !== null && posix.normalize(f) === posix.join(where.repo, ch.path)
          : f === ch.path,
      );
    }
    case 'restart':
      return true;
  }
}

export interface SuspectChanges {
  /** The plan's change ids that are the suspect's (every change for the restart itself). */
  readonly ids: string[];
  /** Why a change of the suspect's is left out of the replay (`the old data is gone`), if one is. */
  readonly skipped: readonly Skipped[];
}

/** The plan's changes a suspect is about, or a usage error that says what the replay can change instead. */
export function changesOfSubject(
  subject: SuspectSubject,
  plan: Pick<ReplayPlan, 'changes' | 'skipped' | 'checkout'>,
  cwd: string,
  title = 'this suspect',
): SuspectChanges {
  const where = { cwd, repo: plan.checkout.repo };
  const ids = plan.changes.filter((c) => matches(subject, { id: c.id, change: c }, where)).map((c) => c.id);
  const skipped = plan.skipped.filter((s) => subject.kind !== 'restart' && matches(subject, { id: s.id }, where));
  if (ids.length === 0) {
    const why = skipped.length
      ? skipped.map((s) => `${s.label}: ${s.why}`).join('; ')
      : `the two recorded launches do not differ in it (they differ in ${
          plan.changes.map((c) => c.label).join(', ') || 'nothing a replay can change'
        })`;
    throw new KnownGoodError('usage', `Prove by Replay: ${title} cannot be replayed: ${why}`);
  }
  return { ids, skipped };
}

function pct(good: number, bad: number): string {
  const change = (bad - good) / good;
  return `${change >= 0 ? '+' : '−'}${Math.abs(change * 100).toFixed(0)} %`;
}

function level(n: number): string {
  return Math.abs(n) >= 1000 ? `${(n / 1000).toFixed(1)}K` : Number(n.toPrecision(3)).toString();
}

/**
 * What the replay said of the changes it bisected: `confirmed` only for a culprit confirmed both ways (the suspect's
 * own change, as the replay ran only those), `not-reproduced` when the known-good launch and now ran as fast, else
 * `inconclusive` with the engine's why.
 */
export function proofOf(o: ReplayOutcome, unit: string, wallSeconds: number, at = new Date()): ReplayProof {
  const r = o.report;
  const culprit =
    r?.verdict.kind === 'culprit' ? (r.changes.find((c) => c.id === r.verdict.ids[0])?.label ?? null) : null;
  const verdict: ReplayProof['verdict'] =
    r?.verdict.kind === 'culprit' && r.confirmation?.confirmed
      ? 'confirmed'
      : r?.verdict.kind === 'not-reproduced'
        ? 'not-reproduced'
        : 'inconclusive';
  return {
    verdict,
    headline: o.headline,
    changes: o.plan.changes.map((c) => c.id),
    culprit,
    good: r ? r.good : null,
    bad: r ? r.bad : null,
    unit,
    runs: o.runs.length,
    wallSeconds,
    ...(o.restart ? { restart: o.restart.text } : {}),
    at: at.toISOString(),
  };
}

/** One line for the report: `confirmed by replay: --work: 2 → 8 — 14.1K → 5.7K tok_s (−59 %), 18 runs in 94 s`. */
export function proofText(p: ReplayProof): string {
  const numbers =
    p.good !== null && p.bad !== null
      ? `known-good ${level(p.good)} → now ${level(p.bad)} ${p.unit} (${pct(p.good, p.bad)})`
      : 'no runs compared';
  const cost = `${p.runs} run${p.runs === 1 ? '' : 's'} in ${Math.round(p.wallSeconds)} s`;
  switch (p.verdict) {
    case 'confirmed':
      return `confirmed by replay: ${p.culprit ?? p.changes.join(', ')} — ${numbers}, ${cost}`;
    case 'not-reproduced':
      return `not reproduced by replay — ${numbers}, ${cost}: ${p.headline.replace(/^Not reproduced by replay: /, '')}`;
    case 'inconclusive':
      return `replay inconclusive — ${numbers}, ${cost}: ${p.headline}`;
  }
}

/** Whether a replay that named a culprit (Bisect All Changes) names one of this suspect's changes. */
export function proofForSuspect(
  proof: ReplayProof,
  culpritId: string | null,
  subject: SuspectSubject,
  plan: Pick<ReplayPlan, 'changes' | 'skipped' | 'checkout'>,
  cwd: string,
): ReplayProof | undefined {
  if (proof.verdict !== 'confirmed' || culpritId === null || subject.kind === 'restart') return undefined;
  try {
    return changesOfSubject(subject, plan, cwd).ids.includes(culpritId) ? proof : undefined;
  } catch {
    return undefined;
  }
}

/** The confirmed culprit's change id of a replay, if it named one. */
export function culpritIdOf(o: ReplayOutcome): string | null {
  const r = o.report;
  return r?.verdict.kind === 'culprit' && r.confirmation?.confirmed ? (r.verdict.ids[0] ?? null) : null;
}
