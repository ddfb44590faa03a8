import { posix } from 'node:path';
import { KnownGoodError } from '../errors';
import { sameArg } from '../args/diff';
import type { CheckpointFact, WhatChangedFacts } from '../whatChanged/facts';
import type { WhatChangedReport } from '../whatChanged/model';
import type { ReplayLaunch, ReplaySetup, SpeedSource } from './replay';
import { outputOf } from './replay';
import { launchSides, type LaunchChoices, type LaunchSides } from './sources';
import type { Stack } from './stacks';

/*
 * A replay's setup from What Changed?'s facts (issue 33 item 2): its two launches from a command the person confirms
 * or the records the run left (kg_record.py's, wandb's, LightningCLI's, Hydra's: core/replay/sources.ts), the
 * reference checkpoint the known-good launch's last, and the speed the report's own throughput key in the run's log.
 * What a person gives (`--steps`, flag names, the changes to bisect) overrides what is read.
 */

export interface SetupChoices extends LaunchChoices {
  readonly steps?: number;
  readonly only?: readonly string[];
  readonly reference?: string;
  readonly key?: string;
  readonly regex?: string;
  readonly runTimeoutMs?: number;
  readonly repeats?: number;
  readonly threshold?: number;
}

/** The replay's setup with where its launches came from (printed with the plan). */
export interface SourcedSetup extends ReplaySetup {
  readonly launches: LaunchSides;
}

/** The replay's setup from a What Changed? gathering and its report, or a usage error saying what is missing. */
export function setupFromFacts(facts: WhatChangedFacts, report: WhatChangedReport, c: SetupChoices = {}): SourcedSetup {
  const run = facts.run;
  if (run === null) throw new KnownGoodError('usage', 'replay needs a run folder');
  const { reference: ref, ...launches } = launchSides(facts, (nowTime) => referenceOf(facts, report, c, nowTime), c);
  const { good, now, stack } = launches;
  const speed = speedSource(facts, report, good, stack, c, launches.outputDir);
  const level = report.throughput.log;
  const steps = c.steps ?? windowSteps(facts);
  return {
    run,
    launches,
    good,
    now,
    reference: { path: ref.path, step: ref.step, label: ref.label },
    steps,
    speed,
    stack,
    ...(c.names ? { names: c.names } : {}),
    ...(c.only?.length ? { only: c.only } : {}),
    ...(c.runTimeoutMs !== undefined ? { runTimeoutMs: c.runTimeoutMs } : {}),
    ...(c.repeats !== undefined ? { repeats: c.repeats } : {}),
    ...(c.threshold !== undefined ? { threshold: c.threshold } : {}),
    ...(level && speed.kind === 'jsonl' && level.key === speed.key
      ? { before: { level: level.reference, key: level.key } }
      : {}),
  };
}

/**
 * The known-good launch's last checkpoint, both sides resume from: the one named, else the newest written before the
 * current launch began (its record's time), else the last at or before the log's latest restart, else the newest
 * whose args differ from the newest checkpoint's (the last the known-good launch wrote), else the report's reference.
 */
function referenceOf(
  facts: WhatChangedFacts,
  report: WhatChangedReport,
  c: SetupChoices,
  nowTime: number | null,
): CheckpointFact {
  const restarts = facts.log?.restarts ?? [];
  const restart = restarts[restarts.length - 1];
  const cks = facts.checkpoints;
  const ref = c.reference
    ? cks.find((k) => k.label === c.reference || k.path === c.reference)
    : nowTime !== null && cks.some((k) => k.mtime !== null)
      ? [...cks].reverse().find((k) => k.mtime !== null && k.mtime <= nowTime)
      : restart
        ? [...cks].reverse().find((k) => k.step <= (restart.prevStep ?? restart.step))
        : (lastOfEarlierArgs(facts) ?? cks.find((k) => k.label === report.reference.checkpoint?.label));
  if (!ref)
    throw new KnownGoodError(
      'usage',
      c.reference
        ? `replay: no checkpoint ${c.reference} in ${facts.run}`
        : `replay: no checkpoint at or before the restart${restart ? ` at step ${restart.step}` : ''} to resume from`,
    );
  return ref;
}

/** The newest checkpoint whose args differ from the newest one's: where the launch before the current one stopped. */
function lastOfEarlierArgs(facts: WhatChangedFacts): CheckpointFact | undefined {
  const read = facts.args.filter((a) => a.args !== null);
  const newest = read[read.length - 1];
  if (!newest) return undefined;
  const earlier = [...read].reverse().find((a) => !sameArg(a.args, newest.args));
  return earlier && facts.checkpoints.find((k) => k.label === earlier.label);
}

function speedSource(
  facts: WhatChangedFacts,
  report: WhatChangedReport,
  good: ReplayLaunch,
  stack: Stack,
  c: SetupChoices,
  outputDir?: string,
): SpeedSource {
  if (c.regex) return { kind: 'regex', regex: c.regex };
  const key = c.key ?? report.throughput.log?.key;
  const log = facts.log?.path;
  if (!key || !log || !log.endsWith('.jsonl'))
    throw new KnownGoodError(
      'usage',
      `replay reads each run's speed from its jsonl log or its output: ${log ? `${log} is not a jsonl log` : 'the run has no metrics log'}; give --regex RE (a pattern for the speed in what it prints)`,
    );
  const out = outputOf(stack, good.argv);
  // a record that says where the launch wrote (Hydra's output_dir) is believed over the folder it ran in
  const base = out === undefined ? (outputDir ?? good.cwd) : out.startsWith('/') ? out : posix.join(good.cwd, out);
  const rel = posix.relative(posix.normalize(base), log);
  if (rel.startsWith('..'))
    throw new KnownGoodError('usage', `the run's log ${log} is not under its output folder ${base}: give --regex RE`);
  return { kind: 'jsonl', rel, key };
}

/** Steps a run makes past the reference: ten logging intervals (half warm-up, half measured), at least 20. */
function windowSteps(facts: WhatChangedFacts): number {
  const x = facts.log?.reduction.series[0]?.x ?? [];
  const gaps: number[] = [];
  for (let i = 1; i < x.length; i++) if (x[i]! > x[i - 1]!) gaps.push(x[i]! - x[i - 1]!);
  gaps.sort((a, b) => a - b);
  const every = gaps[Math.floor(gaps.length / 2)] ?? 10;
  return Math.max(20, Math.round(every * 10));
}
