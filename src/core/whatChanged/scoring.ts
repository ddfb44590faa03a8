import { formatRate } from '../bench/compare';
import type { ReducedSeries } from '../metrics/metricsProbe';
import { CATEGORY_TEXT, CATEGORY_WEIGHT, CATEGORY_WHY } from './categories';
import type { Changepoint } from './changepoints';
import { isoOf, type Draft } from './causes/draft';
import type { CheckpointFact, WhatChangedFacts } from './facts';
import type {
  CosmeticChange,
  EvidenceLink,
  Suspect,
  SuspectCategory,
  ThroughputSummary,
  WhatChangedReport,
} from './model';

/*
 * How a draft is scored against the shift: its category's weight, and whether it changed where the metric shifted
 * (points), or after it or before a level that held (ruled out).
 */

/** Points for a change that lands where a metric shifted, and against one known to come after the shift. */
export const COINCIDES_POINTS = 50;
export const AFTER_SHIFT_POINTS = -25;

export interface Window {
  steps: { from: number; to: number };
  time: { from: number; to: number } | null;
}

/** Where (in steps) and when (in remote time) a changepoint happened, as the checkpoints and the log tell. */
export function windowOf(cp: Changepoint, cks: readonly CheckpointFact[], series: ReducedSeries | undefined): Window {
  const a = [...cks].reverse().find((c) => c.step <= cp.at);
  const b = cks.find((c) => c.step >= cp.firstAfter);
  let from = a?.mtime ?? null;
  let to = b?.mtime ?? null;
  if (series?.t) {
    const i = series.x.indexOf(cp.at);
    const j = series.x.indexOf(cp.firstAfter);
    const ta = i >= 0 ? series.t[i] : undefined;
    const tb = j >= 0 ? series.t[j] : undefined;
    if (ta !== undefined) from = from === null ? ta : Math.min(from, ta);
    if (tb !== undefined) to = to === null ? tb : Math.max(to, tb);
  }
  return {
    steps: { from: a?.step ?? cp.at, to: b?.step ?? cp.firstAfter },
    time: from !== null && to !== null ? { from, to } : null,
  };
}

/**
 * A change somewhere in steps (from, to] lands on the shift: the shift lies in (at, firstAfter], or in the bucket
 * before when that bucket mixed both levels, so the two intervals overlap.
 */
export function atShift(from: number, to: number, cp: Changepoint): boolean {
  return from < cp.firstAfter && to > cp.at - (cp.firstAfter - cp.at);
}

export function scoreOf(
  d: Draft,
  main: { key: string; cp: Changepoint } | undefined,
  win: Window | undefined,
): Pick<Suspect, 'score' | 'reasons' | 'coincides' | 'ruledOut'> {
  const cat = d.category as SuspectCategory;
  const reasons = [
    {
      points: CATEGORY_WEIGHT[cat],
      why: `${CATEGORY_TEXT[cat]} (known to move throughput: weight ${CATEGORY_WEIGHT[cat]}): ${CATEGORY_WHY[cat]}`,
    },
  ];
  if (cat === 'other') reasons[0]!.why = `${CATEGORY_TEXT[cat]} (weight ${CATEGORY_WEIGHT[cat]}): ${CATEGORY_WHY[cat]}`;
  let coincides = false;
  let ruledOut = false;
  const timingRulesOut = (why: string) => {
    ruledOut = true;
    reasons.push({ points: AFTER_SHIFT_POINTS, why });
  };
  if (main && win) {
    const at = `${main.key} shifted at step ${main.cp.at} (${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)})`;
    const s = d.when.steps;
    const t = d.when.time;
    if (s) {
      const lo = main.cp.at - (main.cp.firstAfter - main.cp.at);
      if (atShift(s.from, s.to, main.cp)) {
        coincides = true;
        reasons.push({ points: COINCIDES_POINTS, why: `changed between steps ${s.from} and ${s.to}, where ${at}` });
      } else if (s.from >= main.cp.firstAfter) {
        timingRulesOut(`changed after the shift (from step ${s.from} on; ${at})`);
      } else if (s.to <= lo) {
        timingRulesOut(`changed before the shift and the level held (${at})`);
      }
    } else if (t && win.time) {
      // a window of a second is a point: a commit's time is whole seconds
      const point = t.to - t.from <= 1;
      if (point && t.to > win.time.from && t.from <= win.time.to) {
        coincides = true;
        reasons.push({
          points: COINCIDES_POINTS,
          why: `changed at ${isoOf(t.from)}, between ${isoOf(win.time.from)} and ${isoOf(win.time.to)}, where ${at}`,
        });
      } else if (t.from > win.time.to) {
        timingRulesOut(`changed after the shift (${isoOf(t.from)}; ${at})`);
      } else if (point && t.to <= win.time.from) {
        reasons.push({
          points: AFTER_SHIFT_POINTS,
          why: `changed before the shift and the level held (${isoOf(t.to)})`,
        });
      } else {
        reasons.push({ points: 0, why: `when it changed is not known closer than ${d.when.text}` });
      }
    } else {
      reasons.push({ points: 0, why: 'when it changed is not known' });
    }
  }
  return { score: reasons.reduce((n, r) => n + r.points, 0), reasons, coincides, ruledOut };
}

