import type { HelperTiming, ProbeCall, ProbeOutcome } from '../src/core/probes/probe';
import { ProbeRunner, type RunOptions } from '../src/core/probes/runner';
import { pythonDir } from '../src/core/probes/sources';
import { SshPool } from '../src/core/transport/ssh';
import type { Transport } from '../src/core/transport/types';
import { endpointOf, recordingPrompts, sshOptions } from '../test/support/hosts';
import { opensshArgs, startSshd, type TestSshd } from '../test/support/sshd';

export interface BenchResult {
  case: string;
  ours_ms: number;
  usual_ms: number;
  ratio?: number;
  note?: string;
  /** Peak RSS (MB) on the remote of each probe the case ran, from the answers' footprint. */
  remote_rss_mb?: Record<string, number>;
  /** The target for `ours_ms`, printed beside it. */
  target_ms?: number;
  /** Where one request of each probe the case ran through the helper spent its time (medians, ms). */
  request_ms?: Record<string, RequestCost>;
  /** The link's round-trip time the case ran over (bench "links": a delay relay), ms. */
  rttMs?: number;
  /** Round trips counted at the relay for `ours` (the most of its runs) and for the usual way, and the target. */
  roundTrips?: number;
  usualRoundTrips?: number;
  targetRoundTrips?: number;
}

/** One request of a probe through the resident helper: the client's wall time and the helper's own phases. */
export interface RequestCost {
  n: number;
  wall: number;
  /** wall minus the helper's total: the client, ssh2, sshd and the channel, both ways. */
  transport: number;
  /** From the client's call to the helper reading the request (the helper's clock is the client's here: one host):
   * the client's request, ssh2, sshd, the helper woken. */
  wayIn: number;
  /** From the answer written (by the request's child, or the helper) to the client's call returning: sshd, ssh2,
   * the client's parse and validation. */
  wayOut: number;
  helper: Omit<HelperTiming, 'how' | 'direct' | 'at'>;
  how: Record<string, number>;
  /** Which of the case's requests these are, where not all. */
  note?: string;
}

const requests = new Map<string, { wall: number; wayIn: number; timing: HelperTiming }[]>();

/** The costs of the requests seen since the last call, per probe, and a fresh start for the next case. */
export function takeRequestCosts(): Record<string, RequestCost> {
  const out: Record<string, RequestCost> = {};
  for (const [probe, seen] of requests) {
    const phase = (k: keyof Omit<HelperTiming, 'how' | 'direct' | 'at'>) => median(seen.map((r) => r.timing[k]));
    const helper = {
      parse: phase('parse'),
      compile: phase('compile'),
      handoff: phase('handoff'),
      exec: phase('exec'),
      setup: phase('setup'),
      run: phase('run'),
      frame: phase('frame'),
      pipe: phase('pipe'),
      total: phase('total'),
    };
    const how: Record<string, number> = {};
    for (const r of seen) {
      const k = r.timing.direct ? `${r.timing.how}+direct` : r.timing.how;
      how[k] = (how[k] ?? 0) + 1;
    }
    const wall = median(seen.map((r) => r.wall));
    out[probe] = {
      n: seen.length,
      wall,
      transport: median(seen.map((r) => r.wall - r.timing.total)),
      wayIn: median(seen.map((r) => r.wayIn)),
      wayOut: median(seen.map((r) => r.wall - r.wayIn - r.timing.total)),
      helper,
      how,
    };
  }
  requests.clear();
  return out;
}

/** Peak RSS (kB) of each probe on the remote since the last `takeRemotePeaks`. */
const remotePeaks = new Map<string, number>();

function notePeak<R>(probe: string, outcome: ProbeOutcome<R>): ProbeOutcome<R> {
  const kb = outcome.footprint?.maxRssKb;
  if (kb !== undefined) remotePeaks.set(probe, Math.max(remotePeaks.get(probe) ?? 0, kb));
  return outcome;
}

/** The peaks seen since the last call (MB, one decimal), and a fresh start for the next case. */
export function takeRemotePeaks(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [probe, kb] of remotePeaks) out[probe] = Math.round((kb / 1024) * 10) / 10;
  remotePeaks.clear();
  return out;
}

/** A ProbeRunner that notes each probe's remote footprint for the report (the cases use it, never a bare one). */
export class MeasuredProbeRunner extends ProbeRunner {
  override async run<R>(call: ProbeCall<R>, options?: RunOptions): Promise<ProbeOutcome<R>> {
    const t0 = monotonicS();
    const outcome = await super.run(call, { ...options, timing: true });
    const wall = (monotonicS() - t0) * 1000;
    if (outcome.timing) {
      const seen = requests.get(call.probe) ?? [];
      // The helper stamps when it read the request on CLOCK_MONOTONIC, the clock of process.hrtime: one host here.
      const wayIn = outcome.timing.at !== undefined ? (outcome.timing.at - t0) * 1000 : NaN;
      seen.push({ wall, wayIn, timing: outcome.timing });
      requests.set(call.probe, seen);
    }
    return notePeak(call.probe, outcome);
  }

  override async runOnce<R>(call: ProbeCall<R>, options?: RunOptions): Promise<ProbeOutcome<R>> {
    return notePeak(call.probe, await super.runOnce(call, options));
  }
}

