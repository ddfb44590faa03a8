import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { localHost, type HostSpec } from '../../src/core/hosts';
import type { ProbeCall, ProbeRunnerLike } from '../../src/core/probes/probe';
import { Listings } from '../../src/core/runs/listings';
import type { RunsListing } from '../../src/core/runs/listRuns';

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
