import { z } from 'zod';

/*
 * What Remote Runs keeps across a window reload that VS Code does not keep for an extension's tree: which rows were
 * expanded or collapsed by hand, which rows were selected, and the checkpoint chosen with Select for Compare. VS Code
 * restores none of these (its custom tree only asks TreeItem.collapsibleState for a row it has not seen), so the
 * provider answers each row's state from here, and the selection is revealed again once its rows are listed.
 */

/** The storage it is kept in: VS Code's workspaceState (a Memento), or a Map in tests. */
export interface KeptStore {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): PromiseLike<void>;
}

/**
 * The selected row: its host, and the ids of the rows from below the host down to it (root, run, …, itself); none
 * for the host's own row.
 */
export interface KeptRow {
  hostId: string;
  ids: string[];
}

/** The checkpoint chosen with Select for Compare (the args feature's CheckpointRef). */
export interface KeptCompare {
  hostId: string;
  path: string;
  label: string;
}

export const VIEW_STATE_KEY = 'knownGood.remoteRuns.viewState';
/**
 * Rows whose state is kept, newest change last; older ones are forgotten first. A person opens tens of rows; a
 * bound keeps the stored state small after months of runs coming and going.
 */
export const MAX_KEPT_ROWS = 400;

const keptSchema = z.object({
  /** [row id, expanded], oldest change first. */
  rows: z.array(z.tuple([z.string(), z.boolean()])).default([]),
  selection: z.object({ hostId: z.string(), ids: z.array(z.string()) }).optional(),
  compare: z.object({ hostId: z.string(), path: z.string(), label: z.string() }).optional(),
});
type Kept = z.infer<typeof keptSchema>;

export class RemoteRunsViewState {
  private readonly rows: Map<string, boolean>;
  private selected: KeptRow | undefined;
  private compareRef: KeptCompare | undefined;

  constructor(
    private readonly store: KeptStore,
    private readonly maxRows = MAX_KEPT_ROWS,
  ) {
    // What an older or broken version wrote is dropped, never a reason to fail activation.
    const parsed = keptSchema.safeParse(store.get<unknown>(VIEW_STATE_KEY) ?? {});
    const kept: Kept = parsed.success ? parsed.data : { rows: [] };
    this.rows = new Map(kept.rows.slice(-maxRows));
    this.selected = kept.selection;
    this.compareRef = kept.compare;
  }

  /** Whether the row was last expanded (true) or collapsed (false) by hand; undefined: never touched. */
  expansionOf(id: string): boolean | undefined {
    return this.rows.get(id);
  }

  /** The person expanded or collapsed a row (VS Code's onDidExpandElement / onDidCollapseElement). */
  setExpanded(id: string, expanded: boolean): void {
    if (this.rows.get(id) === expanded) return;
    this.rows.delete(id);
    this.rows.set(id, expanded);
    while (this.rows.size > this.maxRows) this.rows.delete(this.rows.keys().next().value as string);
    this.save();
  }

  /**
   * The row selected last (of a multi-selection, the first: VS Code's reveal selects one row), when it is to be shown
   * again: only when every row above it is expanded (its host and each ancestor), so that a row the person had
   * collapsed away stays hidden as they left it. `defaultExpanded` answers for rows never touched (roots open).
   */
  selection(hostRowId: (hostId: string) => string, defaultExpanded: (id: string) => boolean): KeptRow | undefined {
    const r = this.selected;
    if (!r) return undefined;
    const above = r.ids.length ? [hostRowId(r.hostId), ...r.ids.slice(0, -1)] : [];
    return above.every((id) => this.expansionOf(id) ?? defaultExpanded(id)) ? r : undefined;
  }

  setSelection(row: KeptRow | undefined): void {
    const next = row ? { hostId: row.hostId, ids: [...row.ids] } : undefined;
    if (JSON.stringify(next) === JSON.stringify(this.selected)) return;
    this.selected = next;
    this.save();
  }

  compare(): KeptCompare | undefined {
    return this.compareRef;
  }

  setCompare(ref: KeptCompare | undefined): void {
    const next = ref ? { hostId: ref.hostId, path: ref.path, label: ref.label } : undefined;
    if (JSON.stringify(next) === JSON.stringify(this.compareRef)) return;
    this.compareRef = next;
    this.save();
  }

  private save(): void {
    const kept: Kept = {
      rows: [...this.rows],
      ...(this.selected ? { selection: this.selected } : {}),
      ...(this.compareRef ? { compare: this.compareRef } : {}),
    };
    // Fire and forget: a lost write only loses what the next reload would have restored.
    void Promise.resolve(this.store.update(VIEW_STATE_KEY, kept)).catch(() => undefined);
  }
}
