import * as vscode from 'vscode';
import type { BenchDeps } from './register';
import { formatLive, liveTargetOf, LiveThroughput, type LiveState } from '../core/metrics/liveThroughput';
import { RECENT_LEVEL } from '../core/metrics/logTail';
import { Commands } from '../constants';
import { createStatusBarItem } from '../window';

/**
 * The status-bar item of a selected run: newest step and the tokens/s level (median of the recent values) from its
 * metrics jsonl. It polls only while the
 * Remote Runs view is visible and a run (or its log) is selected, and hides otherwise.
 */
export function registerLiveThroughput(c: BenchDeps): LiveThroughput {
  const item = c.track(createStatusBarItem('knownGood.liveThroughput', vscode.StatusBarAlignment.Left, 50));
  item.name = 'Known Good: live throughput';
  /** The Remote Runs row whose numbers are shown. */
  let followed: unknown;
  const render = (s: LiveState) => {
    if (s.kind === 'hidden') {
      item.hide();
      return;
    }
    // which run the numbers are of, and a click opens its dashboard
    item.text = `$(pulse) ${runName(followed, s.target.path)} · ${formatLive(s)}`;
    item.command = { command: Commands.openDashboard, title: 'Open Dashboard', arguments: [followed ?? s.target] };
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
    const target = sel.length === 1 ? liveTargetOf(sel[0]) : undefined;
    followed = target ? sel[0] : undefined;
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
function runName(node: unknown, path: string): string {
  const n = node as { kind?: unknown; label?: unknown } | undefined;
  if (n?.kind === 'run' && typeof n.label === 'string') return n.label;
  const parts = path.replace(/\/+$/, '').split('/');
  return parts[parts.length - 2] ?? path;
}
