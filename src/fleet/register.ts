import { join } from 'node:path';
import * as vscode from 'vscode';
import { z } from 'zod';
import type { CompareOutcome, FleetOutcome } from '../api';
import { FleetCommands } from '../constants';
import type { EnvSnapshot } from '../core/baselines/envProbe';
import { shortTime } from '../core/baselines/documents';
import { parseBenchConfig } from '../core/bench/records';
import { KnownGoodError } from '../core/errors';
import { FleetBaselineStore } from '../core/fleet/baseline';
import { FLEET_SCHEME, FleetResults, fromFleetUri, toFleetUri, type FleetDoc } from '../core/fleet/documents';
import { benchFleet, captureFleet, describeTarget, fleetHostOf, type FleetCapture } from '../core/fleet/fleet';
import { compareWithMajority } from '../core/fleet/matrix';
import type { FleetRunOptions, FleetTarget, NodeResult } from '../core/fleet/run';
import { listJobs, listNodes, type FleetHost } from '../core/fleet/slurm';
import type { HostSpec } from '../core/hosts';
import type { KeptStorage } from '../core/util/keptDocs';
import type { TargetOf } from '../core/runs/targets';
import type { RegisterCommand } from '../shared/commands';
import { keptTexts, registerReadonlyDocuments } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import { withCancellableProgress, type Report } from '../shared/progress';
import type { TreeSection } from '../shared/treeSection';
import { activeEditorUri, showInfo, showInputBox, showQuickPick, showTextDocument } from '../window';
import { FleetSection, type NodeStanding } from './section';

/** A snapshot to diff, as the baselines feature takes it. */
export interface FleetSnapshotSide {
  snapshot: EnvSnapshot;
  title: string;
  hostLabel: string;
}

/** What Fleet needs from the extension (built once by the container). */
export interface FleetDeps {
  command: RegisterCommand;
  track(d: vscode.Disposable): void;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'warn' | 'error'>;
  /** `<globalStorage>/fleet-baselines`. */
  baselinesDir: string;
  /** The baseline store's key of a host (its transport id), so a renamed host keeps its fleet baselines. */
  storeKeyOf(host: HostSpec): string;
  /** Places the Slurm node under each host (with `slurm`) of Remote Runs. */
  registerSection(section: TreeSection): vscode.Disposable;
  /** Re-renders a node of Remote Runs (its children are asked for again). */
  refresh(node?: unknown): void;
  /** The workspace's storage: the texts of open Fleet documents are kept there for after a reload. */
  kept: KeptStorage;
  /** The usual environment diff of two snapshots (the baselines feature's capability). */
  diffSnapshots(left: FleetSnapshotSide, right: FleetSnapshotSide, title: string): Promise<CompareOutcome>;
}

/** Optional second argument (tests, other commands). */
const extraSchema = z
  .object({
    config: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
    label: z.string().min(1).optional(),
    baseline: z.string().min(1).optional(),
    node: z.string().min(1).optional(),
  })
  .catch({});

interface JobRef {
  spec: HostSpec;
  host: FleetHost;
  jobId: string;
  target: FleetTarget;
  what: string;
}

/** What the session keeps of a capture besides FleetResults: whose it is. */
interface CaptureRef {
  key: string;
  hostId: string;
  jobId: string;
  at: Date;
}

/**
 * Fleet in VS Code: the Slurm node under each login node of Remote Runs (jobs, nodes), the commands on a job
 * (Compare Nodes, Benchmark Every Node, Save / Compare Fleet Baseline) and on a node of a job (Compare Node with
 * Majority), and the read-only `knownGood-fleet:` documents they open.
 */
