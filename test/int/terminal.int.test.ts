import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LiveThroughput, type LiveState } from '../../src/core/metrics/liveThroughput';
import { newNonce } from '../../src/core/util/nonce';
import { probeTerminalCommand, shellTerminalCommand } from '../../src/core/terminal/command';
import { parseFramedResult, torchCheckProbe } from '../../src/core/probes/catalogue';
import { probeChoice } from '../../src/probes/choices';
import { TerminalRunner, type RunnerExit } from '../../src/core/terminal/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { SshPool } from '../../src/core/transport/ssh';
import type { Transport } from '../../src/core/transport/types';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { startSshd, type TestSshd } from '../support/sshd';
import { processAlive, waitUntil } from '../support/process';

const alive = processAlive;

/** A runner with everything it shows collected, as a terminal would. */
function open(
  t: Transport,
  argv: string[],
  extra: { nonce?: string; pty?: boolean; display?: string; earlyMs?: number } = {},
) {
  const r = new TerminalRunner(t, { argv, display: argv.join(' '), color: false, ...extra });
  let screen = '';
  r.onOutput((s) => (screen += s));
  return {
    r,
    screen: () => screen,
    waitFor: async (re: RegExp, ms = 30_000) => {
      assert.ok(await waitUntil(() => re.test(screen), ms), `never saw ${re} in:\n${JSON.stringify(screen)}`);
    },
  };
}

describe('terminal runner over a real sshd (pty)', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let t: Transport;
  before(async () => {
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    t = pool.transport(endpointOf(sshd), 'test-sshd');
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
  });

  test('output and typed input round trip; the command line and exit code are shown', async () => {
    // The sleep keeps this failure out of the first second (that case has its own test below).
    const o = open(t, ['sh', '-c', 'echo ready; read line; echo "got:$line"; sleep 1.2; exit 3']);
    assert.equal(o.r.pty, true);
    const t0 = Date.now();
    await o.r.start({ cols: 100, rows: 30 });
    await o.waitFor(/ready\r\n/);
    o.r.write('hello wörld\r');
    const exit = await o.r.exited;
    assert.match(o.screen(), /^\$ sh -c echo ready; read line/);
    assert.match(o.screen(), /got:hello wörld\r\n/);
    assert.equal(exit.exitCode, 3);
    assert.equal(exit.early, false, `took ${Date.now() - t0} ms`);
    assert.match(o.screen(), /Process exited with code 3 after \d+\.\d s/);
  });

  test('resize reaches the remote (stty size)', async () => {
    const o = open(t, ['sh', '-c', 'stty size; read x; stty size']);
    await o.r.start({ cols: 91, rows: 17 });
    await o.waitFor(/17 91\r\n/);
    // No pause between: the window change and the keystroke travel in order on one channel, and sshd applies the
    // size before it writes the keystroke to the pty.
    o.r.resize({ cols: 132, rows: 41 });
    o.r.write('\r');
    await o.r.exited;
    assert.match(o.screen(), /41 132\r\n/);
  });

  test('Ctrl+C through the pty ends the remote process', async () => {
    const marker = `kg-ctrlc-${randomBytes(4).toString('hex')}`;
    const o = open(t, ['sh', '-c', `echo started; exec python3 -c "import time; time.sleep(300)" ${marker}`]);
    await o.r.start({ cols: 80, rows: 24 });
    await o.waitFor(/started/);
    assert.ok(await waitUntil(() => alive(marker), 30_000), 'remote process never seen');
    const t0 = Date.now();
    o.r.write('\x03');
    const exit = await o.r.exited;
    assert.ok(await waitUntil(() => !alive(marker), 30_000), 'still running after Ctrl+C');
    assert.ok(exit.exitCode !== 0 || exit.exitSignal !== undefined, JSON.stringify(exit));
    assert.match(o.screen(), /KeyboardInterrupt|signal INT\b|exited with code/);
    assert.equal(exit.early, false, 'an interrupt is not an early failure');
    console.log(`Ctrl+C → remote gone in ${Date.now() - t0} ms`);
  });

  test('closing the terminal (stop) ends the remote process', async () => {
    const marker = `kg-close-${randomBytes(4).toString('hex')}`;
    const o = open(t, ['sh', '-c', `echo started; exec python3 -c "import time; time.sleep(300)" ${marker}`]);
    await o.r.start({ cols: 80, rows: 24 });
    await o.waitFor(/started/);
    assert.ok(await waitUntil(() => alive(marker), 30_000));
    const t0 = Date.now();
    o.r.stop();
    const exit = await o.r.exited;
    assert.equal(exit.stopped, true);
    assert.ok(await waitUntil(() => !alive(marker), 30_000), 'still running after the terminal closed');
    console.log(`close → remote gone in ${Date.now() - t0} ms`);
  });

  test('a failure in the first second is flagged early, with the message; a later one is not', async () => {
    // The window is wider than a second here: this machine's load stretches the remote login shell's start.
    const o = open(t, ['no-such-command-kg'], { earlyMs: 8000 });
    await o.r.start();
    const exit: RunnerExit = await o.r.exited;
    assert.equal(exit.exitCode, 127);
    assert.equal(exit.early, true);
    assert.match(o.screen(), /not found/);
    assert.match(o.screen(), /failed within its first second/);
    const late = open(t, ['sh', '-c', 'sleep 1; exit 4'], { earlyMs: 300 });
    await late.r.start();
    const lateExit = await late.r.exited;
    assert.equal(lateExit.exitCode, 4);
    assert.equal(lateExit.early, false);
    assert.doesNotMatch(late.screen(), /first second/);
  });

  test('a probe run in the terminal form: framed JSON captured, hidden from the screen', async () => {
    const nonce = newNonce();
    const choice = probeChoice('gpuStatus');
    const call = choice.call({ hostLabel: 'x', roots: [] });
    const cmd = probeTerminalCommand('python3', call, nonce);
    const o = open(t, cmd.argv, { nonce, display: cmd.display });
    await o.r.start({ cols: 80, rows: 24 });
    const exit = await o.r.exited;
    assert.equal(exit.exitCode, 0, o.screen());
    const { value } = parseFramedResult(call, o.r.framed(), 'test-sshd');
    assert.equal((value as { source: string }).source, 'none');
    assert.doesNotMatch(o.screen(), /KNOWN-GOOD-BEGIN|"processes"/);
    assert.match(o.screen(), /result captured: \d+ B of JSON/);
    assert.match(o.screen(), /nvidia-smi not found/);
    assert.match(o.screen(), /passed as an argv word/);
  });

  test('probe arguments with spaces and quotes arrive intact in the terminal form', async () => {
    const nonce = newNonce();
    const call = probeChoice('listRuns').call({ hostLabel: 'x', roots: [`/tmp/no such 'root' $HOME`] });
    const cmd = probeTerminalCommand('python3', call, nonce);
    const o = open(t, cmd.argv, { nonce });
    await o.r.start();
    await o.r.exited;
    const { value } = parseFramedResult(call, o.r.framed(), 'test-sshd');
    const roots = (value as { roots: { path: string; status: string }[] }).roots;
    assert.equal(roots[0]?.path, `/tmp/no such 'root' $HOME`);
    assert.equal(roots[0]?.status, 'missing');
  });
});

