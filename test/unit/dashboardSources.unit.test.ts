import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { baselineSchema, type Baseline, type ThroughputResult } from '../../src/core/baselines/store';
import { initMessageSchema, type RunData } from '../../src/core/dashboard/protocol';
import {
  benchHistory,
  findMetricsLog,
  nowMayFallInside,
  runDrift,
  runSpanOf,
  isMetricsLog,
  parseRunId,
  runCheckpoints,
  runId,
  runsWithLogs,
  sourceOfLog,
  sourceOfPath,
  sourceOfRun,
  tokensPerSecond,
} from '../../src/core/dashboard/sources';
import { computeDrift, driftCount } from '../../src/core/baselines/drift';
import type { EnvSnapshot } from '../../src/core/baselines/envProbe';
import type { RootListing, RunEntry, RunsListing } from '../../src/core/runs/listRuns';
import { cloneSnapshot, h200KnownGood, h200Now } from '../fixtures/env';

const T = 1_700_000_000;

function file(path: string, mtime: number, extra: Partial<RunEntry> = {}): RunEntry {
  return { name: path.split('/').pop()!, path, kind: 'file', size: 100, mtime, role: 'other', ...extra };
}
function dir(path: string, children: RunEntry[], extra: Partial<RunEntry> = {}): RunEntry {
  return {
    name: path === '' ? 'ckpts' : path.split('/').pop()!,
    path,
    kind: 'dir',
    size: 0,
    mtime: T,
    role: 'dir',
    children,
    ...extra,
  };
}
function ckpt(run: string, step: number, mtime: number): RunEntry {
  const p = `${run}/step_${step}`;
  return dir(p, [file(`${p}/checkpoint.pt`, mtime, { role: 'weights' })], { role: 'checkpoint', step, mtime });
}

const runA = dir('run-a', [
  ckpt('run-a', 690, T + 690),
  ckpt('run-a', 600, T + 600),
  file('run-a/metrics.jsonl', T + 5000, { role: 'metrics' }),
  file('run-a/train_log.jsonl', T + 1000, { role: 'train-log' }),
  file('run-a/train_stdout.log', T + 1000, { role: 'stdout' }),
  dir('run-a/old', [ckpt('run-a/old', 100, T + 100)]),
]);
const runB = dir('run-b', [
  ckpt('run-b', 200, T + 200),
  dir('run-b/logs', [file('run-b/logs/eval.jsonl', T + 9000, { role: 'metrics' })]),
]);
const runC = dir('run-c', [ckpt('run-c', 1, T)]);
const rootListing: RootListing = {
  root: '~/ckpts',
  path: '/home/me/ckpts',
  status: 'ok',
  message: '',
  signature: null,
  entry: dir('', [runA, runB, runC]),
};
const listing: RunsListing = {
  roots: [rootListing],
  depth: 3,
  maxEntries: 5000,
  now: T + 10_000,
  user: 'me',
  elapsedMs: 1,
};

