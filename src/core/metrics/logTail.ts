import { z } from 'zod';
import { defineProbe, type ProbeRunnerLike } from '../probes/probe';

/*
 * python/log_tail.py and the reader that follows a live log with it: the reader keeps the byte offset (and the
 * file's inode), so each poll moves only the bytes appended since the last one across the wire, and a half-written
 * last line is left for the next poll.
 */

const count = z.number().int().nonnegative();

export const latestSchema = z.object({
  step: z.number().nullable(),
  stepKey: z.string().nullable(),
  tokensPerSec: z.number().nullable(),
  tokensPerSecKey: z.string().nullable(),
});
export type LatestProgress = z.infer<typeof latestSchema>;

export const logTailSchema = z.looseObject({
  path: z.string(),
  exists: z.boolean(),
  inode: z.number().nullable(),
  size: count,
  mtime: z.number().nullable(),
  offset: count,
  nextOffset: count,
  /** The file was truncated or replaced since the offset: reading restarted from 0. */
  reset: z.boolean(),
  /** Parsed lines, oldest first; a line that is not JSON is `{ $raw: text }`. Empty with latestOnly. */
  lines: z.array(z.unknown()),
  count,
  malformed: count,
  /** More complete lines were there than maxBytes allowed: poll again. */
  hasMore: z.boolean(),
  latest: latestSchema.nullable(),
  /** The last values (oldest first, at most RECENT_LEVEL) of latest's throughput key in the lines read. */
  recent: z.array(z.number()).default([]),
});
export type LogTail = z.infer<typeof logTailSchema>;

export interface LogTailOptions {
  path: string;
  /** Byte offset to read from; -1 starts near the end (the last maxBytes, from a line boundary). */
  offset: number;
  maxBytes?: number;
  /** The inode seen last time: another one means the file was replaced. */
  inode?: number | null;
  /** Do not send the lines back, only the newest step/throughput and the counts. */
  latestOnly?: boolean;
}

export function logTailArgs(o: LogTailOptions): string[] {
  const args = [o.path, '--offset', String(o.offset)];
  if (o.maxBytes !== undefined) args.push('--max-bytes', String(o.maxBytes));
  if (o.inode !== undefined && o.inode !== null) args.push('--inode', String(o.inode));
  if (o.latestOnly) args.push('--latest-only');
  return args;
}

/** Values the level is the median of (python/log_tail.py RECENT): about two checkpoint-save periods of windows. */
export const RECENT_LEVEL = 21;

export const logTailProbe = defineProbe('log_tail', logTailSchema, (o: LogTailOptions) => logTailArgs(o), {
  modules: ['kg_redact'],
});

export interface LogPoll {
  /** Lines appended since the previous poll (all of them when the file was reset), oldest first. */
  lines: unknown[];
  /** The newest step and tokens/s known so far (kept from earlier polls when this one brought none). */
  latest: LatestProgress | null;
  /**
   * The run's current throughput level: the median of the last RECENT_LEVEL values read (one logged point may be a
   * checkpoint save or an eval pause); null before any.
   */
  level: number | null;
  reset: boolean;
  exists: boolean;
  /** Bytes of log consumed by this poll. */
  bytes: number;
  malformed: number;
}

export interface IncrementalLogReaderOptions {
  /** Start near the end instead of at 0 (a status bar needs the newest step, not the whole history). */
  fromEnd?: boolean;
  maxBytes?: number;
  latestOnly?: boolean;
  timeoutMs?: number;
}

/** Follows one log on one host through the probe runner; `poll` reads what was appended since the last poll. */
export class IncrementalLogReader {
  private offset: number;
  private inode: number | null = null;
  private latestSeen: LatestProgress | null = null;
  private recent: number[] = [];

  constructor(
    private readonly runner: ProbeRunnerLike,
    readonly path: string,
    private readonly options: IncrementalLogReaderOptions = {},
  ) {
    this.offset = options.fromEnd ? -1 : 0;
  }

  /** The median of the recent throughput values, or null before any. */
  get level(): number | null {
    if (!this.recent.length) return null;
    const s = [...this.recent].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  }

  /** The byte offset the next poll reads from. */
  get nextOffset(): number {
    return this.offset;
  }

  get latest(): LatestProgress | null {
    return this.latestSeen;
  }

  /** One probe call: at most maxBytes of new lines. */
  async poll(signal?: AbortSignal): Promise<LogPoll> {
    return (await this.pollWithMore(signal)).poll;
  }

  /** Polls until the log has no more complete lines than were read (bounded by maxPolls). */
  async readAvailable(maxPolls = 64, signal?: AbortSignal): Promise<LogPoll> {
    const all: unknown[] = [];
    let reset = false;
    let bytes = 0;
    let malformed = 0;
    let exists = false;
    for (let i = 0; i < maxPolls; i++) {
      const { poll, hasMore } = await this.pollWithMore(signal);
      if (poll.reset) {
        all.length = 0;
        bytes = 0;
        reset = true;
      }
      all.push(...poll.lines);
      bytes += poll.bytes;
      malformed += poll.malformed;
      exists = poll.exists;
      if (!hasMore) break;
    }
    return { lines: all, latest: this.latestSeen, level: this.level, reset, exists, bytes, malformed };
  }

  private async pollWithMore(signal?: AbortSignal): Promise<{ poll: LogPoll; hasMore: boolean }> {
    const { value } = await this.runner.run(
      logTailProbe({
        path: this.path,
        offset: this.offset,
        inode: this.inode,
        ...(this.options.maxBytes !== undefined ? { maxBytes: this.options.maxBytes } : {}),
        ...(this.options.latestOnly ? { latestOnly: true } : {}),
      }),
      {
        ...(this.options.timeoutMs !== undefined ? { timeoutMs: this.options.timeoutMs } : {}),
        ...(signal ? { signal } : {}),
      },
    );
    // A log that disappeared after being read counts as a reset too: whatever comes next is a new file.
    const reset = value.reset || (!value.exists && this.offset > 0);
    if (reset) {
      this.latestSeen = null;
      this.recent = [];
    }
    // values of another key than the ones kept (a log that changed its columns) start the window over
    if (value.latest?.tokensPerSecKey && value.latest.tokensPerSecKey !== this.latestSeen?.tokensPerSecKey)
      this.recent = [];
    this.recent = [...this.recent, ...value.recent].slice(-RECENT_LEVEL);
    const bytes = value.nextOffset - value.offset;
    this.offset = value.nextOffset;
    this.inode = value.inode;
    if (value.latest) this.latestSeen = mergeLatest(this.latestSeen, value.latest);
    return {
      poll: {
        lines: value.lines,
        latest: this.latestSeen,
        level: this.level,
        reset,
        exists: value.exists,
        bytes,
        malformed: value.malformed,
      },
      hasMore: value.hasMore,
    };
  }
}

/** A poll's latest fills in only what it has: a line with a step but no tok/s keeps the earlier tok/s. */
function mergeLatest(prev: LatestProgress | null, next: LatestProgress): LatestProgress {
  if (!prev) return next;
  return {
    step: next.step ?? prev.step,
    stepKey: next.step !== null ? next.stepKey : prev.stepKey,
    tokensPerSec: next.tokensPerSec ?? prev.tokensPerSec,
    tokensPerSecKey: next.tokensPerSec !== null ? next.tokensPerSecKey : prev.tokensPerSecKey,
  };
}
