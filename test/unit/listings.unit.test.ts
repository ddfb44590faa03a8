import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { localHost, type HostSpec } from '../../src/core/hosts';
import type { ProbeCall, ProbeRunnerLike } from '../../src/core/probes/probe';
import { KnownGoodError } from '../../src/core/errors';
import { Listings } from '../../src/core/runs/listings';
import type { RunsListing } from '../../src/core/runs/listRuns';
import { entryNodeId } from '../../src/core/runs/model';
import { entry as e, listingsOf, rootListing } from '../support/listings';

const listing: RunsListing = { roots: [], depth: 3, maxEntries: 5000, now: 1_700_000_000, user: 'me', elapsedMs: 1 };

function listingsWith(host: HostSpec, answer: () => Promise<RunsListing>) {
  let calls = 0;
  const probes: ProbeRunnerLike = {
    async run<R>(_call: ProbeCall<R>) {
      calls++;
      return { value: (await answer()) as R, python: { executable: '/usr/bin/python3', version: '3.12' } };
    },
  };
  const events: (string | undefined)[] = [];
  const l = new Listings({
    find: (id) => (id === host.id ? host : undefined),
    session: () => ({ connected: true, probes }),
    depth: () => 3,
    maxEntries: () => 5000,
    log: () => undefined,
  });
  l.onDidChange((h) => events.push(h));
  return { l, events, calls: () => calls };
}

void describe('Listings: one listing per host, owned by the core', () => {
  void it('lists once for concurrent asks, tells listeners, and forgets on reload', async () => {
    const host = localHost(['/ckpts']);
    const { l, events, calls } = listingsWith(host, () => Promise.resolve(listing));
    const [a, b] = await Promise.all([l.ensure('local'), l.ensure('local')]);
    assert.equal(a, listing);
    assert.equal(b, listing);
    assert.equal(calls(), 1);
    assert.equal(l.get('local')?.state, 'connected');
    assert.ok(l.remoteNow('local'));
    assert.deepEqual(events, ['local', 'local']);
    l.reload('local');
    assert.equal(l.listing('local'), undefined);
    await l.ensure('local');
    assert.equal(calls(), 2);
  });

  void it('keeps the error of a failed listing and does not retry on its own', async () => {
    const host = localHost(['/ckpts']);
    const { l, calls } = listingsWith(host, () => Promise.reject(new Error('connection refused')));
    assert.equal(await l.ensure('local'), undefined);
    assert.equal(l.get('local')?.state, 'error');
    assert.equal(l.get('local')?.error, 'connection refused');
    l.startIfIdle(host);
    assert.equal(calls(), 1);
  });

  void it('a failure keeps its code and goes to `failed` (the VS Code layer logs it as an error and notifies)', async () => {
    const host = localHost(['/ckpts']);
    const failed: string[] = [];
    const err = new KnownGoodError('auth-failed', 'no key offered to me@box:22');
    const l = new Listings({
      find: () => host,
      session: () => ({ connected: false, probes: { run: () => Promise.reject(err) } }),
      depth: () => 3,
      maxEntries: () => 5000,
      log: (line) => failed.push(`log ${line}`),
      failed: (h, e) => failed.push(`${h.name}: ${(e as Error).message}`),
    });
    await l.ensure('local');
    assert.equal(l.get('local')?.errorCode, 'auth-failed');
    assert.deepEqual(failed, ['This machine: no key offered to me@box:22']);
  });

  void it('relist (Refresh, Retry) keeps the old listing shown until the new one arrives; a failed host lists anew', async () => {
    const host = localHost(['/ckpts']);
    let answer = () => Promise.resolve(listing);
    const { l, calls } = listingsWith(host, () => answer());
    await l.ensure('local');
    const next = { ...listing, now: listing.now + 60 };
    let release!: () => void;
    answer = () => new Promise((r) => (release = () => r(next)));
    l.relist('local');
    // expanded rows are built from this listing while the new one loads: they stay open
    assert.equal(l.listing('local'), listing);
    release();
    await l.ensure('local');
    assert.equal(l.listing('local'), next);
    assert.equal(calls(), 2);

    answer = () => Promise.reject(new Error('connection refused'));
    l.reload('local');
    await l.ensure('local');
    assert.equal(l.get('local')?.state, 'error');
    answer = () => Promise.resolve(listing);
    l.relist('local');
    assert.equal(l.get('local'), undefined);
    assert.equal(await l.ensure('local'), listing);
  });

  void it('a host without roots needs no probe; an unknown host has no listing', async () => {
    const { l, calls } = listingsWith(localHost([]), () => Promise.resolve(listing));
    assert.deepEqual((await l.ensure('local'))?.roots, []);
    assert.equal(calls(), 0);
    assert.equal(await l.ensure('nope'), undefined);
  });
});

