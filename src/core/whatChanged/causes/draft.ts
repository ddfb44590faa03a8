import type { CheckpointFact } from '../facts';
import type { ChangeTime, CheckpointLink, EvidenceLink, ProveHint, SuspectCategory, SuspectSource } from '../model';

/*
 * What a cause module hands analyze(): drafts of suspects, one per fact that differs between the reference and now.
 * analyze() scores and ranks them (scoring.ts); a draft of category 'cosmetic' is listed, never ranked.
 */

/** A fact that differs, before it is scored: what changed, when, and the evidence that shows it. */
export interface Draft {
  source: SuspectSource;
  category: SuspectCategory | 'cosmetic';
  title: string;
  detail: string;
  when: ChangeTime;
  evidence: EvidenceLink[];
  cosmeticWhy?: string;
  /** Cosmetic because it changes no step's cost (categories.ts `inertArgWhy`): listed with its time. */
  inert?: boolean;
  prove?: ProveHint;
}

/** A checkpoint as a report links it. */
export function link(c: CheckpointFact): CheckpointLink {
  return { label: c.label, path: c.argsPath, step: c.step };
}

/** A remote epoch time as a report writes it (whole seconds, UTC). */
export function isoOf(epoch: number | null): string {
  return epoch === null ? 'unknown time' : new Date(epoch * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function epochOf(iso: string): number | null {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t / 1000;
}