describe('dashboard sources: runs and logs from the listing', () => {
  it('prefers train_log*.jsonl over a newer metrics jsonl, and finds a log one folder down', () => {
    assert.equal(findMetricsLog(runA)?.name, 'train_log.jsonl');
    assert.equal(findMetricsLog(runB)?.path, 'run-b/logs/eval.jsonl');
    assert.equal(findMetricsLog(runC), undefined);
    // Not inside a checkpoint, even when it is named like a train log.
    const inCkpt = dir('r', [
      dir('r/step_1', [file('r/step_1/train_log.jsonl', T, { role: 'train-log' })], { role: 'checkpoint' }),
    ]);
    assert.equal(findMetricsLog(inCkpt), undefined);
  });

  it("Open Dashboard on a log file: every format the reducer reads (Lightning's metrics.csv included)", () => {
    const logs = [
      file('v/metrics.csv', T, { role: 'metrics', format: 'csv' }),
      file('v/events.out.tfevents.1.vm.1.0', T, { role: 'metrics', format: 'tensorboard' }),
      file('c/trainer_state.json', T, { role: 'metrics', format: 'hf-trainer-state' }),
      file('r/eval.jsonl', T, { role: 'metrics', format: 'jsonl' }),
      file('r/train_log.jsonl', T, { role: 'train-log' }),
    ];
    assert.deepEqual(
      logs.map((e) => [e.name, isMetricsLog(e)]),
      logs.map((e) => [e.name, true]),
    );
    const others = [
      file('v/hparams.yaml', T, { role: 'config' }),
      file('r/train_stdout.log', T, { role: 'stdout' }),
      file('r/notes.csv', T),
      dir('r/logs', []),
    ];
    assert.deepEqual(
      others.map((e) => isMetricsLog(e)),
      [false, false, false, false],
    );
  });

  it('a run source names the log by its absolute path and the run by its folder', () => {
    const s = sourceOfRun('local', rootListing, runA)!;
    assert.equal(s.logPath, '/home/me/ckpts/run-a/train_log.jsonl');
    assert.equal(s.label, 'run-a');
    assert.equal(sourceOfRun('local', rootListing, runC), undefined);
    const f = sourceOfLog('local', rootListing, runB.children![1]!.children![0]!);
    assert.equal(f.logPath, '/home/me/ckpts/run-b/logs/eval.jsonl');
    assert.equal(f.run?.path, 'run-b/logs');
  });

  it('lists runs with logs newest log first (for a host node and the palette)', () => {
    const runs = runsWithLogs('h', listing);
    assert.deepEqual(
      runs.map((r) => r.logPath),
      ['/home/me/ckpts/run-b/logs/eval.jsonl', '/home/me/ckpts/run-a/train_log.jsonl'],
    );
    // Each log belongs to the folder below the root, not to the root (which also "holds" it) nor to logs/.
    assert.deepEqual(
      runs.map((r) => [r.label, r.run?.path]),
      [
        ['run-b', 'run-b'],
        ['run-a', 'run-a'],
      ],
    );
    const own = runsWithLogs('h', {
      ...listing,
      roots: [{ ...rootListing, entry: dir('', [file('train_log.jsonl', T, { role: 'train-log' })]) }],
    });
    assert.deepEqual(
      own.map((r) => [r.label, r.run?.path]),
      [['~/ckpts', '']],
    );
  });

  it('finds a log path again after a reload, with its run and checkpoints', () => {
    const s = sourceOfPath('h', listing, '/home/me/ckpts/run-a/train_log.jsonl');
    assert.equal(s.label, 'run-a');
    assert.equal(s.run?.path, 'run-a');
    assert.equal(runCheckpoints(s, 'id').length, 3);
    const gone = sourceOfPath('h', listing, '/elsewhere/train_log.jsonl', 'kept');
    assert.deepEqual(gone, { hostId: 'h', logPath: '/elsewhere/train_log.jsonl', label: 'kept' });
    assert.equal(sourceOfPath('h', undefined, '/x/y/metrics.jsonl').label, 'metrics.jsonl');
  });

  it("lists a run's checkpoints oldest step first, nested folders included, as protocol checkpoints", () => {
    const s = sourceOfRun('h', rootListing, runA)!;
    const id = runId('h', s.logPath);
    const cks = runCheckpoints(s, id);
    assert.deepEqual(
      cks.map((c) => [c.checkpoint.label, c.checkpoint.step, c.checkpoint.path]),
      [
        ['step_100', 100, '/home/me/ckpts/run-a/old/step_100'],
        ['step_600', 600, '/home/me/ckpts/run-a/step_600'],
        ['step_690', 690, '/home/me/ckpts/run-a/step_690'],
      ],
    );
    assert.ok(cks.every((c) => c.checkpoint.run === id && c.entry.role === 'checkpoint'));
  });

  it("accelerate's checkpoint_N: ordered by its save counter, placed by no step", () => {
    const save = (n: number) =>
      dir(`acc/checkpoints/checkpoint_${n}`, [], {
        role: 'checkpoint',
        format: 'accelerate',
        step: n,
        stepIsIndex: true,
      });
    const acc = dir('acc', [
      file('acc/train_log.jsonl', T, { role: 'train-log' }),
      dir('acc/checkpoints', [save(1), save(0)]),
    ]);
    const s = sourceOfRun('h', { ...rootListing, entry: dir('', [acc]) }, acc)!;
    assert.deepEqual(
      runCheckpoints(s, 'id').map((c) => [c.checkpoint.label, c.checkpoint.step]),
      [
        ['checkpoint_0', null],
        ['checkpoint_1', null],
      ],
    );
  });

  it('run ids round-trip the host and the path (also with colons and quotes)', () => {
    const id = runId('ssh-config:gpu:box', '/a/"b":c.jsonl');
    assert.deepEqual(parseRunId(id), { hostId: 'ssh-config:gpu:box', logPath: '/a/"b":c.jsonl' });
    assert.equal(parseRunId('gpu-box:/workspace/runs/x'), undefined);
  });
});

