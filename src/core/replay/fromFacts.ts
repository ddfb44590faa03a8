import { posix } from 'node:path';
import { KnownGoodError } from '../errors';
import type { LaunchRecord } from '../whatChanged/factsProbe';
import type { WhatChangedFacts } from '../whatChanged/facts';
import type { WhatChangedReport } from '../whatChanged/model';
import type { ReplayLaunch, ReplaySetup, SpeedSource } from './replay';
import { outputOf } from './replay';
import { RECORDED_MAX } from './changes';
import { stackOf, type OverrideRole, type Stack } from './stacks';

/*
 * Where a replay's launch comes from (issue 33 item 2): the run's launch records (python/kg_record.py) as What
 * Changed? gathered them — the launch before the restart is the known-good one, the latest is now — with the
 * reference checkpoint the last one at or before that restart, and the speed the report's own throughput key in the
 * run's log. What a person gives (`--steps`, flag names, the changes to bisect) overrides what is read.
 */

export interface SetupChoices {
  readonly steps?: number;
  readonly names?: Partial<Record<OverrideRole, string>>;
  readonly stack?: Stack;
  readonly only?: readonly string[];
  readonly reference?: string;
  readonly key?: string;
  readonly regex?: string;
  readonly runTimeoutMs?: number;
  readonly repeats?: number;
  readonly threshold?: number;
}

function launchOf(r: LaunchRecord, what: string): ReplayLaunch {
  if (r.argv.length === 0 || r.cwd === null)
    throw new KnownGoodError('usage', `the ${what} launch record has no command line or folder: it cannot be replayed`);
  const cut = r.argv.find((w) => w.length >= RECORDED_MAX);
  if (cut !== undefined)
    throw new KnownGoodError(
      'usage',
      `the ${what} launch's command line was recorded cut (a word of ${RECORDED_MAX}+ characters): it cannot be replayed as it ran`,
    );
  return { argv: r.argv, env: r.env, cwd: r.cwd, gitHead: r.gitHead };
}

/** The replay's setup from a What Changed? gathering and its report, or a usage error saying what is missing. */
export function setupFromFacts(facts: WhatChangedFacts, report: WhatChangedReport, c: SetupChoices = {}): ReplaySetup {
  const run = facts.run;
  if (run === null) throw new KnownGoodError('usage', 'replay needs a run folder');
  const records = (facts.probe?.launches?.[0]?.records ?? []).filter((r) => r.source === 'kg_record');
  if (records.length < 2)
    throw new KnownGoodError(
      'usage',
      `replay needs the run's known-good launch and the current one: ${run} has ${records.length} recorded launch(es) ` +
        `(put python/kg_record.py in front of the training command: "Record Launches of This Run…")`,
    );
  const good = launchOf(records[records.length - 2]!, 'known-good');
  const now = launchOf(records[records.length - 1]!, 'latest');
  const restarts = facts.log?.restarts ?? [];
  const restart = restarts[restarts.length - 1];
  const cks = facts.checkpoints;
  const nowRecord = records[records.length - 1]!;
  // The known-good launch's last checkpoint: the newest written before the current launch began (its record's time),
  // else the last at or before the log's latest restart, else the report's reference.
  const ref = c.reference
    ? cks.find((k) => k.label === c.reference || k.path === c.reference)
    : nowRecord.time !== null && cks.some((k) => k.mtime !== null)
      ? [...cks].reverse().find((k) => k.mtime !== null && k.mtime <= nowRecord.time!)
      : restart
        ? [...cks].reverse().find((k) => k.step <= (restart.prevStep ?? restart.step))
        : cks.find((k) => k.label === report.reference.checkpoint?.label);
  if (!ref)
    throw new KnownGoodError(
      'usage',
      c.reference
        ? `replay: no checkpoint ${c.reference} in ${run}`
        : `replay: no checkpoint at or before the restart${restart ? ` at step ${restart.step}` : ''} to resume from`,
    );
  const stack = c.stack ?? stackOf(now.argv);
  const speed = speedSource(facts, report, good, stack, c);
  const level = report.throughput.log;
  const steps = c.steps ?? windowSteps(facts);
  return {
    run,
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

function speedSource(
  facts: WhatChangedFacts,
  report: WhatChangedReport,
  good: ReplayLaunch,
  stack: Stack,
  c: SetupChoices,
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
  const base = out === undefined ? good.cwd : out.startsWith('/') ? out : posix.join(good.cwd, out);
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
