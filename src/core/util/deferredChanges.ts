/**
 * Holds change events while work they would disturb is in flight, then delivers them merged: `undefined` (the
 * whole thing changed) wins over single items, and each item is delivered once. Used by the Remote Runs tree:
 * a change fired while VS Code is fetching children makes it fetch the same children twice, and the second fetch
 * fails ("Element with id … is already registered").
 */
export class DeferredChanges<T> {
  private inFlight = 0;
  private all = false;
  private readonly held = new Set<T>();
  private disposed = false;

  constructor(private readonly deliver: (item: T | undefined) => void) {}

  /** A change of `item` (undefined: everything): delivered now when nothing is in flight, else when it settles. */
  fire(item?: T): void {
    if (this.disposed) return;
    if (this.inFlight === 0) {
      this.deliver(item);
      return;
    }
    if (item === undefined) {
      this.all = true;
      this.held.clear();
    } else if (!this.all) this.held.add(item);
  }

  /** Counts `work` as in flight until it settles (either way), then delivers what was held. */
  async during<R>(work: Promise<R>): Promise<R> {
    this.inFlight++;
    try {
      return await work;
    } finally {
      this.inFlight--;
      // Delivered on the next turn: the caller (VS Code) registers the children it just got first.
      if (this.inFlight === 0 && (this.all || this.held.size > 0)) setTimeout(() => this.flush(), 0);
    }
  }

  /** Events waiting for work in flight. */
  get pending(): number {
    return this.all ? 1 : this.held.size;
  }

  private flush(): void {
    if (this.inFlight > 0 || this.disposed) return;
    if (this.all) {
      this.all = false;
      this.held.clear();
      this.deliver(undefined);
      return;
    }
    const items = [...this.held];
    this.held.clear();
    for (const item of items) this.deliver(item);
  }

  dispose(): void {
    this.disposed = true;
    this.held.clear();
  }
}
