import { deflateSync, inflateSync } from 'node:zlib';
import { KnownGoodError, isKnownGoodError, messageOf, type ErrorCode } from '../errors';
import { parsePythonJson } from '../json';
import type { ProbeCall, ProbeOutcome, ProbeProgram } from '../probes/probe';
import { LineSplitter, extractFramed, probeOutcome } from '../probes/runner';
import { newNonce } from '../util/nonce';
import { oneShotProgram, probeSource, pyLiteral } from '../probes/sources';
import { naturalCompare } from '../util/format';
import type { ProcessHandle } from '../transport/types';
import { checkJobId, joinNodes, runningJob, slurmArgv, slurmErrorText, type FleetHost } from './slurm';

/** Which nodes: those of a running job (all, or some of them), or nodes outside any job (`srun -w`, if allowed). */
export type FleetTarget =
  { kind: 'job'; jobId: string; nodes?: readonly string[] } | { kind: 'nodes'; nodes: readonly string[] };

export type NodeResult<R> =
  | { node: string; ok: true; outcome: ProbeOutcome<R>; seconds: number | null; bytes: number }
  | { node: string; ok: false; error: { code: ErrorCode; message: string }; seconds: number | null; bytes: number };

export interface FleetRunResult<R> {
  host: string;
  probe: string;
  target: FleetTarget;
  /** Every node asked, in natural order (n2 before n10), answered or not. */
  nodes: NodeResult<R>[];
  /** srun steps used (nodes / maxNodesPerStep, rounded up). */
  steps: number;
  wallMs: number;
  /** Bytes of the program piped to each step (srun forwards them to every node). */
  stdinBytes: number;
}

export interface FleetRunOptions {
  signal?: AbortSignal;
  /** Called as each node answers or fails (the tree can fill in node by node). */
  onNode?(result: NodeResult<unknown>): void;
  /** Overrides the host's `nodeTimeoutS`. */
  nodeTimeoutMs?: number;
  /** Time a step may take beyond the per-node timeout (srun start-up, step launch on many nodes). */
  stepGraceMs?: number;
  /**
   * Every node prints a heartbeat this often; a node silent for 4 beats (at least 15 s: loading a big C extension
   * such as libtorch can hold Python's GIL, and so the heartbeat thread, for seconds on a busy node) is reported
   * lost at once. Slurm itself notices a dead node only after SlurmdTimeout, often minutes. Default 5 s.
   */
  heartbeatMs?: number;
}

/**
 * What one node's answer (stdout, stderr and seconds, deflated by kg_fleet.py) may inflate to: beyond it that node
 * fails with the bound named. A node runs code of whoever can write its Python path; its answer must never take the
 * extension down (without a bound, 2.6 MiB of base64 inflated to 4 GB of RSS before failing).
 */
export const MAX_NODE_ANSWER_BYTES = 64 * 1024 * 1024;
/** What all the answers of one srun step may inflate to together (and arrive as, in base64). */
export const MAX_STEP_ANSWER_BYTES = 256 * 1024 * 1024;

/** The bounds of one step's answers; nodeResult takes each answer's size from `stepLeft`. */
export interface AnswerBudget {
  perNode: number;
  step: number;
  stepLeft: number;
}

export function answerBudget(perNode = MAX_NODE_ANSWER_BYTES, step = MAX_STEP_ANSWER_BYTES): AnswerBudget {
  return { perNode, step, stepLeft: step };
}

/** base64 of deflated data: at most 4/3 of the inflated size plus deflate's few bytes per block. */
function wireBound(inflated: number): number {
  return Math.ceil((inflated * 4) / 3) + 64 * 1024;
}

function mib(bytes: number): string {
  if (bytes < 1048576) return `${Math.round(bytes / 1024)} KiB`;
  return `${Math.round((bytes / 1048576) * 10) / 10} MiB`;
}

/** What srun's stream said about one node: its reassembled payload and how it ended. */
interface NodeStream {
  chunks: string[];
  /** Characters of chunks received (bounded per node and per step). */
  size?: number;
  status?: string;
  /** Date.now() of its last line (heartbeat or data). */
  lastSeen: number;
}

