import { computeDrift } from '../baselines/drift';
import type { Baseline } from '../baselines/store';
import type { Changepoint } from './changepoints';
import { argsDrafts, changedDataPaths } from './causes/args';
import { gitDrafts } from './causes/code';
import { dataDrafts } from './causes/data';
import { link, type Draft } from './causes/draft';
import { envDrafts } from './causes/environment';
import { hardwareDrafts } from './causes/hardware';
import { foldUncommittedLaunches, launchDrafts, launchSummaryOf } from './causes/launch';
import { restartDrafts, restartsOf } from './causes/restart';
import type { CheckpointFact, WhatChangedFacts } from './facts';
import { headline } from './headline';
import type { UnknownFact, WhatChangedReport } from './model';
import { pickBaseline, pickReference, withBaseline } from './reference';
import { rankDrafts, shiftEvidence, windowOf } from './scoring';
import { benchOf, CHANGEPOINT_WHY, logShifts, logThroughput, mainChangepoint, verdictOf } from './throughput';

/*
 * What Changed?'s analysis: the report, from the facts gathered (gather.ts). It finds the shift and the reference
 * (throughput.ts, reference.ts), asks each kind of cause (causes/) for the facts that differ as drafts, scores and
 * ranks them against the shift (scoring.ts) and says it in one line (headline.ts).
 */

/** The report, from the facts: pure, no I/O. */
export function analyze(facts: WhatChangedFacts, generatedAt = new Date()): WhatChangedReport {
  const unknown: UnknownFact[] = [...facts.unknown];
  const { series: logSeries, changepoints: series } = logShifts(facts.log);
  const main = mainChangepoint(series);
  const ref0 = pickReference(facts, main);
  const base = pickBaseline(facts, ref0.time);
  const cks = facts.checkpoints;
  const refCk = ref0.checkpoint ? cks.find((c) => c.label === ref0.checkpoint!.label) : undefined;
  const nowCk = cks[cks.length - 1];
  const tpSeries = logSeries.find((s) => s.key === main?.key);
  const win = main ? windowOf(main.cp, cks, tpSeries) : undefined;

  const logTp = logThroughput(facts, logSeries, series, main, refCk);
  if (!facts.log && facts.run !== null && !unknown.some((u) => u.fact.startsWith('metrics log')))
    unknown.push({ fact: 'metrics log', why: `no train log found in ${facts.run}` });
  const bench = benchOf(facts, ref0.time);
  const { dropped, verdict } = verdictOf(logTp, bench, series);

  const drafts = causeDrafts(facts, { refCk, nowCk, refTime: ref0.time, main, base }, unknown);
  const evidence = shiftEvidence(facts, main, tpSeries, bench);
  const { suspects, unranked } = rankDrafts(drafts, main, win, verdict, evidence);
  const replayable = facts.run !== null && recordedLaunches(facts) >= 2;
  if (replayable && facts.run !== null)
    for (const s of suspects)
      if (s.subject)
        s.evidence.push({ kind: 'replay', title: 'Prove by Replay', hostId: facts.host.id, run: facts.run });
  const restarts = restartsOf(facts, suspects, unranked);
  const report: WhatChangedReport = {
    schema: 1,
    headline: '',
    verdict,
    host: facts.host,
    run: facts.run,
    generatedAt: generatedAt.toISOString(),
    reference: withBaseline(ref0, base),
    now: {
      checkpoint: nowCk ? link(nowCk) : null,
      time: facts.remoteNow,
      envCapturedAt: facts.env.now?.capturedAt ?? null,
      log: facts.log?.path ?? null,
    },
    throughput: { log: logTp, bench, dropped },
    changepoints: { method: 'binary-segmentation', why: CHANGEPOINT_WHY, series },
    ...(restarts.length ? { restarts } : {}),
    ...(facts.log?.sources && facts.log.sources.length > 1 ? { logSources: facts.log.sources } : {}),
    ...launchSummaryOf(facts.probe?.launches?.[0]),
    suspects,
    ...(replayable ? { replayable } : {}),
    unranked,
    unknown,
    gathered: {
      ...facts.gathered,
      checkpointsRead: facts.args.filter((a) => a.args !== null).length,
      checkpoints: cks.length,
    },
  };
  report.headline = headline(report, main);
  return report;
}

/** The run's launches recorded by kg_record.py: a replay needs two (the known-good one and now's). */
export function recordedLaunches(facts: WhatChangedFacts): number {
  return (facts.probe?.launches?.[0]?.records ?? []).filter((r) => r.source === 'kg_record').length;
}

/** Where a cause compares: the checkpoints and time of the reference and now, the shift, the baseline. */
interface CauseContext {
  refCk: CheckpointFact | undefined;
  nowCk: CheckpointFact | undefined;
  refTime: number | null;
  main: { key: string; cp: Changepoint } | undefined;
  base: { baseline: Baseline; why: string } | undefined;
}

/**
 * The facts that differ, every kind of cause in turn (causes/): a new kind of cause is a module of causes/ that
 * returns drafts, called here. The order is the suspects' ids and their last tie-break; what a cause could not read
 * goes to `unknown`.
 */
function causeDrafts(facts: WhatChangedFacts, c: CauseContext, unknown: UnknownFact[]): Draft[] {
  const fingerprints = new Map((facts.probe?.paths ?? []).map((p) => [p.path, p]));
  const drafts: Draft[] = [];
  const argsDr = argsDrafts(facts, c.refCk, c.nowCk, c.main, fingerprints, unknown);
  drafts.push(...argsDr);
  if (facts.env.now && c.base) {
    const drift = computeDrift(c.base.baseline.snapshot, facts.env.now);
    drafts.push(...envDrafts(facts, c.base, drift, unknown));
    for (const e of drift.errors)
      unknown.push({ fact: `environment: ${e.part} (${e.side})`, why: e.message ?? 'failed' });
  } else if (!c.base) {
    unknown.push({
      fact: 'environment at the reference',
      why: 'no baseline saved for this host: capture one (Known Good: Capture Environment Baseline, or known-good env HOST --save LABEL)',
    });
  }
  drafts.push(...gitDrafts(facts, c.refTime, unknown));
  const launches = facts.probe?.launches?.[0];
  drafts.push(...launchDrafts(facts, launches, argsDr));
  if (launches && !launches.exists && (facts.log?.restarts?.length ?? 0) > 0)
    unknown.push({
      fact: 'command line and process environment of each launch',
      why: `not recorded for this run: launch it through kg_record.py (python3 kg_record.py --run ${facts.run ?? 'RUN'} -- CMD …) to see them next time`,
    });
  drafts.push(...dataDrafts(facts, c.refTime, changedDataPaths(facts, c.refCk, c.nowCk), unknown));
  drafts.push(...restartDrafts(facts, unknown));
  drafts.push(...hardwareDrafts(facts, c.main, unknown));
  return foldUncommittedLaunches(drafts);
}
