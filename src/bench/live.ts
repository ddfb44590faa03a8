import * as vscode from 'vscode';
import type { BenchDeps } from './register';
import { formatLive, liveTargetOf, LiveThroughput, type LiveState } from '../core/metrics/liveThroughput';
import { RECENT_LEVEL } from '../core/metrics/logTail';
import { Commands } from '../constants';
import type { ResolvedTarget } from '../core/runs/listings';
import { displayName } from '../core/runs/model';
import { decodeTarget } from '../core/runs/targets';
import { createStatusBarItem } from '../window';

/**
 * The status-bar item of a selected run: newest step and the tokens/s level (median of the recent values) from its
 * metrics jsonl, or from its stitched history when its log is no jsonl. It polls only while the
 * Remote Runs view is visible and a run (or its log) is selected, and hides otherwise.
 */
export function registerLiveThroughput(c: BenchDeps): LiveThroughput {
  const item = c.track(createStatusBarItem('knownGood.liveThroughput', vscode.StatusBarAlignment.Left, 50));
  item.name = 'Known Good: live throughput';
  /** What the numbers are of (a click opens its dashboard). */
  let followed: ResolvedTarget | undefined;
  const render = (s: LiveState) => {
    if (s.kind === 'hidden') {
      item.hide();
      return;
    }
    // which run the numbers are of, and a click opens its dashboard
    item.text = `$(pulse) ${runName(followed, s.target.path)} · ${formatLive(s)}`;
    const on = followed ? { kind: followed.kind, hostId: followed.hostId, path: followed.path } : undefined;
    item.command = {
      command: Commands.openDashboard,
      title: 'Open Dashboard',
      // a tagged target: the run itself (its dashboard, not only the log's), decoded like a tree node
      arguments: [on ? { target: on } : { hostId: s.target.hostId, logPath: s.target.path }],
    };
    const where = `${s.target.path} on ${c.hosts.find(s.target.hostId)?.name ?? s.target.hostId}`;
    item.tooltip =
      s.kind === 'error'
        ? `${where}\n${s.message}`
        : s.kind === 'value'
          ? `${where}\n${s.latest.stepKey ?? 'step'} / ${s.latest.tokensPerSecKey ?? 'tok/s'}: the median of the last ` +
            `${RECENT_LEVEL} values (the last one logged: ${s.latest.tokensPerSec ?? '—'}); updated ${new Date(s.at).toLocaleTimeString()} ` +
            `(${s.bytes} new bytes read)`
          : `${where}\nreading…`;
    item.show();
  };
  const live = new LiveThroughput({
    runnerFor: (hostId) => c.hosts.session(hostId).probes,
    intervalMs: 3000,
    onState: render,
  });
  c.track({ dispose: () => live.dispose() });
  const view = c.view;
  const follow = () => {
    const sel = view.selection;
    const on = sel.length === 1 ? decodeTarget(sel[0]) : undefined;
    const resolved = on ? c.resolve(on) : undefined;
    const target = liveTargetOf(resolved);
    followed = target ? resolved : undefined;
    live.follow(target);
  };
  c.track(view.onDidChangeSelection(follow));
  // A hidden view or a window in the background needs no numbers: nothing is read then.
  const update = () => live.setVisible(view.visible && vscode.window.state.focused);
  c.track(view.onDidChangeVisibility(update));
  c.track(vscode.window.onDidChangeWindowState(update));
  update();
  follow();
  return live;
}

/** A run row's own name; for a log file, its folder's (the run it belongs to). */
function runName(r: ResolvedTarget | undefined, path: string): string {
  if (r?.kind === 'run') return displayName(r.entry);
  const parts = path.replace(/\/+$/, '').split('/');
  return parts[parts.length - 2] ?? path;
}