const LINE = /^@@KG-FLEET(-END|-BEAT)? (\S+) (\S+) (\d+)(?: (.*))?$/;

/** Demultiplexes the tagged lines of one step's stdout (python/kg_fleet.py) per node; other lines are ignored. */
export class FleetStreamParser {
  readonly nodes = new Map<string, NodeStream>();
  bytes = 0;
  /** Characters of payload chunks held, all nodes together (bounded by the step's budget). */
  private held = 0;
  /** Date.now() of the first tagged line of any node: the step is running from then on. */
  firstLineAt: number | undefined;

  constructor(
    private readonly nonce: string,
    private readonly onEnd: (node: string) => void = () => undefined,
    private readonly budget: AnswerBudget = answerBudget(),
  ) {}

  line(text: string): void {
    this.bytes += text.length + 1;
    const m = LINE.exec(text);
    if (!m || m[2] !== this.nonce) return;
    const node = m[3]!;
    this.firstLineAt ??= Date.now();
    let s = this.nodes.get(node);
    if (!s) this.nodes.set(node, (s = { chunks: [], lastSeen: 0 }));
    s.lastSeen = Date.now();
    if (m[1] === '-BEAT') return;
    if (m[1]) {
      if (s.status !== undefined) return;
      const count = Number(m[4]);
      let missing = s.chunks.length !== count;
      // A sparse array: `some` would skip the holes a lost chunk leaves.
      for (let i = 0; i < count && !missing; i++) missing = s.chunks[i] === undefined;
      s.status = missing ? 'garbled' : (m[5] ?? 'exit=1');
      this.onEnd(node);
    } else if (s.status === undefined) {
      const chunk = m[5] ?? '';
      const mine = (s.size ?? 0) + chunk.length;
      const over =
        mine > wireBound(this.budget.perNode)
          ? 'too-large-node'
          : this.held + chunk.length > wireBound(this.budget.step)
            ? 'too-large-step'
            : undefined;
      if (over) {
        // Dropped at once, not held until its end line: the node is done as far as this step is concerned.
        this.held -= mine - chunk.length;
        s.chunks = [];
        s.status = over;
        this.onEnd(node);
        return;
      }
      this.held += chunk.length;
      s.size = mine;
      s.chunks[Number(m[4])] = chunk;
    }
  }
}

interface NodePayload {
  out: string;
  err: string;
  seconds: number | null;
}

function decodePayload(chunks: string[], budget: AnswerBudget): NodePayload {
  const limit = Math.min(budget.perNode, budget.stepLeft);
  let raw: Buffer;
  try {
    raw = inflateSync(Buffer.from(chunks.join(''), 'base64'), { maxOutputLength: Math.max(1, limit) });
  } catch (e) {
    if ((e as { code?: unknown }).code !== 'ERR_BUFFER_TOO_LARGE') throw e;
    throw new KnownGoodError(
      'bad-output',
      limit < budget.perNode
        ? `would take the step's answers past ${mib(budget.step)} inflated (the per-step bound); dropped`
        : `inflates past ${mib(budget.perNode)} (the per-node bound); dropped`,
    );
  }
  budget.stepLeft -= raw.length;
  const doc = JSON.parse(raw.toString('utf8')) as Partial<NodePayload>;
  return {
    out: String(doc.out ?? ''),
    err: String(doc.err ?? ''),
    seconds: typeof doc.seconds === 'number' ? doc.seconds : null,
  };
}

function tail(text: string, lines = 3): string {
  return text.trim().split('\n').slice(-lines).join(' | ');
}

/**
 * The program piped to `python3 -` on every node: kg_fleet, then the probe's one-shot program (with the modules it
 * declared) under its watchdog.
 * srun sends stdin to every node separately, so it goes compressed: ~23 KB instead of ~67 KB for env_snapshot.
 */
export function fleetProgram(program: ProbeProgram, nonce: string, timeoutS: number, beatS = 5): string {
  const full = `${probeSource('kg_fleet').source}\nfleet_main(${pyLiteral(oneShotProgram(program, nonce))}, ${pyLiteral(nonce)}, ${timeoutS}, ${beatS})\n`;
  const packed = deflateSync(Buffer.from(full, 'utf8'), { level: 9 }).toString('base64');
  return `import zlib as _kg_z, base64 as _kg_b\nexec(compile(_kg_z.decompress(_kg_b.b64decode("${packed}")), "kg_fleet.py", "exec"))\n`;
}

