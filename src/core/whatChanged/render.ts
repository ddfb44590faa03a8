import { formatRate } from '../bench/compare';
import { formatRatio } from './scoring';
import type { EvidenceLink, Suspect, WhatChangedReport } from './model';

/*
 * The report as Markdown: what "Copy as Markdown" copies, what an adapter shows in a preview, and the CLI's text.
 * Evidence is named in words (an adapter turns `report.suspects[i].evidence` into clickable links; the Markdown
 * stays readable where pasted).
 */

// `_` stays: names like NCCL_DEBUG are intraword, where CommonMark never starts emphasis.
export function mdEscape(s: string): string {
  return s.replace(/([\\`*[\]<>#|])/g, '\\$1');
}

function code(s: string): string {
  const ticks = s.includes('`') ? '``' : '`';
  return `${ticks}${s.replace(/\n/g, ' ')}${ticks}`;
}

function iso(epoch: number | null): string {
  return epoch === null ? 'unknown time' : new Date(epoch * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Heading of the suspects whose timing rules them out (listed, never hidden, after all the others). */
export const RULED_OUT_HEADING = 'Changed, but not where the metric shifted (their timing rules them out)';

/** Where the suspects their timing rules out begin (they are sorted last). */
export function firstRuledOut(suspects: readonly Suspect[]): number {
  const i = suspects.findIndex((s) => s.ruledOut);
  return i < 0 ? suspects.length : i;
}

export function evidenceText(e: EvidenceLink): string {
  switch (e.kind) {
    case 'args-diff':
      return `args diff ${e.a.label} → ${e.b.label}`;
    case 'env-diff':
    case 'bisect':
      return e.title;
    case 'plot':
      return `plot of ${e.series}, steps ${formatStep(e.window.from)}–${formatStep(e.window.to)}`;
    case 'bench-compare':
      return 'benchmark comparison';
    case 'file':
      return `file ${e.path}`;
    case 'git':
      return `git log of ${e.repo}`;
    case 'text-diff':
      return `${e.a.name} ↔ ${e.b.name}`;
  }
}

function formatStep(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function level(n: number): string {
  return Math.abs(n) >= 1000 ? formatRate(n) : Number(n.toPrecision(3)).toString();
}

function suspectLines(s: Suspect, i: number): string[] {
  const reasons = s.reasons.map((r) => `${r.points >= 0 ? '+' : '−'}${Math.abs(r.points)} ${r.why}`).join('; ');
  return [
    `${i + 1}. **${mdEscape(s.title)}** — score ${s.score} (${s.source}${s.coincides ? ', at the shift' : ''})`,
    `   - when: ${mdEscape(s.when.text)}`,
    `   - score: ${mdEscape(reasons)}`,
    `   - evidence: ${s.evidence.map((e) => mdEscape(evidenceText(e))).join(' · ') || 'none'}`,
    `   - ${mdEscape(s.detail)}`,
    ...(s.prove ? [`   - prove it: ${code(s.prove.command)} — ${mdEscape(s.prove.text)}`] : []),
  ];
}

export function renderWhatChangedMarkdown(r: WhatChangedReport): string {
  const out: string[] = [`**${mdEscape(r.headline)}**`, ''];
  const ref = r.reference;
  out.push(
    `- host ${code(r.host.label)}${r.run !== null ? `, run ${code(r.run)}` : ' (no run: environment and benchmarks)'}`,
  );
  out.push(`- reference: **${mdEscape(ref.label)}** — ${mdEscape(ref.why)}`);
  if (ref.baseline)
    out.push(
      `- environment baseline: ${mdEscape(JSON.stringify(ref.baseline.label))} captured ${ref.baseline.capturedAt} (${mdEscape(ref.baseline.why)})`,
    );
  const now = r.now;
  out.push(
    `- now: ${now.checkpoint ? mdEscape(now.checkpoint.label) : 'no checkpoint'}, environment ${now.envCapturedAt ?? 'not captured'}, log ${now.log ? code(now.log) : 'none'}`,
  );
  out.push('');

  if (r.verdict === 'regression') {
    out.push('### Suspects, ranked');
    if (!r.suspects.length) out.push('', 'No fact that differs was found: see what could not be gathered below.');
    else {
      const cut = firstRuledOut(r.suspects);
      if (cut > 0) out.push('', ...r.suspects.slice(0, cut).flatMap((s, i) => suspectLines(s, i)));
      if (cut < r.suspects.length)
        out.push(
          '',
          `#### ${RULED_OUT_HEADING}`,
          '',
          ...r.suspects.slice(cut).flatMap((s, i) => suspectLines(s, cut + i)),
        );
    }
    out.push('');
  }

  out.push('### Changepoints');
  const withCps = r.changepoints.series.filter((s) => s.changepoints.length);
  if (!r.changepoints.series.length) out.push('', 'No numeric series long enough to search.');
  else if (!withCps.length) out.push('', `None in ${r.changepoints.series.map((s) => code(s.key)).join(', ')}.`);
  else {
    out.push('');
    for (const s of withCps)
      for (const c of s.changepoints)
        out.push(
          `- ${code(s.key)} at step ${formatStep(c.at)}: ${level(c.before)} → ${level(c.after)}` +
            (c.ratio !== null ? ` (${formatRatio(c.ratio)}×, ${c.sigmas.toFixed(0)}σ)` : ''),
        );
  }
  out.push('', `_Method: ${mdEscape(r.changepoints.why)}._`, '');

  if (r.launches?.running?.length) {
    out.push('### Running now', '');
    for (const p of r.launches.running)
      out.push(
        `- PID ${p.pid ?? '?'}: ${code(p.command)}${p.libs.length ? `; loaded ${p.libs.map(mdEscape).join(', ')}` : ''}`,
      );
    out.push('');
  }
  if (r.restarts?.length) {
    out.push('### Restarts', '');
    for (const x of r.restarts) {
      const when = x.time !== null ? ` at ${new Date(x.time * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')}` : '';
      const gap = x.gapSeconds !== null ? `, ${Math.round(x.gapSeconds)} s after the last point before` : '';
      const src = x.source ? `, ${code(x.source.split('/').slice(-2).join('/'))}` : '';
      const changed = x.changed.length ? `; changed there: ${x.changed.map(mdEscape).join(', ')}` : '';
      const resume = !x.resume
        ? ''
        : `; resume state ${x.resume.before} → ${x.resume.after}: ${x.resume.differences.length ? x.resume.differences.map(mdEscape).join('; ') : 'the same'}`;
      out.push(`- step ${formatStep(x.step)}${when} (${x.signals.join(', ')}${gap}${src})${changed}${resume}`);
    }
    out.push('');
  }

  out.push('### Throughput');
  out.push('');
  const t = r.throughput;
  if (t.log)
    out.push(
      `- log ${code(t.log.key)}: ${level(t.log.now)} now vs ${level(t.log.reference)} at the reference` +
        (t.log.ratio !== null ? ` (${formatRatio(t.log.ratio)}×)` : ''),
    );
  else out.push('- log: no throughput series');
  if (t.bench?.reference || t.bench?.now) {
    const b = t.bench;
    const side = (x: { at: string; tokensPerSec: number } | null) =>
      x ? `${formatRate(x.tokensPerSec)} tok/s (${x.at})` : 'none';
    out.push(
      `- benchmark: now ${side(b.now)}, reference ${side(b.reference)}` +
        (b.ratio !== null ? ` (${formatRatio(b.ratio)}×)` : ''),
    );
  } else out.push('- benchmark: no results kept for this host');
  out.push('');

  if (r.unranked.length) {
    out.push(
      r.verdict === 'regression' ? '### Not ranked (cosmetic)' : '### Differences (not ranked: nothing to explain)',
      '',
    );
    for (const u of r.unranked) {
      out.push(
        'score' in u
          ? `- ${mdEscape(u.title)} (${u.source}; ${mdEscape(u.when.text)})`
          : `- ${mdEscape(u.title)} (${u.source}; ${mdEscape(u.why)})`,
      );
    }
    out.push('');
  }
  if (r.unknown.length) {
    out.push('### Not known', '');
    for (const u of r.unknown) out.push(`- ${mdEscape(u.fact)}: ${mdEscape(u.why)}`);
    out.push('');
  }
  const g = r.gathered;
  out.push(
    `_Gathered in ${g.roundTrips} round trips (${g.requests} requests) in ${(g.elapsedMs / 1000).toFixed(2)} s; args of ${g.checkpointsRead} of ${g.checkpoints} checkpoints; reference time ${iso(ref.time)}._`,
  );
  return out.join('\n') + '\n';
}
