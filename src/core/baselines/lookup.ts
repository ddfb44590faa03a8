import { existsSync } from 'node:fs';
import { KnownGoodError } from '../errors';
import { readBaseline, type BaselineStore, type StoredBaseline } from './store';

/**
 * A baseline named on the command line: a file path, else an id (or a unique prefix of one), else a label (exact,
 * then ignoring case). Several baselines with the same label: the newest wins, as a person means "that one".
 */
export async function findBaseline(store: BaselineStore, hostId: string, word: string): Promise<StoredBaseline> {
  if (word.endsWith('.json') || word.includes('/')) {
    if (!existsSync(word)) throw new KnownGoodError('not-found', `baseline file ${word} not found`);
    const r = await readBaseline(word);
    if (!r.ok) throw new KnownGoodError('bad-output', `${r.problem.file}: ${r.problem.message}`);
    return { baseline: r.baseline, file: word };
  }
  const { baselines } = await store.list(hostId);
  const pick = (list: StoredBaseline[]) => list[0]; // list() is newest first
  const byId = baselines.filter((b) => b.baseline.id === word);
  if (byId.length) return byId[0]!;
  const byPrefix = baselines.filter((b) => b.baseline.id.startsWith(word));
  if (byPrefix.length === 1) return byPrefix[0]!;
  const byLabel = pick(baselines.filter((b) => b.baseline.label === word));
  if (byLabel) return byLabel;
  const byLabelCi = pick(baselines.filter((b) => b.baseline.label.toLowerCase() === word.toLowerCase()));
  if (byLabelCi) return byLabelCi;
  if (byPrefix.length > 1) {
    throw new KnownGoodError('not-found', `"${word}" matches ${byPrefix.length} baseline ids: give more of the id`);
  }
  const known = baselines
    .slice(0, 10)
    .map((b) => `  ${b.baseline.id}  ${b.baseline.label}`)
    .join('\n');
  throw new KnownGoodError(
    'not-found',
    `no baseline "${word}" for this host in ${store.hostDir(hostId)}${known ? `\nknown baselines:\n${known}` : ' (none saved yet)'}`,
  );
}
