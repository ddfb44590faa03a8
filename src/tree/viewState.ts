import type * as vscode from 'vscode';
import { hostNodeId, opensByDefault } from '../core/runs/model';
import type { RemoteRunsViewState } from '../core/runs/viewState';
import type { TreeNode } from '../shared/treeSection';
import type { RemoteRunsProvider } from './provider';

/**
 * Keeps Remote Runs as the person leaves it (core/runs/viewState.ts): each expand and collapse, and the selection.
 * After a reload the provider opens the same rows (ProviderOptions.expansionOf) and this selects the same row again
 * once its host's listing is in, the first time the view is shown: a host kept closed is never connected for it.
 */
export class KeepViewState implements vscode.Disposable {
  private readonly subs: vscode.Disposable[] = [];
  /** Until the kept selection is shown again (or given up), a selection seen is the person's own: theirs wins. */
  private restoring = true;

  constructor(
    private readonly view: vscode.TreeView<TreeNode>,
    private readonly tree: Pick<RemoteRunsProvider, 'idOf' | 'pathOf' | 'resolvePath'>,
    private readonly state: RemoteRunsViewState,
    private readonly ensureListing: (hostId: string) => Promise<unknown>,
    private readonly log: (line: string) => void,
  ) {
    this.subs.push(
      view.onDidExpandElement((e) => state.setExpanded(tree.idOf(e.element), true)),
      view.onDidCollapseElement((e) => state.setExpanded(tree.idOf(e.element), false)),
      view.onDidChangeSelection((e) => {
        this.restoring = false;
        const first = e.selection[0];
        state.setSelection(first ? tree.pathOf(first) : undefined);
      }),
    );
    if (view.visible) void this.restoreSelection();
    else {
      const once = view.onDidChangeVisibility((e) => {
        if (!e.visible) return;
        once.dispose();
        void this.restoreSelection();
      });
      this.subs.push(once);
    }
  }

  private async restoreSelection(): Promise<void> {
    const row = this.state.selection(hostNodeId, opensByDefault);
    if (!row) return;
    try {
      if (row.ids.length) await this.ensureListing(row.hostId);
      const node = await this.tree.resolvePath(row.hostId, row.ids);
      // The row may be gone (a run deleted meanwhile); the person may have clicked elsewhere while it listed.
      if (!node || !this.restoring) return;
      await this.view.reveal(node, { select: true, focus: false, expand: false });
    } catch (e) {
      this.log(`Remote Runs: the selection kept from the last window was not shown again (${String(e)})`);
    } finally {
      this.restoring = false;
    }
  }

  dispose(): void {
    for (const s of this.subs.splice(0)) s.dispose();
  }
}
