import { envSnapshotProbe, type EnvSnapshot, type EnvSnapshotOptions } from '../baselines/envProbe';
import { throughputBenchProbe, type BenchConfig, type BenchResult } from '../bench/benchProbe';
import { KnownGoodError } from '../errors';
import type { HostSession } from '../registry';
import { compareBench, type FleetBench } from './bench';
import { compareGpuHealth, type FleetGpu } from './gpu';
import { gpuHealthProbe, type GpuHealth } from '../hardware/gpuProbe';
import { compareNodes, type NodeMatrix } from './matrix';
import { answered, runOnNodes, type FleetRunOptions, type FleetRunResult, type FleetTarget } from './run';
import type { FleetHost } from './slurm';

/*
 * The Fleet workflows the tree and the CLI call: capture every node and compare, benchmark every node. Each takes
 * a FleetHost (a session of a host whose entry has `slurm`) and a target (a job, or nodes outside jobs).
 */

/** The FleetHost of a session; a host without `slurm` in its entry is refused with what to set. */
export function fleetHostOf(session: HostSession): FleetHost {
  const slurm = session.spec.slurm;
  if (!slurm) {
    throw new KnownGoodError(
      'settings',
      `${session.label} is not a Slurm login node: add "slurm": {} to its entry in knownGood.hosts`,
    );
  }
  return { transport: session.transport, label: session.label, python: session.spec.python, slurm };
}

export interface FailedNode {
  node: string;
  message: string;
}

export function failedNodes(run: FleetRunResult<unknown>): FailedNode[] {
  return run.nodes.flatMap((n) => (n.ok ? [] : [{ node: n.node, message: n.error.message }]));
}

/** For titles: `job 4242 on login1`, `3 nodes on login1`. */
export function describeTarget(host: Pick<FleetHost, 'label'>, target: FleetTarget): string {
  return target.kind === 'job'
    ? `job ${target.jobId} on ${host.label}`
    : `${target.nodes.length} node${target.nodes.length === 1 ? '' : 's'} on ${host.label}`;
}

export interface FleetCapture {
  run: FleetRunResult<EnvSnapshot>;
  snapshots: Map<string, EnvSnapshot>;
  failed: FailedNode[];
  matrix: NodeMatrix;
}

/** Compare Nodes: env_snapshot on every node at once, then the matrix of what differs. */
export async function captureFleet(
  host: FleetHost,
  target: FleetTarget,
  options: FleetRunOptions & { env?: EnvSnapshotOptions } = {},
): Promise<FleetCapture> {
  const run = await runOnNodes(host, envSnapshotProbe(options.env ?? {}), target, options);
  const snapshots = answered(run);
  return { run, snapshots, failed: failedNodes(run), matrix: compareNodes(snapshots) };
}

export interface FleetBenchRun {
  run: FleetRunResult<BenchResult>;
  results: Map<string, BenchResult>;
  bench: FleetBench;
}

/** Benchmark every node: the throughput benchmark on each node at once, the slowest flagged against the median. */
export async function benchFleet(
  host: FleetHost,
  target: FleetTarget,
  config: BenchConfig = {},
  options: FleetRunOptions = {},
): Promise<FleetBenchRun> {
  const run = await runOnNodes(host, throughputBenchProbe(config), target, options);
  const results = answered(run);
  return { run, results, bench: compareBench(results, failedNodes(run)) };
}

export interface FleetGpuRun {
  run: FleetRunResult<GpuHealth>;
  results: Map<string, GpuHealth>;
  gpu: FleetGpu;
}

/** GPU health on every node: gpu_health.py's reading now on each node at once, the odd node named. */
export async function gpuFleet(
  host: FleetHost,
  target: FleetTarget,
  options: FleetRunOptions = {},
): Promise<FleetGpuRun> {
  const run = await runOnNodes(host, gpuHealthProbe(), target, options);
  const results = answered(run);
  return { run, results, gpu: compareGpuHealth(results, failedNodes(run)) };
}
