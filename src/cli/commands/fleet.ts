import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { KnownGoodError } from '../../core/errors';
import { renderDriftText } from '../../core/baselines/drift';
import { renderBenchText } from '../../core/fleet/bench';
import { compareFleetWithBaseline, FleetBaselineStore, renderFleetDriftText } from '../../core/fleet/baseline';
import { benchFleet, captureFleet, describeTarget, failedNodes, gpuFleet } from '../../core/fleet/fleet';
import { renderGpuText } from '../../core/fleet/gpu';
import { compareWithMajority, renderMatrixText } from '../../core/fleet/matrix';
import { runOnNodes, type FleetTarget } from '../../core/fleet/run';
import { slurmSettings } from '../../core/fleet/settings';
import { expandHostlist, type FleetHost } from '../../core/fleet/slurm';
import { defineProbe } from '../../core/probes/probe';
import { importedModules } from '../../core/probes/sources';
import { parseBenchConfig } from '../../core/bench/records';
import type { CliCommand, CliContext } from './types';
import { flag, jsonOption, valued } from '../options';
import { printable, printableTree } from '../output';

/** The CLI's fleet baselines: `~/.known-good/fleet-baselines/<host>/`. */
export function cliFleetBaselineDir(): string {
  return join(homedir(), '.known-good', 'fleet-baselines');
}

function fleetHost({ session, options }: CliContext): FleetHost {
  const slurm = slurmSettings({
    ...(session.spec.slurm ?? {}),
    ...(options.slurmConf ? { conf: options.slurmConf } : {}),
    // Naming nodes without a job on the command line is the permission.
    ...(options.nodes && options.job === undefined ? { allowNodesOutsideJobs: true } : {}),
    nodeTimeoutS: options.timeoutMs / 1000,
  });
  return { transport: session.transport, label: session.label, python: session.spec.python, slurm };
}

function target(ctx: CliContext): FleetTarget {
  const nodes = ctx.options.nodes ? expandHostlist(ctx.options.nodes) : undefined;
  if (ctx.options.job !== undefined) return { kind: 'job', jobId: ctx.options.job, ...(nodes ? { nodes } : {}) };
  if (nodes) return { kind: 'nodes', nodes };
  throw new KnownGoodError('settings', 'fleet: give --job JOBID (squeue --me lists yours), or --nodes LIST');
}

/**
 * `known-good fleet HOST --job J env|bench|gpu|probe NAME`: a probe on every node of a Slurm job, through srun on the
 * login node HOST. `env` prints the fields that differ between nodes (exit 1 when any node differs or did not
 * answer); `--save LABEL` keeps the snapshots as a fleet baseline; `--diff BASELINE` says which node drifted since.
 */
