import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { findMetricsLog, joinRemote } from '../../src/core/dashboard/sources';
import { liveTargetOf } from '../../src/core/metrics/liveThroughput';
import { metricsLogsOf } from '../../src/core/metrics/history';
import { isJsonlLog, metricsLogOf } from '../../src/core/metrics/metricsLog';
import type { RootListing, RunEntry } from '../../src/core/runs/listRuns';
import { childrenOf, rootNode, type RunsNode } from '../../src/core/runs/model';
import { decodeTarget } from '../../src/core/runs/targets';
import { listingsOf } from '../support/listings';

const T = 1_700_000_000;
const file = (path: string, mtime: number, extra: Partial<RunEntry> = {}): RunEntry => ({
  name: path.split('/').pop()!,
  path,
  kind: 'file',
  size: 100,
  mtime,
  role: 'other',
  ...extra,
});
const dir = (path: string, children: RunEntry[], extra: Partial<RunEntry> = {}): RunEntry => ({
  name: path === '' ? 'ckpts' : path.split('/').pop()!,
  path,
  kind: 'dir',
  size: 0,
  mtime: T,
  role: 'dir',
  children,
  ...extra,
});
const ckpt = (run: string, step: number): RunEntry =>
  dir(`${run}/step_${step}`, [file(`${run}/step_${step}/checkpoint.pt`, T, { role: 'weights' })], {
    role: 'checkpoint',
    step,
  });

const synthetic: RootListing = {
  root: '~/ckpts',
  path: '/home/me/ckpts',
  status: 'ok',
  message: '',
  signature: null,
  entry: dir('', [
    dir('run-a', [
      ckpt('run-a', 600),
      file('run-a/metrics.jsonl', T + 5000, { role: 'metrics' }),
      file('run-a/train_log.jsonl', T + 1000, { role: 'train-log' }),
    ]),
    dir('run-b', [ckpt('run-b', 200), dir('run-b/logs', [file('run-b/logs/eval.jsonl', T, { role: 'metrics' })])]),
    dir('run-c', [
      file('run-c/train.jsonl', T + 5, { role: 'train-log' }),
      file('run-c/metrics.jsonl', T + 1, { role: 'metrics' }),
    ]),
    dir('run-d', [ckpt('run-d', 1)]),
    dir('run-e', [file('run-e/metrics.csv', T, { role: 'metrics', format: 'csv' })]),
  ]),
};

function runNodes(listing: RootListing): RunsNode[] {
  const out: RunsNode[] = [];
  const walk = (n: RunsNode) => {
    if (n.kind === 'run') out.push(n);
    for (const c of childrenOf(n)) if (c.kind === 'run' || c.kind === 'folder') walk(c);
  };
  walk(rootNode('local', listing));
  return out;
}

/** Both consumers of the rule on every run of a listing: the dashboard's log, and live throughput's on the node. */
async function agree(listing: RootListing): Promise<number> {
  const listings = await listingsOf([listing]);
  let compared = 0;
  for (const node of runNodes(listing)) {
    if (node.kind !== 'run') continue;
    const log = findMetricsLog(node.entry);
    // a jsonl is tailed; any other log through the run's stitched history, whose newest file it shows
    const history = metricsLogsOf(node.entry).map((e) => joinRemote(listing.path, e.path));
    const expected = log && (isJsonlLog(log) ? joinRemote(listing.path, log.path) : history[history.length - 1]);
    const target = decodeTarget(node);
    assert.ok(target);
    const live = liveTargetOf(listings.resolve(target));
    assert.equal(live?.path, expected, node.remotePath);
    assert.deepEqual(live?.history, log && !isJsonlLog(log) ? history : undefined, node.remotePath);
    compared++;
  }
  return compared;
}

void describe('metricsLogOf: one rule for the dashboard and live throughput', () => {
  void it('the dashboard and live throughput pick the same log of every run (jsonl: the one live can tail)', async () => {
    assert.equal(findMetricsLog, metricsLogOf);
    assert.ok((await agree(synthetic)) >= 5);
  });

  void it('train_log*.jsonl first, then a metrics jsonl, then a train-log jsonl, then csv, nested logs count', () => {
    const runs = synthetic.entry!.children!;
    assert.deepEqual(
      runs.map((r) => metricsLogOf(r)?.path),
      ['run-a/train_log.jsonl', 'run-b/logs/eval.jsonl', 'run-c/metrics.jsonl', undefined, 'run-e/metrics.csv'],
    );
  });

  void it('they agree on the real training stacks too (listed by list_runs.py)', async () => {
    for (const root of ['test/fixtures/real', 'test/fixtures/real/hf']) {
      const listed = (
        JSON.parse(execFileSync('python3', ['python/list_runs.py', root], { encoding: 'utf8' })) as {
          roots: RootListing[];
        }
      ).roots[0]!;
      assert.ok((await agree(listed)) > 0, root);
    }
  });
});
