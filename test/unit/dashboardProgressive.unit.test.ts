// The dashboard's two-step read (preview, then exact), follow after it, side data per host, and the protocol and
// webview helpers for both. The probe is a fake here: each call is recorded and answered from a script.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  hostsOf,
  ProgressiveRuns,
  sideByHost,
  type LoadedRun,
  type Reduce,
} from '../../src/core/dashboard/progressive';
import { runDataFromReduction } from '../../src/core/dashboard/fromReduction';
import { parseHostMessage, type HostSide, type RunInfo } from '../../src/core/dashboard/protocol';
import { runId, type RunSource } from '../../src/core/dashboard/sources';
import {
  metricsReduceArgs,
  metricsReductionSchema,
  type MetricsReduceOptions,
  type MetricsReduction,
} from '../../src/core/metrics/metricsProbe';
import { previewNote, sampledShare, sideHosts } from '../../webview/src/data';

const SIZE = 100_000_000;

/** A reduction of `path` with one `loss` series; `sample` makes it a preview (nextOffset = where it started). */
function reduction(
  path: string,
  o: { lines: number; x: number[]; sample?: { bytes: number; windows: number; of: number }; nextOffset?: number },
): MetricsReduction {
  const last = o.x.map((x) => 10 - x / 1000);
  return metricsReductionSchema.parse({
    path,
    size: SIZE,
    offset: 0,
    requestedOffset: 0,
    reset: false,
    nextOffset: o.sample ? 0 : (o.nextOffset ?? SIZE),
    lines: o.lines,
    blank: 0,
    skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
    x: 'step',
    xKeys: ['step'],
    xRange: [o.x[0] ?? 0, o.x.at(-1) ?? 0],
    keys: ['loss'],
    buckets: 2000,
    bucketWidth: 1,
    window: null,
    series: [
      {
        key: 'loss',
        x: o.x,
        min: last.map((v) => v - 1),
        max: last.map((v) => v + 1),
        last,
        count: o.x.length,
        lastX: o.x.at(-1) ?? 0,
        lastValue: last.at(-1) ?? 0,
      },
    ],
    seriesTruncated: false,
    fastLines: o.lines,
    shapes: 1,
    elapsedMs: 1,
    sample: o.sample ?? null,
  });
}

interface Call {
  path: string;
  options: Omit<MetricsReduceOptions, 'path'>;
}

/** A promise with its resolve/reject outside, to hold an exact read back until the test lets it land. */
function deferred<T>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

/**
 * The fake probe: previews of `big` are sampled, of `small` exact; exact reads of a path wait on `hold[path]` when
 * set; offset reads answer `appended[path]`.
 */
function fakeProbe(o: {
  big: string[];
  hold?: Record<string, Promise<MetricsReduction>>;
  appended?: Record<string, MetricsReduction>;
  failPreview?: string[];
}): { reduce: Reduce; calls: Call[] } {
  const calls: Call[] = [];
  const reduce: Reduce = (src, options) => {
    calls.push({ path: src.logPath, options });
    const path = src.logPath;
    const isPreview = options.preview === true || options.previewBytes !== undefined;
    if (options.offset !== undefined) {
      const a = o.appended?.[path];
      return a ? Promise.resolve(a) : Promise.reject(new Error(`nothing appended to ${path}`));
    }
    if (isPreview && o.failPreview?.includes(path)) return Promise.reject(new Error('unknown option --preview'));
    if (isPreview && o.big.includes(path)) {
      return Promise.resolve(
        reduction(path, {
          lines: 5000,
          x: [100, 50_000, 99_000],
          sample: { bytes: options.previewBytes ?? 8 << 20, windows: 16, of: SIZE },
        }),
      );
    }
    const held = o.hold?.[path];
    if (held && !isPreview) return held;
    const lines = o.big.includes(path) ? 1_000_000 : 300;
    return Promise.resolve(reduction(path, { lines, x: [100, 200, 50_000, 77_777, 100_000] }));
  };
  return { reduce, calls };
}

