import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { inflateSync } from 'node:zlib';
import { benchResultSchema } from '../../src/core/bench/benchProbe';
import { throughputFromJsonl } from '../../src/core/bench/customBenchmark';
import { BaselineStore } from '../../src/core/baselines/store';
import { parsePythonJson } from '../../src/core/json';
import type { ProbeCall, ProbeOutcome, ProbeRunnerLike } from '../../src/core/probes/probe';
import { importedModules, oneShotProgram } from '../../src/core/probes/sources';
import { benchRecord, comparisonDocument, parseBenchConfig } from '../../src/core/bench/records';
import { probeTerminalCommand, TERMINAL_LOADER } from '../../src/core/terminal/command';
import { FrameFilter } from '../../src/core/terminal/frame';
import { formatLive, liveTargetOf, LiveThroughput, type LiveState } from '../../src/core/metrics/liveThroughput';
import { waitUntil } from '../support/process';
import { entry as e, listingsOf, rootListing } from '../support/listings';
import { parseFramedResult, terminalName } from '../../src/core/probes/catalogue';
import { PROBES } from '../../src/probes/choices';

const N = 'abc123';
const framed = (doc: string) => `\r\n@@KNOWN-GOOD-BEGIN ${N}@@\r\n${doc}\r\n@@KNOWN-GOOD-END ${N}@@\r\n`;

test('FrameFilter hides the framed block however the stream is cut, and keeps the rest in order', () => {
  const text = `progress 1\r\nprompt> ${framed('{"ok": true, "result": {"x": 1}}')}tail\r\n`;
  for (const size of [1, 2, 3, 7, 64, text.length]) {
    const f = new FrameFilter(N);
    let out = '';
    for (let i = 0; i < text.length; i += size) out += f.push(text.slice(i, i + size));
    out += f.flush();
    assert.doesNotMatch(out, /KNOWN-GOOD|"result"/, `chunk ${size}`);
    assert.match(out, /^progress 1\r\nprompt> \r\n.*result captured: \d+ B.*\r\ntail\r\n$/s, `chunk ${size}`);
    assert.equal(f.blocks, 1);
  }
});

test('FrameFilter passes text that only looks like a marker start, and a prompt without newline at once', () => {
  const f = new FrameFilter(N);
  assert.equal(f.push('name? '), 'name? ');
  assert.equal(f.push('@@KNOWN'), '');
  assert.equal(f.push('-BAD@@ x'), '@@KNOWN-BAD@@ x');
  // The trailing `@@` could start the real marker: it waits for the next chunk, then passes.
  assert.equal(f.push(`@@KNOWN-GOOD-BEGIN other@@`), `@@KNOWN-GOOD-BEGIN other`);
  assert.equal(f.push('\r\n'), '@@\r\n');
});

