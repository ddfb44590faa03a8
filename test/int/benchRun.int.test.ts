import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { benchProcess } from '../../src/core/bench/run';
import { isKnownGoodError } from '../../src/core/errors';
import { LocalTransport } from '../../src/core/transport/local';
import { TORCH_PYTHON, requireTorch } from '../support/require';
import { TINY_CPU_BENCH } from '../support/tinyBench';

void describe('core/bench/run.ts: the one process run of throughput_bench.py (extension and CLI)', () => {
  const tiny = { ...TINY_CPU_BENCH, steps: 2, warmup: 0 } as const;

  void it('runs the probe through pipes, hides the frame, and parses the result in the epilogue and after', async () => {
    requireTorch();
    let inEpilogue: number | undefined;
    const bench = benchProcess({ transport: new LocalTransport(), python: TORCH_PYTHON, label: 'This machine' }, tiny, {
      pty: false,
      color: false,
      epilogue: (exit, result) => {
        inEpilogue = result().value.tokensPerSec.median;
        return Promise.resolve(exit.exitCode === 0 ? 'kept' : undefined);
      },
    });
    let shown = '';
    bench.runner.onOutput((t) => (shown += t));
    await bench.runner.start();
    const exit = await bench.runner.exited;
    assert.equal(exit.exitCode, 0, shown);
    const { value } = bench.result();
    assert.ok(value.tokensPerSec.median > 0);
    assert.equal(inEpilogue, value.tokensPerSec.median);
    assert.equal(value.config.layers, 1);
    assert.match(shown, /kept/);
    assert.doesNotMatch(shown, /@@KNOWN-GOOD-BEGIN/);
    // In words first, then the command as a person would run it by hand (not the packed script).
    assert.match(
      bench.command.display,
      /^\S+ -u throughput_bench\.py --layers 1 .*# throughput_bench\.py travels in the command line \([\d.]+ KB packed\)$/,
    );
    assert.match(
      shown,
      /^Known Good benchmark: .*2 timed steps after a first step and 0 warm-up \(3 in all\), \S+ on This machine\r?\n\$ /,
    );
  });

  void it('a run that printed no result says so, naming the probe and the host', async () => {
    const bench = benchProcess(
      { transport: new LocalTransport(), python: 'false', label: 'gpu box' },
      {},
      { pty: false },
    );
    await bench.runner.start();
    await bench.runner.exited;
    assert.throws(
      () => bench.result(),
      (e: unknown) =>
        isKnownGoodError(e, 'probe-failed') && /throughput_bench on gpu box printed no result/.test(e.message),
    );
  });
});
