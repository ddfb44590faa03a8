import { computeDrift } from '../baselines/drift';
import { formatRate } from '../bench/compare';
import type { ReducedSeries } from '../metrics/metricsProbe';
import { restartsFromTimes } from '../metrics/restarts';
import { pointTimes } from '../metrics/speedFromTime';
import { CATEGORY_WEIGHT, throughputRank } from './categories';
import { findChangepoints, medianOf, type Changepoint } from './changepoints';
import type { WhatChangedFacts } from './facts';
import type {
  CosmeticChange,
  EvidenceLink,
  ReferencePoint,
  Suspect,
  ThroughputSummary,
  UnknownFact,
  WhatChangedReport,
} from './model';
import { link, type Draft } from './causes/draft';
import { argsDrafts, changedDataPaths } from './causes/args';
import { gitDrafts } from './causes/code';
import { envDrafts } from './causes/environment';
import { launchDrafts, runningOf } from './causes/launch';
import { dataDrafts } from './causes/data';
import { pickBaseline, pickReference } from './reference';
import {
  benchOf,
  CHANGEPOINT_WHY,
  DROP_RATIO,
  launchesOf,
  logSeriesOf,
  mainChangepoint,
  seriesChangepoints,
  slowdownOf,
  speedRatioOf,
} from './throughput';
import { formatLevel, formatRatio, scoreOf, windowOf } from './scoring';

// ------------------------------------------------------------------------------------------------ analysis