const src = (hostId: string, logPath: string): RunSource => ({ hostId, logPath, label: logPath.split('/')[1] ?? '' });

function loader(sources: RunSource[], reduce: Reduce, previewBytes?: number): ProgressiveRuns {
  return new ProgressiveRuns(sources, {
    reduce,
    hostLabel: (id) => `host ${id}`,
    previewBytes,
    maxBuckets: 2000,
  });
}

const noEvents = { exact: () => undefined, failed: () => undefined };

describe('dashboard: preview first, then the exact read', () => {
  it('a sampled run shows its preview (marked, no follow offset), then the exact data replaces it', async () => {
    const probe = fakeProbe({ big: ['/big/train_log.jsonl'] });
    const runs = loader([src('gpu', '/big/train_log.jsonl')], probe.reduce);
    await runs.loadPreviews();
    assert.deepEqual(probe.calls, [{ path: '/big/train_log.jsonl', options: { x: 'step', preview: true } }]);
    const run = runs.runs[0]!;
    assert.equal(run.exact, 'pending');
    assert.equal(run.nextOffset, undefined, "a preview's nextOffset is where it started: never followed from");
    assert.deepEqual(run.data.run.sample, { bytes: 8 << 20, of: SIZE, failed: false });
    assert.equal(run.data.run.lines, 5000);
    assert.equal(run.data.run.host, 'host gpu');
    assert.equal(run.id, runId('gpu', '/big/train_log.jsonl'));
    assert.ok(runs.anyPending);
    assert.equal(runs.allExact, false);
    assert.ok(parseHostMessage({ type: 'runData', data: run.data }).ok, 'a preview is a valid runData');

    const landed: LoadedRun[] = [];
    await runs.completeExact({ exact: (r) => landed.push(r), failed: (_r, m) => assert.fail(m) });
    assert.deepEqual(probe.calls[1], { path: '/big/train_log.jsonl', options: { x: 'step' } });
    assert.equal(landed.length, 1);
    assert.equal(run.exact, 'done');
    assert.equal(run.data.run.sample, undefined, 'exact data carries no sample');
    assert.equal(run.data.run.lines, 1_000_000);
    assert.equal(run.data.run.label, 'big');
    assert.deepEqual(run.data.series[0]?.x, [100, 200, 50_000, 77_777, 100_000]);
    assert.equal(run.nextOffset, SIZE);
    assert.ok(runs.allExact);
  });

  it('a small log is exact from the first read: no second read', async () => {
    const probe = fakeProbe({ big: [] });
    const runs = loader([src('local', '/small/train_log.jsonl')], probe.reduce);
    await runs.loadPreviews();
    const run = runs.runs[0]!;
    assert.equal(run.exact, 'done');
    assert.equal(run.data.run.sample, undefined);
    assert.equal(run.nextOffset, SIZE);
    assert.ok(runs.allExact);
    await runs.completeExact({ exact: () => assert.fail('nothing to replace'), failed: () => assert.fail('no read') });
    assert.equal(probe.calls.length, 1);
  });

  it('the preview budget is passed as --preview-bytes; without one the probe default (--preview)', async () => {
    const probe = fakeProbe({ big: ['/big/train_log.jsonl'] });
    const runs = loader([src('gpu', '/big/train_log.jsonl')], probe.reduce, 65536);
    await runs.loadPreviews();
    assert.deepEqual(probe.calls[0]?.options, { x: 'step', previewBytes: 65536 });
    assert.deepEqual(runs.runs[0]?.data.run.sample, { bytes: 65536, of: SIZE, failed: false });
    assert.deepEqual(metricsReduceArgs({ path: '/l', x: 'step', previewBytes: 65536 }), [
      '/l',
      '--x',
      'step',
      '--preview-bytes',
      '65536',
    ]);
    assert.deepEqual(metricsReduceArgs({ path: '/l', x: 'step', preview: true }), ['/l', '--x', 'step', '--preview']);
  });

  it('a preview that fails is read whole instead; a log that cannot be read at all is named in errors', async () => {
    const probe = fakeProbe({ big: ['/old/train_log.jsonl'], failPreview: ['/old/train_log.jsonl'] });
    const failing: Reduce = (s, o) =>
      s.logPath === '/gone/train_log.jsonl' ? Promise.reject(new Error('No such file')) : probe.reduce(s, o);
    const runs = loader([src('a', '/old/train_log.jsonl'), src('a', '/gone/train_log.jsonl')], failing);
    await runs.loadPreviews();
    assert.equal(runs.runs.length, 1);
    assert.equal(runs.runs[0]?.exact, 'done', 'the fallback read is exact');
    assert.equal(runs.runs[0]?.data.run.lines, 1_000_000);
    assert.deepEqual(runs.errors, ['gone: No such file']);
  });

  it('an exact read that fails leaves the preview, marked failed, and follow never reads from it', async () => {
    const hold = deferred<MetricsReduction>();
    const probe = fakeProbe({ big: ['/big/train_log.jsonl'], hold: { '/big/train_log.jsonl': hold.promise } });
    const runs = loader([src('gpu', '/big/train_log.jsonl')], probe.reduce);
    await runs.loadPreviews();
    const failures: string[] = [];
    const done = runs.completeExact({ exact: () => assert.fail('it failed'), failed: (_r, m) => failures.push(m) });
    hold.reject(new Error('timed out after 30 s'));
    await done;
    const run = runs.runs[0]!;
    assert.deepEqual(failures, ['timed out after 30 s']);
    assert.equal(run.exact, 'failed');
    assert.deepEqual(run.data.run.sample, { bytes: 8 << 20, of: SIZE, failed: true });
    assert.equal(run.data.run.lines, 5000, 'the preview stays');
    assert.ok(parseHostMessage({ type: 'runData', data: run.data }).ok);
    const before = probe.calls.length;
    await runs.follow({ grew: () => assert.fail('not followed'), failed: (_r, m) => assert.fail(m) });
    assert.equal(probe.calls.length, before);
  });

  it('an exact read that comes back sampled is refused (following from it would re-read the log)', async () => {
    const probe = fakeProbe({ big: ['/big/train_log.jsonl'] });
    const sampledAlways: Reduce = (s, o) => probe.reduce(s, { ...o, preview: true });
    const runs = loader([src('gpu', '/big/train_log.jsonl')], sampledAlways);
    await runs.loadPreviews();
    const failures: string[] = [];
    await runs.completeExact({ exact: () => assert.fail('sampled'), failed: (_r, m) => failures.push(m) });
    assert.match(failures[0] ?? '', /sampled/);
    assert.equal(runs.runs[0]?.nextOffset, undefined);
  });
});

