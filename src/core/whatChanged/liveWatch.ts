import { messageOf } from '../errors';
import { metricsLogOf } from '../metrics/metricsLog';
import type { ProbeRunnerLike } from '../probes/probe';
import type { RunsListing } from '../runs/listRuns';
import { remotePathOf } from '../runs/model';
import { formatAge, formatLocalTime } from '../util/format';
import { whatChangedProbe, type LaunchRecord } from './factsProbe';
import type { WhatChangedStore } from './store';

/*
 * The training process of running runs, seen by the polls that already run (Remote Runs' auto-refresh, the
 * dashboard's follow mode), not only by a What Changed? report. One poll is one what_changed request per host: the
 * runs whose log changed since the last poll share one pass over /proc (python/live_process.py scan_runs); a run
 * whose log did not change is not looked for again. Each process seen is kept once (WhatChangedStore.saveLive), so
 * the next report compares the processes around a restart even when no report saw the one before. A process that
 * appears after the one seen before ended is a restart.
 */

/** At most this many runs a host are looked for in one poll. */
export const MAX_POLLED_RUNS = 16;
/** Restarts remembered a run (the newest). */
const MAX_RESTARTS = 8;

export interface LiveRestart {
  /** When the poll saw it (ms since the epoch, this machine's clock). */
  seenAt: number;
  before: LaunchRecord;
  after: LaunchRecord;
}

export interface LiveRunState {
  hostId: string;
  run: string;
  /** The run's processes at the last poll that looked (oldest first); empty: none runs there. */
  running: LaunchRecord[];
  /** When /proc was last looked at for this run (ms since the epoch, this machine's clock). */
  lookedAt: number;
  restarts: LiveRestart[];
  /** Why the last look failed (the host keeps its last state). */
  error?: string;
}

export interface LiveHost {
  /** The host's id in the settings: what `state()` is asked by. */
  id: string;
  /** Its key in the baseline store (the report's host id), where each launch is kept; default `id`. */
  storeKey?: string;
  probes: ProbeRunnerLike;
}

interface Entry {
  /** The log's state at the last poll (python `_log_state`), passed back so an unchanged log costs no scan. */
  seen: string | null;
  /** Every process of the run seen so far (kept ones first, read once). */
  known: LaunchRecord[] | undefined;
  /** Processes that appeared beside a running launch (shown, not kept), while they run. */
  beside: LaunchRecord[];
  state: LiveRunState;
}

const sameProcess = (a: LaunchRecord, b: LaunchRecord) => a.pid === b.pid && a.time === b.time;

/** One line of a process for a tooltip: PID, command line and the CUDA libraries it mapped. */
export function describeProcess(r: LaunchRecord, now = Date.now()): string[] {
  const started = r.time !== null ? ` (started ${formatAge(r.time * 1000, now)})` : '';
  const lines = [`PID ${r.pid ?? '?'}${started}: ${r.argv.join(' ').slice(0, 300) || r.interpreter || '?'}`];
  const libs = Object.entries(r.libs).map(([k, v]) => `${k.replace(/\.so.*$/, '')} ${v.includes('/') ? '' : v}`);
  if (libs.length) lines.push(`loaded: ${libs.map((l) => l.trim()).join(', ')}`);
  const env = Object.keys(r.env);
  const speed = env.filter((k) => /^(CUDA_|NCCL_|TORCH|PYTORCH_|OMP_|CUBLAS|CUDNN|XLA_)/.test(k));
  if (env.length)
    lines.push(
      `environment: ${env.length} variables (secrets redacted)${speed.length ? `; ${speed.map((k) => `${k}=${r.env[k]}`).join(' ')}` : ''}`,
    );
  return lines;
}

/**
 * The runs of a listing a poll looks at: each run folder with a metrics log (the log is what tells a poll whether to
 * look again), the most recently written first, at most MAX_POLLED_RUNS.
 */
export function pollableRuns(listing: RunsListing): { run: string; log: string }[] {
  const out: { run: string; log: string; mtime: number }[] = [];
  for (const root of listing.roots) {
    if (!root.entry || root.pathB64) continue;
    for (const run of root.entry.children ?? []) {
      if (run.kind !== 'dir' || run.escaped || run.pathB64) continue;
      const log = metricsLogOf(run);
      if (!log || log.pathB64) continue;
      out.push({
        run: remotePathOf(root, run).remotePath,
        log: remotePathOf(root, log).remotePath,
        mtime: log.mtime ?? 0,
      });
    }
  }
  return out
    .sort((a, b) => b.mtime - a.mtime)
    .slice(0, MAX_POLLED_RUNS)
    .map(({ run, log }) => ({ run, log }));
}

