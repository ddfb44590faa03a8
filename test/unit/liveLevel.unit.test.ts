import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { IncrementalLogReader } from '../../src/core/metrics/logTail';
import { formatLive } from '../../src/core/metrics/liveThroughput';
import type { ProbeCall, ProbeOutcome, ProbeRunnerLike } from '../../src/core/probes/probe';

/*
 * The status bar shows the run's current level (issue 22): the median of the recent throughput values, not the last
 * logged point, which in a real loop is often a checkpoint save or an eval pause. The real python/log_tail.py reads a
 * real file here; only the transport is left out.
 */

const runner: ProbeRunnerLike = {
  run<R>(call: ProbeCall<R>): Promise<ProbeOutcome<R>> {
    const out = execFileSync('python3', [join('python', 'log_tail.py'), ...call.args], { encoding: 'utf8' });
    return Promise.resolve({ value: call.parse(JSON.parse(out)), python: { executable: 'python3', version: '3' } });
  },
};

/** A line of a loop at 564K tok/s whose every 10th window is a save at a tenth of the speed. */
function line(step: number): string {
  return JSON.stringify({ step, tok_s: step % 100 === 0 ? 57_000 : 564_000 + (step % 7) * 100, loss: 2 }) + '\n';
}

void test('the live level is the median of the recent values: a save stall as the last point does not show', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-level-'));
  try {
    const path = join(dir, 'train_log.jsonl');
    writeFileSync(path, Array.from({ length: 100 }, (_, i) => line((i + 1) * 10)).join(''));
    const reader = new IncrementalLogReader(runner, path, { fromEnd: true, latestOnly: true });
    const first = await reader.poll();
    assert.equal(first.latest?.tokensPerSec, 57_000, 'the last point is a stall');
    assert.ok(first.level !== null && first.level > 560_000, `level ${first.level}`);
    const state = {
      kind: 'value' as const,
      target: { hostId: 'h', path },
      latest: first.latest,
      level: first.level,
      bytes: 1,
      at: 0,
    };
    assert.equal(formatLive(state), 'step 1000 · 564.2K tok/s');
    // appended lines move the window on; a slowdown shows once it is most of the window
    appendFileSync(
      path,
      Array.from({ length: 5 }, (_, i) => JSON.stringify({ step: 1010 + i * 10, tok_s: 200_000 }) + '\n').join(''),
    );
    const second = await reader.poll();
    assert.ok(second.level! > 560_000, `still the old level after 5 of 21: ${second.level}`);
    appendFileSync(
      path,
      Array.from({ length: 10 }, (_, i) => JSON.stringify({ step: 1060 + i * 10, tok_s: 200_000 }) + '\n').join(''),
    );
    const third = await reader.poll();
    assert.equal(third.level, 200_000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
