import { posix } from 'node:path';
import { z } from 'zod';
import { KnownGoodError } from '../errors';
import type { ReplayProof, SuspectSubject, WhatChangedReport } from '../whatChanged/model';
import type { ReplayChange, Skipped } from './changes';
import type { ReplayOutcome, ReplayPlan } from './replay';

/*
 * What Changed?'s suspects as replay changes (Prove by Replay, issue 33): a suspect says what changed (its `subject`:
 * an arg key, a variable, files of the code, a data path, the restart itself) and the plan lists what the two
 * recorded launches differ in; this finds the plan's changes that are the suspect's, and words what the replay said
 * of it.
 */

/** A suspect's subject as another command hands it over (Prove by Replay's argument): checked, never trusted. */
export const suspectSubjectSchema: z.ZodType<SuspectSubject> = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('arg'), key: z.string().min(1).max(500) }),
  z.object({ kind: z.literal('env'), name: z.string().min(1).max(500) }),
  z.object({
    kind: z.literal('code'),
    repo: z.string().max(4096).nullable(),
    files: z.array(z.string().max(4096)).max(10_000),
    uncommitted: z.boolean().optional(),
  }),
  z.object({ kind: z.literal('data'), path: z.string().min(1).max(4096) }),
  z.object({ kind: z.literal('restart') }),
]);

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
      return kind === 'restart';
  }
}

export interface SuspectChanges {
  /** The plan's change ids that are the suspect's (`restart` for the restart itself). */
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
  const skipped = plan.skipped.filter((s) => matches(subject, { id: s.id }, where));
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

/** Whether a replay that named a culprit (Bisect All Changes) names one of this suspect's changes. */
export function proofForSuspect(
  proof: ReplayProof,
  culpritId: string | null,
  subject: SuspectSubject,
  plan: Pick<ReplayPlan, 'changes' | 'skipped' | 'checkout'>,
  cwd: string,
): ReplayProof | undefined {
  if (proof.verdict !== 'confirmed' || culpritId === null) return undefined;
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

/** What a finished replay lends the report: its plan's changes (to find the suspects they are) and its culprit. */
export interface ReplayMapping {
  readonly plan: Pick<ReplayPlan, 'changes' | 'skipped' | 'checkout'>;
  /** The latest launch's folder. */
  readonly cwd: string;
  readonly culpritId: string | null;
}

/**
 * The report with a replay's proof on it: on the suspect(s) of `on`'s subject (Prove by Replay), or — for every
 * change (`on` null: Bisect All Changes) — on the report and on the suspects whose changes hold the confirmed
 * culprit. Pure: the panel shows and keeps what this returns.
 */
export function reportWithProof(
  report: WhatChangedReport,
  proof: ReplayProof,
  on: SuspectSubject | null,
  m: ReplayMapping,
): WhatChangedReport {
  // by value, whatever the order of its fields (a subject handed through a command was parsed again)
  const key = (s: SuspectSubject) => JSON.stringify(Object.entries(s).sort(([a], [b]) => a.localeCompare(b)));
  const suspects = report.suspects.map((s) => {
    if (!s.subject) return s;
    if (on !== null) return key(s.subject) === key(on) ? { ...s, replay: proof } : s;
    const p = proofForSuspect(proof, m.culpritId, s.subject, m.plan, m.cwd);
    return p ? { ...s, replay: p } : s;
  });
  return { ...report, suspects, ...(on === null ? { replay: proof } : {}) };
}