describe('dashboard: follow skips runs whose exact read is pending', () => {
  it('reads appended bytes of exact runs only, from their exact nextOffset; a pending run joins once exact', async () => {
    const hold = deferred<MetricsReduction>();
    const big = '/big/train_log.jsonl';
    const small = '/small/train_log.jsonl';
    const probe = fakeProbe({
      big: [big],
      hold: { [big]: hold.promise },
      appended: {
        [small]: reduction(small, { lines: 2, x: [100_001, 100_002], nextOffset: SIZE + 50 }),
        [big]: reduction(big, { lines: 1, x: [100_010], nextOffset: 123_456_789 }),
      },
    });
    const runs = loader([src('gpu', big), src('local', small)], probe.reduce);
    await runs.loadPreviews();
    assert.deepEqual(
      runs.runs.map((r) => r.exact),
      ['pending', 'done'],
    );
    const exact = runs.completeExact(noEvents);

    const grew: string[] = [];
    const followEvents = {
      grew: (r: LoadedRun) => grew.push(r.id),
      failed: (_r: LoadedRun, m: string) => assert.fail(m),
    };
    await runs.follow(followEvents);
    const offsetCalls = () => probe.calls.filter((c) => c.options.offset !== undefined);
    assert.deepEqual(offsetCalls(), [{ path: small, options: { x: 'step', offset: SIZE } }], 'only the exact run');
    assert.deepEqual(grew, [runId('local', small)]);
    const smallRun = runs.runs[1]!;
    assert.equal(smallRun.nextOffset, SIZE + 50);
    assert.deepEqual(smallRun.data.series[0]?.x.slice(-2), [100_001, 100_002]);
    assert.equal(smallRun.data.run.lines, 302);

    // The exact read lands: the big run is followed from where that read ended, not from the preview.
    hold.resolve(reduction(big, { lines: 1_000_000, x: [100, 100_000], nextOffset: SIZE - 10 }));
    await exact;
    await runs.follow(followEvents);
    assert.deepEqual(
      offsetCalls().filter((c) => c.path === big),
      [{ path: big, options: { x: 'step', offset: SIZE - 10 } }],
    );
    const bigRun = runs.runs[0]!;
    assert.equal(bigRun.data.run.lines, 1_000_001);
    assert.deepEqual(bigRun.data.series[0]?.x, [100, 100_000, 100_010]);
    assert.equal(bigRun.nextOffset, 123_456_789);
  });
});

