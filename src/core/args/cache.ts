import { KnownGoodError } from '../errors';

/**
 * Args read from checkpoints, keyed by host + path + size + mtime: reopening a checkpoint is instant, and a
 * rewritten one (new size or mtime) is read again. Pure and in memory; the least recently used entry goes first.
 */
export interface ArgsCacheKey {
  host: string;
  path: string;
  size: number;
  /** Epoch seconds (or ms) as the listing reported it; only compared, never interpreted. */
  mtime: number | null;
  /** Keys / --all asked for: another view of the same file is another entry. */
  view?: string;
}

export function argsCacheKey(k: ArgsCacheKey): string {
  return JSON.stringify([k.host, k.path, k.size, k.mtime, k.view ?? '']);
}

export class ArgsCache<V> {
  private readonly map = new Map<string, V>();

  constructor(private readonly capacity = 200) {
    if (!(capacity >= 1)) throw new KnownGoodError('internal', 'ArgsCache capacity must be at least 1');
  }

  get size(): number {
    return this.map.size;
  }

  get(key: ArgsCacheKey): V | undefined {
    const k = argsCacheKey(key);
    const v = this.map.get(k);
    if (v === undefined) return undefined;
    // re-insert: Map keeps insertion order, so the first key is always the least recently used
    this.map.delete(k);
    this.map.set(k, v);
    return v;
  }

  set(key: ArgsCacheKey, value: V): void {
    const k = argsCacheKey(key);
    this.map.delete(k);
    this.map.set(k, value);
    while (this.map.size > this.capacity) {
      const oldest = this.map.keys().next();
      if (oldest.done) break;
      this.map.delete(oldest.value);
    }
  }

  /** Whether anything of one file is kept for this view (at any size and mtime). */
  holds(host: string, path: string, view = ''): boolean {
    for (const k of this.map.keys()) {
      const [h, p, , , v] = JSON.parse(k) as [string, string, number, number | null, string];
      if (h === host && p === path && v === view) return true;
    }
    return false;
  }

  /** Forget every entry of one file (all sizes, mtimes and views), e.g. when it was deleted. */
  forget(host: string, path: string): void {
    for (const k of [...this.map.keys()]) {
      const [h, p] = JSON.parse(k) as [string, string];
      if (h === host && p === path) this.map.delete(k);
    }
  }

  clear(): void {
    this.map.clear();
  }
}
