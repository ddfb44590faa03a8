import { KnownGoodError, messageOf } from '../errors';
import type { HostSpec } from '../hosts';
import type { ProbeRunnerLike } from '../probes/probe';
import { isMetricsLog, metricsLogOf } from '../metrics/metricsLog';
import { listRunsProbe, type RootListing, type RunsListing } from './listRuns';
import { entryNodeId, graftListing, remoteNow, remotePathOf, trainingStep, type HostState } from './model';
import type { RunEntry } from './listRuns';
import type { CommandTarget } from './targets';

/*
 * The runs listing of each host, owned here and not by a view: one listing per host (one probe call through the
 * host's resident helper), the load in flight, folders listed later and grafted in, the last error and the remote
 * clock. Remote Runs, the dashboard, the runs commands and auto-refresh all read the same listings; the CLI can use
 * them too (nothing here knows VS Code).
 */

export interface HostListing {
  state: HostState;
  listing?: RunsListing;
  /** When the listing arrived (this machine's clock), for ages on the remote's clock. */
  receivedAt?: number;
  error?: string;
  /** The failure's KnownGoodError code, when it had one. */
  errorCode?: string;
  loading?: Promise<void>;
  /** Folders past the listing's depth, listed on expansion: node id → grafted entry. */
  grafts: Map<string, RunEntry>;
}

export interface ListingsDeps {
  find(hostId: string): HostSpec | undefined;
  session(host: HostSpec): { readonly connected: boolean; readonly probes: ProbeRunnerLike };
  depth(): number;
  maxEntries(): number;
  log(line: string): void;
  /** A listing failed (after `log`): the VS Code layer logs it as an error and says so once. */
  failed?(host: HostSpec, error: unknown): void;
}

/**
 * A command's target found in its host's listing: what handlers need of it, so that none reads a tree node. A
 * folder listed later (past the listing's depth) is its grafted entry.
 */
export interface ResolvedTarget {
  /** What the command was invoked on (a folder inside a checkpoint is a `run` target with `inCheckpoint`). */
  kind: 'root' | 'run' | 'checkpoint' | 'log';
  hostId: string;
  /** Absolute path on the host (text; U+FFFD where a name is not UTF-8). */
  path: string;
  /** The exact bytes of `path`, base64, when it is not UTF-8. */
  pathB64?: string;
  /** The listing of the root the target is under (the innermost, when roots nest). */
  root: RootListing;
  /** The target's entry; a root's own entry for a root. */
  entry: RunEntry;
  /** Below a checkpoint: one of its parts, not a run or a checkpoint of its own. */
  inCheckpoint: boolean;
  /** Its training step (a save counter is not one: trainingStep). */
  step: number | undefined;
  /** A checkpoint's layout (`hf`, `dcp`, …) or a metrics log's format (`jsonl`, `csv`, …). */
  format: string | undefined;
  /**
   * The metrics log the dashboard plots for it: the file itself when it is one, a folder's by metricsLogOf (the one
   * rule); none for a checkpoint.
   */
  metricsLog: { path: string; entry: RunEntry } | undefined;
}

/** Undefined: every host changed. */
export type ListingsListener = (hostId: string | undefined) => void;

export class Listings {
  private readonly state = new Map<string, HostListing>();
  private readonly listeners = new Set<ListingsListener>();

  constructor(private readonly deps: ListingsDeps) {}

