import { posix } from 'node:path';
import { KnownGoodError, isKnownGoodError } from '../errors';
import type { ExecResult, Transport } from '../transport/types';
import type { SlurmSettings } from './settings';
import { naturalCompare } from '../util/format';

/** What the Fleet functions need of a login node: its transport (the pooled SSH connection) and its settings. */
export interface FleetHost {
  readonly transport: Transport;
  /** For messages: the host's name. */
  readonly label: string;
  /** The interpreter on the compute nodes (the host's `python`, default python3). */
  readonly python: string;
  readonly slurm: SlurmSettings;
}

export type SlurmTool = 'srun' | 'squeue' | 'sinfo';

/** argv for one Slurm command on the login node: `env SLURM_CONF=… <binDir>/tool args…` (words never re-split). */
export function slurmArgv(settings: SlurmSettings, tool: SlurmTool, args: readonly string[]): string[] {
  const bin = settings.binDir ? posix.join(settings.binDir, tool) : tool;
  return settings.conf ? ['env', `SLURM_CONF=${settings.conf}`, bin, ...args] : [bin, ...args];
}

export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

function notFound(tool: SlurmTool, host: FleetHost): KnownGoodError {
  return new KnownGoodError(
    'command-not-found',
    `${tool} not found on ${host.label}: is it a Slurm login node? Set knownGood.hosts[].slurm.binDir to the folder with srun, squeue and sinfo`,
  );
}

/** The first `error:` lines a Slurm tool printed, for messages. */
export function slurmErrorText(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const errors = lines.filter((l) => /error/i.test(l));
  return (errors.length ? errors : lines).slice(0, 3).join(' | ') || 'no message';
}