export function registerFleet(d: FleetDeps): void {
  const { command, hosts, log } = d;
  const results = new FleetResults();
  const store = new FleetBaselineStore(d.baselinesDir);
  /** host \n job → its latest capture; capture key → the same. */
  const latest = new Map<string, CaptureRef>();
  const byKey = new Map<string, CaptureRef>();

  const fleetHost = (hostId: string) => fleetHostOf(hosts.session(hosts.get(hostId)));
  const section = new FleetSection(
    { jobs: (h) => listJobs(fleetHost(h)), nodes: (h) => listNodes(fleetHost(h)) },
    {
      standing(hostId, jobId, node): NodeStanding | undefined {
        const ref = latest.get(`${hostId}\n${jobId}`);
        const cap = ref && results.capture(ref.key)?.value;
        if (!ref || !cap) return undefined;
        const failed = cap.failed.find((f) => f.node === node);
        if (failed) return { failed: failed.message, at: ref.at };
        if (!cap.snapshots.has(node)) return undefined;
        return { fields: cap.matrix.outlierNodes.find((o) => o.node === node)?.fields ?? [], at: ref.at };
      },
    },
  );
  d.track(d.registerSection(section));
  // A read-only file system, so VS Code restores the editors after a reload; a result is held by this window only,
  // so the text each document last showed is kept with the workspace and shown again then.
  const texts = keptTexts(d.kept, 'knownGood.fleetDocs', 12);
  d.track(
    registerReadonlyDocuments(FLEET_SCHEME, async (uri) => {
      const doc = fromFleetUri(uri);
      if (!doc) return `# not a Known Good Fleet document: ${uri.toString()}\n`;
      const key = uri.toString();
      if (!results.holds(doc)) return texts.get(key) ?? (await results.text(doc, store));
      try {
        const text = await results.text(doc, store);
        texts.set(key, text);
        return text;
      } catch (e) {
        return `# ${e instanceof Error ? e.message : String(e)}\n`;
      }
    }),
  );

  async function pickJob(spec: HostSpec): Promise<string | undefined> {
    const jobs = (await listJobs(fleetHostOf(hosts.session(spec)))).filter((j) => j.state === 'RUNNING');
    if (!jobs.length) throw new KnownGoodError('usage', `No running job of yours on ${spec.name} (squeue --me)`);
    if (jobs.length === 1) return jobs[0]!.id;
    const pick = await showQuickPick(
      jobs.map((j) => ({ label: `${j.id} ${j.name}`, description: `${j.nodeCount} nodes · ${j.elapsed}`, id: j.id })),
      { placeHolder: `Which job of ${spec.name}?`, ignoreFocusOut: true },
    );
    return pick?.id;
  }

  async function jobRef(t: TargetOf<'slurm-job' | 'slurm-node' | 'host'>): Promise<JobRef | undefined> {
    const spec = hosts.get(t.hostId);
    const host = fleetHostOf(hosts.session(spec));
    const jobId = t.kind === 'host' ? await pickJob(spec) : t.jobId;
    if (!jobId) return undefined;
    const target: FleetTarget = { kind: 'job', jobId };
    return { spec, host, jobId, target, what: describeTarget(host, target) };
  }

  const onNode = (report: Report, total: () => number) => {
    let done = 0;
    return (r: NodeResult<unknown>) => {
      done++;
      report(`${r.node} ${r.ok ? 'answered' : `failed: ${r.error.message}`} (${done} of ${total() || '?'})`);
    };
  };

  async function capture(j: JobRef, title: string): Promise<{ cap: FleetCapture; ref: CaptureRef } | undefined> {
    const count = section.job(j.spec.id, j.jobId)?.nodeCount ?? 0;
    const cap = await withCancellableProgress(title, (signal, report) => {
      report('srun on every node…');
      const options: FleetRunOptions = { signal, onNode: onNode(report, () => count) };
      return captureFleet(j.host, j.target, options);
    });
    if (!cap) return undefined;
    const ref: CaptureRef = {
      key: results.addCapture(cap, j.what),
      hostId: j.spec.id,
      jobId: j.jobId,
      at: new Date(),
    };
    latest.set(`${ref.hostId}\n${ref.jobId}`, ref);
    byKey.set(ref.key, ref);
    for (const k of byKey.keys()) if (!results.capture(k)) byKey.delete(k);
    log.info(
      `fleet: ${j.what}: ${cap.snapshots.size} answered, ${cap.failed.length} failed, ${cap.matrix.rows.length} fields differ`,
    );
    const jobNode = section.jobNode(ref.hostId, ref.jobId);
    if (jobNode) d.refresh(jobNode);
    return { cap, ref };
  }

  async function open(doc: FleetDoc): Promise<{ uri: vscode.Uri; text: string }> {
    const uri = vscode.Uri.from(toFleetUri(doc));
    const text = await results.text(doc, store);
    await showTextDocument(uri, { preview: false });
    return { uri, text };
  }

  const outcomeOf = (
    view: FleetOutcome['view'],
    j: JobRef,
    cap: FleetCapture,
    opened: { uri: vscode.Uri; text: string },
  ): FleetOutcome => ({
    view,
    hostId: j.spec.id,
    jobId: j.jobId,
    uri: opened.uri.toString(),
    text: opened.text,
    nodes: [...cap.snapshots.keys()],
    failed: cap.failed,
    outliers: cap.matrix.outlierNodes,
  });

  const onJob = { kinds: ['slurm-job', 'slurm-node', 'host'], pick: 'Which Slurm login node?' } as const;

  command(FleetCommands.compareNodes, onJob, async (t): Promise<FleetOutcome | undefined> => {
    const j = await jobRef(t);
    if (!j) return undefined;
    const got = await capture(j, `Comparing the nodes of ${j.what}`);
    if (!got) return undefined;
    const opened = await open({ view: 'matrix', capture: got.ref.key, name: `job ${j.jobId} nodes` });
    return outcomeOf('matrix', j, got.cap, opened);
  });

  command(FleetCommands.benchmark, onJob, async (t, call): Promise<FleetOutcome | undefined> => {
    const j = await jobRef(t);
    if (!j) return undefined;
    const extra = extraSchema.parse(call.extra);
    const config =
      extra.config === undefined
        ? { device: 'cpu' as const }
        : parseBenchConfig(typeof extra.config === 'string' ? extra.config : JSON.stringify(extra.config));
    const count = section.job(j.spec.id, j.jobId)?.nodeCount ?? 0;
    const run = await withCancellableProgress(`Benchmarking every node of ${j.what}`, (signal, report) => {
      report(`${config.device ?? 'default'} benchmark on every node…`);
      return benchFleet(j.host, j.target, config, { signal, onNode: onNode(report, () => count) });
    });
    if (!run) return undefined;
    const key = results.addBench(run.bench, j.what);
    const opened = await open({ view: 'bench', run: key, name: `job ${j.jobId} benchmark` });
    return {
      view: 'bench',
      hostId: j.spec.id,
      jobId: j.jobId,
      uri: opened.uri.toString(),
      text: opened.text,
      nodes: [...run.results.keys()],
      failed: run.bench.failed,
      outliers: run.bench.flagged.map((node) => ({ node, fields: ['tokens/s'] })),
    };
  });

  command(FleetCommands.saveBaseline, onJob, async (t, call): Promise<FleetOutcome | undefined> => {
    const j = await jobRef(t);
    if (!j) return undefined;
    const extra = extraSchema.parse(call.extra);
    const label =
      extra.label ??
      (await showInputBox({
        prompt: `Name the fleet baseline of ${j.what}`,
        value: `job ${j.jobId} ${shortTime(new Date().toISOString())}`,
        ignoreFocusOut: true,
      }));
    if (!label) return undefined;
    const got = await capture(j, `Capturing every node of ${j.what}`);
    if (!got) return undefined;
    const saved = await store.save({
      label,
      host: d.storeKeyOf(j.spec),
      hostLabel: j.spec.name,
      jobId: j.jobId,
      snapshots: got.cap.snapshots,
      failed: got.cap.failed,
    });
    log.info(`fleet baseline "${label}" of ${j.what} saved to ${saved.file}`);
    const failed = got.cap.failed.length ? ` (${got.cap.failed.length} did not answer)` : '';
    void showInfo(`Saved fleet baseline "${label}": ${got.cap.snapshots.size} nodes of ${j.what}${failed}.`);
    const opened = await open({ view: 'matrix', capture: got.ref.key, name: `job ${j.jobId} nodes` });
    return { ...outcomeOf('matrix', j, got.cap, opened), file: saved.file };
  });

  command(FleetCommands.compareBaseline, onJob, async (t, call): Promise<FleetOutcome | undefined> => {
    const j = await jobRef(t);
    if (!j) return undefined;
    const extra = extraSchema.parse(call.extra);
    const storeHost = d.storeKeyOf(j.spec);
    let baselineId: string | undefined;
    if (extra.baseline) baselineId = (await store.find(storeHost, extra.baseline)).baseline.id;
    else {
      const { baselines, problems } = await store.list(storeHost);
      for (const p of problems) log.warn(`fleet baseline ${p.file}: ${p.message}`);
      if (!baselines.length)
        throw new KnownGoodError('usage', `No fleet baselines of ${j.spec.name} yet: Save Fleet Baseline first.`);
      const pick = await showQuickPick(
        baselines.map((b) => ({
          label: b.baseline.label,
          description: `${Object.keys(b.baseline.nodes).length} nodes${b.baseline.jobId ? ` · job ${b.baseline.jobId}` : ''}`,
          detail: shortTime(b.baseline.capturedAt),
          id: b.baseline.id,
        })),
        { placeHolder: `Compare ${j.what} with which fleet baseline?`, ignoreFocusOut: true },
      );
      baselineId = pick?.id;
    }
    if (!baselineId) return undefined;
    const got = await capture(j, `Capturing every node of ${j.what}`);
    if (!got) return undefined;
    const opened = await open({
      view: 'drift',
      capture: got.ref.key,
      hostId: storeHost,
      baseline: baselineId,
      name: `job ${j.jobId} fleet drift`,
    });
    const drifted = /^# drifted: (.*)$/m.exec(opened.text)?.[1]?.split(', ') ?? [];
    return { ...outcomeOf('drift', j, got.cap, opened), outliers: drifted.map((node) => ({ node, fields: [] })) };
  });

  /** The capture a node command reads: the matrix document's, or the job's latest (captured now if none). */
  async function captureFor(
    t: TargetOf<'slurm-job' | 'slurm-node'> | undefined,
    first: unknown,
  ): Promise<{ ref: CaptureRef; cap: FleetCapture } | undefined> {
    const doc = first instanceof vscode.Uri ? fromFleetUri(first) : undefined;
    if (doc && doc.view !== 'bench') {
      const ref = byKey.get(doc.capture);
      const cap = results.capture(doc.capture)?.value;
      if (!ref || !cap)
        throw new KnownGoodError('usage', 'This Fleet result is no longer held: compare the nodes again.');
      return { ref, cap };
    }
    if (!t) {
      throw new KnownGoodError(
        'usage',
        'Compare Node with Majority works on a node of a job, or on a Compare Nodes document',
      );
    }
    const ref = latest.get(`${t.hostId}\n${t.jobId}`);
    const cap = ref && results.capture(ref.key)?.value;
    if (ref && cap) return { ref, cap };
    const j = await jobRef(t);
    return j && capture(j, `Comparing the nodes of ${j.what}`);
  }

  command(
    FleetCommands.compareNode,
    { kinds: ['slurm-node', 'slurm-job'] },
    async (t, call): Promise<FleetOutcome | undefined> => {
      // From the palette while the matrix is open: that matrix.
      const got = await captureFor(t, call.args[0] ?? (t ? undefined : activeEditorUri()));
      if (!got) return undefined;
      const { ref, cap } = got;
      const extra = extraSchema.parse(call.extra);
      let node = extra.node ?? (t?.kind === 'slurm-node' && t.jobId === ref.jobId ? t.node : undefined);
      if (!node) {
        const odd = new Map(cap.matrix.outlierNodes.map((o) => [o.node, o.fields]));
        const items = [...cap.matrix.nodes]
          .sort((a, b) => (odd.get(b)?.length ?? 0) - (odd.get(a)?.length ?? 0))
          .map((n) => ({
            label: n,
            description: odd.has(n) ? `differs: ${odd.get(n)!.join(', ')}` : 'agrees with the majority',
          }));
        node = (
          await showQuickPick(items, {
            placeHolder: `Compare which node of job ${ref.jobId} with the majority?`,
            ignoreFocusOut: true,
          })
        )?.label;
      }
      if (!node) return undefined;
      const vs = compareWithMajority(cap.snapshots, node, cap.matrix);
      if (!vs) {
        const why = cap.snapshots.has(node) ? 'it is the only node that answered' : 'it did not answer';
        throw new KnownGoodError('usage', `Cannot compare ${node} with the majority: ${why}.`);
      }
      const spec = hosts.get(ref.hostId);
      const side = (n: string, title: string): FleetSnapshotSide => ({
        snapshot: cap.snapshots.get(n)!,
        title,
        hostLabel: `${n} (job ${ref.jobId} on ${spec.name})`,
      });
      const diff = await d.diffSnapshots(
        side(vs.majorityNode, `${vs.majorityNode} (majority)`),
        side(node, node),
        `job ${ref.jobId}: ${vs.majorityNode} (majority) ↔ ${node}`,
      );
      return {
        view: 'node',
        hostId: ref.hostId,
        jobId: ref.jobId,
        uri: diff.right,
        text: diff.headline,
        nodes: cap.matrix.nodes,
        failed: cap.failed,
        outliers: cap.matrix.outlierNodes.filter((o) => o.node === node),
      };
    },
  );

  command(FleetCommands.refresh, { kinds: ['host'] }, (t) => {
    d.refresh(t ? section.groupNode(t.hostId) : undefined);
  });
}

/** Where the extension keeps fleet baselines, under its global storage. */
export function fleetBaselinesDir(globalStorage: string): string {
  return join(globalStorage, 'fleet-baselines');
}