describe('terminal runner on This machine (pipes, own line discipline)', () => {
  const t = new LocalTransport();

  test('typed input is echoed and sent on Enter; backspace edits', async () => {
    const o = open(t, ['sh', '-c', 'echo ready; read line; echo "got:$line"']);
    assert.equal(o.r.pty, false);
    await o.r.start();
    await o.waitFor(/ready\r\n/);
    o.r.write('helo');
    o.r.write('\x7f');
    o.r.write('lo\r');
    const exit = await o.r.exited;
    assert.equal(exit.exitCode, 0);
    assert.ok(o.screen().includes('helo\b \blo\r\n'), JSON.stringify(o.screen()));
    assert.match(o.screen(), /got:hello\r\n/);
  });

  test('Ctrl+C becomes SIGINT of the process group; closing ends it', async () => {
    const marker = `kg-local-${randomBytes(4).toString('hex')}`;
    const o = open(t, ['sh', '-c', `echo started; python3 -c "import time; time.sleep(300)" ${marker}; echo after`]);
    await o.r.start();
    await o.waitFor(/started/);
    assert.ok(await waitUntil(() => alive(marker), 30_000));
    o.r.write('\x03');
    await o.r.exited;
    assert.ok(await waitUntil(() => !alive(marker), 30_000), 'child survived Ctrl+C');
    assert.match(o.screen(), /\^C/);

    const marker2 = `kg-local2-${randomBytes(4).toString('hex')}`;
    const o2 = open(t, ['sh', '-c', `echo started; python3 -c "import time; time.sleep(300)" ${marker2}`]);
    await o2.r.start();
    await o2.waitFor(/started/);
    assert.ok(await waitUntil(() => alive(marker2), 30_000));
    o2.r.stop();
    assert.equal((await o2.r.exited).stopped, true);
    assert.ok(await waitUntil(() => !alive(marker2), 30_000), 'child survived close');
  });

  test("Ctrl+C or closing while the epilogue works (the restore's benchmarks) ends that work too", async () => {
    for (const how of ['ctrl-c', 'close'] as const) {
      const marker = `kg-epi-${how}-${randomBytes(4).toString('hex')}`;
      let entered!: () => void;
      const inEpilogue = new Promise<void>((r) => (entered = r));
      const r = new TerminalRunner(t, {
        argv: ['sh', '-c', 'echo built'],
        display: 'sh',
        color: false,
        // the epilogue's own work: a real process that runs until the signal stops it
        epilogue: async (_exit, _runner, signal) => {
          const work = t.exec(['python3', '-c', 'import time; time.sleep(300)', marker], { signal });
          entered();
          await work;
          return 'finished';
        },
      });
      let screen = '';
      r.onOutput((x) => (screen += x));
      await r.start();
      await inEpilogue;
      assert.ok(await waitUntil(() => alive(marker), 30_000), "the epilogue's process never started");
      if (how === 'ctrl-c') r.write('\x03');
      else r.stop();
      const exit = await r.exited;
      assert.equal(exit.exitCode, 0, 'the process itself had ended well');
      assert.ok(await waitUntil(() => !alive(marker), 30_000), `${how}: the epilogue's process survived`);
      assert.doesNotMatch(screen, /finished/);
      assert.match(screen, /✗ /, screen);
      if (how === 'ctrl-c') assert.match(screen, /\^C/);
    }
  });

  test('a command that is not there fails early with the message', async () => {
    const o = open(t, ['no-such-command-kg']);
    await o.r.start();
    const exit = await o.r.exited;
    assert.equal(exit.early, true);
    assert.match(exit.error ?? '', /not found/);
    assert.match(o.screen(), /✗ no-such-command-kg not found/);
  });

  test('the user benchmark command: output read by regex (through sh -c)', async () => {
    const cmd = shellTerminalCommand('for i in 1 2 3; do echo "step $i | 12,8${i}0 tok/s"; done');
    const o = open(t, cmd.argv);
    await o.r.start();
    await o.r.exited;
    const { throughputFromOutput } = await import('../../src/core/bench/customBenchmark');
    const reading = throughputFromOutput(o.r.output, '([\\d,.]+[KM]?) tok/s');
    assert.deepEqual(reading?.used, [12810, 12820, 12830]);
    assert.equal(reading?.tokensPerSec, 12820);
  });

  test('torch_check in the terminal form (the real torch here)', { timeout: 120_000 }, async () => {
    const nonce = newNonce();
    const call = torchCheckProbe();
    const cmd = probeTerminalCommand('/usr/bin/python3', call, nonce);
    const o = open(t, cmd.argv, { nonce });
    await o.r.start();
    const exit = await o.r.exited;
    assert.equal(exit.exitCode, 0, o.screen());
    const { value } = parseFramedResult(call, o.r.framed(), 'local');
    assert.equal(value.imported, true, value.error ?? '');
    assert.match(value.version ?? '', /^\d+\.\d+/);
    assert.match(o.screen(), /imported in \d/);
  });
});