/** What the cases share: one real sshd on loopback, one pooled connection to it, one resident helper. */
export class BenchContext {
  private sshdP: Promise<TestSshd> | undefined;
  private pool: SshPool | undefined;
  private runner: ProbeRunner | undefined;
  private transportV: Transport | undefined;

  sshd(): Promise<TestSshd> {
    // The user's own HOME: the usual `ssh HOST CMD` pays for its ~/.bashrc as it would on a real host.
    this.sshdP ??= startSshd({ userHome: true });
    return this.sshdP;
  }

  async transport(): Promise<Transport> {
    if (!this.transportV) {
      const sshd = await this.sshd();
      this.pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
      this.transportV = this.pool.transport(endpointOf(sshd), 'bench-sshd');
    }
    return this.transportV;
  }

  /** The raw ssh2 client of the pooled connection (for the SFTP comparison). */
  async sshClient(): Promise<import('ssh2').Client> {
    await this.transport();
    const sshd = await this.sshd();
    return this.pool!.connection(endpointOf(sshd)).ready();
  }

  async probes(python = 'python3'): Promise<ProbeRunner> {
    if (!this.runner || this.runner.python !== python) {
      this.runner?.dispose();
      this.runner = new MeasuredProbeRunner(await this.transport(), { python, timeoutMs: 120000 });
    }
    return this.runner;
  }

  /** `ssh … user@127.0.0.1 CMD` with the OpenSSH client: the usual way, a new connection and login shell each time. */
  async sshArgv(command: string): Promise<string[]> {
    return ['ssh', ...opensshArgs(await this.sshd(), command)];
  }

  async dispose(): Promise<void> {
    this.runner?.dispose();
    this.pool?.dispose();
    if (this.sshdP) await (await this.sshdP).stop();
  }
}

/** CLOCK_MONOTONIC in seconds: Python's time.perf_counter on Linux reads the same clock. */
export function monotonicS(): number {
  return Number(process.hrtime.bigint()) / 1e9;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export async function timeIt(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

/**
 * The floor of one request on this connection, measured as the cases measure theirs: the median of `n` single lines
 * echoed by a remote `cat` on a channel of the pooled connection, each awaited, each after the same untimed pause
 * (`idlePause`) when `pauseMs` is given (ssh2, sshd and a process that does nothing: no request can beat it).
 */
export async function echoFloorMs(ctx: BenchContext, n = 20, pauseMs?: number): Promise<number> {
  const cat = await (await ctx.transport()).spawn(['cat']);
  let seen = 0;
  let wake: (() => void) | undefined;
  cat.stdout.on('data', (c: Buffer) => {
    seen += c.toString('utf8').split('\n').length - 1;
    wake?.();
  });
  const echo = async (): Promise<number> => {
    const want = seen + 1;
    return timeIt(async () => {
      const got = new Promise<void>((r) => (wake = () => seen >= want && r()));
      cat.stdin.write('{"id": 1, "op": "ping"}\n');
      await got;
    });
  };
  try {
    await echo();
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      if (pauseMs !== undefined) await idlePause(pauseMs);
      out.push(await echo());
    }
    return median(out);
  } finally {
    cat.stdin.end();
    cat.kill('TERM');
  }
}

const PROBE_WORK = [
  'import importlib, json, sys, time',
  'sys.path.insert(0, sys.argv[1])',
  'import kg_common',
  'mod = importlib.import_module(sys.argv[2])',
  'pause, n, args = float(sys.argv[3]) / 1000, int(sys.argv[4]), sys.argv[5:]',
  'limits = kg_common.probe_limits(mod.main)',
  'def once():',
  '    t = time.perf_counter()',
  '    kg_common.call_probe(mod.main, args, limits)',
  '    return (time.perf_counter() - t) * 1000',
  'once()',
  'warm = sorted(once() for _ in range(n))',
  'paused = []',
  'for _ in range(n):',
  '    time.sleep(pause)',
  '    paused.append(once())',
  'paused.sort()',
  'print(json.dumps({"warm": warm[n // 2], "paused": paused[n // 2]}))',
].join('\n');

/**
 * What a probe's own work costs on the host, in one interpreter that stays up (no helper, no child, no channel):
 * the median of `n` calls back to back, and of `n` calls each after the same untimed pause in which the process
 * sleeps (`pauseMs`). The second is what this host charges any process for the same instructions after a pause (on
 * the 2-vCPU VM here, 4-5x the first: its caches went cold); a request's child, asleep since it was made, pays it.
 */
export async function probeWorkMs(
  ctx: BenchContext,
  call: { probe: string; args: readonly string[] },
  pauseMs: number,
  n = 7,
): Promise<{ warm: number; paused: number }> {
  const t = await ctx.transport();
  const argv = ['python3', '-c', PROBE_WORK, pythonDir(), call.probe, String(pauseMs), String(n), ...call.args];
  return JSON.parse((await t.exec(argv)).stdout) as { warm: number; paused: number };
}

export const IDLE_PAUSE_MS = 200;

/** Untimed, before each request a case times: the pause the user's clicks and the dashboard's polls leave, in which
 * the resident helper makes its spares (knownGood.helper.spares, kg_pool IDLE_S 50 ms). */
export function idlePause(ms = IDLE_PAUSE_MS): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
