import { timeAgo } from '../util/format';
import {
  computeDrift,
  driftBullets,
  renderDriftMarkdown,
  renderDriftText,
  type Drift,
  type DriftTitles,
} from './drift';
import type { EnvSnapshot } from './envProbe';
import { renderSnapshot } from './render';
import type { Baseline } from './store';

/*
 * The texts a person reads: one snapshot on its own, the two sides of a diff, the drift summary. Pure, so what the
 * editor shows is tested in plain Node.
 */

export interface EnvSide {
  snapshot: EnvSnapshot;
  /** e.g. `baseline "known good" (2026-11-29 12:00)` or `now (2026-12-20 09:14)`. */
  title: string;
}

/** `baseline 2026-11-29 12:00`: the default label, in the local time of whoever captures. */
export function defaultLabel(at: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `baseline ${at.getFullYear()}-${p(at.getMonth() + 1)}-${p(at.getDate())} ${p(at.getHours())}:${p(at.getMinutes())}`;
}

/** `2026-11-29 12:00 UTC` from an ISO time (UTC, so the same on every machine). */
export function shortTime(iso: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return new Date(t).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

/** What the tree shows next to a baseline's label: `3 h ago · torch 2.10.0+cu130`. */
export function baselineDescription(b: Baseline, now: number = Date.now()): string {
  const torch = b.snapshot.torch.found ? `torch ${b.snapshot.torch.version ?? '?'}` : 'no torch';
  return `${timeAgo(b.capturedAt, now)} · ${torch}`;
}

export function baselineTitle(b: Pick<Baseline, 'label' | 'capturedAt'>): string {
  return `"${b.label}" (${shortTime(b.capturedAt)})`;
}

const comment = (text: string): string =>
  text
    .trimEnd()
    .split('\n')
    .map((l) => (l ? `# ${l}` : '#'))
    .join('\n');

/** One snapshot: a short header, the canonical text, then the volatile values apart (never compared). */
export function snapshotDocument(side: EnvSide, meta: string[] = []): string {
  const r = renderSnapshot(side.snapshot);
  const source = side.snapshot.env.source;
  const head = comment([side.title, ...meta, ...(source ? [`variables from ${source}`] : [])].join('\n'));
  const vol = r.volatile.length
    ? `\n# Volatile values: they move on their own and are never compared.\n${comment(r.volatileText)}\n`
    : '';
  return `${head}\n\n${r.text}${vol}`;
}

export interface DiffDocuments {
  drift: Drift;
  titles: DriftTitles;
  left: string;
  right: string;
  /** The plain-text summary (the comment block, without `# `). */
  summaryText: string;
  summaryMarkdown: string;
  /** One line for a notification: the headline and the first few topics. */
  headline: string;
}

/**
 * Both sides of a diff. The drift summary heads BOTH documents, identically: the diff then shows only what changed
 * (an unchanged machine diffs clean) and the summary is read first on either side instead of standing out as
 * "added" lines. Volatile values are left out of both.
 */
export function diffDocuments(left: EnvSide, right: EnvSide): DiffDocuments {
  const drift = computeDrift(left.snapshot, right.snapshot);
  const titles = { baseline: left.title, now: right.title };
  const summaryText = renderDriftText(drift, titles);
  const block =
    comment(summaryText) +
    '\n# (This block heads both sides. Volatile values — free memory and disk, load, times — are not compared.)\n';
  const bullets = driftBullets(drift);
  const topics = bullets.slice(0, 4).map(([label]) => label);
  const firstLine = summaryText.split('\n')[0] ?? '';
  const headline = drift.unchanged
    ? firstLine
    : `${firstLine}${topics.length ? ` — ${topics.join(', ')}${bullets.length > topics.length ? ', …' : ''}` : ''}`;
  return {
    drift,
    titles,
    left: `${block}\n${renderSnapshot(left.snapshot).text}`,
    right: `${block}\n${renderSnapshot(right.snapshot).text}`,
    summaryText,
    summaryMarkdown: `# Environment drift\n\n${renderDriftMarkdown(drift, titles)}`,
    headline,
  };
}
