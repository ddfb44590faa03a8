import * as vscode from 'vscode';
import type { HostRegistry } from '../core/registry';
import { listRunsProbe } from '../core/runs/listRuns';
import type { Listings } from '../core/runs/listings';
import { pollableRuns, type LiveWatch } from '../core/whatChanged/liveWatch';

/**
 * While Remote Runs is visible and `knownGood.autoRefreshSeconds` > 0, new checkpoints appear by themselves: each
 * listed host is asked only for its roots' signatures (entry counts and newest mtimes, no walk); a host is listed
 * again only when a signature changed.
 */
export class AutoRefresh implements vscode.Disposable {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private readonly subs: vscode.Disposable[] = [];

  constructor(
    private readonly view: vscode.TreeView<unknown>,
    private readonly listings: Pick<Listings, 'listing' | 'reload'>,
    private readonly registry: HostRegistry,
    private readonly seconds: () => number,
    settingsChanged: vscode.Event<unknown>,
    private readonly live?: { watch: LiveWatch; storeKeyOf(hostId: string): string; redraw(): void },
  ) {
    this.subs.push(view.onDidChangeVisibility(() => this.schedule()));
    this.subs.push(settingsChanged(() => this.schedule()));
    this.schedule();
  }

  private schedule(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    const s = this.seconds();
    if (!this.view.visible || !(s > 0)) return;
    this.timer = setInterval(() => void this.tick(), Math.max(2, s) * 1000);
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      await Promise.all(
        this.registry.hosts().map(async (host) => {
          const listing = this.listings.listing(host.id);
          if (!listing) return;
          try {
            const r = await this.registry.session(host).probes.run(listRunsProbe(host.roots, { signatureOnly: true }));
            const before = listing.roots.map((x) => `${x.path}\u0000${x.status}\u0000${x.signature ?? ''}`).join('\n');
            const now = r.value.roots.map((x) => `${x.path}\u0000${x.status}\u0000${x.signature ?? ''}`).join('\n');
            if (before !== now) this.listings.reload(host.id);
          } catch {
            /* the next full listing shows the error */
            return;
          }
          if (!this.live) return;
          const changed = await this.live.watch.poll(
            { id: host.id, storeKey: this.live.storeKeyOf(host.id), probes: this.registry.session(host).probes },
            pollableRuns(listing),
          );
          if (changed.length) this.live.redraw();
        }),
      );
    } finally {
      this.busy = false;
    }
  }

  dispose(): void {
    if (this.timer) clearInterval(this.timer);
    for (const s of this.subs) s.dispose();
  }
}

/**
 * Relative ages ("3 min ago") in Remote Runs move on by themselves: while the view is visible, its rows are redrawn
 * every `periodMs` from the listings it already has (no remote call; ids are stable, so expanded rows stay open).
 */
export class AgeTicker implements vscode.Disposable {
  private timer: NodeJS.Timeout | undefined;
  private readonly sub: vscode.Disposable;

  constructor(
    private readonly view: vscode.TreeView<unknown>,
    private readonly redraw: () => void,
    private readonly periodMs = 60_000,
  ) {
    this.sub = view.onDidChangeVisibility(() => this.schedule());
    this.schedule();
  }

  private schedule(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.view.visible) this.timer = setInterval(this.redraw, this.periodMs);
  }

  dispose(): void {
    if (this.timer) clearInterval(this.timer);
    this.sub.dispose();
  }
}
