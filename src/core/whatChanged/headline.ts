import { formatRate } from '../bench/compare';
import { throughputRank } from './categories';
import type { Changepoint } from './changepoints';
import { tooLittleHeadline } from './youngRestart';
import { restartOfDrop } from './causes/restart';
import type { WhatChangedReport } from './model';
import { atShift, formatLevel, formatRatio } from './scoring';
import { DROP_RATIO, slowdownOf, speedRatioOf } from './throughput';

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
  const inert = inertAt(report, r.step);
  if (inert.length) {
    const shown = inert.length > 3 ? `${inert.slice(0, 3).join(', ')} and ${inert.length - 3} more` : inert.join(', ');
    return `; nothing that changes a step's cost changed at the restart at step ${r.step} (only ${shown}, which cannot)${missing}`;
  }
  return `; nothing recorded at the restart at step ${r.step} differs${missing}`;
}

/** The settings changed at a restart that change no step's cost (categories.ts `inertArgWhy`), listed not ranked. */
function inertAt(report: WhatChangedReport, step: number, cp?: Changepoint): string[] {
  const out: string[] = [];
  for (const u of report.unranked) {
    const s = u.when?.steps;
    const at = s && (cp ? atShift(s.from, s.to, cp) : s.from < step && s.to >= step);
    if (!('score' in u) && u.inert && at && !out.includes(u.title)) out.push(u.title);
  }
  return out;
}

function suspectTail(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const honest = honestTail(report, main);
  if (honest !== null) return honest;
  const top = report.suspects[0];
  const inert = main ? inertAt(report, main.cp.firstAfter, main.cp) : [];
  if (!top && inert.length)
    return `; nothing that changes a step's cost changed at the shift (only ${inert.join(', ')}, which cannot)`;
  if (!top) return '; no recorded change explains it (see what could not be gathered)';
  if (top.ruledOut) {
    const n = report.suspects.length;
    return `; no recorded change at the shift explains it (${n} changed at other times, listed)`;
  }
  const src = top.source;
  if (top.coincides && main) return `; changed at step ${main.cp.at}: ${top.title} (${src}, ${top.when.text})`;
  return `; first suspect: ${top.title} (${src}, ${top.when.text})`;
}

/** The report in one line: the verdict, the levels, and what explains the slowdown (or that nothing recorded does). */
export function headline(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const t = report.throughput;
  const ref = report.reference.label;
  if (report.verdict === 'unknown') {
    const n = report.unranked.length;
    if (t.log?.young) return tooLittleHeadline(t.log.young, n, ref);
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