/** One node's result from its stream (or from its absence, with srun's word about it). */
export function nodeResult<R>(
  call: ProbeCall<R>,
  node: string,
  stream: NodeStream | undefined,
  nonce: string,
  where: string,
  srunStderr: string,
  why: 'ended' | 'timeout' | 'cancelled' | 'lost',
  silentMs = 0,
  budget: AnswerBudget = answerBudget(),
): NodeResult<R> {
  const bytes = stream ? stream.chunks.reduce((n, c) => n + c.length, 0) : 0;
  const fail = (code: ErrorCode, message: string, seconds: number | null = null): NodeResult<R> => ({
    node,
    ok: false,
    error: { code, message },
    seconds,
    bytes,
  });
  const said = srunStderr
    .split('\n')
    .filter((l) => new RegExp(`(^|[\\s:])${node.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}([\\s:]|$)`).test(l))
    .slice(0, 3)
    .map((l) => l.trim())
    .join(' | ');
  if (why === 'lost' && stream?.status === undefined) {
    const what = stream
      ? `the node stopped answering (no heartbeat for ${Math.round(silentMs / 1000)} s)`
      : `the node never started the probe (nothing from it ${Math.round(silentMs / 1000)} s after the first node answered)`;
    return fail('connection-lost', `${call.probe} on ${node}: ${what}${said ? `; srun: ${said}` : ''}`);
  }
  if (!stream || stream.status === undefined) {
    return fail(
      why === 'timeout' ? 'timeout' : why === 'cancelled' ? 'cancelled' : 'connection-lost',
      `${call.probe} on ${node}: no answer (${why === 'timeout' ? 'the step ran past its deadline' : why === 'cancelled' ? 'cancelled' : 'srun ended first'})${said ? `; srun: ${said}` : ''}`,
    );
  }
  if (stream.status === 'garbled') return fail('bad-output', `${call.probe} on ${node}: its answer arrived incomplete`);
  if (stream.status === 'too-large-node' || stream.status === 'too-large-step') {
    return fail(
      'bad-output',
      stream.status === 'too-large-node'
        ? `${call.probe} on ${node}: its answer passed ${mib(wireBound(budget.perNode))} of base64 (the per-node bound, ${mib(budget.perNode)} inflated); dropped`
        : `${call.probe} on ${node}: the step's answers passed ${mib(wireBound(budget.step))} of base64 together (the per-step bound, ${mib(budget.step)} inflated); dropped`,
    );
  }
  let payload: NodePayload;
  try {
    payload = decodePayload(stream.chunks, budget);
  } catch (e) {
    if (isKnownGoodError(e)) return fail(e.code, `${call.probe} on ${node}: its answer ${e.message}`);
    return fail('bad-output', `${call.probe} on ${node}: its answer could not be decoded (${messageOf(e)})`);
  }
  if (stream.status === 'timeout') {
    return fail(
      'timeout',
      `${call.probe} on ${node} was stopped after ${payload.seconds ?? '?'} s (the per-node timeout)`,
      payload.seconds,
    );
  }
  const framed = extractFramed(payload.out, nonce);
  if (framed === undefined) {
    const err = tail(payload.err);
    return fail(
      'probe-failed',
      `${call.probe} on ${node} printed no result (${stream.status})${err ? `: ${err}` : ''}`,
      payload.seconds,
    );
  }
  try {
    return {
      node,
      ok: true,
      outcome: probeOutcome(call, parsePythonJson(framed), where),
      seconds: payload.seconds,
      bytes,
    };
  } catch (e) {
    const code = isKnownGoodError(e) ? e.code : 'bad-output';
    return fail(code, messageOf(e), payload.seconds);
  }
}