test('the terminal command carries the probe program in one argv word that decodes to the one-shot program', () => {
  const call = { probe: 'list_runs', modules: [], args: ['--', '/a b'] };
  const cmd = probeTerminalCommand('python3', call, N);
  assert.deepEqual(cmd.argv.slice(0, 4), ['python3', '-u', '-c', TERMINAL_LOADER]);
  assert.deepEqual(cmd.argv.slice(5), ['--', '/a b']);
  assert.equal(inflateSync(Buffer.from(cmd.argv[4]!, 'base64')).toString('utf8'), oneShotProgram(call, N));
  assert.match(cmd.display, /^python3 -u -c <loader> <python\/list_runs\.py: [\d.]+ KB zlib\+base64> -- '\/a b' {2}# /);
  // The largest probe fits in one argument word with room to spare.
  const ckptArgs = { probe: 'ckpt_args', modules: importedModules('ckpt_args'), args: [] };
  assert.ok(probeTerminalCommand('python3', ckptArgs, N).argv[4]!.length < 60 * 1024);
});

test('parseFramedResult: ok, probe error, missing frame', () => {
  const call = PROBES.find((p) => p.id === 'torchCheck')!.call({ hostLabel: 'h', roots: [] });
  const ok = JSON.stringify({
    ok: true,
    python: { executable: '/usr/bin/python3', version: '3.11.2' },
    result: {
      imported: false,
      importSeconds: 0.1,
      error: 'ModuleNotFoundError: torch',
      version: null,
      cuda: null,
      cudaAvailable: null,
      deviceCount: 0,
      devices: [],
      triton: null,
    },
  });
  assert.equal((parseFramedResult(call, ok, 'h').value as { imported: boolean }).imported, false);
  const bad = JSON.stringify({ ok: false, error: { message: 'boom', code: 'x' } });
  assert.throws(() => parseFramedResult(call, bad, 'h'), /torch_check on h: boom/);
  assert.throws(() => parseFramedResult(call, undefined, 'h'), /printed no result/);
  assert.equal(terminalName('GPU status', 'gpu-box'), 'Known Good: GPU status @ gpu-box');
});

test('bench config words: presets, JSON checked by the core schema, --compile', () => {
  assert.deepEqual(parseBenchConfig('tiny'), { device: 'cpu' });
  assert.deepEqual(parseBenchConfig('gpu', true), { device: 'cuda', compile: true });
  assert.deepEqual(parseBenchConfig('{"layers": 4, "seq": 512}'), { layers: 4, seq: 512 });
  assert.throws(() => parseBenchConfig('{"layers": -1}'), /layers/);
  assert.throws(() => parseBenchConfig('{"nope": 1}'), /nope|unrecognized/i);
  assert.throws(() => parseBenchConfig('huge'), /expected tiny, gpu or a JSON object/);
});

test('a bench result is kept with the host baselines and compared with a slower run', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-bench-'));
  try {
    const fixture = benchResultSchema.parse(
      parsePythonJson(readFileSync(join(__dirname, '../fixtures/bench/throughput_bench.cpu.json'), 'utf8')),
    );
    const store = new BaselineStore(dir);
    const host = 'ssh:me@gpu-box:22';
    const good = { ...fixture, tokensPerSec: { median: 12800, min: 12000, max: 13000 } };
    const slow = {
      ...fixture,
      tokensPerSec: { median: 4300, min: 4000, max: 4400 },
      fingerprint: { ...fixture.fingerprint, torch: '2.11.0' },
    };
    const a = await store.appendResult(
      host,
      benchRecord(good, { hostId: host, hostLabel: 'gpu-box', label: 'good-run', at: '2026-01-01T00:00:00Z' }),
    );
    const b = await store.appendResult(host, benchRecord(slow, { hostId: host, hostLabel: 'gpu-box', label: 'now' }));
    const listed = await store.listResults(host);
    assert.deepEqual(
      listed.results.map((r) => r.result['tokensPerSec']),
      [12800, 4300],
    );
    assert.equal(listed.results[1]!.result['host'], host);
    assert.equal((listed.results[1]!.result['fingerprint'] as { torch: string }).torch, '2.11.0');
    const doc = comparisonDocument(
      { result: b.result, label: 'now' },
      { result: a.result, label: 'good-run' },
      'gpu-box',
    );
    assert.match(doc, /4\.3K tok\/s now vs 12\.8K tok\/s at baseline "good-run" \(0\.34×\)/);
    assert.match(doc, /- torch: 2\.11\.0 \(baseline 1\.13\.0a0\)/);
    assert.match(doc, /same shape/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('custom benchmark: throughput by jsonl key from a log with a torn last line', () => {
  const log = [
    '{"step": 1, "perf": {"tok_per_s": 1000}}',
    '{"step": 2, "perf": {"tok_per_s": 3000}}',
    '{"step": 3, "perf": {"tok_p',
  ].join('\n');
  const r = throughputFromJsonl(log, 'perf.tok_per_s');
  assert.deepEqual(r?.used, [1000, 3000]);
  assert.equal(r?.tokensPerSec, 2000);
});

test('live target of tree nodes: a run folder picks its metrics jsonl, a train log file is itself', async () => {
  const root = rootListing('/ck', [
    e('run1', {
      kind: 'dir',
      role: 'dir',
      children: [
        e('run1/train.jsonl', { role: 'train-log', mtime: 5 }),
        e('run1/metrics.jsonl', { role: 'metrics', mtime: 1 }),
        e('run1/step_100', { kind: 'dir', role: 'checkpoint', step: 100, children: [] }),
      ],
    }),
    e('run2', { kind: 'dir', role: 'dir', children: [e('run2/step_1', { kind: 'dir', role: 'checkpoint' })] }),
  ]);
  const l = await listingsOf([root]);
  const live = (kind: 'run' | 'log' | 'checkpoint', path: string) =>
    liveTargetOf(l.resolve({ kind, hostId: 'local', path }));
  assert.deepEqual(live('run', '/ck/run1'), { hostId: 'local', path: '/ck/run1/metrics.jsonl' });
  assert.deepEqual(live('log', '/ck/run1/train.jsonl'), { hostId: 'local', path: '/ck/run1/train.jsonl' });
  assert.equal(live('checkpoint', '/ck/run1/step_100'), undefined);
  assert.equal(live('run', '/ck/run2'), undefined);
  assert.equal(live('run', '/ck/gone'), undefined);
});

test('live throughput polls only while visible, from the offset it reached, and forgets a target left', async () => {
  const calls: { path: string; offset: string }[] = [];
  let size = 100;
  const runner: ProbeRunnerLike = {
    run<R>(call: ProbeCall<R>): Promise<ProbeOutcome<R>> {
      const path = call.args[0]!;
      const offset = call.args[call.args.indexOf('--offset') + 1]!;
      calls.push({ path, offset });
      const from = Number(offset) < 0 ? 0 : Number(offset);
      const raw = {
        path,
        exists: true,
        inode: 7,
        size,
        mtime: 1,
        offset: from,
        nextOffset: size,
        reset: false,
        lines: [],
        count: 1,
        malformed: 0,
        hasMore: false,
        latest: { step: size, stepKey: 'step', tokensPerSec: 12800, tokensPerSecKey: 'tok_per_s' },
      };
      size += 50;
      return Promise.resolve({ value: call.parse(raw), python: { executable: 'p', version: '3' } });
    },
  };
  const states: LiveState[] = [];
  const live = new LiveThroughput({ runnerFor: () => runner, intervalMs: 20, onState: (s) => states.push(s) });
  live.follow({ hostId: 'h', path: '/a.jsonl' });
  // Hidden, it sets no timer at all: four intervals without a poll show it (a slow machine only polls later).
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(calls.length, 0, 'polled while hidden');
  live.setVisible(true);
  // Three polls answered, however long this machine takes for them.
  assert.ok(
    await waitUntil(() => states.filter((s) => s.kind === 'value').length >= 3, 30_000),
    `polls: ${calls.length}`,
  );
  live.setVisible(false);
  const n = calls.length;
  assert.deepEqual(
    calls.slice(0, 3).map((c) => c.offset),
    ['-1', '100', '150'],
  );
  const last = states[states.length - 1]!;
  assert.equal(last.kind, 'value');
  assert.match(formatLive(last), /^step \d+ · 12\.8K tok\/s$/);
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(calls.length, n, 'kept polling after it was hidden');
  live.follow(undefined);
  assert.equal(states[states.length - 1]!.kind, 'hidden');
  live.dispose();
});
