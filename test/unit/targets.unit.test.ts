import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RootListing, RunEntry } from '../../src/core/runs/listRuns';
import { childrenOf, hostChildren, hostNode, rootNode } from '../../src/core/runs/model';
import { decodeTarget, narrowTarget } from '../../src/core/runs/targets';
import { toArgsUri } from '../../src/core/args/uri';
import { toRemoteFileUri } from '../../src/core/remote/readFile';

const NOW_S = 1_700_000_000;
const file = (path: string, extra: Partial<RunEntry> = {}): RunEntry => ({
  name: path.split('/').pop()!,
  path,
  kind: 'file',
  size: 10,
  mtime: NOW_S,
  role: 'other',
  ...extra,
});
const ckpt: RunEntry = {
  name: 'step_100',
  path: 'runA/step_100',
  kind: 'dir',
  size: 10,
  mtime: NOW_S,
  role: 'checkpoint',
  step: 100,
  format: 'step',
  children: [file('runA/step_100/checkpoint.pt', { role: 'weights', format: 'torch' })],
};
const runA: RunEntry = {
  name: 'runA',
  path: 'runA',
  kind: 'dir',
  size: 20,
  mtime: NOW_S,
  role: 'dir',
  children: [ckpt, file('runA/train_log.jsonl', { role: 'train-log' })],
};
const top: RunEntry = { name: 'ckpts', path: '', kind: 'dir', size: 20, mtime: NOW_S, role: 'dir', children: [runA] };
const root: RootListing = { root: '/ckpts', path: '/ckpts', status: 'ok', message: '', signature: '1:1', entry: top };

void describe('CommandTarget: one decoder of what a command was invoked on', () => {
  const hostId = 'settings:gpu box';
  const r = rootNode(hostId, root);
  const run = childrenOf(r).find((n) => n.kind === 'run')!;
  const kids = childrenOf(run);
  const checkpoint = kids.find((n) => n.kind === 'checkpoint')!;
  const log = kids.find((n) => n.kind === 'file')!;

  void it('every Remote Runs node, messages included, decodes to a target that names its host', () => {
    const host = hostNode({ id: hostId, label: 'gpu box', state: 'error', error: 'refused' });
    const message = hostChildren({ id: hostId, label: 'gpu box', state: 'error', error: 'refused' }, undefined)[0]!;
    assert.deepEqual(decodeTarget(host), { kind: 'host', hostId });
    assert.deepEqual(decodeTarget(message), { kind: 'host', hostId });
    assert.deepEqual(decodeTarget(r), { kind: 'root', hostId, path: '/ckpts' });
    assert.deepEqual(decodeTarget(run), { kind: 'run', hostId, path: '/ckpts/runA' });
    assert.deepEqual(decodeTarget(checkpoint), {
      kind: 'checkpoint',
      hostId,
      path: '/ckpts/runA/step_100',
      label: 'step_100',
    });
    assert.deepEqual(decodeTarget(log), {
      kind: 'log',
      hostId,
      path: '/ckpts/runA/train_log.jsonl',
      label: 'train_log.jsonl',
    });
  });

  void it('palette calls, feature nodes and document URIs decode the same way', () => {
    assert.deepEqual(decodeTarget({ hostId }), { kind: 'host', hostId });
    assert.deepEqual(decodeTarget({ hostId, baselineId: 'b1' }), { kind: 'baseline', hostId, baselineId: 'b1' });
    assert.deepEqual(decodeTarget({ hostId, logPath: '/w/log.jsonl' }), { kind: 'log', hostId, path: '/w/log.jsonl' });
    const section = { kind: 'section', target: { kind: 'baseline', hostId, baselineId: 'b2' } };
    assert.deepEqual(decodeTarget(section), { kind: 'baseline', hostId, baselineId: 'b2' });
    const args = toArgsUri({ hostId, path: '/w/step_1/ck.pt', label: 'step_1', view: 'args' });
    assert.deepEqual(decodeTarget(args), { kind: 'checkpoint', hostId, path: '/w/step_1/ck.pt', label: 'step_1' });
    const remote = toRemoteFileUri({ hostId, path: '/w/out.log', maxBytes: 10 });
    assert.deepEqual(decodeTarget(remote), { kind: 'log', hostId, path: '/w/out.log' });
    for (const junk of [undefined, null, 'x', 3, {}, { hostId: '' }, { scheme: 'file', path: '/x', query: '' }])
      assert.equal(decodeTarget(junk), undefined);
  });

  void it('a command that takes hosts gets the host of any target; others get only their kinds', () => {
    const t = decodeTarget(checkpoint);
    assert.deepEqual(narrowTarget(t, ['host']), { kind: 'host', hostId });
    assert.equal(narrowTarget(t, ['baseline']), undefined);
    assert.equal(narrowTarget(t, ['checkpoint'])?.kind, 'checkpoint');
    assert.equal(narrowTarget(undefined, ['host']), undefined);
  });
});
