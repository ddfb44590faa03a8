import type { Restart } from '../../metrics/restarts';
import { shellQuote } from '../../quote';
import type { Changepoint } from '../changepoints';
import type { CheckpointFact, WhatChangedFacts } from '../facts';
import type { CosmeticChange, ProveHint, Suspect, UnknownFact, WhatChangedReport } from '../model';
import { describeWhere, pythonValue, resumeDifferences, type ResumeDifference } from '../resumeDifferences';
import type { ResumeFacts } from '../resumeFacts';
import { isoOf, type Draft } from './draft';

/*
 * Cause: the restart itself. The run's restarts (the stitched history's, with what is known to have changed at each),
 * the restart a slowdown came with, and what the resumed process loaded that the launch before did not have: the
 * resume-path facts of the checkpoints around it (python/resume_facts.py, resumeDifferences.ts) and the compile
 * caches that were empty when it started.
 */

/** Where a change lands relative to a restart: in the checkpoint interval that holds it. */
function spansRestart(u: Suspect | CosmeticChange, r: Restart): boolean {
  const s = u.when?.steps;
  return s !== undefined && s.from < r.step && s.to >= (r.prevStep ?? r.step);
}

/**
 * The report's restarts: what is known to have changed at each restart, the args whose change lies between the
 * checkpoints around it (a setting that costs no step said so), and the resume state of the checkpoints around the
 * one whose were read.
 */
export function restartsOf(
  facts: WhatChangedFacts,
  suspects: readonly Suspect[],
  unranked: readonly (CosmeticChange | Suspect)[],
): NonNullable<WhatChangedReport['restarts']> {
  return (facts.log?.restarts ?? []).map((r) => {
    const changed = [...suspects, ...unranked]
      // the restart itself is no change made at the restart: its facts are `resume`
      .filter((u) => ('score' in u ? u.source !== 'restart' : u.inert === true) && spansRestart(u, r))
      .map((u) => ('score' in u ? u.title : `${u.title} (no cost to a step)`));
    const resume = facts.resume?.restart === r.step ? resumeSummary(facts.resume) : undefined;
    return {
      step: r.step,
      time: r.time,
      gapSeconds: r.gapSeconds,
      signals: r.signals,
      ...(r.source !== undefined ? { source: r.source } : {}),
      changed,
      ...(resume ? { resume } : {}),
    };
  });
}

function resumeSummary(
  p: NonNullable<WhatChangedFacts['resume']>,
): NonNullable<NonNullable<WhatChangedReport['restarts']>[number]['resume']> | null {
  if (!p.before.facts || !p.after.facts) return null;
  return {
    before: p.before.checkpoint.label,
    after: p.after.checkpoint.label,
    differences: resumeDifferences(p.before.facts, p.after.facts).map((d) => d.text),
  };
}

/** The restart the slowdown came with: the changepoint's launch, or the latest one when launches were compared. */
export function restartOfDrop(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined) {
  const rs = report.restarts ?? [];
  if (main?.cp.launch !== undefined) return rs.find((r) => r.step === main.cp.launch) ?? rs[rs.length - 1];
  return report.throughput.log?.byLaunch ? rs[rs.length - 1] : undefined;
}

/**
 * The checkpoints whose resume state tells what a restart loaded: the last one the launch before wrote (at or before
 * the step it stopped at, and before the resumed launch logged) and the first one the resumed launch wrote. The restart
 * is the shift's launch, else the latest (what gather.ts reads: two requests).
 */
export function resumePair(
  checkpoints: readonly CheckpointFact[],
  restarts: readonly Restart[],
  launch: number | undefined,
): { restart: Restart; before: CheckpointFact; after: CheckpointFact } | { restart: Restart; missing: string } | null {
  const restart = (launch !== undefined ? restarts.find((r) => r.step === launch) : undefined) ?? restarts.at(-1);
  if (!restart) return null;
  const stopped = restart.prevStep ?? restart.step - 1;
  const before = [...checkpoints]
    .reverse()
    .find(
      (c) => c.step <= stopped && (c.mtime === null || restart.time === null || c.mtime <= restart.time) && c.step >= 0,
    );
  if (!before) return { restart, missing: `no checkpoint written before the restart at step ${restart.step}` };
  const after = checkpoints.find((c) => c.step > before.step && c.step >= restart.step);
  if (!after) return { restart, missing: `no checkpoint written by the launch resumed at step ${restart.step} yet` };
  return { restart, before, after };
}

/** One fact a line, sorted by kind: the resume state as a document, for the two checkpoints side by side. */
export function resumeText(f: ResumeFacts): string {
  const lines = [`checkpoint ${f.path}`, `format ${f.format}`, `step ${f.step ?? 'not saved'}`];
  for (const o of f.optimizers) {
    lines.push(`optimizer ${o.source}: ${o.paramsWithState} parameters with state`);
    for (const [k, s] of Object.entries(o.state).sort(([a], [b]) => a.localeCompare(b)))
      lines.push(`optimizer ${o.source} state ${k}: ${describeWhere(s.tensors, s.numbers, s.other)}`);
    o.paramGroups.forEach((g, i) => {
      for (const [k, v] of Object.entries(g.values).sort(([a], [b]) => a.localeCompare(b)))
        lines.push(`optimizer ${o.source} param group ${i} ${k}: ${pythonValue(v)}`);
    });
  }
  for (const w of f.weights) lines.push(`weights ${w.source}: ${w.tensors} tensors, ${describeWhere(w.where)}`);
  for (const [k, v] of [
    ['scheduler state', f.scheduler],
    ['data-loader state', f.loader],
    ['RNG state', f.rng],
  ] as const)
    lines.push(`${k}: ${v.length ? v.join(', ') : 'not saved'}`);
  for (const w of f.warnings) lines.push(`warning: ${w}`);
  return lines.join('\n') + '\n';
}

