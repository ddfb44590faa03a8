import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { BaselineStore } from '../../src/core/baselines/store';
import { parseWebviewMessage } from '../../src/core/dashboard/protocol';
import { benchHistory, benchReferenceOf, markBenchReference } from '../../src/core/dashboard/sources';
import { isKnownGoodError } from '../../src/core/errors';

describe('a benchmark result marked as the known-good reference', () => {
  let dir: string;
  let store: BaselineStore;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kg-ref-'));
    store = new BaselineStore(dir);
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('is stored beside the results, shown as the baseline point, and can be unmarked', async () => {
    const host = 'ssh:me@gpu-box:22';
    const a = await store.appendResult(host, { at: '2026-01-01T00:00:00Z', tokensPerS: 12800, label: 'good' });
    const b = await store.appendResult(host, { at: '2026-01-05T00:00:00Z', tokensPerS: 4300, label: 'now' });
    assert.equal(await benchReferenceOf(store, [host]), null);
    const results = (await store.listResults(host)).results.map((r) => r.result);
    const before = benchHistory(results, undefined);
    assert.deepEqual(
      before.map((p) => [p.id, p.baseline]),
      [
        [a.result.id, false],
        [b.result.id, false],
      ],
    );

    // results are kept under the transport id; the settings id is tried as well
    await markBenchReference(store, ['settings:gpu-box', host], a.result.id);
    assert.equal(await benchReferenceOf(store, ['settings:gpu-box', host]), a.result.id);
    const marked = benchHistory(results, undefined, await benchReferenceOf(store, [host]));
    assert.deepEqual(
      marked.map((p) => [p.tokPerS, p.baseline, p.label]),
      [
        [12800, true, 'good'],
        [4300, false, 'now'],
      ],
    );
    // the results folder is untouched: the mark is a file of its own, and list() of baselines ignores it
    assert.equal((await readdir(join(store.hostDir(host), 'results'))).length, 2);
    assert.deepEqual((await store.list(host)).problems, []);

    await markBenchReference(store, [host], null);
    assert.equal(await benchReferenceOf(store, [host]), null);
  });

  it('a mark overrides the results recorded with the newest baseline; a result that is gone is refused', async () => {
    const host = 'h';
    const a = await store.appendResult(host, { at: '2026-01-01T00:00:00Z', tokensPerS: 100 });
    await assert.rejects(markBenchReference(store, [host], 'nope'), (e: unknown) => isKnownGoodError(e, 'not-found'));
    const results = (await store.listResults(host)).results.map((r) => r.result);
    // a mark naming a result that no longer exists is ignored
    assert.deepEqual(
      benchHistory(results, undefined, 'deleted').map((p) => p.baseline),
      [false],
    );
    assert.deepEqual(
      benchHistory(results, undefined, a.result.id).map((p) => p.baseline),
      [true],
    );
  });

  it('the webview message is typed and validated', () => {
    assert.ok(parseWebviewMessage({ type: 'markReference', host: 'settings:gpu', result: 'abc' }).ok);
    assert.ok(parseWebviewMessage({ type: 'markReference', host: 'settings:gpu', result: null }).ok);
    assert.ok(!parseWebviewMessage({ type: 'markReference', host: '', result: 'abc' }).ok);
    assert.ok(!parseWebviewMessage({ type: 'markReference', host: 'h', result: 3 }).ok);
  });
});
