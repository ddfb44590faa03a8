import { posix } from 'node:path';
import { formatRate } from '../bench/compare';
import { messageOf } from '../errors';
import { IncrementalLogReader, type LatestProgress } from './logTail';
import type { ProbeRunnerLike } from '../probes/probe';
import type { ResolvedTarget } from '../runs/listings';
import { throughputRank } from '../whatChanged/categories';
import { metricsLogsOf } from './history';
import { HistoryLevelReader } from './liveHistory';
import { isJsonlLog } from './metricsLog';

/*
 * Live throughput of a selected run: the newest step and tokens/s of its metrics jsonl (the log the dashboard plots), polled every few seconds
 * while it is on screen. Each poll reads only the bytes appended since the last one (IncrementalLogReader, which
 * leaves a half-written last line for the next poll). A run whose log is no jsonl (Lightning CSV, TensorBoard, HF
 * trainer_state) is followed through its stitched history instead (HistoryLevelReader).
 */

export interface LiveTarget {
  hostId: string;
  /** The jsonl on the host; for a history, its newest file. */
  path: string;
  /**
   * A log that is no jsonl: every file of the run's history (metricsLogsOf, oldest launch first), whose stitched
   * series the numbers come from.
   */
  history?: string[];
}

/**
 * The metrics log live throughput follows for a target of Remote Runs: a metrics or train-log file itself, or a run
 * folder's log as the dashboard picks it (ResolvedTarget.metricsLog, metricsLogOf: the one rule) when it is jsonl.
 */
export function liveTargetOf(r: ResolvedTarget | undefined): LiveTarget | undefined {
  if (r?.kind === 'log' && (r.entry.role === 'metrics' || r.entry.role === 'train-log'))
    return isJsonlLog(r.entry)
      ? { hostId: r.hostId, path: r.path }
      : { hostId: r.hostId, path: r.path, history: [r.path] };
  if (r?.kind === 'run' && !r.inCheckpoint && r.metricsLog) {
    if (isJsonlLog(r.metricsLog.entry)) return { hostId: r.hostId, path: r.metricsLog.path };
    const history = metricsLogsOf(r.entry).map((e) => posix.join(r.root.path, e.path));
    if (history.length) return { hostId: r.hostId, path: history[history.length - 1]!, history };
  }
  return undefined;
}

export type LiveState =
  | { kind: 'hidden' }
  | { kind: 'waiting'; target: LiveTarget }
  | { kind: 'value'; target: LiveTarget; latest: LatestProgress; level: number | null; bytes: number; at: number }
  | { kind: 'error'; target: LiveTarget; message: string };

/** The status-bar text: `step 1200 · 12.8K tok/s`, the run's level (median of the recent values), not its last point. */
export function formatLive(s: LiveState): string {
  switch (s.kind) {
    case 'hidden':
      return '';
    case 'waiting':
      return 'step … · … tok/s';
    case 'error':
      return 'tok/s: error';
    case 'value': {
      const step = s.latest.step !== null ? `step ${s.latest.step}` : 'step ?';
      const v = s.level ?? s.latest.tokensPerSec;
      const unit = unitOf(s.latest.tokensPerSecKey);
      const tps = v !== null ? `${formatRate(v)} ${unit}` : `no ${unit} in log`;
      return `${step} · ${tps}`;
    }
  }
}

/** What the speed counts, by its key: tok/s unless the key says samples, steps or seconds per step. */
function unitOf(key: string | null): string {
  if (!key) return 'tok/s';
  const rank = throughputRank(key);
  return rank === 1.5 ? 'samples/s' : rank === 1 ? 'steps/s' : rank === 0.5 ? 's/step' : 'tok/s';
}

export interface LiveThroughputOptions {
  runnerFor(hostId: string): ProbeRunnerLike;
  intervalMs?: number;
  onState(s: LiveState): void;
  /** Bytes read per poll at most (the first poll starts this far from the end). */
  maxBytes?: number;
}

/** Follows one target at a time; polls only while visible. */
export class LiveThroughput {
  private target: LiveTarget | undefined;
  private reader: Pick<IncrementalLogReader, 'poll'> | undefined;
  private visible = false;
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private generation = 0;
  private disposed = false;
  /** Polls made and bytes of log they moved (for tests and the tooltip). */
  polls = 0;
  bytesRead = 0;

  constructor(private readonly options: LiveThroughputOptions) {}

  get current(): LiveTarget | undefined {
    return this.target;
  }

  follow(target: LiveTarget | undefined): void {
    if (target && this.target && target.hostId === this.target.hostId && target.path === this.target.path) return;
    this.generation++;
    this.target = target;
    const runner = target && this.options.runnerFor(target.hostId);
    this.reader =
      !target || !runner
        ? undefined
        : target.history
          ? new HistoryLevelReader(runner, target.history, { timeoutMs: 20_000 })
          : new IncrementalLogReader(runner, target.path, {
              fromEnd: true,
              latestOnly: true,
              maxBytes: this.options.maxBytes ?? 256 * 1024,
              timeoutMs: 20_000,
            });
    this.options.onState(target ? { kind: 'waiting', target } : { kind: 'hidden' });
    this.reschedule(0);
  }

  setVisible(visible: boolean): void {
    if (this.visible === visible) return;
    this.visible = visible;
    this.reschedule(0);
  }

  private reschedule(delay: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.disposed || !this.visible || !this.target || this.polling) return;
    this.timer = setTimeout(() => void this.poll(), delay);
    this.timer.unref?.();
  }

  /** One poll now (also what the timer runs). */
  async poll(): Promise<void> {
    const reader = this.reader;
    const target = this.target;
    if (!reader || !target || this.polling) return;
    const gen = this.generation;
    this.polling = true;
    try {
      const r = await reader.poll();
      this.polls++;
      this.bytesRead += r.bytes;
      if (gen !== this.generation) return;
      if (!r.exists) this.options.onState({ kind: 'error', target, message: `${target.path} does not exist (yet)` });
      else if (r.latest)
        this.options.onState({
          kind: 'value',
          target,
          latest: r.latest,
          level: r.level,
          bytes: r.bytes,
          at: Date.now(),
        });
      else this.options.onState({ kind: 'waiting', target });
    } catch (e) {
      if (gen === this.generation) this.options.onState({ kind: 'error', target, message: messageOf(e) });
    } finally {
      this.polling = false;
      this.reschedule(this.options.intervalMs ?? 3000);
    }
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
  }
}