/**
 * The compile caches of the environment snapshot that were empty when the resumed launch started: every file in them
 * is newer than the launch before's last logged point (a cache emptied, or a new one such as a TORCHINDUCTOR_CACHE_DIR
 * under /tmp on a new node).
 */
export function coldCaches(facts: WhatChangedFacts, restart: Restart): string[] {
  if (restart.time === null) return [];
  const stopped = restart.time - (restart.gapSeconds ?? 0);
  return (facts.env.now?.caches ?? [])
    .filter((c) => c.exists && (c.files ?? 0) > 0 && !c.truncated && c.oldestMtime !== null && c.oldestMtime > stopped)
    .map(
      (c) =>
        `${c.name} compile cache (${c.path}) empty at the restart: its ${c.files} files were all written after the launch before stopped (the oldest ${isoOf(c.oldestMtime)}), so the resumed launch compiled its kernels anew: that costs compile time at its start (left out as warm-up), and with autotuning it may choose other kernels`,
    );
}

/** The replay that proves the restart itself (src/core/replay/, `known-good replay HOST RUN`). */
function proveHint(facts: WhatChangedFacts, before: CheckpointFact): ProveHint {
  const command = `known-good replay ${shellQuote(facts.host.label)} ${shellQuote(facts.run ?? 'RUN')}`;
  const recorded = (facts.probe?.launches?.[0]?.records ?? []).filter((r) => r.source === 'kg_record').length;
  const ready = recorded >= 2;
  return {
    kind: 'replay',
    command,
    ready,
    text: ready
      ? `resumes the launch before the restart from ${before.label} with nothing changed and compares its speed with the run's own before the restart: as slow as now, the restart itself (how the run resumes) costs the speed`
      : `the replay resumes the run from ${before.label} with nothing changed and compares its speed with the run's own before the restart; it needs the command each launch ran, so record the launches first (python3 kg_record.py --run RUN -- CMD …, or Record Launches of This Run…)`,
  };
}

/**
 * The restart itself as a suspect: what the checkpoints before and after the restart say the resumed process loaded
 * differently (optimizer state on another device or dtype, other implementation flags, weights cast), and compile
 * caches empty at its start. None when nothing that can cost a step differs; the checkpoints not read are unknown.
 */
export function restartDrafts(facts: WhatChangedFacts, unknown: UnknownFact[]): Draft[] {
  const p = facts.resume;
  if (!p) return [];
  const restart = facts.log?.restarts?.find((r) => r.step === p.restart);
  for (const side of [p.before, p.after])
    if (!side.facts) unknown.push({ fact: `resume state of ${side.checkpoint.label}`, why: side.error ?? 'not read' });
  const diffs: ResumeDifference[] =
    p.before.facts && p.after.facts ? resumeDifferences(p.before.facts, p.after.facts) : [];
  const costly = diffs.filter((d) => d.speed !== 'no');
  const caches = restart ? coldCaches(facts, restart) : [];
  if (!costly.length && !caches.length) return [];
  const { before, after } = { before: p.before.checkpoint, after: p.after.checkpoint };
  const lead = costly[0]?.text ?? caches[0]!.split(' (')[0]!;
  const more = costly.length + caches.length - 1;
  const bits = [
    `what the launch resumed at step ${p.restart} loaded differs from what the launch before had: ${before.label} (the last checkpoint before the restart) against ${after.label} (the first the resumed launch wrote)`,
    ...costly.map((d) => (d.hint ? `${d.text}. ${d.hint}` : d.text)),
    ...caches,
  ];
  const inert = diffs.filter((d) => d.speed === 'no').map((d) => d.text);
  if (inert.length) bits.push(`also differs, at no cost to a step: ${inert.join('; ')}`);
  return [
    {
      source: 'restart',
      category: 'resume',
      title: `the restart itself: ${lead}${more > 0 ? ` (and ${more} more)` : ''}`,
      detail: bits.join('; '),
      when: {
        text: `${before.label} → ${after.label}, around the restart at step ${p.restart}`,
        steps: { from: before.step, to: after.step },
        ...(before.mtime !== null && after.mtime !== null ? { time: { from: before.mtime, to: after.mtime } } : {}),
      },
      evidence:
        p.before.facts && p.after.facts
          ? [
              {
                kind: 'text-diff',
                title: `resume state ${before.label} ↔ ${after.label}`,
                hostId: facts.host.id,
                a: { name: `resume state ${before.label}.txt`, text: resumeText(p.before.facts) },
                b: { name: `resume state ${after.label}.txt`, text: resumeText(p.after.facts) },
              },
            ]
          : [],
      prove: proveHint(facts, before),
    },
  ];
}