/** What a run's row in Remote Runs says of its process: a word for the description, lines for the tooltip. */
export function liveRowText(
  s: LiveRunState | undefined,
  now = Date.now(),
): { description?: string; tooltip: string[] } {
  if (!s || (!s.running.length && !s.restarts.length)) return { tooltip: [] };
  const tooltip: string[] = [];
  const last = s.restarts[s.restarts.length - 1];
  const restartedNow = last !== undefined && s.running.some((r) => sameProcess(r, last.after));
  if (s.running.length) {
    tooltip.push(`Running now, seen ${formatLocalTime(s.lookedAt)}:`);
    for (const r of s.running.slice(0, 3)) tooltip.push(...describeProcess(r, now).map((l) => `  ${l}`));
  }
  for (const r of s.restarts.slice(-3))
    tooltip.push(
      `Restarted: PID ${r.before.pid ?? '?'} → PID ${r.after.pid ?? '?'}, seen ${formatLocalTime(r.seenAt)}; What Changed? compares the two`,
    );
  const description = s.running.length ? (restartedNow ? 'running · restarted' : 'running') : undefined;
  return { ...(description ? { description } : {}), tooltip };
}

export class LiveWatch {
  private readonly entries = new Map<string, Entry>();
  private readonly listeners = new Set<(s: LiveRunState) => void>();

  constructor(private readonly store?: Pick<WhatChangedStore, 'liveHistory' | 'saveLive'>) {}

  /** Called with a run's state after each poll that changed it (a process seen, gone, or a restart). */
  onDidChange(listener: (s: LiveRunState) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  state(hostId: string, run: string): LiveRunState | undefined {
    return this.entries.get(`${hostId}\u0000${run}`)?.state;
  }

  /**
   * One poll of these runs of one host (the first MAX_POLLED_RUNS): one request; the runs whose log did not change
   * since the last poll are not looked for. Resolves to the states that changed. A failed request changes nothing
   * (the next poll looks again) and resolves to [].
   */
  async poll(host: LiveHost, runs: readonly { run: string; log?: string | undefined }[]): Promise<LiveRunState[]> {
    const asked = runs.slice(0, MAX_POLLED_RUNS);
    if (!asked.length) return [];
    const entryOf = (run: string): Entry => {
      const key = `${host.id}\u0000${run}`;
      let e = this.entries.get(key);
      if (!e) {
        e = {
          seen: null,
          known: undefined,
          beside: [],
          state: { hostId: host.id, run, running: [], lookedAt: 0, restarts: [] },
        };
        this.entries.set(key, e);
      }
      return e;
    };
    let polled;
    try {
      const r = await host.probes.run(
        whatChangedProbe({ live: asked.map((a) => ({ run: a.run, log: a.log, seen: entryOf(a.run).seen })) }),
      );
      polled = r.value.live ?? [];
    } catch {
      return []; // the host is down or busy: the tree and the dashboard say so themselves
    }
    const changed: LiveRunState[] = [];
    for (const p of polled) {
      const e = entryOf(p.run);
      e.seen = p.logState;
      if (p.unchanged) continue;
      if (await this.update(host.storeKey ?? host.id, e, p.records, p.error)) changed.push(e.state);
    }
    for (const s of changed) for (const l of this.listeners) l(s);
    return changed;
  }

  /** Takes the processes seen now; true when the state changed. */
  private async update(storeKey: string, e: Entry, now: LaunchRecord[], error: string | null): Promise<boolean> {
    const s = e.state;
    if (e.known === undefined) {
      try {
        e.known = (await this.store?.liveHistory(storeKey, s.run)) ?? [];
      } catch {
        e.known = [];
      }
    }
    const known = e.known;
    const fresh = now.filter((r) => !known.some((k) => sameProcess(k, r)) && !e.beside.some((k) => sameProcess(k, r)));
    // A launch is the first process seen, or one that appears once none the last look saw still runs (a restart).
    // A process that appears beside a running one (a `tail -f` of the log, a shell in the run) is no launch: it is
    // shown, never kept, or the next report would compare it as one.
    const last = known[known.length - 1];
    const lastGone = last !== undefined && !now.some((r) => sameProcess(last, r));
    const launched = fresh.length && (known.length === 0 || lastGone) ? fresh[0]! : undefined;
    for (const r of fresh) if (r !== launched) e.beside.push(r);
    e.beside = e.beside.filter((b) => now.some((r) => sameProcess(b, r)));
    let keptError: string | undefined;
    if (launched) {
      known.push(launched);
      try {
        await this.store?.saveLive(storeKey, s.run, launched, known.slice(0, -1));
      } catch (err) {
        keptError = `keeping the process: ${messageOf(err)}`;
      }
      if (lastGone && last)
        s.restarts = [...s.restarts, { seenAt: Date.now(), before: last, after: launched }].slice(-MAX_RESTARTS);
    }
    const before = s.running.map((r) => `${r.pid}:${r.time}`).join(',');
    const hadError = s.error;
    s.running = now;
    s.lookedAt = Date.now();
    const why = error ?? keptError;
    if (why) s.error = why;
    else delete s.error;
    return launched !== undefined || before !== now.map((r) => `${r.pid}:${r.time}`).join(',') || hadError !== s.error;
  }
}
