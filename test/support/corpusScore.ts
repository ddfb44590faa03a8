import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { WhatChangedReport } from '../../src/core/whatChanged/model';
import { whatChanged, type WhatChangedHost } from '../../src/core/whatChanged/gather';
import { realRunNames } from './realRuns';

/*
 * The score of What Changed? on the real regressions corpus (issue 23): every run of test/fixtures/real/regressions/
 * analysed as `known-good why` analyses it, judged against its truth.json. One place for the test and the bench, so
 * the score printed by `npm run bench -- --only regressions` is the one the test checks.
 */

export interface CorpusTruth {
  name: string;
  library: string;
  launch_recorded: boolean;
  regression: boolean;
  change: { kind: string; where: string; key: string; before: unknown; after: unknown } | null;
  speed: { metric: string; ratio: number };
}

export interface CorpusRow {
  run: string;
  truth: CorpusTruth;
  verdict: WhatChangedReport['verdict'];
  headline: string;
  /** Titles of the ranked suspects, first first (ruled-out ones included, last). */
  suspects: string[];
  /** 1-based rank of the true change among the ranked suspects; null when it is not ranked. */
  rank: number | null;
  right: boolean;
  falseAlarm: boolean;
  ms: number;
  report: WhatChangedReport;
}

export function corpusTruth(dir: string, run: string): CorpusTruth {
  return JSON.parse(readFileSync(join(dir, run, 'truth.json'), 'utf8')) as CorpusTruth;
}

/** The words a suspect about the true change names: its key, and its new value where the key alone is too common. */
function namesTheChange(title: string, truth: CorpusTruth): boolean {
  const c = truth.change;
  if (!c) return false;
  const t = title.toLowerCase();
  const key = c.key.replace(/^--/, '').toLowerCase();
  switch (c.where) {
    case 'code':
      // a code change is named by its file; a host sync by its line too is better, the file is enough
      return t.includes(key);
    case 'env':
      return t.includes(key);
    default:
      return t.includes(key) || (typeof c.after === 'string' && t.includes(c.after.toLowerCase()));
  }
}

/**
 * Right: a regression run whose first suspect is the true change; a run with no regression (no change, bookkeeping,
 * a comment, a change too small to matter) called steady. A false alarm: `regression` where the run measured none.
 */
export function judge(run: string, truth: CorpusTruth, report: WhatChangedReport, ms: number): CorpusRow {
  const suspects = report.suspects.map((s) => s.title);
  const at = suspects.findIndex((s) => namesTheChange(s, truth));
  const rank = at >= 0 ? at + 1 : null;
  const right = truth.regression ? report.verdict === 'regression' && rank === 1 : report.verdict === 'steady';
  const falseAlarm = !truth.regression && report.verdict === 'regression';
  return {
    run,
    truth,
    verdict: report.verdict,
    headline: report.headline,
    suspects,
    rank,
    right,
    falseAlarm,
    ms,
    report,
  };
}

/** What Changed? on every run of the materialized corpus `dir`, one after another. */
export async function scoreCorpus(host: WhatChangedHost, dir: string): Promise<CorpusRow[]> {
  const rows: CorpusRow[] = [];
  for (const run of realRunNames('regressions')) {
    const truth = corpusTruth(dir, run);
    const t0 = performance.now();
    const report = await whatChanged(host, join(dir, run), { timeoutMs: 120_000 });
    rows.push(judge(run, truth, report, performance.now() - t0));
  }
  return rows;
}

export interface CorpusSummary {
  runs: number;
  rightFirst: number;
  rightTop3: number;
  falseAlarms: number;
  medianMs: number;
}

export function summarize(rows: readonly CorpusRow[]): CorpusSummary {
  const ms = rows.map((r) => r.ms).sort((a, b) => a - b);
  const mid = ms.length ? (ms[(ms.length - 1) >> 1]! + ms[ms.length >> 1]!) / 2 : 0;
  return {
    runs: rows.length,
    rightFirst: rows.filter((r) => r.right).length,
    rightTop3: rows.filter((r) => (r.truth.regression ? r.rank !== null && r.rank <= 3 : r.right)).length,
    falseAlarms: rows.filter((r) => r.falseAlarm).length,
    medianMs: mid,
  };
}

/** The score table, one line a run and the totals. */
export function scoreTable(rows: readonly CorpusRow[]): string {
  const s = summarize(rows);
  const lines = rows.map((r) => {
    const expect = r.truth.regression ? `${r.truth.change?.key ?? '?'} (regression)` : 'steady';
    const got = r.verdict === 'regression' ? `#1 ${r.suspects[0] ?? '(none)'}` : r.verdict;
    return `  ${r.right ? 'ok ' : 'BAD'} ${r.run.padEnd(26)} want ${expect.padEnd(36)} got ${r.verdict.padEnd(10)} rank ${String(r.rank ?? '-').padEnd(2)} ${got.slice(0, 70)}  ${r.ms.toFixed(0)} ms`;
  });
  lines.push(
    `  runs ${s.runs}, right first ${s.rightFirst}, right in top 3 ${s.rightTop3}, false alarms ${s.falseAlarms}, median report ${s.medianMs.toFixed(0)} ms`,
  );
  return lines.join('\n');
}