describe('dashboard: side data per host', () => {
  it('one entry per distinct host in run order, labelled; a host that fails shows none, the others still show', async () => {
    const sources = [src('b', '/x/l.jsonl'), src('a', '/y/l.jsonl'), src('b', '/z/l.jsonl')];
    assert.deepEqual(hostsOf(sources), ['b', 'a']);
    const warnings: string[] = [];
    const asked: string[] = [];
    const hosts = await sideByHost(
      sources,
      (id) => `Host ${id.toUpperCase()}`,
      (id) => {
        asked.push(id);
        if (id === 'a') return Promise.reject(new Error('store unreadable'));
        return Promise.resolve({
          bench: [{ time: 1, tokPerS: 1000, baseline: true }],
          runs: [{ run: 'r', label: 'run', span: null, drift: null, note: 'no wall times' }],
        });
      },
      (line) => warnings.push(line),
    );
    assert.deepEqual(asked, ['b', 'a'], 'each host read once');
    assert.deepEqual(hosts, [
      {
        host: 'b',
        label: 'Host B',
        drift: null,
        bench: [{ time: 1, tokPerS: 1000, baseline: true }],
        runs: [{ run: 'r', label: 'run', span: null, drift: null, note: 'no wall times' }],
      },
      { host: 'a', label: 'Host A', drift: null, bench: [], runs: [] },
    ]);
    assert.match(warnings.join('\n'), /Host A: store unreadable/);
    assert.ok(parseHostMessage({ type: 'side', hosts }).ok);
  });

  it('the webview takes hosts when sent, else the one host of drift/bench (older init messages)', () => {
    const drift = { baseline: 'b', changes: 0, text: 'same' };
    const bench = [{ time: 5, tokPerS: 9, baseline: false }];
    assert.deepEqual(sideHosts({ drift, bench, hosts: undefined }), [{ host: '', label: '', drift, bench, runs: [] }]);
    const two: HostSide[] = [
      { host: 'a', label: 'A', drift: null, bench: [], runs: [] },
      { host: 'b', label: 'B', drift, bench, runs: [] },
    ];
    assert.deepEqual(sideHosts({ drift: null, bench: [], hosts: two }), two);
  });
});

/** The run-a fixture of the protocol and preview-note tests, with a sample when given. */
function runInfo(sample?: RunInfo['sample']): RunInfo {
  return {
    id: 'r',
    label: 'run-a',
    host: 'gpu',
    path: '/runs/run-a/train_log.jsonl',
    lines: 10,
    skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
    ...(sample ? { sample } : {}),
  };
}