function result(id: string, at: string, extra: Record<string, unknown>): ThroughputResult {
  return { id, at, kind: 'throughput', baselineId: null, ...extra };
}

function baseline(
  label: string,
  capturedAt: string,
  snapshot = h200KnownGood,
  throughput?: ThroughputResult[],
): Baseline {
  return baselineSchema.parse({
    schema: 1,
    id: label.replace(/\W/g, '-'),
    label,
    host: 'ssh:me@gpu:22',
    capturedAt,
    snapshot,
    ...(throughput ? { throughput } : {}),
  });
}

describe('dashboard sources: benchmark history and drift', () => {
  it('reads tokens/s from a number or the probe stats', () => {
    assert.equal(tokensPerSecond({ tokensPerS: 41234.5 }), 41234.5);
    assert.equal(tokensPerSecond({ tokensPerSec: { median: 12800, min: 1, max: 2 } }), 12800);
    assert.equal(tokensPerSecond({ result: { tokensPerSec: { median: 7 } } }), 7);
    assert.equal(tokensPerSecond({ tokensPerS: Number.NaN }), undefined);
    assert.equal(tokensPerSecond({}), undefined);
  });

  it('orders the history by time, marks the baseline run and adds it when only the baseline has it', () => {
    const base = result('b1', '2026-01-02T00:00:00Z', { tokensPerS: 40000 });
    const points = benchHistory(
      [
        result('r2', '2026-01-03T00:00:00Z', { tokensPerS: 35000, label: 'after the lr change' }),
        result('r0', '2026-01-01T00:00:00Z', { tokensPerSec: { median: 41000 } }),
        result('bad', 'not a time', { tokensPerS: 1 }),
        result('none', '2026-01-04T00:00:00Z', {}),
      ],
      baseline('good run', '2026-01-02T00:00:00Z', h200KnownGood, [base]),
    );
    assert.deepEqual(
      points.map((p) => [p.tokPerS, p.baseline, p.label]),
      [
        [41000, false, undefined],
        [40000, true, 'baseline "good run"'],
        [35000, false, 'after the lr change'],
      ],
    );
    assert.equal(points[1]!.time, Date.parse('2026-01-02T00:00:00Z') / 1000);
    // What the panel sends must pass the protocol.
    assert.ok(
      initMessageSchema.safeParse({ type: 'init', runs: [], checkpoints: [], drift: null, bench: points }).success,
    );
  });
});

/** When `iso` was captured, as Unix seconds. */
const at = (iso: string) => Date.parse(iso) / 1000;
/** A snapshot of now captured at `iso` (the panel's, cached for 5 minutes). */
const nowAt = (iso: string, from = h200Now): EnvSnapshot => ({ ...cloneSnapshot(from), capturedAt: iso });

/** A run that logged from 10:00 to 12:00 on 2026-03-01 (UTC). */
const run = { id: 'r1', label: 'run-a', span: { from: at('2026-03-01T10:00:00Z'), to: at('2026-03-01T12:00:00Z') } };

