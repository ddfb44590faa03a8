import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeferredChanges } from '../../src/core/util/deferredChanges';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

void describe('DeferredChanges: tree change events never land while children are being fetched', () => {
  void it('delivers at once when nothing is in flight', () => {
    const got: (string | undefined)[] = [];
    const c = new DeferredChanges<string>((x) => got.push(x));
    c.fire('host');
    c.fire();
    assert.deepEqual(got, ['host', undefined]);
  });

  void it('holds events during a fetch and delivers each item once after the last fetch settles', async () => {
    const got: (string | undefined)[] = [];
    const c = new DeferredChanges<string>((x) => got.push(x));
    const a = deferred<number>();
    const b = deferred<number>();
    const fa = c.during(a.promise);
    const fb = c.during(b.promise);
    c.fire('host');
    c.fire('host');
    c.fire('job');
    assert.equal(c.pending, 2);
    a.resolve(1);
    assert.equal(await fa, 1);
    await sleep(5);
    assert.deepEqual(got, [], 'delivered while another fetch was in flight');
    b.reject(new Error('listing failed'));
    await assert.rejects(fb, /listing failed/);
    await sleep(5);
    assert.deepEqual(got, ['host', 'job']);
    assert.equal(c.pending, 0);
  });

  void it('a change of everything replaces the held per-item changes (one refresh, not many)', async () => {
    const got: (string | undefined)[] = [];
    const c = new DeferredChanges<string>((x) => got.push(x));
    const a = deferred<void>();
    const f = c.during(a.promise);
    c.fire('host');
    c.fire();
    c.fire('job');
    a.resolve();
    await f;
    await sleep(5);
    assert.deepEqual(got, [undefined]);
  });

  void it('after dispose nothing is delivered', async () => {
    const got: (string | undefined)[] = [];
    const c = new DeferredChanges<string>((x) => got.push(x));
    const a = deferred<void>();
    const f = c.during(a.promise);
    c.fire('host');
    c.dispose();
    a.resolve();
    await f;
    await sleep(5);
    c.fire('x');
    assert.deepEqual(got, []);
  });
});
