import type * as vscode from 'vscode';
import { checkpointOfEntry, type CheckpointRef as ArgsCheckpoint } from '../core/args/target';
import { captureSnapshot } from '../core/baselines/capture';
import type { EnvSnapshot } from '../core/baselines/envProbe';
import type { BaselineStore, StoreChange } from '../core/baselines/store';
import type { BenchPoint, RunDriftInfo } from '../core/dashboard/protocol';
import {
  benchHistory,
  benchReferenceOf,
  markBenchReference,
  nowMayFallInside,
  runDrift,
  type RunSpan,
} from '../core/dashboard/sources';
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

/** How long the side data waits for a snapshot of "now" before it goes without one. */
const NOW_BUDGET_MS = 2500;
/** How long a snapshot of "now" is reused (per host). */
const NOW_CACHE_MS = 5 * 60_000;

/** A run of the panel, for its part of the drift panel: its id, label and time. */
export interface RunOfSide {
  id: string;
  label: string;
  span: RunSpan | undefined;
}

/** One host's side data: the drift during each of its runs, its benchmark history, and when its snapshots were taken. */
export interface SideData {
  bench: BenchPoint[];
  runs: RunDriftInfo[];
  /** Capture times (Unix seconds) of the snapshots the drift may compare: a run that grows past one compares anew. */
  snapshotTimes: number[];
}

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
  /** One host's benchmark history and the drift during each of its runs; the panel asks once per host of its runs. */
  sideData(hostId: string | undefined, runs: readonly RunOfSide[]): Promise<SideData>;
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

  async sideData(hostId: string | undefined, runs: readonly RunOfSide[]): Promise<SideData> {
    const spec = hostId ? this.d.hosts.find(hostId) : undefined;
    if (!spec) return { bench: [], runs: [], snapshotTimes: [] };
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
    // A cached snapshot of now is always looked at (its capture time decides where it counts); a new one is taken
    // only for a run that may still grow past it.
    const capture = nowMayFallInside(
      runs.map((r) => r.span),
      Date.now() / 1000,
      NOW_CACHE_MS / 1000,
    );
    const now = await this.now(spec.id, capture);
    const snapshotTimes = list.map((b) => Date.parse(b.capturedAt) / 1000);
    if (now.snapshot) snapshotTimes.push(Date.parse(now.snapshot.capturedAt) / 1000);
    return {
      bench,
      runs: runs.map((r) => runDrift(r, list, now.snapshot, now.note)),
      snapshotTimes: snapshotTimes.filter(Number.isFinite),
    };
  }

  /**
   * A snapshot of the host now (no torch import: a few hundred ms through the resident helper), cached a few
   * minutes per host; `capture`: take one when none is cached. Past the budget the side data goes without it and
   * says so; the capture goes on and the next read uses it.
   */
  private async now(hostId: string, capture: boolean): Promise<{ snapshot?: EnvSnapshot; note?: string }> {
    let cached = this.nowCache.get(hostId);
    if (cached && Date.now() - cached.at > NOW_CACHE_MS) cached = undefined;
    if (!cached) {
      if (!capture) return {};
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
      if (r === 'late') return { note: 'Capturing the environment now took too long: not compared with now.' };
      return { snapshot: r };
    } catch (e) {
      return { note: `Could not capture the environment now (${messageOf(e)}): not compared with now.` };
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