describe('live throughput through the resident helper', () => {
  test('a growing metrics log: newest step and tok/s, only new bytes read, a torn line waits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-live-'));
    const log = join(dir, 'metrics.jsonl');
    const line = (step: number) => JSON.stringify({ step, loss: 2.5, tok_per_s: 12000 + step }) + '\n';
    writeFileSync(log, Array.from({ length: 2000 }, (_, i) => line(i + 1)).join(''));
    const runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 30000 });
    const states: LiveState[] = [];
    const live = new LiveThroughput({
      runnerFor: () => runner,
      intervalMs: 1_000_000,
      maxBytes: 4096,
      onState: (s) => states.push(s),
    });
    try {
      live.follow({ hostId: 'local', path: log });
      await live.poll();
      let s = states[states.length - 1]!;
      assert.equal(s.kind, 'value');
      assert.equal(s.kind === 'value' && s.latest.step, 2000);
      assert.ok(live.bytesRead <= 4096, `first poll read ${live.bytesRead} bytes of a ${2000 * 50}-byte log`);

      const before = live.bytesRead;
      appendFileSync(log, line(2001) + line(2002).slice(0, 10));
      await live.poll();
      s = states[states.length - 1]!;
      assert.equal(s.kind === 'value' && s.latest.step, 2001, 'the torn line 2002 must wait');
      assert.equal(live.bytesRead - before, line(2001).length);

      appendFileSync(log, line(2002).slice(10));
      await live.poll();
      s = states[states.length - 1]!;
      assert.equal(s.kind === 'value' && s.latest.step, 2002);
      assert.equal(s.kind === 'value' && s.latest.tokensPerSec, 14002);
      console.log(`live throughput: ${live.polls} polls, ${live.bytesRead} bytes read for a ${2002 * 50}+ byte log`);
    } finally {
      live.dispose();
      runner.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
