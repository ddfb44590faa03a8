import type { WhatChangedFacts } from '../facts';
import type { Changepoint } from '../changepoints';
import type { CosmeticChange, Suspect, WhatChangedReport } from '../model';

/*
 * Cause: the restart itself. The run's restarts (the stitched history's, with what is known to have changed at each),
 * and the restart a slowdown came with.
 */

/**
 * The report's restarts: what is known to have changed at each restart, the args whose change lies between the
 * checkpoints around it.
 */
export function restartsOf(
  facts: WhatChangedFacts,
  suspects: readonly Suspect[],
  unranked: readonly (CosmeticChange | Suspect)[],
): NonNullable<WhatChangedReport['restarts']> {
  return (facts.log?.restarts ?? []).map((r) => {
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
}

/** The restart the slowdown came with: the changepoint's launch, or the latest one when launches were compared. */
export function restartOfDrop(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined) {
  const rs = report.restarts ?? [];
  if (main?.cp.launch !== undefined) return rs.find((r) => r.step === main.cp.launch) ?? rs[rs.length - 1];
  return report.throughput.log?.byLaunch ? rs[rs.length - 1] : undefined;
}