function srunArgs(host: FleetHost, target: FleetTarget, nodes: readonly string[]): string[] {
  const common = [
    `--nodes=${nodes.length}`,
    `--ntasks=${nodes.length}`,
    '--ntasks-per-node=1',
    `--nodelist=${joinNodes(nodes)}`,
    // The program reaches every task on its stdin; one node failing must not end the others.
    '--input=all',
    '--kill-on-bad-exit=0',
    '--job-name=known-good-fleet',
  ];
  if (target.kind === 'job') return [`--jobid=${checkJobId(target.jobId)}`, '--overlap', ...common];
  // Outside a job: a new allocation of just these nodes; never queue behind others for long.
  return [...(host.slurm.partition ? [`--partition=${host.slurm.partition}`] : []), '--immediate=30', ...common];
}

async function runStep<R>(
  host: FleetHost,
  call: ProbeCall<R>,
  target: FleetTarget,
  nodes: readonly string[],
  timeoutMs: number,
  graceMs: number,
  options: FleetRunOptions,
): Promise<{ results: NodeResult<R>[]; stdinBytes: number }> {
  const nonce = newNonce();
  const beatMs = options.heartbeatMs ?? 5000;
  const lostAfterMs = Math.max(4 * beatMs, 15000);
  const program = fleetProgram(call, nonce, Math.max(1, Math.round(timeoutMs / 100) / 10), beatMs / 1000);
  const argv = slurmArgv(host.slurm, 'srun', [...srunArgs(host, target, nodes), host.python, '-', ...call.args]);
  const where = (node: string) => `${node} (via ${host.label})`;
  const reported = new Set<string>();
  const results = new Map<string, NodeResult<R>>();
  let stderr = '';
  const budget = answerBudget();
  const parser = new FleetStreamParser(
    nonce,
    (node) => {
      if (!nodes.includes(node) || reported.has(node)) return;
      reported.add(node);
      const r = nodeResult(call, node, parser.nodes.get(node), nonce, where(node), '', 'ended', 0, budget);
      results.set(node, r);
      options.onNode?.(r);
    },
    budget,
  );
  let handle: ProcessHandle;
  try {
    handle = await host.transport.spawn(argv, options.signal ? { signal: options.signal } : {});
  } catch (e) {
    if (isKnownGoodError(e, 'command-not-found')) {
      throw new KnownGoodError(
        'command-not-found',
        `srun not found on ${host.label}: set knownGood.hosts[].slurm.binDir`,
      );
    }
    throw e;
  }
  const lines = new LineSplitter((l) => parser.line(l));
  handle.stdout.on('data', (c: Buffer) => lines.push(c));
  handle.stderr.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-64 * 1024);
  });
  handle.stdin.on('error', () => undefined);
  handle.stdin.end(program);

  // A dropped connection ends the step like srun's own exit: the nodes not heard from are reported, not thrown.
  let lostConnection = '';
  const exited = handle.exited.then(
    (x) => x,
    (e: unknown) => {
      lostConnection = messageOf(e);
      return { exitCode: null };
    },
  );
  let why: 'ended' | 'timeout' | 'cancelled' = 'ended';
  const stop = (reason: 'timeout' | 'cancelled') => {
    why = reason;
    handle.kill('TERM');
  };
  const timer = setTimeout(() => stop('timeout'), timeoutMs + graceMs);
  const onAbort = () => stop('cancelled');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  // Every node answered or was lost: the step is done even if srun lingers on a lost node's I/O.
  const allIn = new Promise<void>((resolve) => {
    const check = setInterval(() => {
      const now = Date.now();
      for (const [node, st] of parser.nodes) {
        if (reported.has(node) || st.status !== undefined || !nodes.includes(node)) continue;
        if (now - st.lastSeen > lostAfterMs) {
          reported.add(node);
          const r = nodeResult(call, node, st, nonce, where(node), stderr, 'lost', now - st.lastSeen, budget);
          results.set(node, r);
          options.onNode?.(r);
        }
      }
      // A node that never said anything while the others run: its task never started, or it died first.
      const first = parser.firstLineAt;
      if (first !== undefined && now - first > lostAfterMs + 10000) {
        for (const node of nodes) {
          if (reported.has(node) || parser.nodes.has(node)) continue;
          reported.add(node);
          const r = nodeResult(call, node, undefined, nonce, where(node), stderr, 'lost', now - first, budget);
          results.set(node, r);
          options.onNode?.(r);
        }
      }
      if (reported.size >= nodes.length) {
        clearInterval(check);
        resolve();
      }
    }, 50);
    void exited.then(() => clearInterval(check));
  });
  const exit = await Promise.race([exited, allIn.then(() => undefined)]);
  clearTimeout(timer);
  options.signal?.removeEventListener('abort', onAbort);
  if (exit === undefined) handle.kill('TERM');

  const out: NodeResult<R>[] = [];
  for (const node of nodes) {
    let r = results.get(node);
    if (!r) {
      const srunWord = lostConnection
        ? lostConnection
        : why === 'ended' && exit && exit.exitCode !== 0 && !stderr.includes(node)
          ? `srun: ${slurmErrorText(stderr)}`
          : '';
      r = nodeResult(call, node, parser.nodes.get(node), nonce, where(node), stderr, why, 0, budget);
      if (srunWord && !r.ok) r = { ...r, error: { ...r.error, message: `${r.error.message}; ${srunWord}` } };
      options.onNode?.(r);
    }
    out.push(r);
  }
  return { results: out, stdinBytes: Buffer.byteLength(program) };
}

