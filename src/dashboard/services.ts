import type * as vscode from 'vscode';
import { checkpointOfEntry, type CheckpointRef as ArgsCheckpoint } from '../core/args/target';
import { captureSnapshot } from '../core/baselines/capture';
import type { EnvSnapshot } from '../core/baselines/envProbe';
import type { BaselineStore, StoreChange } from '../core/baselines/store';
import type { BenchPoint, DriftSummary } from '../core/dashboard/protocol';
import { benchHistory, benchReferenceOf, driftSummary, markBenchReference } from '../core/dashboard/sources';
import { KnownGoodError, messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import type { ProbeRunnerLike } from '../core/probes/probe';
import type { RootListing, RunEntry } from '../core/runs/listRuns';
import type { ResolvedTarget } from '../core/runs/listings';
import type { CommandTarget } from '../core/runs/targets';
import type { RunsListing } from '../core/runs/listRuns';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import type { LiveRunState, LiveWatch } from '../core/whatChanged/liveWatch';
import { showError } from '../window';

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
  /** Looks for these runs' training processes (the polls' shared LiveWatch); resolves to their states now. */
  live?(hostId: string, runs: { run: string; log: string }[]): Promise<LiveRunState[]>;
}

/** What the dashboard needs from the extension (built once by the container). */
export interface DashboardDeps {
  readonly extensionUri: vscode.Uri;
  readonly log: Pick<vscode.LogOutputChannel, 'info' | 'warn' | 'error'>;
  readonly hosts: Hosts;
  readonly settings: SettingsAccess;
  /** The host's listing (shared with Remote Runs: one listing per host, loaded once). */
  ensureListing(hostId: string): Promise<RunsListing | undefined>;
  /** A target in its host's listing as it is now (Listings.resolve). */
  resolve(target: CommandTarget): ResolvedTarget | undefined;
  readonly store: BaselineStore;
  storeKeyOf(host: HostSpec): string;
  /** The args feature's capability (the checkpoint buttons). */
  readonly args: {
    open(ref: ArgsCheckpoint): Promise<unknown>;
    openDiff(a: ArgsCheckpoint, b: ArgsCheckpoint): Promise<unknown>;
  };
  /** Panels keep what crossed their webview for the extension-host tests (only in ExtensionMode.Test). */
  readonly recordForTests: boolean;
  /** The training processes the polls see, shared with Remote Runs' auto-refresh (one state a run). */
  readonly live?: LiveWatch;
}

function argsRefOf(c: CheckpointRef): ArgsCheckpoint {
  if (c.entry.role !== 'checkpoint') throw new KnownGoodError('usage', `${c.entry.name} is not a checkpoint`);
  return checkpointOfEntry(c.hostId, c.root, c.entry);
}

export class ContainerServices implements DashboardServices {
  private readonly nowCache = new Map<string, { at: number; snapshot: Promise<EnvSnapshot> }>();

  constructor(private readonly d: DashboardDeps) {}

  get extensionUri(): vscode.Uri {
    return this.d.extensionUri;
  }

  get log(): DashboardDeps['log'] {
    return this.d.log;
  }

  probes(hostId: string): ProbeRunnerLike {
    return this.d.hosts.session(hostId).probes;
  }

  hostLabel(hostId: string): string {
    return this.d.hosts.find(hostId)?.name ?? hostId;
  }

  async live(hostId: string, runs: { run: string; log: string }[]): Promise<LiveRunState[]> {
    const spec = this.d.hosts.find(hostId);
    if (!this.d.live || !spec) return [];
    const live = this.d.live;
    await live.poll({ id: hostId, storeKey: this.d.storeKeyOf(spec), probes: this.probes(hostId) }, runs);
    // every run's state, not only those this poll changed: Remote Runs' tick may have seen the restart first
    return runs.map((r) => live.state(hostId, r.run)).filter((s): s is LiveRunState => s !== undefined);
  }

  async markReference(hostId: string, resultId: string | null): Promise<void> {
    const spec = this.d.hosts.find(hostId);
    if (!spec) throw new KnownGoodError('not-found', `unknown host ${hostId}`);
    await markBenchReference(this.d.store, [this.d.storeKeyOf(spec), spec.id], resultId);
  }

  /**
   * A change in the store: returns the hosts (settings ids) it concerns. A snapshot it brings (a saved baseline's,
   * or a compare's "now") is the newest of the host: it replaces the cached "now", so the panels show what the
   * compare showed.
   */
  noteStoreChange(change: StoreChange): string[] {
    const ids = this.d.hosts
      .all()
      .filter((spec) => spec.id === change.hostId || this.storeKey(spec) === change.hostId)
      .map((spec) => spec.id);
    const snapshot = change.snapshot;
    if (snapshot) for (const id of ids) this.nowCache.set(id, { at: Date.now(), snapshot: Promise.resolve(snapshot) });
    return ids;
  }

  private storeKey(spec: HostSpec): string | undefined {
    try {
      return this.d.storeKeyOf(spec);
    } catch {
      return undefined;
    }
  }

  async sideData(hostId: string | undefined): Promise<{ drift: DriftSummary | null; bench: BenchPoint[] }> {
    const spec = hostId ? this.d.hosts.find(hostId) : undefined;
    if (!spec) return { drift: null, bench: [] };
    const store = this.d.store;
    // Baselines are kept by the store key (the transport's id); the host's settings id is tried too.
    const ids = [...new Set([this.d.storeKeyOf(spec), spec.id])];
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
      const settings = this.d.settings.current.baselines;
      const snapshot = captureSnapshot(this.d.hosts.session(hostId), settings);
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

  /** As a command would: a failure is logged and shown, not posted to the page. */
  private async report(what: string, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
    } catch (e) {
      this.d.log.error(`${what}: ${messageOf(e)}`);
      void showError(messageOf(e));
    }
  }

  async openArgs(hostId: string, root: RootListing, entry: RunEntry): Promise<void> {
    await this.report('dashboard: open args', () => this.d.args.open(argsRefOf({ hostId, root, entry })));
  }

  async diffArgs(checkpoints: CheckpointRef[]): Promise<void> {
    // The lower step on the left, as Compare Args on a selection of two does.
    const [x, y] = checkpoints as [CheckpointRef, CheckpointRef];
    const [a, b] =
      x.entry.step !== undefined && y.entry.step !== undefined && y.entry.step < x.entry.step ? [y, x] : [x, y];
    await this.report('dashboard: compare args', () => this.d.args.openDiff(argsRefOf(a), argsRefOf(b)));
  }
}
