import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hostInfoProbe } from '../../src/core/probes/hostProbes';
import { pythonDir } from '../../src/core/probes/sources';
import type { ProcessHandle, Transport } from '../../src/core/transport/types';
import { MeasuredProbeRunner, median, takeRequestCosts, timeIt, type BenchContext, type BenchResult } from '../context';

const run = promisify(execFile);
const N = 20;
const BATCHES = 8;
/** Untimed pause before each burst: well past kg_pool's IDLE_S, and long enough for the helper to make its spares. */
const IDLE_MS = 500;
const FORK_FLOOR = [
  'import os, time, json, re, struct, subprocess, threading, tempfile, shutil, socket, platform, zipfile, pickle',
  't = time.perf_counter()',
  'for _ in range(20):',
  '    r, w = os.pipe()',
  '    pid = os.fork()',
  '    if pid == 0:',
  '        os.write(w, b"x")',
  '        os._exit(0)',
  '    os.read(r, 1)',
  '    os.waitpid(pid, 0)',
  '    os.close(r)',
  '    os.close(w)',
  'print((time.perf_counter() - t) * 1000)',
].join('\n');

/**
 * Issue 2's target: 20 small requests through the resident helper on the pooled connection, once connected,
 * versus 20 separate `ssh HOST CMD` runs of the OpenSSH client (a handshake and a login shell that sources
 * ~/.bashrc each time). Targets: ≥ 100× (issue 2), ≤ 15 ms (issue 21). Measured two ways: awaited one after the
 * other, and all 20 in flight at once (what the tree does when it expands a host). Beside each, the floors on this
 * machine, measured the same way on channels of the same connection: the same number of lines echoed by `cat` (a
 * round trip through ssh2, sshd and a remote process that does nothing, which no request can beat), and the same
 * requests answered by bench/floor_relay.py, the least code that answers them, in its own process and with a child
 * forked ahead per request (the isolation the helper keeps: what a request costs here before any of our code).
 */
export async function benchHelperRequests(ctx: BenchContext): Promise<BenchResult[]> {
  const runner = await ctx.probes();
  await runner.run(hostInfoProbe()); // connect and start the helper: "once connected"
  takeRequestCosts();
  const sequential = await batches(async () => {
    for (let i = 0; i < N; i++) await runner.run(hostInfoProbe());
  });
  // Where one request's time goes, from the requests awaited one by one (in flight, each also waits for the others).
  const alone = takeRequestCosts();
  for (const c of Object.values(alone)) c.note = 'awaited one by one';
  const pipelined = await batches(() => Promise.all(Array.from({ length: N }, () => runner.run(hostInfoProbe()))));
  const transport = await ctx.transport();
  // The same bursts from a helper that has been idle past its shrink time (a minute; none here), which keeps one
  // spare: the first clicks after a pause find one process made ahead, not knownGood.helper.spares of them.
  const shrunk = new MeasuredProbeRunner(transport, { python: 'python3', timeoutMs: 120_000, shrinkAfterMs: 0 });
  let afterIdle: { sequential: number[]; pipelined: number[] };
  try {
    await shrunk.run(hostInfoProbe());
    afterIdle = {
      sequential: await batches(async () => {
        for (let i = 0; i < N; i++) await shrunk.run(hostInfoProbe());
      }),
      pipelined: await batches(() => Promise.all(Array.from({ length: N }, () => shrunk.run(hostInfoProbe())))),
    };
  } finally {
    shrunk.dispose();
  }
  const floor = await lineFloor(await transport.spawn(['cat']));
  // The same requests answered by the least code that can (bench/floor_relay.py): one process answering each itself,
  // and one handing each to a child forked before it came (the isolation the helper keeps, and nothing else).
  const inline = await relayFloor(transport, 'inline');
  const child = await relayFloor(transport, 'child');
  // Each request's own process: 20 forks of an interpreter with the helper's standard modules loaded, each child
  // writing a byte and leaving, awaited in turn, timed on the host (the least a fresh process per request costs).
  const forks = Number((await transport.exec(['python3', '-c', FORK_FLOOR])).stdout.trim());
  const argv = await ctx.sshArgv(
    `python3 -c 'import socket,os,json; print(json.dumps([socket.gethostname(), os.getcwd()]))'`,
  );
  const usual = await timeIt(async () => {
    for (let i = 0; i < N; i++) await run(argv[0]!, argv.slice(1));
  });
  const floorNote = (way: 'sequential' | 'pipelined') =>
    `floors here, measured the same way: ${N} lines echoed by a remote cat on the same connection ` +
    `${median(floor[way]).toFixed(1)} ms; host_info answered by a bare relay (bench/floor_relay.py) in its own ` +
    `process ${median(inline[way]).toFixed(1)} ms, by a child forked ahead per request ${median(child[way]).toFixed(1)} ` +
    `ms (p10 ${p10(child[way]).toFixed(1)}; ours p10 ${p10(way === 'sequential' ? sequential : pipelined).toFixed(1)}); ` +
    `${N} forks of the helper-sized interpreter on the host, one after the other, ${forks.toFixed(1)} ms`;

  return [
    {
      case: `${N} small requests, one after the other: resident helper on pooled ssh2 vs ${N}× ssh HOST CMD`,
      ours_ms: median(sequential),
      usual_ms: usual,
      target_ms: 15, // issue 21: the physical limit with each request in its own process
      note: floorNote('sequential'),
      request_ms: alone,
    },
    {
      case: `${N} small requests in flight at once: resident helper on pooled ssh2 vs ${N}× ssh HOST CMD`,
      ours_ms: median(pipelined),
      usual_ms: usual,
      target_ms: 15,
      note: floorNote('pipelined'),
      request_ms: alone,
    },
    {
      case: `${N} small requests one after the other, the helper idle past its shrink time (one spare left) vs ${N}× ssh HOST CMD`,
      ours_ms: median(afterIdle.sequential),
      usual_ms: usual,
      note: 'each spare past the first is made during the burst (~2.5 ms of CPU each on the host)',
      request_ms: alone,
    },
    {
      case: `${N} small requests in flight at once, the helper idle past its shrink time (one spare left) vs ${N}× ssh HOST CMD`,
      ours_ms: median(afterIdle.pipelined),
      usual_ms: usual,
      note: 'each spare past the first is made during the burst (~2.5 ms of CPU each on the host)',
      request_ms: alone,
    },
  ];
}

