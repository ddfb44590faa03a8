import { type BisectChange, type BisectEvent, type BisectReport, type StateStats, fmt, formatChange } from './engine';

export interface RenderOptions {
  /** The speed's unit ("tok/s", "samples/s"). */
  readonly unit?: string;
  /** What was bisected, for the title ("env of gpu-box vs baseline h200-good"). */
  readonly subject?: string;
  /** What a slot is called ("GPU 3"), for runs made side by side; default "slot N". */
  readonly slotLabel?: (slot: number) => string;
}

const slotName = (opts: RenderOptions, slot: number) => opts.slotLabel?.(slot) ?? `slot ${slot}`;

function labelsOf(changes: readonly BisectChange[], ids: readonly string[]): string[] {
  const byId = new Map(changes.map((c) => [c.id, c.label]));
  return ids.map((id) => byId.get(id) ?? id);
}

function appliedText(changes: readonly BisectChange[], applied: readonly string[]): string {
  if (applied.length === 0) return 'none (good)';
  if (applied.length === changes.length) return 'all (bad)';
  return labelsOf(changes, applied).join(', ');
}

/**
 * The verdict's headline: the culprit; "Not reproduced" when good and bad ran as fast (never "no single change
 * explains it" for a difference that was not there); else "No single change explains it" and why. `by` names what
 * measured (`replay`: "Not reproduced by replay").
 */
export function bisectHeadline(report: BisectReport, by?: string): string {
  const v = report.verdict;
  const names = labelsOf(report.changes, v.ids);
  switch (v.kind) {
    case 'culprit':
      return `Culprit: ${names[0]} — ${v.why}`;
    case 'group':
      return `No single change explains it: the group ${names.join(', ')} cannot be split — ${v.why}`;
    case 'not-reproduced':
      return `Not reproduced${by ? ` by ${by}` : ''}: ${v.why.replace(/^the difference is not reproduced: /, '')}`;
    case 'inconclusive':
      return `No single change explains it: inconclusive — ${v.why}`;
  }
}

function samplesText(st: StateStats, opts: RenderOptions): string {
  const slots = st.slots;
  return st.samples.map((v, i) => (slots ? `${fmt(v)} (${slotName(opts, slots[i]!)})` : fmt(v))).join(', ');
}

/** The report document: the budget, the verdict with its evidence, every round with every sample. */
export function renderBisectMarkdown(report: BisectReport, opts: RenderOptions = {}): string {
  const unit = opts.unit ? ` ${opts.unit}` : '';
  const out: string[] = [];
  out.push(`# Bisect${opts.subject ? `: ${opts.subject}` : ''}`, '');
  out.push(`**${bisectHeadline(report)}**`, '');
  if (report.confirmation) {
    const c = report.confirmation;
    out.push(
      `Confirmation (round ${c.round}): ${c.confirmed ? 'confirmed' : 'not confirmed'} — reverted ` +
        `${c.revertedRestores ? 'restores' : 'does not restore'} the speed` +
        `${c.revertedMatchesGood ? ' to the good level' : ' (still slower than good)'}, alone ` +
        `${c.aloneSlows ? 'slows it' : 'does not slow it'}.`,
      '',
    );
  }
  out.push(
    `Good ${fmt(report.good)}${unit}, bad ${fmt(report.bad)}${unit}. ${report.changes.length} ` +
      `change${report.changes.length === 1 ? '' : 's'}; ` +
      `budget ${report.budget.rounds} rounds (⌈log₂ ${report.changes.length}⌉ + 2), ${report.budget.runs} runs; ` +
      `used ${report.rounds.length} rounds, ${report.runs} runs. Each state ran ${report.repeats}× per round, ` +
      `interleaved${report.slots ? `, ${report.slots} runs side by side, each state moved to the next slot on its next run` : ''}; a difference is trusted at ≥ ${(report.threshold * 100).toFixed(0)} % between medians with ` +
      `spreads that do not overlap.`,
    '',
  );
  out.push('## Changes', '');
  for (const c of report.changes) out.push(`- ${c.label}${c.detail ? ` — ${c.detail}` : ''}`);
  out.push('');
  for (const r of report.rounds) {
    out.push(`## Round ${r.index}: ${r.kind}${r.extended ? ' (extended: a decision was unclear)' : ''}`, '');
    out.push(`| state | applied | median | spread | runs |`, `|---|---|---|---|---|`);
    for (const st of r.states) {
      out.push(
        `| ${st.name} | ${appliedText(report.changes, st.applied)} | ${fmt(st.median)}${unit} | ` +
          `${fmt(st.low)}–${fmt(st.high)} | ${samplesText(st, opts)} |`,
      );
    }
    out.push('');
    for (const c of r.comparisons) out.push(`- ${c.state} vs ${c.against}: ${formatChange(c.change)}, ${c.decision}`);
    out.push('', `Decision: ${r.decision}`, '');
  }
  return out.join('\n');
}

/** One terminal line per event, so the bisect can be followed live. */
export function bisectEventLine(
  e: BisectEvent,
  changes: readonly BisectChange[],
  opts: RenderOptions = {},
): string | undefined {
  const unit = opts.unit ? ` ${opts.unit}` : '';
  switch (e.kind) {
    case 'budget':
      return (
        `Bisecting ${e.changes} change${e.changes === 1 ? '' : 's'}: budget ${e.rounds} rounds (⌈log₂ ${e.changes}⌉ + 2), at most ${e.runs} runs` +
        (e.slots ? `, ${e.slots} side by side` : '')
      );
    case 'round':
      return (
        `Round ${e.index} (${e.round}): ` +
        e.states.map((s) => `${s.name} = ${appliedText(changes, s.applied)}`).join('; ')
      );
    case 'sample':
      return `  ${e.state}: ${fmt(e.value)}${unit}${opts.slotLabel ? ` on ${opts.slotLabel(e.slot)}` : ''}`;
    case 'extend':
      return `  unclear: ${'running each state again'}`;
    case 'decided':
      return `  → ${e.round.decision}`;
    case 'done':
      return bisectHeadline(e.report);
  }
}
