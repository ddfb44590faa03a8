import { join } from 'node:path';
import * as vscode from 'vscode';
import type { Container } from '../container';
import { captureSnapshot } from '../core/baselines/capture';
import type { EnvSnapshot } from '../core/baselines/envProbe';
import { parseBaselineSettings } from '../core/baselines/settings';
import { BaselineStore } from '../core/baselines/store';
import type { BenchPoint, DriftSummary } from '../core/dashboard/protocol';
import { benchHistory, benchReferenceOf, driftSummary, markBenchReference } from '../core/dashboard/sources';
import { messageOf } from '../core/errors';
import type { ProbeRunnerLike } from '../core/probes/probe';
import type { RootListing, RunEntry } from '../core/runs/listRuns';
import { entryNode } from '../core/runs/model';
import { executeCommand, getConfiguration } from '../window';

/** The args commands (src/args/) the checkpoint buttons run, with the tree's own checkpoint nodes. */
export const ARGS_OPEN = 'knownGood.args.open';
export const ARGS_COMPARE = 'knownGood.args.compare';

/** How long the first init waits for a snapshot of "now" before it compares the two newest baselines instead. */
const NOW_BUDGET_MS = 2500;
const NOW_CACHE_MS = 5 * 60_000;

export interface CheckpointRef {
  hostId: string;
  root: RootListing;
  entry: RunEntry;
}

/** What a dashboard panel needs from the extension: kept narrow so the panel reads as the protocol it speaks. */
export interface DashboardServices {
  readonly extensionUri: vscode.Uri;
  readonly log: Pick<vscode.LogOutputChannel, 'info' | 'warn' | 'error'>;
  probes(hostId: string): ProbeRunnerLike;
  hostLabel(hostId: string): string;
  /** One host's baseline drift and benchmark history; the panel asks once per host of its runs. */
  sideData(hostId: string | undefined): Promise<{ drift: DriftSummary | null; bench: BenchPoint[] }>;
  openArgs(hostId: string, root: RootListing, entry: RunEntry): Promise<void>;
  diffArgs(checkpoints: CheckpointRef[]): Promise<void>;
  /** Marks a benchmark result of the host as its known-good reference (null unmarks). */
  markReference(hostId: string, resultId: string | null): Promise<void>;
}

export class ContainerServices implements DashboardServices {
  private readonly nowCache = new Map<string, { at: number; snapshot: Promise<EnvSnapshot> }>();

  constructor(private readonly c: Container) {}

  get extensionUri(): vscode.Uri {
    return this.c.context.extensionUri;
  }

  get log(): vscode.LogOutputChannel {
    return this.c.log;
  }

  probes(hostId: string): ProbeRunnerLike {
    return this.c.registry.session(hostId).probes;
  }

  hostLabel(hostId: string): string {
    return this.c.registry.find(hostId)?.name ?? hostId;
  }

  private store(): BaselineStore {
    return new BaselineStore(join(this.c.context.globalStorageUri.fsPath, 'baselines'));
  }

  async markReference(hostId: string, resultId: string | null): Promise<void> {
    const spec = this.c.registry.find(hostId);
    if (!spec) throw new Error(`unknown host ${hostId}`);
    await markBenchReference(this.store(), [this.c.registry.session(spec).transport.id, spec.id], resultId);
  }

  async sideData(hostId: string | undefined): Promise<{ drift: DriftSummary | null; bench: BenchPoint[] }> {
    const spec = hostId ? this.c.registry.find(hostId) : undefined;
    if (!spec) return { drift: null, bench: [] };
    const store = this.store();
    // Baselines are kept by the transport's id (src/baselines storeHostOf); the host's settings id is tried too.
    const ids = [...new Set([this.c.registry.session(spec).transport.id, spec.id])];
    let baselines: Awaited<ReturnType<BaselineStore['list']>>['baselines'] = [];
    let results: Awaited<ReturnType<BaselineStore['listResults']>>['results'] = [];
    for (const id of ids) {
      if (!baselines.length) baselines = (await store.list(id)).baselines;
      if (!results.length) results = (await store.listResults(id)).results;
    }
    const list = baselines.map((b) => b.baseline);
    const bench = benchHistory(
      results.map((r) => r.result),
      list[0],
      await benchReferenceOf(store, ids),
    );
    if (!list.length) return { drift: null, bench };
    const now = await this.now(spec.id);
    return { drift: driftSummary(list, now.snapshot, now.note), bench };
  }

  /**
   * A snapshot of the host now (no torch import: a few hundred ms through the resident helper), cached a few
   * minutes per host. Past the budget the panel compares the two newest baselines and says so; the capture goes on
   * and the next panel uses it.
   */
  private async now(hostId: string): Promise<{ snapshot?: EnvSnapshot; note?: string }> {
    let cached = this.nowCache.get(hostId);
    if (!cached || Date.now() - cached.at > NOW_CACHE_MS) {
      // The options the baselines feature captures with (scripts, variables, caches), so only real changes show.
      const cfg = getConfiguration('knownGood');
      const settings = parseBaselineSettings((k) => cfg.get(k));
      const snapshot = captureSnapshot(this.c.registry.session(hostId), settings);
      cached = { at: Date.now(), snapshot };
      this.nowCache.set(hostId, cached);
      snapshot.catch(() => this.nowCache.delete(hostId));
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), NOW_BUDGET_MS)));
    try {
      const r = await Promise.race([cached.snapshot, late]);
      if (r === 'late')
        return { note: 'Capturing the environment now took too long: compared the two newest baselines.' };
      return { snapshot: r };
    } catch (e) {
      return { note: `Could not capture the environment now (${messageOf(e)}): compared the two newest baselines.` };
    } finally {
      clearTimeout(timer);
    }
  }

  private async needCommand(id: string): Promise<void> {
    const all = await vscode.commands.getCommands(true);
    if (!all.includes(id)) throw new Error(`${id} is not available (the checkpoint args feature is not loaded)`);
  }

  async openArgs(hostId: string, root: RootListing, entry: RunEntry): Promise<void> {
    await this.needCommand(ARGS_OPEN);
    // The same node the Remote Runs tree passes when a checkpoint is clicked.
    await executeCommand(ARGS_OPEN, entryNode(hostId, root, entry, false));
  }

  async diffArgs(checkpoints: CheckpointRef[]): Promise<void> {
    await this.needCommand(ARGS_COMPARE);
    const nodes = checkpoints.map((c) => entryNode(c.hostId, c.root, c.entry, false));
    // As a multi-selection in the tree: (clicked node, selected nodes), older first.
    await executeCommand(ARGS_COMPARE, nodes[0], nodes);
  }
}
