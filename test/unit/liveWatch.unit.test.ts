import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lastStep, liveRestartMark } from '../../src/core/dashboard/liveRestarts';
import type { RunData } from '../../src/core/dashboard/protocol';
import type { RunEntry, RunsListing } from '../../src/core/runs/listRuns';
import { launchRecordSchema } from '../../src/core/whatChanged/factsProbe';
import { liveRowText, pollableRuns, type LiveRunState } from '../../src/core/whatChanged/liveWatch';

/* What the polls' live-process state shows: the run's row in Remote Runs, the dashboard's restart mark, which runs. */

const T = 1_700_000_000;
const proc = (pid: number, env: Record<string, string> = {}) =>
  launchRecordSchema.parse({
    source: 'live',
    pid,
    time: T + pid,
    argv: ['python3', 'train.py', '--lr', '3e-4'],
    env: { HOME: '/home/u', HF_TOKEN: '<redacted>', ...env },
    libs: { 'libcudnn.so.9.1.0': '9.1.0', 'libnccl.so.2': '2', 'libtorch_cuda.so': '/venv/torch/lib/libtorch_cuda.so' },
  });
const state = (s: Partial<LiveRunState>): LiveRunState => ({
  hostId: 'gpu',
  run: '/ckpts/run',
  running: [],
  lookedAt: T * 1000,
  restarts: [],
  ...s,
});

void describe('live process on the run row and the dashboard', () => {
  void it('a running process: "running", and its command line, loaded CUDA libraries and speed variables in the tooltip', () => {
    const t = liveRowText(state({ running: [proc(41, { CUDA_LAUNCH_BLOCKING: '1' })] }), (T + 141) * 1000);
    assert.equal(t.description, 'running');
    const text = t.tooltip.join('\n');
    assert.match(text, /^ {2}PID 41 \(started 1 min ago\): python3 train\.py --lr 3e-4$/m);
    assert.match(text, /^ {2}loaded: libcudnn 9\.1\.0, libnccl 2, libtorch_cuda$/m);
    assert.match(text, /^ {2}environment: 3 variables \(secrets redacted\); CUDA_LAUNCH_BLOCKING=1$/m);
  });

  void it('a restart the polls saw: "running · restarted" while the new process runs, and both PIDs named', () => {
    const restart = { seenAt: T * 1000, before: proc(41), after: proc(57) };
    const t = liveRowText(state({ running: [proc(57)], restarts: [restart] }));
    assert.equal(t.description, 'running · restarted');
    assert.ok(t.tooltip.some((l) => /^Restarted: PID 41 → PID 57, seen .*; What Changed\? compares the two$/.test(l)));
    assert.equal(liveRowText(state({ restarts: [restart] })).description, undefined);
    assert.deepEqual(liveRowText(undefined), { tooltip: [] });
  });

  void it('the dashboard marks a restart where the old process points end', () => {
    const data: RunData = {
      run: {
        id: 'r',
        label: 'run',
        host: 'gpu',
        path: '/ckpts/run/log.jsonl',
        lines: 3,
        skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
      },
      series: [{ key: 'tok_s', x: [10, 20, 610], min: [1, 1, 1], max: [1, 1, 1], last: [1, 1, 1] }],
    };
    assert.equal(lastStep(data), 610);
    const restart = { seenAt: T * 1000, before: proc(41), after: proc(57) };
    assert.deepEqual(liveRestartMark(restart, lastStep(data)), {
      step: 610,
      time: T + 57,
      label: 'restart (new process, PID 41 → 57)',
    });
    assert.equal(liveRestartMark(restart, undefined), undefined, 'no point yet: nowhere to mark it');
  });

  void it('the runs a poll looks at: run folders with a log, most recently written first, at most 16', () => {
    const run = (i: number): RunEntry => ({
      name: `run${i}`,
      path: `run${i}`,
      kind: 'dir',
      size: 0,
      mtime: T,
      role: 'dir',
      children: [
        {
          name: 'train_log.jsonl',
          path: `run${i}/train_log.jsonl`,
          kind: 'file',
          size: 9,
          mtime: T + i,
          role: 'train-log',
          format: 'jsonl',
        },
      ],
    });
    const nolog: RunEntry = {
      name: 'empty',
      path: 'empty',
      kind: 'dir',
      size: 0,
      mtime: T + 99,
      role: 'dir',
      children: [],
    };
    const listing: RunsListing = {
      roots: [
        {
          root: '~/ckpts',
          path: '/home/u/ckpts',
          status: 'ok',
          message: '',
          signature: null,
          entry: {
            name: 'ckpts',
            path: '',
            kind: 'dir',
            size: 0,
            mtime: T,
            role: 'dir',
            children: [nolog, ...Array.from({ length: 20 }, (_, i) => run(i))],
          },
        },
      ],
      depth: 3,
      maxEntries: 1000,
      now: T,
      user: 'u',
      elapsedMs: 1,
    };
    const got = pollableRuns(listing);
    assert.equal(got.length, 16);
    assert.deepEqual(got[0], { run: '/home/u/ckpts/run19', log: '/home/u/ckpts/run19/train_log.jsonl' });
    assert.ok(!got.some((g) => g.run.endsWith('/empty')));
  });
});