describe('dashboard protocol: preview and per-host fields', () => {
  const info = runInfo();
  const init = (extra: Record<string, unknown>) => ({ type: 'init', runs: [], checkpoints: [], ...extra });

  it('sample on a run: parsed with failed defaulting to false; bad values rejected', () => {
    const r = parseHostMessage({
      type: 'runData',
      data: { run: { ...info, sample: { bytes: 5, of: 100 } }, series: [] },
    });
    assert.ok(r.ok && r.message.type === 'runData');
    assert.deepEqual(r.message.data.run.sample, { bytes: 5, of: 100, failed: false });
    for (const sample of [{ bytes: -1, of: 100 }, { bytes: 5 }, { bytes: 1.5, of: 100 }, 'half']) {
      const bad = parseHostMessage({ type: 'runData', data: { run: { ...info, sample }, series: [] } });
      assert.equal(bad.ok, false, JSON.stringify(sample));
      assert.match(bad.ok ? '' : bad.error, /sample/);
    }
  });

  it('init: hosts and sidePending optional; old-style drift/bench still accepted; broken hosts rejected', () => {
    const old = parseHostMessage(init({ drift: null, bench: [] }));
    assert.ok(old.ok && old.message.type === 'init');
    assert.equal(old.message.hosts, undefined);
    assert.equal(old.message.sidePending, false);
    const bare = parseHostMessage(init({}));
    assert.ok(bare.ok && bare.message.type === 'init');
    assert.deepEqual([bare.message.drift, bare.message.bench], [null, []]);
    const hosts = [{ host: 'a', label: 'A', drift: null, bench: [{ time: 1, tokPerS: 2 }] }];
    const good = parseHostMessage(init({ hosts, sidePending: true }));
    assert.ok(good.ok && good.message.type === 'init');
    assert.equal(good.message.hosts?.[0]?.bench[0]?.baseline, false);
    assert.equal(good.message.sidePending, true);
    for (const h of [
      { host: 'a', drift: null, bench: [] },
      { host: 'a', label: 'A', drift: 'x', bench: [] },
    ]) {
      assert.equal(parseHostMessage(init({ hosts: [h] })).ok, false, JSON.stringify(h));
    }
    assert.equal(parseHostMessage({ type: 'side', hosts: 'a' }).ok, false);
    assert.equal(parseHostMessage({ type: 'side' }).ok, false);
  });
});

describe('dashboard webview: the preview note', () => {
  it('says how much of which file, whether the whole log is on its way, and nothing once exact', () => {
    assert.equal(
      previewNote(runInfo({ bytes: 7_000_000, of: 100_000_000, failed: false }), false),
      'Preview: sampled 7% of train_log.jsonl — reading the whole log…',
    );
    assert.equal(
      previewNote(runInfo({ bytes: 7_000_000, of: 100_000_000, failed: false }), true),
      'Preview of run-a: sampled 7% of train_log.jsonl — reading the whole log…',
    );
    assert.match(previewNote(runInfo({ bytes: 1, of: 100, failed: true }), false) ?? '', /could not be read/);
    assert.equal(previewNote(runInfo(), false), undefined);
    assert.equal(sampledShare(65_536, 111_000_000), 'less than 1%');
    assert.equal(sampledShare(999, 1000), '99%', 'a sample is never called 100%');
    assert.equal(sampledShare(16 << 20, 111 << 20), '14%');
  });

  it('run data from a sampled reduction carries the sample; from an exact one it does not', () => {
    const sampled = reduction('/a.jsonl', { lines: 3, x: [1], sample: { bytes: 10, windows: 2, of: 1000 } });
    assert.deepEqual(runDataFromReduction({ id: 'a', label: 'a', host: 'h' }, sampled).run.sample, {
      bytes: 10,
      of: 1000,
      failed: false,
    });
    const exact = reduction('/a.jsonl', { lines: 3, x: [1] });
    const withOldSample = { id: 'a', label: 'a', host: 'h', sample: { bytes: 1, of: 2, failed: false } };
    assert.equal(runDataFromReduction(withOldSample, exact).run.sample, undefined, 'a stale sample is not carried');
  });
});