export async function runSlurm(
  host: FleetHost,
  tool: SlurmTool,
  args: readonly string[],
  options: CallOptions = {},
): Promise<ExecResult> {
  let res: ExecResult;
  try {
    res = await host.transport.exec(slurmArgv(host.slurm, tool, args), {
      timeoutMs: options.timeoutMs ?? 30000,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (e) {
    if (isKnownGoodError(e, 'command-not-found')) throw notFound(tool, host);
    throw e;
  }
  if (res.exitCode === 127) throw notFound(tool, host);
  return res;
}

// ------------------------------------------------------------------------------------------------ hostlists

/**
 * Expands a Slurm hostlist (`gpu[01-03,7],login1`, `r[1-2]n[1-2]`) into node names, zero padding kept. The
 * same expression `scontrol show hostnames` expands, without a round trip.
 */
export function expandHostlist(text: string): string[] {
  const out: string[] = [];
  for (const item of splitTopLevel(text.trim())) {
    if (item) out.push(...expandItem(item));
  }
  return out;
}

function splitTopLevel(text: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '[') depth++;
    else if (c === ']') depth--;
    else if (c === ',' && depth === 0) {
      items.push(text.slice(start, i));
      start = i + 1;
    }
  }
  items.push(text.slice(start));
  return items;
}

function expandItem(item: string): string[] {
  const open = item.indexOf('[');
  if (open < 0) return [item];
  const close = item.indexOf(']', open);
  if (close < 0) throw new KnownGoodError('bad-output', `bad hostlist "${item}": no closing ]`);
  const prefix = item.slice(0, open);
  const rest = expandItem(item.slice(close + 1));
  const out: string[] = [];
  for (const part of item.slice(open + 1, close).split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new KnownGoodError('bad-output', `bad hostlist "${item}": range "${part}"`);
    const width = m[1]!.length;
    const lo = Number(m[1]);
    const hi = m[2] !== undefined ? Number(m[2]) : lo;
    if (hi < lo || hi - lo > 100000) throw new KnownGoodError('bad-output', `bad hostlist "${item}": range "${part}"`);
    for (let n = lo; n <= hi; n++) {
      const num = String(n).padStart(width, '0');
      for (const r of rest) out.push(prefix + num + r);
    }
  }
  return out;
}

/** A short hostlist for messages and `srun -w` (names joined by commas; Slurm reads either form). */
export function joinNodes(nodes: readonly string[]): string {
  return nodes.join(',');
}

// ------------------------------------------------------------------------------------------------ squeue

export interface SlurmJob {
  id: string;
  name: string;
  user: string;
  /** RUNNING, PENDING, COMPLETING, … (squeue's %T). */
  state: string;
  partition: string;
  nodeCount: number;
  /** Node names, expanded; empty while pending. */
  nodes: string[];
  /** squeue's own hostlist (`n[1-3]`). */
  nodelist: string;
  /** `1-02:03:04` as squeue prints it, and in seconds. */
  elapsed: string;
  elapsedS: number | null;
  timeLimit: string;
  /** Why it is pending (`Resources`, `Priority`), `None` when running. */
  reason: string;
}

/** The fixed format: fields that never hold `|` first, the job name (free text) last. */
export const SQUEUE_FORMAT = '%i|%T|%D|%M|%l|%P|%u|%N|%r|%j';

/** `1-02:03:04`, `02:03:04`, `3:04` → seconds; `INVALID`, `N/A` → null. */
export function parseSlurmDuration(text: string): number | null {
  const m = /^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$/.exec(text.trim());
  if (!m) return null;
  return Number(m[1] ?? 0) * 86400 + Number(m[2] ?? 0) * 3600 + Number(m[3]) * 60 + Number(m[4]);
}

export function parseSqueue(stdout: string): SlurmJob[] {
  const jobs: SlurmJob[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.trim()) continue;
    const f = line.split('|');
    if (f.length < 10)
      throw new KnownGoodError('bad-output', `squeue printed an unexpected line: ${line.slice(0, 200)}`);
    const [id, state, count, elapsed, limit, partition, user, nodelist, reason] = f as [
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const list = nodelist.trim();
    jobs.push({
      id: id.trim(),
      name: f.slice(9).join('|'),
      user: user.trim(),
      state: state.trim(),
      partition: partition.trim(),
      nodeCount: Number(count) || 0,
      nodes: list && list !== '(null)' ? expandHostlist(list) : [],
      nodelist: list,
      elapsed: elapsed.trim(),
      elapsedS: parseSlurmDuration(elapsed),
      timeLimit: limit.trim(),
      reason: reason.trim(),
    });
  }
  return jobs;
}

/** Your jobs on the cluster (`squeue --me`), newest id last as squeue sorts them. */
export async function listJobs(host: FleetHost, options: CallOptions = {}): Promise<SlurmJob[]> {
  const res = await runSlurm(host, 'squeue', ['--me', '--noheader', `--format=${SQUEUE_FORMAT}`], options);
  if (res.exitCode !== 0) {
    throw new KnownGoodError('probe-failed', `squeue on ${host.label} failed: ${slurmErrorText(res.stderr)}`);
  }
  return parseSqueue(res.stdout);
}

/** Slurm job ids as squeue and srun take them: `123`, an array task `123_4`, a het component `123+1`. */
export function checkJobId(jobId: string): string {
  const id = jobId.trim();
  if (!/^\d+(?:[_+]\d+)?$/.test(id)) {
    throw new KnownGoodError('settings', `"${jobId}" is not a Slurm job id (expected digits, e.g. 123456)`);
  }
  return id;
}

/** One job, running, with its nodes: a clear error when it does not exist (any more) or has no nodes yet. */
export async function runningJob(host: FleetHost, jobId: string, options: CallOptions = {}): Promise<SlurmJob> {
  const id = checkJobId(jobId);
  const res = await runSlurm(host, 'squeue', ['--noheader', `--jobs=${id}`, `--format=${SQUEUE_FORMAT}`], options);
  const jobs = res.exitCode === 0 ? parseSqueue(res.stdout).filter((j) => j.id === id) : [];
  if (res.exitCode !== 0 && !/invalid job id/i.test(res.stderr)) {
    throw new KnownGoodError('probe-failed', `squeue on ${host.label} failed: ${slurmErrorText(res.stderr)}`);
  }
  const job = jobs[0];
  if (!job) {
    throw new KnownGoodError(
      'not-found',
      `job ${id} is not known to Slurm on ${host.label} (it finished, or the id is wrong): squeue --me lists your jobs`,
    );
  }
  if (job.state !== 'RUNNING' || job.nodes.length === 0) {
    throw new KnownGoodError(
      'not-found',
      `job ${id} on ${host.label} is ${job.state}${job.reason && job.reason !== 'None' ? ` (${job.reason})` : ''}: only a running job's nodes can be probed`,
    );
  }
  return job;
}

// ------------------------------------------------------------------------------------------------ sinfo

export interface SlurmNode {
  name: string;
  /** Every partition the node is in (sinfo prints one line per node and partition; `*` marks the default). */
  partitions: string[];
  /** idle, mixed, allocated, down, drained… (sinfo's %T) */
  state: string;
  cpus: number | null;
  memoryMb: number | null;
  /** CPU load, or null when sinfo does not know it. */
  load: number | null;
  gres: string;
  /** Why it is down or drained (`none` otherwise). */
  reason: string;
}

export const SINFO_FORMAT = '%N|%P|%T|%c|%m|%O|%G|%E';

function numberOrNull(text: string): number | null {
  const n = Number(text.trim());
  return text.trim() !== '' && Number.isFinite(n) ? n : null;
}

export function parseSinfo(stdout: string): SlurmNode[] {
  const byName = new Map<string, SlurmNode>();
  for (const line of stdout.split('\n')) {
    if (!line.trim()) continue;
    const f = line.split('|');
    if (f.length < 8) throw new KnownGoodError('bad-output', `sinfo printed an unexpected line: ${line.slice(0, 200)}`);
    for (const name of expandHostlist(f[0]!)) {
      const seen = byName.get(name);
      const partition = f[1]!.trim();
      if (seen) {
        if (!seen.partitions.includes(partition)) seen.partitions.push(partition);
        continue;
      }
      byName.set(name, {
        name,
        partitions: [partition],
        state: f[2]!.trim(),
        cpus: numberOrNull(f[3]!),
        memoryMb: numberOrNull(f[4]!),
        load: numberOrNull(f[5]!),
        gres: f[6]!.trim(),
        reason: f.slice(7).join('|').trim(),
      });
    }
  }
  return [...byName.values()].sort((a, b) => naturalCompare(a.name, b.name));
}

/** The nodes of the cluster's partitions (`sinfo -N`), one entry per node. */
export async function listNodes(host: FleetHost, options: CallOptions = {}): Promise<SlurmNode[]> {
  const res = await runSlurm(host, 'sinfo', ['--Node', '--noheader', `--format=${SINFO_FORMAT}`], options);
  if (res.exitCode !== 0) {
    throw new KnownGoodError('probe-failed', `sinfo on ${host.label} failed: ${slurmErrorText(res.stderr)}`);
  }
  return parseSinfo(res.stdout);
}