describe("dashboard drift: limited to the run's time (issue 32 item 6)", () => {
  const before = baseline('before the run', '2026-02-20T09:00:00Z', h200KnownGood);
  const first = baseline('at launch', '2026-03-01T10:05:00Z', h200KnownGood);
  const second = baseline('mid-run', '2026-03-01T11:00:00Z', h200Now);
  const after = baseline('after the run', '2026-03-05T09:00:00Z', h200KnownGood);

  it('compares the first snapshot captured during the run with the last, never one from before or after it', () => {
    // the newest baseline and now are both after the run (the old panel compared those two: the host's drift)
    const d = runDrift(run, [before, first, second, after], nowAt('2026-03-06T08:00:00Z'));
    assert.equal(d.drift?.baseline, 'baseline "at launch" → baseline "mid-run"');
    assert.ok(d.drift.changes > 0);
    assert.equal(d.drift.changes, driftCount(computeDrift(h200KnownGood, h200Now)));
    assert.match(d.drift.text, /between baseline "at launch" and baseline "mid-run"/);
    assert.doesNotMatch(d.drift.text, /before the run|after the run|now/);
    assert.deepEqual(d.span, run.span);
    assert.match(d.note, /^2 snapshots captured during this run/);
    // the same baselines, another run's time: another answer
    const later = { ...run, span: { from: at('2026-03-04T00:00:00Z'), to: at('2026-03-06T00:00:00Z') } };
    assert.equal(runDrift(later, [before, first, second, after], undefined).drift, null);
  });

  it('no baseline captured during the run: says so, and no drift from another time', () => {
    const d = runDrift(run, [before, after], nowAt('2026-03-06T08:00:00Z'));
    assert.equal(d.drift, null);
    assert.match(d.note, /^No baseline captured during this run\. /);
    assert.match(d.note, /The host's newest, "after the run", is from 2026-03-05/);
    assert.equal(runDrift(run, [], undefined).drift, null);
    assert.match(runDrift(run, [], undefined).note, /^No baseline captured during this run/);
  });

  it('one baseline during the run: nothing to compare it with (unless now was captured during the run too)', () => {
    const only = runDrift(run, [before, first, after], undefined);
    assert.equal(only.drift, null);
    assert.match(
      only.note,
      /^Only baseline "at launch" \(2026-03-01 .*\) was captured during this run: nothing to compare it with\.$/,
    );
    // a live run: the panel's snapshot of now was taken while it logged (its last point is later)
    const live = runDrift(run, [before, first, after], nowAt('2026-03-01T11:58:00Z'));
    assert.match(live.drift?.baseline ?? '', /^baseline "at launch" → now \(2026-03-01 \d\d:58:00/);
    assert.ok(live.drift!.changes > 0);
    assert.match(live.drift!.text, /and now \(\d{4}-\d\d-\d\d \d\d:58:00 \(UTC/);
    // now alone in the run's time: named once, with its time once
    const alone = runDrift(run, [before], nowAt('2026-03-01T11:58:00Z'));
    assert.equal(alone.drift, null);
    assert.match(alone.note, /^Only now \(\d{4}-\d\d-\d\d \d\d:58:00 \([^)]*\)\) was captured during this run: /);
  });

  it('a compare in the same second as a capture: counted once only when it is the same snapshot', () => {
    // capturedAt is whole seconds: the baseline just captured is also the panel's now (the same capture) ...
    const same = runDrift(run, [first], nowAt('2026-03-01T10:05:00Z', h200KnownGood));
    assert.equal(same.drift, null);
    assert.match(same.note, /^Only baseline "at launch"/);
    // ... but a compare within that second took a snapshot of its own, and what changed between them is drift
    const other = runDrift(run, [first], nowAt('2026-03-01T10:05:00Z'));
    assert.match(other.drift?.baseline ?? '', /^baseline "at launch" → now /);
    assert.equal(other.drift!.changes, driftCount(computeDrift(h200KnownGood, h200Now)));
  });

  it("the 5-minute cache of now: a snapshot taken before the run began, or after its last point, is not the run's", () => {
    // cached 3 minutes before the run's first point (the panel opened on the host just before the launch)
    const early = runDrift(run, [first], nowAt('2026-03-01T09:57:00Z'));
    assert.equal(early.drift, null);
    assert.match(early.note, /^Only baseline "at launch"/);
    // cached after the run's last point: the run ended before it
    assert.equal(runDrift(run, [first], nowAt('2026-03-01T12:00:01Z')).drift, null);
    // a baseline just captured is the cached now too (the same capture): one snapshot, not a drift from itself
    const same = runDrift(run, [first], nowAt('2026-03-01T10:05:00Z', h200KnownGood));
    assert.equal(same.drift, null);
    assert.match(same.note, /^Only baseline "at launch"/);
    // at the edges it counts: the run logged at that second
    assert.ok(runDrift(run, [first], nowAt('2026-03-01T12:00:00Z')).drift);
    // a new one is taken only for a run that may still grow past it: one whose last point is within the cache's life
    const end = run.span.to;
    assert.equal(nowMayFallInside([run.span], end + 299, 300), true);
    assert.equal(nowMayFallInside([run.span], end + 301, 300), false);
    assert.equal(nowMayFallInside([undefined, run.span], end + 301, 300), false);
    assert.equal(nowMayFallInside([undefined, run.span], end + 10, 300), true);
  });

  it("a deep baseline against now is compared without its deep part (the panel's capture does not import torch)", () => {
    const deep = baseline('deep', '2026-03-01T10:30:00Z', { ...cloneSnapshot(h200KnownGood), deep: true });
    const d = runDrift(run, [deep], nowAt('2026-03-01T11:00:00Z', h200KnownGood));
    assert.equal(d.drift?.changes, 0, d.drift?.text);
  });

  it('a log without wall times has no time: no baseline placed in it', () => {
    const d = runDrift({ ...run, span: undefined }, [first, second], nowAt('2026-03-01T11:00:00Z'));
    assert.equal(d.drift, null);
    assert.equal(d.span, null);
    assert.match(d.note, /no wall times/);
  });

  it("a run's span: its first and last wall time over every series, and its restarts'", () => {
    const data: RunData = {
      run: {
        id: 'r1',
        label: 'run-a',
        host: 'h',
        path: '/p',
        lines: 3,
        skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
        restarts: [{ step: 5, time: 90, label: 'restart (time-gap)' }],
      },
      series: [
        { key: 'loss', x: [1, 2], min: [1, 1], max: [1, 1], last: [1, 1], t: [100, 200] },
        { key: 'tok_s', x: [3, 9], min: [1, 1], max: [1, 1], last: [1, 1], t: [150, 400] },
      ],
    };
    assert.deepEqual(runSpanOf(data), { from: 90, to: 400 });
    assert.equal(
      runSpanOf({ ...data, run: { ...data.run, restarts: [] }, series: [{ ...data.series[0]!, t: undefined }] }),
      undefined,
    );
  });
});

describe('dashboard page for the panel', () => {
  it("accepts VS Code's real cspSource (several sources, 'self') and still refuses keywords slipped into it", async () => {
    const { dashboardCsp, dashboardHtml } = await import('../../webview/src/html');
    const opts = { nonce: 'abcDEF0123456789xyzABC', scriptUri: 'https://x/dashboard.js', cssUris: [] };
    const html = dashboardHtml({ ...opts, cspSource: "'self' https://*.vscode-cdn.net" });
    assert.ok(html.includes(dashboardCsp("'self' https://*.vscode-cdn.net", opts.nonce).replace(/'/g, '&#39;')));
    assert.match(
      dashboardCsp("'self' https://*.vscode-cdn.net", opts.nonce),
      /^default-src 'none'; img-src 'self' https:\/\/\*\.vscode-cdn\.net data:;.*script-src 'nonce-abcDEF0123456789xyzABC';/,
    );
    assert.throws(() => dashboardHtml({ ...opts, cspSource: "'self' 'unsafe-eval'" }), /cspSource/);
    assert.throws(() => dashboardHtml({ ...opts, cspSource: 'https://a; script-src *' }), /cspSource/);
  });
});

void describe('metrics logs of real training stacks (test/fixtures/real, listed by the real probe)', () => {
  const list = (root: string): RunEntry =>
    (
      JSON.parse(execFileSync('python3', ['python/list_runs.py', root], { encoding: 'utf8' })) as {
        roots: RootListing[];
      }
    ).roots[0]!.entry!;
  const real = list('test/fixtures/real');
  // The Trainer's runs/<date>/ sits one folder deeper than the other stacks: listed from the run's parent, as a user
  // would point a root at an output folder.
  const hf = list('test/fixtures/real/hf');
  const at = (rel: string): RunEntry => {
    let cur: RunEntry | undefined = rel.startsWith('hf/') ? hf : real;
    if (rel.startsWith('hf/')) rel = rel.slice(3);
    for (const part of rel.split('/')) cur = cur?.children?.find((c) => c.name === part);
    assert.ok(cur, rel);
    return cur;
  };

  void it("finds Lightning's metrics.csv from the version folder and from the logger's folder", () => {
    assert.equal(
      findMetricsLog(at('lightning/lightning_logs/version_1'))?.path,
      'lightning/lightning_logs/version_1/metrics.csv',
    );
    assert.match(findMetricsLog(at('lightning/lightning_logs'))?.path ?? '', /version_\d\/metrics\.csv$/);
  });

  void it("finds the Trainer's TensorBoard log, else the newest checkpoint's trainer_state.json", () => {
    assert.match(findMetricsLog(at('hf/run-hf'))?.path ?? '', /^run-hf\/runs\/[^/]+\/events\.out\.tfevents\./);
    const run = at('hf/run-hf');
    const withoutTb: RunEntry = { ...run, children: run.children!.filter((c) => c.name !== 'runs') };
    assert.equal(findMetricsLog(withoutTb)?.path, 'run-hf/checkpoint-4/trainer_state.json');
  });

  void it('finds a TensorBoard event file', () => {
    assert.match(findMetricsLog(at('tensorboard/run-tb'))?.name ?? '', /^events\.out\.tfevents\./);
    assert.equal(findMetricsLog(at('torch/run-plain')), undefined);
  });
});