export const fleetCommand: CliCommand = {
  name: 'fleet',
  usage: 'fleet HOST --job J env|bench|gpu|probe NAME [--json]',
  summary: 'every node of a Slurm job: compare environments, benchmark, GPU health, or run a probe',
  options: [
    valued('job', 'JOBID', 'the Slurm job whose nodes to use', (o, v) => (o.job = v)),
    valued(
      'nodes',
      'LIST',
      'only these nodes (n[1-4],gpu7); without --job, nodes outside jobs (srun -w)',
      (o, v) => (o.nodes = v),
    ),
    valued('slurm-conf', 'FILE', 'SLURM_CONF on the login node', (o, v) => (o.slurmConf = v)),
    valued(
      'save',
      'LABEL',
      'env: keep the snapshots as a fleet baseline (~/.known-good/fleet-baselines/<host>/)',
      (o, v) => (o.save = v),
    ),
    valued(
      'diff',
      'BASELINE',
      'env: which node drifted since a fleet baseline (exit 1 when any)',
      (o, v) => (o.diff = v),
    ),
    valued('config', 'tiny|gpu|JSON', 'bench: the benchmark shape (default tiny on CPU)', (o, v) => (o.config = v)),
    flag('compile', 'bench: torch.compile the model', (o) => (o.compile = true)),
    jsonOption(),
  ],
  async run(ctx) {
    const { positional, options, out, err } = ctx;
    const [what, ...args] = positional;
    const host = fleetHost(ctx);
    const tgt = target(ctx);
    const title = describeTarget(host, tgt);
    const ac = { signal: ctx.signal };
    const progress = (r: { node: string; ok: boolean; error?: { message: string } }) => {
      if (!options.json)
        err.write(printable(r.ok ? `${r.node}: answered` : `${r.node}: ${r.error?.message ?? 'failed'}`) + '\n');
    };
    {
      if (what === 'env') {
        const store = new FleetBaselineStore(cliFleetBaselineDir());
        const hostKey = ctx.session.transport.id;
        const against = options.diff !== undefined ? await store.find(hostKey, options.diff) : undefined;
        const cap = await captureFleet(host, tgt, { signal: ac.signal, onNode: progress });
        let code = cap.failed.length || cap.matrix.rows.length ? 1 : 0;
        if (against) {
          const drift = compareFleetWithBaseline(against.baseline, cap.snapshots);
          code = drift.drifted.length || drift.missing.length ? 1 : 0;
          out.write(
            options.json
              ? JSON.stringify(
                  { drifted: drift.drifted, missing: drift.missing, nodes: drift.nodes, failed: cap.failed },
                  null,
                  2,
                ) + '\n'
              : printable(renderFleetDriftText(drift, `${title} against fleet baseline "${against.baseline.label}"`)),
          );
        } else if (options.json) {
          out.write(JSON.stringify({ matrix: cap.matrix, failed: cap.failed, wallMs: cap.run.wallMs }, null, 2) + '\n');
        } else {
          out.write(printable(renderMatrixText(cap.matrix, { what: title, failed: cap.failed })));
          const odd = cap.matrix.outlierNodes[0];
          const vs = odd ? compareWithMajority(cap.snapshots, odd.node, cap.matrix) : undefined;
          if (vs) {
            out.write(
              '\n' +
                printable(
                  renderDriftText(vs.drift, { baseline: `the majority (as on ${vs.majorityNode})`, now: vs.node }),
                ),
            );
          }
        }
        if (options.save !== undefined) {
          const saved = await store.save({
            label: options.save.trim() || `fleet ${new Date().toISOString()}`,
            host: hostKey,
            hostLabel: ctx.session.spec.name,
            jobId: options.job ?? null,
            snapshots: cap.snapshots,
            failed: cap.failed,
          });
          err.write(
            printable(`saved fleet baseline ${saved.baseline.id} (${cap.snapshots.size} nodes) to ${saved.file}`) +
              '\n',
          );
        }
        return code;
      }
      if (what === 'bench') {
        const config =
          options.config !== undefined
            ? parseBenchConfig(options.config, options.compile)
            : options.compile
              ? { compile: true }
              : {};
        const r = await benchFleet(host, tgt, config, { signal: ac.signal, onNode: progress });
        out.write(
          options.json
            ? JSON.stringify({ bench: r.bench, results: Object.fromEntries(r.results) }, null, 2) + '\n'
            : printable(renderBenchText(printableTree(r.bench), title)),
        );
        return r.bench.flagged.length || r.bench.failed.length ? 1 : 0;
      }
      if (what === 'gpu') {
        const r = await gpuFleet(host, tgt, { signal: ac.signal, onNode: progress });
        out.write(
          options.json
            ? JSON.stringify({ gpu: r.gpu, results: Object.fromEntries(r.results) }, null, 2) + '\n'
            : printable(renderGpuText(printableTree(r.gpu), title)),
        );
        return r.gpu.odd.length || r.gpu.failed.length ? 1 : 0;
      }
      if (what === 'probe') {
        const [name, ...probeArgs] = args;
        if (!name) throw new KnownGoodError('settings', 'fleet probe: NAME is missing');
        const call = defineProbe(name, z.unknown(), () => [...probeArgs, ...ctx.rest], {
          modules: importedModules(name),
        })();
        const run = await runOnNodes(host, call, tgt, { signal: ac.signal, onNode: progress });
        const nodes = Object.fromEntries(
          run.nodes.map((n) => [n.node, n.ok ? { ok: true, result: n.outcome.value } : { ok: false, error: n.error }]),
        );
        out.write(
          JSON.stringify(options.json ? { nodes, wallMs: run.wallMs, steps: run.steps } : nodes, null, 2) + '\n',
        );
        return failedNodes(run).length ? 1 : 0;
      }
      throw new KnownGoodError(
        'settings',
        `fleet: expected env, bench, gpu or probe NAME after HOST (got ${what ?? 'nothing'})`,
      );
    }
  },
};