export function formatLevel(n: number): string {
  return Math.abs(n) >= 1000 ? formatRate(n) : Number(n.toPrecision(3)).toString();
}

export function formatRatio(r: number): string {
  return r >= 10 ? r.toFixed(1) : r.toFixed(2);
}

/** The evidence the shift lends: its plot (to a suspect that coincides with it), the benchmark pair (to the build). */
export interface ShiftEvidence {
  plot: EvidenceLink[];
  bench: EvidenceLink[];
}

export function shiftEvidence(
  facts: WhatChangedFacts,
  main: { key: string; cp: Changepoint } | undefined,
  tpSeries: ReducedSeries | undefined,
  bench: ThroughputSummary['bench'],
): ShiftEvidence {
  const plot: EvidenceLink[] =
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
  return { plot, bench: benchLink };
}

/** The plot's window around the shift: a tenth of the series either side, at least the shift's own bucket. */
function zoom(cp: Changepoint, s: ReducedSeries | undefined): { from: number; to: number } {
  const lo = s?.x[0] ?? cp.segmentBefore[0];
  const hi = s?.x[s.x.length - 1] ?? cp.segmentAfter[1];
  const span = Math.max((hi - lo) * 0.1, cp.firstAfter - cp.at);
  return { from: Math.max(lo, Math.floor(cp.at - span)), to: Math.min(hi, Math.ceil(cp.firstAfter + span)) };
}

/**
 * The drafts as the report lists them: cosmetic ones unranked; the others scored, and ranked when the verdict is a
 * regression (not ruled out first, then by score and category weight), else listed unranked.
 */
export function rankDrafts(
  drafts: readonly Draft[],
  main: { key: string; cp: Changepoint } | undefined,
  win: Window | undefined,
  verdict: WhatChangedReport['verdict'],
  shift: ShiftEvidence,
): { suspects: Suspect[]; unranked: (CosmeticChange | Suspect)[] } {
  const suspects: Suspect[] = [];
  const unranked: (CosmeticChange | Suspect)[] = [];
  let n = 0;
  for (const d of drafts) {
    if (d.category === 'cosmetic') {
      unranked.push({
        source: d.source,
        title: d.title,
        why: d.cosmeticWhy ?? 'cosmetic',
        ...(d.inert ? { inert: true, when: d.when } : {}),
      });
      continue;
    }
    const s = scoreOf(d, main, win);
    const evidence = [...d.evidence];
    if (s.coincides) evidence.push(...shift.plot);
    if (d.category === 'torch-build' || d.category === 'driver' || d.category === 'hardware')
      evidence.push(...shift.bench);
    const suspect: Suspect = {
      id: `s${++n}`,
      source: d.source,
      category: d.category,
      title: d.title,
      detail: d.detail,
      when: d.when,
      evidence,
      ...(d.prove ? { prove: d.prove } : {}),
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
  return { suspects, unranked };
}