/**
 * Runs one probe on every node of a job (or on nodes outside jobs, when the host allows it) through `srun` on
 * the login node: one step per `maxNodesPerStep` nodes, at most `concurrency` steps at once, each node's answer
 * framed and tagged with its name. A node that fails is reported with why; the others still answer.
 */
export async function runOnNodes<R>(
  host: FleetHost,
  call: ProbeCall<R>,
  target: FleetTarget,
  options: FleetRunOptions = {},
): Promise<FleetRunResult<R>> {
  const t0 = Date.now();
  let nodes: string[];
  if (target.kind === 'job') {
    const job = await runningJob(host, target.jobId, options.signal ? { signal: options.signal } : {});
    if (target.nodes?.length) {
      const outside = target.nodes.filter((n) => !job.nodes.includes(n));
      if (outside.length) {
        throw new KnownGoodError('settings', `not nodes of job ${job.id} (${job.nodelist}): ${outside.join(', ')}`);
      }
      nodes = [...target.nodes];
    } else nodes = job.nodes;
  } else {
    if (!host.slurm.allowNodesOutsideJobs) {
      throw new KnownGoodError(
        'settings',
        `running on nodes outside a job is off for ${host.label}: set knownGood.hosts[].slurm.allowNodesOutsideJobs (it allocates the nodes, charged to you)`,
      );
    }
    if (target.nodes.length === 0) throw new KnownGoodError('settings', 'no nodes given');
    nodes = [...target.nodes];
  }
  nodes = [...new Set(nodes)].sort(naturalCompare);
  const per = host.slurm.maxNodesPerStep;
  const batches: string[][] = [];
  for (let i = 0; i < nodes.length; i += per) batches.push(nodes.slice(i, i + per));
  const timeoutMs = options.nodeTimeoutMs ?? host.slurm.nodeTimeoutS * 1000;
  const graceMs = options.stepGraceMs ?? 15000 + 50 * per;

  const results: NodeResult<R>[] = [];
  let stdinBytes = 0;
  let next = 0;
  const worker = async () => {
    while (next < batches.length) {
      const batch = batches[next++]!;
      const r = await runStep(host, call, target, batch, timeoutMs, graceMs, options);
      results.push(...r.results);
      stdinBytes = r.stdinBytes;
    }
  };
  await Promise.all(Array.from({ length: Math.min(host.slurm.concurrency, batches.length) }, worker));
  results.sort((a, b) => naturalCompare(a.node, b.node));
  return {
    host: host.label,
    probe: call.probe,
    target,
    nodes: results,
    steps: batches.length,
    wallMs: Date.now() - t0,
    stdinBytes,
  };
}

/** The values of the nodes that answered, by node. */
export function answered<R>(run: FleetRunResult<R>): Map<string, R> {
  return new Map(run.nodes.flatMap((n) => (n.ok ? [[n.node, n.outcome.value] as [string, R]] : [])));
}
