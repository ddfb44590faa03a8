import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IncrementalLogReader } from '../../src/core/metrics/logTail';
import { metricsReduceProbe } from '../../src/core/metrics/metricsProbe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { CountingTransport, generateMetricsLog } from '../../bench/cases/metrics';

let dir: string;
let transport: CountingTransport;
let runner: ProbeRunner;

before(async () => {
  dir = await fs.mkdtemp(join(tmpdir(), 'kg-metrics-int-'));
  transport = new CountingTransport();
  runner = new ProbeRunner(transport, { python: 'python3', timeoutMs: 300_000 });
});

after(async () => {
  runner.dispose();
  await fs.rm(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

void test('IncrementalLogReader follows a log that is being written, torn lines included', async () => {
  const path = join(dir, 'train_log.jsonl');
  await fs.writeFile(path, '');
  const total = 400;
  let written = 0;
  let writerDone = false;
  // The writer appends each line in two writes with pauses between, so polls often meet half a line.
  const writer = (async () => {
    const fh = await fs.open(path, 'a');
    try {
      for (let i = 0; i < total; i++) {
        const line = `${JSON.stringify({ step: i, loss: 1 / (i + 1), tok_per_s: 12800 + i })}\n`;
        const half = Math.floor(line.length / 2);
        await fh.write(line.slice(0, half));
        if (i % 20 === 0) await sleep(3);
        await fh.write(line.slice(half));
        written++;
      }
      await fh.write('{"step": 400, "loss": 0.0'); // still being written when the test ends
    } finally {
      await fh.close();
      writerDone = true;
    }
  })();

  const reader = new IncrementalLogReader(runner, path, { maxBytes: 2048 });
  const steps: number[] = [];
  let polls = 0;
  let bytes = 0;
  for (;;) {
    const done = writerDone;
    const p = await reader.poll();
    polls++;
    bytes += p.bytes;
    assert.equal(p.reset, false);
    assert.equal(p.malformed, 0);
    for (const rec of p.lines) steps.push((rec as { step: number }).step);
    if (p.lines.length) {
      const last = p.lines[p.lines.length - 1] as { step: number };
      assert.equal(p.latest?.step, last.step);
      assert.equal(p.latest?.tokensPerSec, 12800 + last.step);
    }
    if (done && p.lines.length === 0) break;
  }
  await writer;
  assert.equal(written, total);
  assert.deepEqual(
    steps,
    Array.from({ length: total }, (_, i) => i),
  ); // each line once, whole, in order
  assert.ok(polls > 3, `only ${polls} polls`);
  const size = (await fs.stat(path)).size;
  const tornLength = Buffer.byteLength('{"step": 400, "loss": 0.0');
  assert.equal(reader.nextOffset, size - tornLength);
  assert.equal(bytes, size - tornLength);

  // A new run truncates the log: the reader starts over.
  await fs.writeFile(path, '{"step": 0, "tok/s": 5}\n');
  const p = await reader.readAvailable();
  assert.equal(p.reset, true);
  assert.deepEqual(p.lines, [{ step: 0, 'tok/s': 5 }]);
  assert.deepEqual(p.latest, { step: 0, stepKey: 'step', tokensPerSec: 5, tokensPerSecKey: 'tok/s' });
});

void test('metrics_reduce through the runner: a 1,000,000-line log, few bytes on the wire', async () => {
  const path = join(dir, 'big.jsonl');
  const size = await generateMetricsLog(path, 1_000_000);
  await runner.interpreter(); // the helper is up, as it is once a host is connected
  transport.reset();
  // Open Dashboard asks for a preview first: evenly spaced windows, a few MB whatever the file's size.
  const tp = performance.now();
  const preview = (await runner.run(metricsReduceProbe({ path, preview: true }))).value;
  const previewMs = performance.now() - tp;
  assert.ok(preview.sample, 'a 111 MB log is sampled');
  assert.equal(preview.sample.of, size);
  assert.ok(preview.sample.bytes <= 9 << 20 && preview.sample.bytes > 4 << 20, `${preview.sample.bytes} bytes read`);
  assert.deepEqual(preview.xRange, [0, 999_999]);
  assert.equal(preview.nextOffset, 0);
  transport.reset();
  const t0 = performance.now();
  const { value } = await runner.run(metricsReduceProbe({ path }));
  const ms = performance.now() - t0;
  const wire = transport.bytesIn + transport.bytesOut;
  process.stderr.write(
    `\n  metrics_reduce via ProbeRunner: ${value.lines} lines, ${(size / 1e6).toFixed(1)} MB in ${ms.toFixed(0)} ms ` +
      `(probe ${value.elapsedMs} ms, ${value.jobs} jobs; preview first: ${previewMs.toFixed(0)} ms); ${wire} bytes on the wire = ` +
      `${((100 * wire) / size).toFixed(3)}% of the file\n`,
  );
  assert.equal(value.lines, 1_001_000);
  assert.equal(value.nextOffset, size);
  assert.equal(value.sample, null);
  assert.equal(value.source, 'read');
  assert.equal(value.skipped.nonFinite, 1);
  const byKey = new Map(value.series.map((s) => [s.key, s]));
  assert.deepEqual([...byKey.keys()].sort(), ['eval.acc', 'eval.loss', 'grad_norm', 'loss', 'lr', 'tok_per_s']);
  const loss = byKey.get('loss')!;
  assert.ok(loss.x.length <= 2000 && loss.x.length > 1000);
  assert.equal(Math.max(...loss.max), 99);
  assert.equal(loss.count, 999_999);
  assert.equal(byKey.get('eval.loss')!.count, 1000);
  assert.ok(loss.t && loss.t.length === loss.x.length);
  assert.ok(wire < size / 100, `${wire} bytes crossed, over 1% of ${size}`);

  // Zoom: finer buckets for a window of one series.
  transport.reset();
  const zoom = await runner.run(
    metricsReduceProbe({ path, window: { from: 700_000, to: 800_000 }, series: ['loss'], buckets: 500 }),
  );
  assert.deepEqual(
    zoom.value.series.map((s) => s.key),
    ['loss'],
  );
  const z = zoom.value.series[0]!;
  assert.ok(z.x[0]! >= 700_000 && z.x[z.x.length - 1]! <= 800_000);
  assert.equal(Math.max(...z.max), 99);
  assert.ok(transport.bytesIn < 100_000);
  // The helper kept the zone map of the first read: a window of 1% of the steps reads a few % of the file.
  assert.equal(zoom.value.source, 'cache');
  assert.ok(zoom.value.bytesRead! < size / 5, `zoom read ${zoom.value.bytesRead} bytes`);

  // Following: only the bytes appended since nextOffset are read.
  await fs.appendFile(path, '{"step": 1000000, "loss": 0.5}\n{"step": 1000001, "loss": 0.25}\n{"step": 10');
  const tail = await runner.run(metricsReduceProbe({ path, offset: value.nextOffset }));
  assert.equal(tail.value.lines, 2);
  assert.deepEqual(tail.value.series.find((s) => s.key === 'loss')?.last, [0.5, 0.25]);
  assert.equal(tail.value.nextOffset, (await fs.stat(path)).size - Buffer.byteLength('{"step": 10'));

  // Opening the dashboard again: the helper's exact reduction, which the follow read already grew by the two
  // appended lines: nothing is read.
  const again = (await runner.run(metricsReduceProbe({ path, preview: true }))).value;
  assert.equal(again.sample, null);
  assert.equal(again.source, 'cache');
  assert.equal(again.bytesRead, 0);
  assert.equal(again.lines, 1_001_002);
  assert.equal(again.series.find((s) => s.key === 'loss')?.lastValue, 0.25);
});