/** The report, from the facts: pure, no I/O. */
export function analyze(facts: WhatChangedFacts, generatedAt = new Date()): WhatChangedReport {
  const unknown: UnknownFact[] = [...facts.unknown];
  const logSeries = logSeriesOf(facts.log);
  const series = seriesChangepoints(logSeries, launchesOf(facts.log));
  const main = mainChangepoint(series);
  const ref0 = pickReference(facts, main);
  const base = pickBaseline(facts, ref0.time);
  const reference: ReferencePoint = {
    ...ref0,
    baseline: base
      ? { id: base.baseline.id, label: base.baseline.label, capturedAt: base.baseline.capturedAt, why: base.why }
      : null,
  };
  const cks = facts.checkpoints;
  const refCk = ref0.checkpoint ? cks.find((c) => c.label === ref0.checkpoint!.label) : undefined;
  const nowCk = cks[cks.length - 1];
  const tpSeries = logSeries.find((s) => s.key === main?.key);
  const win = main ? windowOf(main.cp, cks, tpSeries) : undefined;

  // throughput
  const tp = series.find((s) => s.throughput);
  let logTp: ThroughputSummary['log'] = null;
  if (tp && facts.log) {
    const raw = logSeries.find((s) => s.key === tp.key)!;
    const rawTimes = pointTimes(raw, logSeries);
    const levelAt = (step: number): number => {
      const cps = tp.changepoints;
      const idx = cps.findIndex((c) => step <= c.at);
      if (idx >= 0) return cps[idx]!.before;
      if (cps.length) return cps[cps.length - 1]!.after;
      return (
        findChangepoints(raw.x, raw.last, {
          launches: restartsFromTimes(raw.x, raw.t).map((r) => r.step),
          ...(rawTimes ? { times: rawTimes } : {}),
        }).lastLevel ?? NaN
      );
    };
    const refStep = refCk?.step ?? (main ? main.cp.at : raw.x[0]!);
    const reference = levelAt(refStep);
    const nowLevel = levelAt(Infinity);
    logTp = { key: tp.key, reference, now: nowLevel, ratio: reference ? nowLevel / reference : null };
    // A restarted run: is it slower in its latest launch than in the one before (their medians, warm-up left out),
    // or did it slow down inside its latest launch? A shift inside an earlier launch that the latest kept is the level
    // the run settled at, not a change to explain (the real steady loop ran 18% faster for its first 200 steps).
    const launches = [...new Set([...launchesOf(facts.log), ...restartsFromTimes(raw.x, raw.t).map((r) => r.step)])]
      .filter((l) => l > raw.x[0]!)
      .sort((a, b) => a - b);
    const latest = launches[launches.length - 1];
    if (latest !== undefined) {
      const prevStart = launches.length > 1 ? launches[launches.length - 2]! : -Infinity;
      const launchLevel = (lo: number, hi: number) =>
        medianOf(raw.last.filter((v, i) => raw.x[i]! >= lo && raw.x[i]! < hi && Number.isFinite(v)).slice(2));
      const inLatest = tp.changepoints.filter((c) => c.at >= latest && slowdownOf(tp.key, c) > 1 / DROP_RATIO);
      const prev = launchLevel(prevStart, latest);
      const last = launchLevel(latest, Infinity);
      if (!inLatest.length && Number.isFinite(prev) && Number.isFinite(last))
        logTp = { key: tp.key, reference: prev, now: last, ratio: prev ? last / prev : null, byLaunch: true };
    }
  }
  if (!facts.log && facts.run !== null && !unknown.some((u) => u.fact.startsWith('metrics log')))
    unknown.push({ fact: 'metrics log', why: `no train log found in ${facts.run}` });
  const bench = benchOf(facts, ref0.time);
  // A regression is a slowdown: throughput down, or step time up, by DROP_RATIO at least; a rise or a shift of the
  // loss is no regression to explain.
  const dropped =
    (logTp !== null && speedRatioOf(logTp) < DROP_RATIO) || (bench?.ratio != null && bench.ratio < DROP_RATIO);
  const verdict: WhatChangedReport['verdict'] = dropped
    ? 'regression'
    : logTp === null && bench?.ratio == null && !series.length
      ? 'unknown'
      : 'steady';

  // facts that differ
  const fingerprints = new Map((facts.probe?.paths ?? []).map((p) => [p.path, p]));
  const drafts: Draft[] = [];
  const argsDr = argsDrafts(facts, refCk, nowCk, main, fingerprints, unknown);
  drafts.push(...argsDr);
  if (facts.env.now && base) {
    const drift = computeDrift(base.baseline.snapshot, facts.env.now);
    drafts.push(...envDrafts(facts, base, drift, unknown));
    for (const e of drift.errors)
      unknown.push({ fact: `environment: ${e.part} (${e.side})`, why: e.message ?? 'failed' });
  } else if (!base) {
    unknown.push({
      fact: 'environment at the reference',
      why: 'no baseline saved for this host: capture one (Known Good: Capture Environment Baseline, or known-good env HOST --save LABEL)',
    });
  }
  drafts.push(...gitDrafts(facts, ref0.time, unknown));
  const launches = facts.probe?.launches?.[0];
  drafts.push(...launchDrafts(facts, launches, argsDr));
  if (launches && !launches.exists && (facts.log?.restarts?.length ?? 0) > 0)
    unknown.push({
      fact: 'command line and process environment of each launch',
      why: `not recorded for this run: launch it through kg_record.py (python3 kg_record.py --run ${facts.run ?? 'RUN'} -- CMD …) to see them next time`,
    });
  drafts.push(...dataDrafts(facts, ref0.time, changedDataPaths(facts, refCk, nowCk), unknown));

  const evidencePlot: EvidenceLink[] =
    main && facts.log
      ? [
          {
            kind: 'plot',
            title: `${main.key} zoomed at step ${main.cp.at}`,
            hostId: facts.host.id,
            log: facts.log.path,
            series: main.key,
            window: zoom(main.cp, tpSeries),
            marks: [main.cp.at],
          },
        ]
      : [];
  const benchLink: EvidenceLink[] =
    bench?.reference && bench.now
      ? [
          {
            kind: 'bench-compare',
            title: 'benchmark now vs reference',
            hostId: facts.host.id,
            referenceId: bench.reference.id,
            nowId: bench.now.id,
          },
        ]
      : [];

  const suspects: Suspect[] = [];
  const unranked: (CosmeticChange | Suspect)[] = [];
  let n = 0;
  for (const d of drafts) {
    if (d.category === 'cosmetic') {
      unranked.push({ source: d.source, title: d.title, why: d.cosmeticWhy ?? 'cosmetic' });
      continue;
    }
    const s = scoreOf(d, main, win);
    const evidence = [...d.evidence];
    if (s.coincides) evidence.push(...evidencePlot);
    if (d.category === 'torch-build' || d.category === 'driver' || d.category === 'hardware')
      evidence.push(...benchLink);
    const suspect: Suspect = {
      id: `s${++n}`,
      source: d.source,
      category: d.category,
      title: d.title,
      detail: d.detail,
      when: d.when,
      evidence,
      ...s,
    };
    if (verdict === 'regression') suspects.push(suspect);
    else unranked.push(suspect);
  }
  suspects.sort(
    (a, b) =>
      Number(a.ruledOut) - Number(b.ruledOut) ||
      b.score - a.score ||
      CATEGORY_WEIGHT[b.category] - CATEGORY_WEIGHT[a.category] ||
      a.id.localeCompare(b.id),
  );

  const throughput: ThroughputSummary = { log: logTp, bench, dropped };
  // what is known to have changed at each restart: the args whose change lies between the checkpoints around it
  const restarts = (facts.log?.restarts ?? []).map((r) => {
    const changed = [...suspects, ...unranked]
      .filter((u): u is Suspect => 'when' in u && u.when.steps !== undefined)
      .filter((u) => u.when.steps!.from < r.step && u.when.steps!.to >= (r.prevStep ?? r.step))
      .map((u) => u.title);
    return {
      step: r.step,
      time: r.time,
      gapSeconds: r.gapSeconds,
      signals: r.signals,
      ...(r.source !== undefined ? { source: r.source } : {}),
      changed,
    };
  });
  const report: WhatChangedReport = {
    schema: 1,
    headline: '',
    verdict,
    host: facts.host,
    run: facts.run,
    generatedAt: generatedAt.toISOString(),
    reference,
    now: {
      checkpoint: nowCk ? link(nowCk) : null,
      time: facts.remoteNow,
      envCapturedAt: facts.env.now?.capturedAt ?? null,
      log: facts.log?.path ?? null,
    },
    throughput,
    changepoints: { method: 'binary-segmentation', why: CHANGEPOINT_WHY, series },
    ...(restarts.length ? { restarts } : {}),
    ...(facts.log?.sources && facts.log.sources.length > 1 ? { logSources: facts.log.sources } : {}),
    ...(launches
      ? {
          launches: {
            recorded: launches.exists,
            path: launches.path,
            records: launches.records.length,
            ...(launches.live?.records.length ? { running: launches.live.records.map(runningOf) } : {}),
          },
        }
      : {}),
    suspects,
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

function zoom(cp: Changepoint, s: ReducedSeries | undefined): { from: number; to: number } {
  const lo = s?.x[0] ?? cp.segmentBefore[0];
  const hi = s?.x[s.x.length - 1] ?? cp.segmentAfter[1];
  const span = Math.max((hi - lo) * 0.1, cp.firstAfter - cp.at);
  return { from: Math.max(lo, Math.floor(cp.at - span)), to: Math.min(hi, Math.ceil(cp.firstAfter + span)) };
}

/** The restart the slowdown came with: the changepoint's launch, or the latest one when launches were compared. */
function restartOfDrop(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined) {
  const rs = report.restarts ?? [];
  if (main?.cp.launch !== undefined) return rs.find((r) => r.step === main.cp.launch) ?? rs[rs.length - 1];
  return report.throughput.log?.byLaunch ? rs[rs.length - 1] : undefined;
}

/**
 * A slowdown at a restart where nothing recorded differs: said so, with what was not recorded, rather than a suspect
 * of another time promoted to first.
 */
function honestTail(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string | null {
  const r = restartOfDrop(report, main);
  if (!r) return null;
  const atRestart = report.suspects.some(
    (s) => !s.ruledOut && (s.coincides || (s.when.steps && s.when.steps.from < r.step && s.when.steps.to >= r.step)),
  );
  if (atRestart) return null;
  const l = report.launches;
  const missing =
    l && !l.recorded
      ? '; not recorded for this run: command line, process environment (record launches to see it next time)'
      : l && l.recorded
        ? '; its launch records show no difference either'
        : '';
  return `; nothing recorded at the restart at step ${r.step} differs${missing}`;
}

function suspectTail(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const honest = honestTail(report, main);
  if (honest !== null) return honest;
  const top = report.suspects[0];
  if (!top) return '; no recorded change explains it (see what could not be gathered)';
  if (top.ruledOut) {
    const n = report.suspects.length;
    return `; no recorded change at the shift explains it (${n} changed at other times, listed)`;
  }
  const src = top.source;
  if (top.coincides && main) return `; changed at step ${main.cp.at}: ${top.title} (${src}, ${top.when.text})`;
  return `; first suspect: ${top.title} (${src}, ${top.when.text})`;
}

export function headline(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const t = report.throughput;
  const ref = report.reference.label;
  if (report.verdict === 'unknown') {
    const n = report.unranked.length;
    const why = report.unknown.find((u) => /metrics log|listing/.test(u.fact));
    return `Cannot tell whether throughput dropped: no metrics log${why ? ` (${why.why})` : ''} and no benchmark pair${n ? `; ${n} difference${n === 1 ? '' : 's'} since ${ref} listed, not ranked` : ''}`;
  }
  if (report.verdict === 'steady') {
    const n = report.unranked.length;
    const file = report.now.log?.split('/').pop();
    const shifts = report.changepoints.series.some((s) => s.changepoints.length);
    const what = !file ? 'no metrics log' : shifts ? `no slowdown in ${file}` : `no changepoint in ${file}`;
    const shift =
      main && t.log && main.key === t.log.key && main.cp.ratio !== null
        ? `${main.key} ${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)} at step ${main.cp.at}`
        : undefined;
    const rise = !shift
      ? ''
      : slowdownOf(main!.key, main!.cp) > 0 && t.log?.byLaunch
        ? ` (${shift}, inside an earlier launch; the latest launch runs at ${formatLevel(t.log.now)}, ${formatRatio(t.log.ratio ?? 1)}× the one before)`
        : ` (${shift}, not slower)`;
    const listed = n ? `; ${n} difference${n === 1 ? '' : 's'} since ${ref} listed, not ranked` : '';
    // say what the "no drop" rests on: a log without tok/s and no benchmark pair cannot show one
    const drop =
      t.log || t.bench?.ratio != null
        ? 'No throughput drop'
        : 'No throughput measured (no tok/s series, no benchmark pair)';
    return `${drop}${rise} and ${what}: nothing to explain${listed}`;
  }
  if (t.log && t.log.ratio !== null && speedRatioOf(t.log) < DROP_RATIO) {
    const tok = throughputRank(t.log.key) === 3;
    const unit = tok ? ' tok/s' : ` ${t.log.key}`;
    const f = tok ? formatRate : formatLevel;
    return `${f(t.log.now)}${unit} now vs ${f(t.log.reference)} at ${ref} (${formatRatio(t.log.ratio)}×)${suspectTail(report, main)}`;
  }
  if (t.bench?.reference && t.bench.now && t.bench.ratio !== null) {
    return `benchmark ${formatRate(t.bench.now.tokensPerSec)} tok/s now vs ${formatRate(t.bench.reference.tokensPerSec)} at ${t.bench.reference.at} (${formatRatio(t.bench.ratio)}×)${suspectTail(report, main)}`;
  }
  if (main) {
    const r = main.cp.ratio !== null ? ` (${formatRatio(main.cp.ratio)}×)` : '';
    return `${main.key} ${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)} at step ${main.cp.at}${r}${suspectTail(report, main)}`;
  }
  return `A change to explain${suspectTail(report, main)}`;
}