void describe('Listings.resolve: a target as its listing has it (entry, root, step, format, metrics log)', () => {
  const root = rootListing(
    '/ck',
    [
      e('run-a', {
        kind: 'dir',
        role: 'dir',
        children: [
          e('run-a/train_log.jsonl', { role: 'train-log', format: 'jsonl' }),
          e('run-a/step_600', {
            kind: 'dir',
            role: 'checkpoint',
            step: 600,
            format: 'hf',
            children: [e('run-a/step_600/trainer_state.json', { role: 'metrics', format: 'hf-trainer-state' })],
          }),
          e('run-a/checkpoint_3', { kind: 'dir', role: 'checkpoint', step: 3, stepIsIndex: true, children: [] }),
        ],
      }),
      e('run-deep', { kind: 'dir', role: 'dir', listed: false }),
    ],
    '~/ck',
  );

  void it('gives the entry, its root, step, format and metrics log; nothing for a path no listing holds', async () => {
    const l = await listingsOf([root]);
    const run = l.resolve({ kind: 'run', hostId: 'local', path: '/ck/run-a' });
    assert.equal(run?.entry.name, 'run-a');
    assert.equal(run?.root.root, '~/ck');
    assert.deepEqual(run?.metricsLog?.path, '/ck/run-a/train_log.jsonl');
    const ckpt = l.resolve({ kind: 'checkpoint', hostId: 'local', path: '/ck/run-a/step_600' });
    assert.deepEqual([ckpt?.step, ckpt?.format, ckpt?.inCheckpoint, ckpt?.metricsLog], [600, 'hf', false, undefined]);
    // a save counter is no training step
    assert.equal(l.resolve({ kind: 'checkpoint', hostId: 'local', path: '/ck/run-a/checkpoint_3' })?.step, undefined);
    const part = l.resolve({ kind: 'log', hostId: 'local', path: '/ck/run-a/step_600/trainer_state.json' });
    assert.deepEqual(
      [part?.inCheckpoint, part?.format, part?.metricsLog?.path],
      [true, 'hf-trainer-state', '/ck/run-a/step_600/trainer_state.json'],
    );
    assert.equal(l.resolve({ kind: 'root', hostId: 'local', path: '/ck' })?.entry, root.entry);
    assert.equal(l.resolve({ kind: 'run', hostId: 'local', path: '/ck/gone' }), undefined);
    assert.equal(l.resolve({ kind: 'run', hostId: 'local', path: '/elsewhere/run-a' }), undefined);
    assert.equal(l.resolve({ kind: 'host', hostId: 'local' }), undefined);
    assert.equal(l.resolve({ kind: 'run', hostId: 'other', path: '/ck/run-a' }), undefined);
  });

  void it('a folder listed later is its grafted entry; nested roots resolve in the innermost', async () => {
    const deep = rootListing('/ck/run-deep', [e('train_log.jsonl', { role: 'train-log' })]);
    const l = await listingsOf([root], deep);
    const folder = root.entry!.children![1]!;
    assert.equal(l.resolve({ kind: 'run', hostId: 'local', path: '/ck/run-deep' })?.metricsLog, undefined);
    await l.listFolder('local', entryNodeId('local', root, folder), folder, '/ck/run-deep');
    assert.equal(
      l.resolve({ kind: 'run', hostId: 'local', path: '/ck/run-deep' })?.metricsLog?.path,
      '/ck/run-deep/train_log.jsonl',
    );
    assert.equal(
      l.resolve({ kind: 'log', hostId: 'local', path: '/ck/run-deep/train_log.jsonl' })?.entry.role,
      'train-log',
    );
    const nested = await listingsOf([root, { ...deep, root: 'deep' }]);
    assert.equal(nested.resolve({ kind: 'run', hostId: 'local', path: '/ck/run-deep' })?.root.root, 'deep');
  });
});
