import type { RunEntry } from '../runs/listRuns';

/*
 * Which file of a run is its metrics log: one rule, used by the dashboard (what it plots) and by live throughput
 * (what it tails). A listing entry in, a listing entry out: no host is asked.
 */

const isFile = (e: RunEntry) => e.kind === 'file' || (e.kind === 'symlink' && e.targetKind === 'file');

const METRICS_FORMAT_RANK: Record<string, number> = { csv: 3, tensorboard: 4, 'hf-trainer-state': 5 };
/** The Trainer's trainer_state.json: the one log that counts inside a (Hugging Face) checkpoint. */
const TRAINER_STATE_RANK = 5;

/**
 * How good a metrics log a file is, lower is better (undefined: not one): 0 train_log*.jsonl, 1 another jsonl the
 * listing calls metrics, 2 one it calls a train log, 3 Lightning's metrics.csv, 4 a TensorBoard event file, 5 the
 * Hugging Face Trainer's trainer_state.json (its log_history; the newest checkpoint's holds all of it).
 */
function logRank(e: RunEntry): number | undefined {
  if (!isFile(e) || e.escaped) return undefined;
  const name = e.name.toLowerCase();
  if (name.startsWith('train_log') && name.endsWith('.jsonl')) return 0;
  if (e.role !== 'train-log' && e.role !== 'metrics') return undefined;
  if (name.endsWith('.jsonl')) return e.role === 'metrics' ? 1 : 2;
  return METRICS_FORMAT_RANK[e.format ?? ''];
}

/** A file the dashboard can plot: a jsonl log, Lightning's metrics.csv, TensorBoard events, trainer_state.json. */
export function isMetricsLog(e: RunEntry): boolean {
  return logRank(e) !== undefined;
}

/** A log read as JSON lines (what live throughput can tail). */
export function isJsonlLog(e: RunEntry): boolean {
  return e.name.toLowerCase().endsWith('.jsonl');
}

/**
 * The metrics log of a run folder: the best rank of logRank, nearer the run folder first (logs/, Lightning's
 * version_N/, the Trainer's runs/<date>/ below it count, down to `maxDepth`), newest on a tie. Never inside a
 * checkpoint, except the Trainer's trainer_state.json of the newest Hugging Face checkpoint, the one log such a run
 * may have.
 */
export function metricsLogOf(run: RunEntry, maxDepth = 3): RunEntry | undefined {
  let best: { e: RunEntry; rank: number; depth: number; step: number } | undefined;
  const stack: { e: RunEntry; depth: number; step: number }[] = (run.children ?? []).map((e) => ({
    e,
    depth: 1,
    step: -1,
  }));
  while (stack.length) {
    const { e, depth, step } = stack.pop()!;
    const rank = logRank(e);
    if (rank !== undefined && (step < 0 || rank === TRAINER_STATE_RANK)) {
      const better =
        !best ||
        rank < best.rank ||
        (rank === best.rank &&
          (step > best.step ||
            (step === best.step &&
              (depth < best.depth || (depth === best.depth && (e.mtime ?? 0) > (best.e.mtime ?? 0))))));
      if (better) best = { e, rank, depth, step };
    } else if (e.kind === 'dir' && e.role !== 'checkpoint' && depth < maxDepth) {
      for (const c of e.children ?? []) stack.push({ e: c, depth: depth + 1, step });
    } else if (e.kind === 'dir' && e.role === 'checkpoint' && e.format === 'hf' && step < 0) {
      for (const c of e.children ?? []) stack.push({ e: c, depth: depth + 1, step: e.step ?? 0 });
    }
  }
  return best?.e;
}

/** The log's path on the host, from the run folder's (listing paths are relative to the root, the run's included). */
export function metricsLogPath(runPath: string, run: RunEntry, log: RunEntry): string {
  const rel = run.path && log.path.startsWith(`${run.path}/`) ? log.path.slice(run.path.length + 1) : log.path;
  return runPath.endsWith('/') ? runPath + rel : `${runPath}/${rel}`;
}