async function batches(fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let b = 0; b < BATCHES; b++) {
    // Each burst comes after a pause, as the tree's and the dashboard's do: the helper makes its spares while idle
    // (knownGood.helper.spares, kg_pool IDLE_S), so the pause is not timed; the burst is.
    await new Promise((r) => setTimeout(r, IDLE_MS));
    out.push(await timeIt(fn));
  }
  return out;
}

function p10(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * 0.1)]!;
}

/** bench/floor_relay.py on the host in `mode`, timed as the helper is: host_info's envelope per request line. */
async function relayFloor(
  transport: Transport,
  mode: 'inline' | 'child',
): Promise<{ sequential: number[]; pipelined: number[] }> {
  const program = readFileSync(join(__dirname, '..', 'floor_relay.py'), 'utf8');
  const relay = await transport.spawn(['python3', '-c', program, pythonDir(), mode]);
  const request = JSON.stringify({ id: 1, op: 'probe', name: 'host_info', hash: '0123456789abcdef', args: [] });
  return lineFloor(relay, request + '\n');
}

/**
 * N request lines through a remote process, awaited one by one and all at once, counting answer lines: with `cat`,
 * the round trip without any work.
 */
async function lineFloor(
  remote: ProcessHandle,
  request = '{"id": 1, "op": "ping"}\n',
): Promise<{ sequential: number[]; pipelined: number[] }> {
  let buffered = '';
  let waiting: { lines: number; done: () => void } | undefined;
  remote.stdout.on('data', (c: Buffer) => {
    buffered += c.toString('utf8');
    const lines = buffered.split('\n').length - 1;
    if (waiting && lines >= waiting.lines) {
      buffered = buffered.slice(buffered.lastIndexOf('\n') + 1);
      const w = waiting;
      waiting = undefined;
      w.done();
    }
  });
  let stderr = '';
  remote.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-2000)));
  const gone = remote.exited.then(() => {
    throw new Error(`the floor's remote process ended: ${stderr.trim()}`);
  });
  gone.catch(() => undefined);
  const echo = (lines: number) =>
    new Promise<void>((done, fail) => {
      gone.catch(fail);
      waiting = { lines, done };
      remote.stdin.write(request.repeat(lines));
    });
  try {
    await echo(1);
    const sequential = await batches(async () => {
      for (let i = 0; i < N; i++) await echo(1);
    });
    const pipelined = await batches(() => echo(N));
    return { sequential, pipelined };
  } finally {
    remote.stdin.end();
    remote.kill('TERM');
  }
}
