import type { KeptStore } from '../runs/viewState';

/**
 * True the first time it is asked for `key` in this store, and never again (the answer is kept before it is given):
 * what is done once per installation (opening the walkthrough) is done once even when the write is slow.
 */
export function firstTime(store: KeptStore, key: string): boolean {
  if (store.get<boolean>(key) === true) return false;
  // Fire and forget: a lost write only means the same question once more next time.
  void Promise.resolve(store.update(key, true)).catch(() => undefined);
  return true;
}