  /** Called with the host whose listing state changed; returns the unsubscribe. */
  onDidChange(listener: ListingsListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private fire(hostId: string | undefined): void {
    for (const l of this.listeners) l(hostId);
  }

  /** The host's listing state, if it was ever asked for. */
  get(hostId: string): Readonly<HostListing> | undefined {
    return this.state.get(hostId);
  }

  listing(hostId: string): RunsListing | undefined {
    return this.state.get(hostId)?.listing;
  }

  /** The remote's "now" in epoch seconds for ages, when the host has a listing. */
  remoteNow(hostId: string): number | undefined {
    const st = this.state.get(hostId);
    return st?.listing && st.receivedAt ? remoteNow(st.listing, st.receivedAt) : undefined;
  }

  /** Forget listings (of one host, or all): the next ask lists again. */
  reload(hostId?: string): void {
    if (hostId) this.state.delete(hostId);
    else this.state.clear();
    this.fire(hostId);
  }

  /**
   * Lists again while the old listing stays shown, so rows the person expanded stay open (Refresh, Retry); a host
   * without a listing (never listed, or failed) is forgotten and listed when shown, as `reload` does.
   */
  relist(hostId?: string): void {
    const ids = hostId ? [hostId] : [...this.state.keys()];
    for (const id of ids) {
      const st = this.state.get(id);
      const host = this.deps.find(id);
      if (st?.loading) continue;
      if (st?.listing && host) this.load(host);
      else this.reload(id);
    }
  }

  /** Lists a host now (or waits for the listing in flight) and returns it. */
  async ensure(hostId: string): Promise<RunsListing | undefined> {
    const host = this.deps.find(hostId);
    if (!host) return undefined;
    const st = this.entry(hostId);
    if (!st.listing && !st.loading) this.load(host);
    await st.loading;
    return this.state.get(hostId)?.listing;
  }

  /** Starts listing a host unless it has a listing, is listing, or failed (Retry reloads it). */
  startIfIdle(host: HostSpec): void {
    const st = this.entry(host.id);
    if (!st.listing && !st.loading && st.state !== 'error') this.load(host, true);
  }

  private entry(hostId: string): HostListing {
    let st = this.state.get(hostId);
    if (!st) {
      st = { state: 'disconnected', grafts: new Map() };
      this.state.set(hostId, st);
    }
    return st;
  }

  /**
   * Lists a host's roots. `quiet`: no change event at the start (a view asking for the host's children shows the
   * loading row it gets back; firing for that node then would make it ask twice at once).
   */
  private load(host: HostSpec, quiet = false): void {
    const st = this.entry(host.id);
    const session = this.deps.session(host);
    st.state = session.connected && host.ssh ? 'listing' : host.ssh ? 'connecting' : 'listing';
    st.error = undefined;
    st.errorCode = undefined;
    if (host.roots.length === 0) {
      // Nothing to list: no probe, and the model says "No checkpoint roots: add one".
      st.listing = { roots: [], depth: 0, maxEntries: 0, now: Date.now() / 1000, user: null, elapsedMs: 0 };
      st.receivedAt = Date.now();
      st.state = 'connected';
      if (!quiet) this.fire(host.id);
      return;
    }
    if (!quiet) this.fire(host.id);
    st.loading = (async () => {
      try {
        const r = await session.probes.run(
          listRunsProbe(host.roots, { depth: this.deps.depth(), maxEntries: this.deps.maxEntries() }),
        );
        st.listing = r.value;
        st.receivedAt = Date.now();
        st.grafts.clear();
        st.state = 'connected';
        this.deps.log(
          `${host.name}: listed ${host.roots.length} root(s) in ${r.value.elapsedMs} ms (python ${r.python.executable})`,
        );
      } catch (e) {
        st.state = 'error';
        st.error = messageOf(e);
        if (e instanceof KnownGoodError) st.errorCode = e.code;
        if (this.deps.failed) this.deps.failed(host, e);
        else this.deps.log(`${host.name}: ${st.error}`);
      } finally {
        st.loading = undefined;
        this.fire(host.id);
      }
    })();
  }

  /**
   * What `target` is in its host's listing as it is now (no remote call: `ensure` first for a palette call), or
   * undefined: a host, a baseline, a path no listing holds.
   */
  resolve(target: CommandTarget): ResolvedTarget | undefined {
    if (target.kind !== 'root' && target.kind !== 'run' && target.kind !== 'checkpoint' && target.kind !== 'log')
      return undefined;
    const { hostId, path } = target;
    let root: RootListing | undefined;
    for (const r of this.listing(hostId)?.roots ?? []) {
      if (!r.entry || (root && root.path.length >= r.path.length)) continue;
      if (path === r.path || path.startsWith(r.path.endsWith('/') ? r.path : `${r.path}/`)) root = r;
    }
    if (!root?.entry) return undefined;
    const rel = path === root.path ? '' : path.slice(root.path.length).replace(/^\/+/, '');
    const found = this.entryAt(hostId, root, rel);
    if (!found) return undefined;
    const { entry, inCheckpoint } = found;
    const exact = remotePathOf(root, entry);
    const isFile = entry.kind === 'file' || (entry.kind === 'symlink' && entry.targetKind === 'file');
    let metricsLog: ResolvedTarget['metricsLog'];
    if (isFile && isMetricsLog(entry)) metricsLog = { path, entry };
    else if (entry.kind === 'dir' && entry.role !== 'checkpoint') {
      const log = metricsLogOf(entry);
      if (log) metricsLog = { path: remotePathOf(root, log).remotePath, entry: log };
    }
    return {
      kind: target.kind,
      hostId,
      path,
      ...(exact.remotePathB64 ? { pathB64: exact.remotePathB64 } : {}),
      root,
      entry,
      inCheckpoint,
      step: trainingStep(entry),
      format: entry.format,
      metricsLog,
    };
  }

  /** The entry at `rel` below a root, through the folders grafted in since the listing. */
  private entryAt(
    hostId: string,
    root: RootListing,
    rel: string,
  ): { entry: RunEntry; inCheckpoint: boolean } | undefined {
    const grafted = (e: RunEntry) => (e.kind === 'dir' ? (this.graft(hostId, entryNodeId(hostId, root, e)) ?? e) : e);
    let cur = grafted(root.entry!);
    let inCheckpoint = false;
    while (cur.path !== rel && rel !== '') {
      inCheckpoint ||= cur.role === 'checkpoint';
      const next = (cur.children ?? []).find((c) => c.path === rel || rel.startsWith(`${c.path}/`));
      if (!next) return undefined;
      cur = grafted(next);
    }
    return { entry: cur, inCheckpoint };
  }

  /** A folder grafted in earlier (by node id), if any. */
  graft(hostId: string, nodeId: string): RunEntry | undefined {
    return this.state.get(hostId)?.grafts.get(nodeId);
  }

  /**
   * One remote call for a folder that was past the listing's depth: its entry with the new children grafted in,
   * kept for the next expansion; undefined when the folder is gone. Failures propagate.
   */
  async listFolder(
    hostId: string,
    nodeId: string,
    folder: RunEntry,
    remotePath: string,
  ): Promise<RunEntry | undefined> {
    const host = this.deps.find(hostId);
    if (!host) return undefined;
    const r = await this.deps
      .session(host)
      .probes.run(listRunsProbe([remotePath], { depth: 2, maxEntries: this.deps.maxEntries() }));
    const sub = r.value.roots[0];
    if (!sub) return undefined;
    const grafted = graftListing(folder, sub);
    this.entry(hostId).grafts.set(nodeId, grafted);
    return grafted;
  }
}
