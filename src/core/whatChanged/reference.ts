import type { Baseline } from '../baselines/store';
import type { Changepoint } from './changepoints';
import { epochOf, link } from './causes/draft';
import type { CheckpointFact, WhatChangedFacts } from './facts';
import type { ReferencePoint } from './model';

/*
 * The known-good reference a report compares now with (a marked benchmark or baseline, else the checkpoint before the
 * shift, else the earliest), and the environment baseline of that time.
 */

/** The checkpoint of a time: the last saved by then, else (a reference older than every checkpoint) the earliest. */
function lastCheckpointAtOrBefore(cks: readonly CheckpointFact[], time: number): CheckpointFact | undefined {
  let best: CheckpointFact | undefined;
  for (const c of cks) if (c.mtime !== null && c.mtime <= time) best = c;
  return best ?? cks[0];
}

/** The known-good reference, in the order of preference; the reason is part of the answer. */
export function pickReference(
  facts: Pick<WhatChangedFacts, 'checkpoints' | 'env' | 'bench' | 'marks' | 'chosenBaselineId'>,
  main: { key: string; cp: Changepoint } | undefined,
): Omit<ReferencePoint, 'baseline'> {
  const cks = facts.checkpoints;
  const markedBench = facts.marks.benchId ? facts.bench.find((b) => b.id === facts.marks.benchId) : undefined;
  if (markedBench) {
    const time = epochOf(markedBench.at);
    const c = time !== null ? lastCheckpointAtOrBefore(cks, time) : undefined;
    return {
      kind: 'marked-bench',
      label: `benchmark ${markedBench.id}`,
      why: `the benchmark result marked known-good (${markedBench.at})`,
      checkpoint: c ? link(c) : null,
      time,
    };
  }
  const markedId = facts.chosenBaselineId ?? facts.marks.baselineId;
  const marked = markedId ? facts.env.baselines.find((b) => b.id === markedId) : undefined;
  if (marked) {
    const time = epochOf(marked.capturedAt);
    const c = time !== null ? lastCheckpointAtOrBefore(cks, time) : undefined;
    return {
      kind: 'marked-baseline',
      label: `baseline ${JSON.stringify(marked.label)}`,
      why: `${facts.chosenBaselineId ? 'the baseline asked for' : 'the baseline marked known-good'} (captured ${marked.capturedAt})`,
      checkpoint: c ? link(c) : null,
      time,
    };
  }
  if (main) {
    const before = [...cks].reverse().find((c) => c.step <= main.cp.at);
    if (before) {
      return {
        kind: 'changepoint',
        label: before.label,
        why: `the last checkpoint before ${main.key} shifted at step ${main.cp.at}`,
        checkpoint: link(before),
        time: before.mtime,
      };
    }
  }
  const first = cks[0];
  if (first) {
    return {
      kind: 'earliest',
      label: first.label,
      why: main
        ? `no checkpoint before the shift at step ${main.cp.at}: the earliest checkpoint`
        : 'no benchmark or baseline marked known-good and no changepoint: the earliest checkpoint',
      checkpoint: link(first),
      time: first.mtime,
    };
  }
  return {
    kind: 'none',
    label: 'none',
    why: 'no checkpoint, no marked baseline or benchmark',
    checkpoint: null,
    time: null,
  };
}

/** The environment baseline to compare now with: the marked one, else the newest captured by the reference time. */
export function pickBaseline(
  facts: Pick<WhatChangedFacts, 'env' | 'marks' | 'chosenBaselineId'>,
  refTime: number | null,
): { baseline: Baseline; why: string } | undefined {
  const all = facts.env.baselines; // newest first
  const wanted = facts.chosenBaselineId ?? facts.marks.baselineId;
  const marked = wanted ? all.find((b) => b.id === wanted) : undefined;
  if (marked) return { baseline: marked, why: facts.chosenBaselineId ? 'asked for' : 'marked known-good' };
  if (!all.length) return undefined;
  if (refTime !== null) {
    const before = all.find((b) => (epochOf(b.capturedAt) ?? Infinity) <= refTime);
    if (before) return { baseline: before, why: 'the newest captured by the reference time' };
  }
  return {
    baseline: all[all.length - 1]!,
    why: 'the oldest there is (captured after the reference: changes before it are not seen)',
  };
}

/** The reference as the report gives it: with the environment baseline of its time. */
export function withBaseline(
  ref: Omit<ReferencePoint, 'baseline'>,
  base: { baseline: Baseline; why: string } | undefined,
): ReferencePoint {
  return {
    ...ref,
    baseline: base
      ? { id: base.baseline.id, label: base.baseline.label, capturedAt: base.baseline.capturedAt, why: base.why }
      : null,
  };
}
