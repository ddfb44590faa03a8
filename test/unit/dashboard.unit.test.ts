import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  dashboardStateSchema,
  parseDashboardState,
  parseHostMessage,
  parseWebviewMessage,
  type RunData,
  type SeriesData,
} from '../../src/core/dashboard/protocol';
import {
  alignRuns,
  buildPlotModel,
  detectSeries,
  ema,
  formatValue,
  mergeWindow,
  previousCheckpoints,
  stepWindow,
  upsertRun,
  withAlpha,
  xValues,
  yExtent,
} from '../../webview/src/data';
import { dashboardCsp, dashboardHtml } from '../../webview/src/html';
import { appendReduction, coarsen, runDataFromReduction } from '../../src/core/dashboard/fromReduction';
import { metricsReductionSchema, type MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { loadInitFixture } from '../fixtures/dashboard';

function series(key: string, x: number[], last: number[], t?: number[]): SeriesData {
  return { key, x, min: last.map((v) => v - 1), max: last.map((v) => v + 1), last, ...(t ? { t } : {}) };
}
function run(id: string, s: SeriesData[]): RunData {
  return {
    run: {
      id,
      label: id,
      host: 'h',
      path: `/r/${id}.jsonl`,
      lines: 10,
      skipped: { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
    },
    series: s,
  };
}

// ---- protocol ----

void test('every webview → host message kind parses', () => {
  const good = [
    { type: 'ready', version: 1 },
    { type: 'requestRange', run: 'r1', series: 'loss', from: 100, to: 200 },
    { type: 'openArgs', path: '/ck/a.pt' },
    { type: 'diffArgs', a: '/ck/a.pt', b: '/ck/b.pt' },
    { type: 'toggleFollow', on: true },
    { type: 'selectSeries', keys: ['loss', 'lr'] },
  ];
  for (const m of good) {
    const r = parseWebviewMessage(m);
    assert.ok(r.ok, `${m.type}: ${r.ok ? '' : r.error}`);
    assert.deepEqual(r.message, m);
  }
});

void test('bad webview messages are rejected with a message naming the problem', () => {
  const bad: [unknown, RegExp][] = [
    [null, /invalid object message/],
    ['ready', /invalid string message/],
    [{ type: 'nope' }, /invalid nope message/],
    [{ type: 'openArgs' }, /path/],
    [{ type: 'openArgs', path: '' }, /path/],
    [{ type: 'requestRange', run: 'r', series: 'loss', from: 5, to: 1 }, /from must not exceed to/],
    [{ type: 'requestRange', run: 'r', series: 'loss', from: 0, to: Infinity }, /to/],
    [{ type: 'diffArgs', a: '/x' }, /b/],
    [{ type: 'toggleFollow' }, /on/],
    [{ type: 'selectSeries', keys: 'loss' }, /keys/],
    // Host-only messages do not pass as webview messages.
    [{ type: 'follow', on: true }, /invalid follow message/],
  ];
  for (const [raw, why] of bad) {
    const r = parseWebviewMessage(raw);
    assert.equal(r.ok, false, JSON.stringify(raw));
    if (!r.ok) assert.match(r.error, why);
  }
});

void test('host messages: the fixture init parses, defaults applied; corrupt payloads are rejected', () => {
  const init = loadInitFixture();
  assert.equal(init.runs.length, 2);
  const r = parseHostMessage(JSON.parse(JSON.stringify(init)));
  assert.ok(r.ok);
  for (const m of [
    { type: 'follow', on: false },
    { type: 'error', message: 'connection lost' },
    { type: 'runData', data: init.runs[1] },
    { type: 'rangeData', run: 'r', series: 'loss', from: 0, to: 10, data: series('loss', [1, 2], [3, 4]) },
  ]) {
    assert.ok(parseHostMessage(m).ok, m.type);
  }
  const minimal = parseHostMessage({
    type: 'init',
    runs: [],
    checkpoints: [{ path: '/c.pt', label: 'c' }],
    drift: null,
    bench: [{ time: 1, tokPerS: 2 }],
  });
  assert.ok(minimal.ok);
  if (minimal.ok && minimal.message.type === 'init') {
    assert.equal(minimal.message.follow, false);
    assert.equal(minimal.message.checkpoints[0]?.hasArgs, true);
    assert.equal(minimal.message.bench[0]?.baseline, false);
  }
  const ragged = {
    type: 'runData',
    data: { run: init.runs[0]!.run, series: [{ key: 'loss', x: [1, 2], min: [1], max: [1, 2], last: [1, 2] }] },
  };
  const r2 = parseHostMessage(ragged);
  assert.equal(r2.ok, false);
  if (!r2.ok) assert.match(r2.error, /same length/);
  assert.equal(
    parseHostMessage({
      type: 'runData',
      data: { run: { ...init.runs[0]!.run, skipped: { malformed: -1, nonNumeric: 0, nonFinite: 0 } }, series: [] },
    }).ok,
    false,
  );
  assert.equal(
    parseHostMessage({ type: 'rangeData', run: 'r', series: 'loss', from: 0, to: 1, data: series('loss', [1], [NaN]) })
      .ok,
    false,
  );
  assert.equal(parseHostMessage({ type: 'ready', version: 1 }).ok, false, 'a webview message is not a host message');
});

void test('saved state: defaults fill in, junk is refused', () => {
  assert.deepEqual(parseDashboardState({}), { runs: [], smoothing: 0, xAxis: 'step', follow: false });
  assert.equal(parseDashboardState({ smoothing: 2 }), undefined);
  assert.equal(parseDashboardState({ xAxis: 'epoch' }), undefined);
  assert.equal(parseDashboardState('x'), undefined);
  const full = {
    runs: [{ id: 'a', host: 'h', path: '/p', label: 'a' }],
    selected: ['loss'],
    smoothing: 0.6,
    xAxis: 'relative',
    follow: true,
  };
  assert.deepEqual(dashboardStateSchema.parse(full), full);
});

// ---- data handling ----

void test('series detection: union over runs, x-like and empty keys left out, familiar metrics first', () => {
  const runs = [
    run('a', [series('zeta', [1], [1]), series('lr', [1], [1]), series('step', [1], [1]), series('empty', [], [])]),
    run('b', [
      series('tok_per_s', [1, 2, 3], [1, 1, 1]),
      series('train/loss', [1], [1]),
      series('grad_norm', [1], [1]),
      series('acc', [1], [1]),
      series('lr', [1], [1]),
    ]),
  ];
  assert.deepEqual(detectSeries(runs), ['tok_per_s', 'train/loss', 'acc', 'lr', 'grad_norm', 'zeta']);
  assert.deepEqual(detectSeries([]), []);
  // one point a launch is an end-of-run summary (HF's train_samples_per_second), not the speed's series: after the rest
  const summary = run('s', [series('train_samples_per_second', [1], [1]), series('train/loss', [1], [1])]);
  assert.deepEqual(detectSeries([summary]), ['train/loss', 'train_samples_per_second']);
  // Lightning with ThroughputMonitor and HF Trainer: speed first, then the loss; epoch and counters last
  const pl = run('pl', [
    series('epoch', [1], [1]),
    series('batches_per_sec', [1, 2, 3], [1, 1, 1]),
    series('train_loss', [1], [1]),
    series('samples_per_sec', [1, 2, 3], [1, 1, 1]),
  ]);
  assert.deepEqual(detectSeries([pl]), ['samples_per_sec', 'batches_per_sec', 'train_loss', 'epoch']);
  const hf = run('hf', [
    series('train/epoch', [1], [1]),
    series('train/grad_norm', [1], [1]),
    series('train/learning_rate', [1], [1]),
    series('train/loss', [1], [1]),
    series('train/num_input_tokens_seen', [1], [1]),
    series('steps/s (from wall time)', [1, 2, 3], [1, 1, 1]),
  ]);
  assert.deepEqual(detectSeries([hf]), [
    'steps/s (from wall time)',
    'train/loss',
    'train/learning_rate',
    'train/grad_norm',
    'train/epoch',
    'train/num_input_tokens_seen',
  ]);
});

void test('EMA smoothing: weight 0 is identity, debiased start, gaps stay gaps, constant stays constant', () => {
  assert.deepEqual(ema([1, 2, 3], 0), [1, 2, 3]);
  const s = ema([10, 0, null, 0], 0.5);
  // Debiased: the first value is itself, not 5.
  assert.equal(s[0], 10);
  assert.ok(Math.abs((s[1] ?? 0) - 10 / 3) < 1e-12, String(s[1]));
  assert.equal(s[2], null);
  assert.ok(Math.abs((s[3] ?? 0) - 10 / 7) < 1e-12, String(s[3]));
  assert.deepEqual(
    ema([4, 4, 4, 4], 0.9).map((v) => Math.round((v ?? 0) * 1e9) / 1e9),
    [4, 4, 4, 4],
  );
  // Heavier smoothing moves less towards a step change.
  const light = ema([0, 0, 0, 1], 0.3).at(-1) ?? 0;
  const heavy = ema([0, 0, 0, 1], 0.9).at(-1) ?? 0;
  assert.ok(heavy < light && heavy > 0, `${heavy} ${light}`);
});

void test('overlay alignment: union of x, nulls where a run has no point, order kept per run', () => {
  const a = alignRuns([
    { x: [0, 10, 20], cols: [[1, 2, 3]] },
    {
      x: [5, 10, 30],
      cols: [
        [7, 8, 9],
        [70, 80, 90],
      ],
    },
  ]);
  assert.deepEqual(a.x, [0, 5, 10, 20, 30]);
  assert.deepEqual(a.parts[0], [[1, null, 2, 3, null]]);
  assert.deepEqual(a.parts[1], [
    [null, 7, 8, null, 9],
    [null, 70, 80, null, 90],
  ]);
  // Unsorted input and duplicate x (last one wins) do not break it.
  const b = alignRuns([{ x: [20, 10, 10], cols: [[1, 2, 3]] }]);
  assert.deepEqual(b.x, [10, 20]);
  assert.deepEqual(b.parts[0], [[3, 1]]);
});

void test('plot model over the fixture: both runs on one x, lines smoothed, colours by run order', () => {
  const init = loadInitFixture();
  const m = buildPlotModel(init.runs, 'loss', 'step', 0);
  const lengths = init.runs.map((r) => r.series.find((s) => s.key === 'loss')!.x.length);
  assert.ok(m.x.length >= Math.max(...lengths) && m.x.length <= lengths[0]! + lengths[1]!);
  assert.deepEqual(
    m.runs.map((r) => r.colorIndex),
    [0, 1],
  );
  for (const r of m.runs) assert.equal(r.line.length, m.x.length);
  const nonNull = m.runs.map((r) => r.line.filter((v) => v !== null).length);
  assert.deepEqual(nonNull, lengths);
  // Raw line lies within the band; min/max come through untouched.
  m.runs[0]!.line.forEach((v, i) => {
    if (v !== null) assert.ok(v >= m.runs[0]!.min[i]! && v <= m.runs[0]!.max[i]!, `bucket ${i}`);
  });
  const smooth = buildPlotModel(init.runs, 'loss', 'step', 0.9);
  assert.notDeepEqual(smooth.runs[0]!.line, m.runs[0]!.line);
  // A run without the series is left out of that plot, colours unchanged for the others.
  const only = buildPlotModel([run('x', [series('acc', [1], [1])]), ...init.runs], 'loss', 'step', 0);
  assert.deepEqual(
    only.runs.map((r) => r.colorIndex),
    [1, 2],
  );
  const [lo, hi] = yExtent(m, 0, m.x.length - 1)!;
  assert.ok(lo < 2.3 && hi > 10, `${lo} ${hi}`);
});

void test('x axes: step, wall time, hours since the run started', () => {
  const s = series('loss', [10, 20], [1, 2], [1000, 4600]);
  assert.deepEqual(xValues(s, 'step', undefined), [10, 20]);
  assert.deepEqual(xValues(s, 'time', 1000), [1000, 4600]);
  assert.deepEqual(xValues(s, 'relative', 1000), [0, 1]);
  assert.equal(xValues(series('loss', [1], [1]), 'time', undefined), undefined);
  const m = buildPlotModel([run('a', [s]), run('b', [series('loss', [5], [1], [9000])])], 'loss', 'relative', 0);
  assert.deepEqual(m.x, [0, 1], 'relative time lines runs up at their own start');
});

void test('zoom: time window maps to steps, finer buckets replace the window only', () => {
  const s = series('loss', [100, 200, 300, 400], [1, 2, 3, 4], [10, 20, 30, 40]);
  // A bucket's x is its last step, so the window starts at the bucket before.
  assert.deepEqual(stepWindow(s, s.t!, 19, 31), { from: 100, to: 300 });
  assert.deepEqual(stepWindow(s, s.x, 150, 400), { from: 100, to: 400 });
  assert.equal(stepWindow(s, s.x, 500, 600), undefined);
  const fine = series('loss', [210, 220, 230, 500], [9, 9, 9, 9], [21, 22, 23, 50]);
  const m = mergeWindow(s, fine, 205, 300);
  assert.deepEqual(m.x, [100, 200, 210, 220, 230, 400]);
  assert.deepEqual(m.last, [1, 2, 9, 9, 9, 4]);
  assert.deepEqual(m.t, [10, 20, 21, 22, 23, 40]);
});

void test('helpers: run upsert keeps order, colours get alpha, values format short, previous checkpoint per run', () => {
  const runs = [run('a', []), run('b', [])];
  const replaced = upsertRun(runs, run('a', [series('loss', [1], [1])]));
  assert.deepEqual(
    replaced.map((r) => [r.run.id, r.series.length]),
    [
      ['a', 1],
      ['b', 0],
    ],
  );
  assert.equal(upsertRun(runs, run('c', [])).length, 3);
  assert.equal(withAlpha('#3794ff', 0.2), 'rgba(55, 148, 255, 0.2)');
  assert.equal(withAlpha('#fff', 0.5), 'rgba(255, 255, 255, 0.5)');
  assert.equal(withAlpha('rgb(1, 2, 3)', 0.25), 'rgba(1, 2, 3, 0.25)');
  assert.equal(withAlpha('rgba(1, 2, 3, 0.5)', 0.5), 'rgba(1, 2, 3, 0.25)');
  assert.equal(withAlpha('#00000080', 1), 'rgba(0, 0, 0, 0.502)');
  assert.equal(withAlpha('red', 0.5), 'red');
  assert.equal(formatValue(0.000301), '3.01e-4');
  assert.equal(formatValue(41000), '41000');
  assert.equal(formatValue(2.123456), '2.123');
  assert.equal(formatValue(null), '—');
  const prev = previousCheckpoints([
    { path: 'b2', run: 'b', step: 20 },
    { path: 'a2', run: 'a', step: 200 },
    { path: 'a1', run: 'a', step: 100 },
    { path: 'b1', run: 'b', step: 10 },
  ]);
  assert.equal(prev.get('a2')?.path, 'a1');
  assert.equal(prev.get('b2')?.path, 'b1');
  assert.equal(prev.has('a1'), false);
  assert.equal(prev.has('b1'), false);
});

// ---- page ----

void test('dashboard HTML: strict CSP with the nonce, resources escaped, bad nonce refused', () => {
  const html = dashboardHtml({
    cspSource: 'https://file+.vscode-resource.vscode-cdn.net',
    nonce: 'abcDEF0123456789xyz',
    scriptUri: 'https://x/dashboard.js?a=1&b="2"',
    cssUris: ['https://x/uPlot.min.css', 'https://x/dashboard.css'],
  });
  const csp = dashboardCsp('https://file+.vscode-resource.vscode-cdn.net', 'abcDEF0123456789xyz');
  assert.match(csp, /^default-src 'none'; /);
  assert.doesNotMatch(csp, /unsafe-(eval|inline)/);
  assert.match(csp, /script-src 'nonce-abcDEF0123456789xyz'/);
  assert.ok(html.includes(`content="${csp.replace(/'/g, '&#39;')}"`));
  assert.match(
    html,
    /<script nonce="abcDEF0123456789xyz" src="https:\/\/x\/dashboard.js\?a=1&amp;b=&quot;2&quot;"><\/script>/,
  );
  assert.equal(html.match(/<link rel="stylesheet"/g)?.length, 2);
  assert.match(html, /<meta property="csp-nonce" content="abcDEF0123456789xyz">/);
  assert.doesNotMatch(html, /<script(?![^>]*nonce=)/);
  assert.throws(
    () => dashboardHtml({ cspSource: 'x', nonce: "x' 'unsafe-eval", scriptUri: 's', cssUris: [] }),
    /nonce/,
  );
  assert.throws(
    () => dashboardHtml({ cspSource: "x 'unsafe-eval'", nonce: 'abcDEF0123456789xyz', scriptUri: 's', cssUris: [] }),
    /cspSource/,
  );
});

// ---- from the reduction probe to messages ----

function reduction(
  series: { key: string; x: number[]; last: number[]; t?: number[] }[],
  lines: number,
  skipped = { malformed: 0, nonNumeric: 0, nonFinite: 0, noX: 0 },
): MetricsReduction {
  return metricsReductionSchema.parse({
    path: '/runs/a/train_log.jsonl',
    size: 1000,
    offset: 0,
    requestedOffset: 0,
    reset: false,
    nextOffset: 1000,
    lines,
    blank: 0,
    skipped,
    x: 'step',
    xKeys: ['step'],
    xRange: [0, 100],
    keys: series.map((s) => s.key),
    buckets: 100,
    bucketWidth: 1,
    window: null,
    series: series.map((s) => ({
      ...s,
      min: s.last.map((v) => v - 1),
      max: s.last.map((v) => v + 1),
      count: s.x.length,
      lastX: s.x.at(-1) ?? 0,
      lastValue: s.last.at(-1) ?? 0,
    })),
    seriesTruncated: false,
    fastLines: lines,
    shapes: 1,
    elapsedMs: 1,
  });
}

void test('reduction → run data: only the drawn fields cross, and the result is a valid runData message', () => {
  const r = reduction([{ key: 'loss', x: [1, 2], last: [5, 4], t: [10, 20] }], 7, {
    malformed: 1,
    nonNumeric: 2,
    nonFinite: 3,
    noX: 1,
  });
  const data = runDataFromReduction({ id: 'h:/runs/a', label: 'a', host: 'h' }, r);
  assert.deepEqual(data.series, [{ key: 'loss', x: [1, 2], min: [4, 3], max: [6, 5], last: [5, 4], t: [10, 20] }]);
  assert.deepEqual(data.run, {
    id: 'h:/runs/a',
    label: 'a',
    host: 'h',
    path: '/runs/a/train_log.jsonl',
    lines: 7,
    skipped: { malformed: 1, nonNumeric: 2, nonFinite: 3, noX: 1 },
    // exact data: the report's changepoints were looked for (too few points for any)
    shifts: [],
  });
  assert.ok(parseHostMessage({ type: 'runData', data }).ok);
});

void test('follow: appended buckets extend the run, re-read ones are dropped, extremes survive coarsening', () => {
  const first = reduction([{ key: 'loss', x: [1, 2, 3, 4], last: [9, 8, 7, 6] }], 4);
  const more = reduction(
    [
      { key: 'loss', x: [4, 5, 6], last: [100, 5, 4] },
      { key: 'acc', x: [5], last: [0.5] },
    ],
    3,
    { malformed: 1, nonNumeric: 0, nonFinite: 0, noX: 0 },
  );
  const nextReduction = appendReduction(first, more, 100);
  const next = runDataFromReduction({ id: 'r', label: 'r', host: 'h' }, nextReduction);
  const loss = next.series.find((s) => s.key === 'loss')!;
  assert.deepEqual(loss.x, [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(loss.last, [9, 8, 7, 6, 5, 4]);
  assert.deepEqual(next.series.find((s) => s.key === 'acc')?.x, [5]);
  assert.equal(next.run.lines, 7);
  assert.equal(next.run.skipped.malformed, 1);
  assert.equal(nextReduction.series.find((s) => s.key === 'loss')?.lastX, 6);
  const small = appendReduction(first, more, 2).series.find((s) => s.key === 'loss')!;
  assert.ok(small.x.length <= 2);
  assert.equal(Math.max(...small.max), 10, 'the largest max survives');
  assert.equal(Math.min(...small.min), 3, 'the smallest min survives');
  assert.equal(small.x.at(-1), 6);
  // A rewritten log (reset) replaces the run's data instead of extending it.
  const fresh = appendReduction(first, metricsReductionSchema.parse({ ...more, reset: true }), 100);
  assert.deepEqual(fresh.series.find((s) => s.key === 'loss')?.x, [4, 5, 6]);
  assert.equal(fresh.lines, 3);
  const c = coarsen({ key: 'k', x: [1, 2, 3], min: [0, -5, 1], max: [1, 2, 9], last: [1, 2, 3] }, 2);
  assert.deepEqual(c, { key: 'k', x: [2, 3], min: [-5, 1], max: [2, 9], last: [2, 3] });
});

void test('benchmark chart range: one point gets a day either side, not years', async () => {
  const { benchTimeRange, benchValueRange } = await import('../../webview/src/data');
  const t = Date.UTC(2028, 5, 1) / 1000;
  assert.deepEqual(benchTimeRange(t, t), [t - 86_400, t + 86_400]);
  const [lo, hi] = benchTimeRange(t, t + 10 * 86_400);
  assert.ok(lo < t && lo > t - 86_400 && hi > t + 10 * 86_400 && hi < t + 11 * 86_400);
  assert.deepEqual(benchValueRange(12800, 12800), [11520, 14080]);
  assert.deepEqual(benchValueRange(0, 0), [0, 1]);
});

void test('checkpoint marks: at their step, their time, or hours since the run started', async () => {
  const { checkpointMarks } = await import('../../webview/src/data');
  const init = loadInitFixture();
  const run = init.runs[0]!;
  const mine = init.checkpoints.filter((c) => c.run === run.run.id);
  const steps = checkpointMarks(init.checkpoints, [run], 'step');
  assert.deepEqual(
    steps.map((m) => m.x),
    mine.map((c) => c.step),
  );
  const times = checkpointMarks(init.checkpoints, [run], 'time');
  assert.deepEqual(
    times.map((m) => m.x),
    mine.map((c) => c.mtime),
  );
  const origin = Math.min(...run.series.map((s) => s.t?.[0] ?? Infinity));
  assert.equal(checkpointMarks(init.checkpoints, [run], 'relative')[0]!.x, (mine[0]!.mtime! - origin) / 3600);
});

void test('readable times in the dashboard: local date and time, not ISO', async () => {
  const { readableTime } = await import('../../webview/src/data');
  const saved = process.env['TZ'];
  try {
    process.env['TZ'] = 'Europe/Berlin';
    assert.equal(readableTime('2025-01-10T08:00:00Z'), '2025-01-10 09:00');
    assert.equal(readableTime(1736496000), '2025-01-10 09:00');
    assert.equal(readableTime('not a time'), 'not a time');
  } finally {
    if (saved === undefined) delete process.env['TZ'];
    else process.env['TZ'] = saved;
  }
});
