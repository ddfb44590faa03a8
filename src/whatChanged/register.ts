import { posix } from 'node:path';
import * as vscode from 'vscode';
import type { MarkKnownGoodOutcome, ReplayRunOutcome, WhatChangedOutcome } from '../api';
import { Commands, WHAT_CHANGED_VIEW_TYPE } from '../constants';
import type { CheckpointRef as ArgsCheckpoint } from '../core/args/target';
import type { BaselineStore } from '../core/baselines/store';
import { KnownGoodError, messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { toRemoteFileUri } from '../core/remote/readFile';
import {
  EVIDENCE_SCHEME,
  fromEvidenceUri,
  readDataEvidence,
  renderDataEvidence,
  toEvidenceUri,
} from '../core/whatChanged/dataEvidence';
import type { TargetOf } from '../core/runs/targets';
import { whatChanged, type WhatChangedOptions } from '../core/whatChanged/gather';
import type {
  CheckpointLink,
  EvidenceLink,
  Suspect,
  SuspectSubject,
  WhatChangedReport,
} from '../core/whatChanged/model';
import { reportWithProof } from '../core/replay/suspects';
import {
  parseWhatChangedPageState,
  parseWhatChangedPanelState,
  type WhatChangedPageState,
} from '../core/whatChanged/protocol';
import { newNonce } from '../core/util/nonce';
import { proofLine, renderWhatChangedMarkdown } from '../core/whatChanged/render';
import { WhatChangedStore } from '../core/whatChanged/store';
import type { RegisterCommand } from '../shared/commands';
import { registerReadonlyDocuments, type Documents } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import { executeCommand, registerWebviewPanelSerializer, showInfo, showTextDocument } from '../window';
import { withCancellableProgress } from '../shared/progress';
import { WhatChangedPanel } from './panel';
import { registerRecordLaunches } from './recordLaunches';

/** What "What Changed?" needs: hosts, settings, the shared store and its key, and how to open each kind of evidence. */
export interface WhatChangedDeps {
  command: RegisterCommand;
  track<T extends vscode.Disposable>(d: T): T;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'error'>;
  settings: SettingsAccess;
  store: BaselineStore;
  /** The id the host's baselines, results and marks are kept by (its transport's id). */
  storeKeyOf(host: HostSpec): string;
  /** The workspace's storage (ExtensionContext.workspaceState): report panels kept for a restore after a reload. */
  kept: Pick<vscode.Memento, 'get' | 'update'>;
  /** Read-only documents kept across a reload: the evidence that is text (a commit's diff, launch records). */
  documents: Pick<Documents, 'show' | 'uri'>;
  /** Other features' views, passed on by the container (ids are settings host ids). */
  evidence: {
    openArgsDiff(a: ArgsCheckpoint, b: ArgsCheckpoint): Promise<unknown>;
    /** With the report's run, whose training process (if it runs now) is compared too. */
    compareBaseline(hostId: string, baselineId: string, run: string | null): Thenable<unknown>;
    /** Confirm by bisect: the environment bisect against that baseline (with `packages`, the package bisect). */
    bisect(hostId: string, baselineId: string, packages: boolean): Thenable<unknown>;
    compareBench(hostId: string, referenceId: string | null): Thenable<unknown>;
    /** Prove by Replay (a suspect's subject) or Bisect All Changes (null) on the report's run. */
    replay(
      hostId: string,
      run: string,
      subject: SuspectSubject | null,
      title: string,
    ): Thenable<ReplayRunOutcome | undefined>;
    openDashboard(
      hostId: string,
      logPath: string,
      window?: { from: number; to: number },
      series?: string,
    ): Thenable<unknown>;
  };
}

/** Where report panels are kept for a restore (workspaceState), and how many. */
const KEPT_KEY = 'knownGood.whatChanged.panels';
const KEPT_MAX = 10;

/** The run folder a checkpoint belongs to: its parent, or the parent's parent for a `checkpoints/` folder. */
export function runOfCheckpoint(path: string): string {
  const parent = posix.dirname(path.replace(/\/+$/, ''));
  return /^(checkpoints?|ckpts?)$/i.test(posix.basename(parent)) ? posix.dirname(parent) : parent;
}

interface Subject {
  host: HostSpec;
  run: string | null;
  nowCheckpoint?: string;
}

function subjectOf(d: WhatChangedDeps, t: TargetOf<'host' | 'run' | 'checkpoint'>): Subject {
  const host = d.hosts.get(t.hostId);
  if (t.kind === 'run') return { host, run: t.path };
  if (t.kind === 'checkpoint') return { host, run: runOfCheckpoint(t.path), nowCheckpoint: t.path };
  return { host, run: null };
}

const keyOf = (s: Subject) => JSON.stringify([s.host.id, s.run, s.nowCheckpoint ?? null]);

function titleOf(s: Subject): string {
  const what = s.nowCheckpoint
    ? posix.basename(s.nowCheckpoint)
    : s.run !== null
      ? posix.basename(s.run) || s.run
      : s.host.name;
  return `What Changed? ${what}`;
}

function outcomeOf(s: Subject, r: WhatChangedReport, panel: WhatChangedPanel, reused: boolean): WhatChangedOutcome {
  return {
    hostId: s.host.id,
    run: s.run,
    ...(s.nowCheckpoint !== undefined ? { nowCheckpoint: s.nowCheckpoint } : {}),
    verdict: r.verdict,
    headline: r.headline,
    reference: { kind: r.reference.kind, label: r.reference.label, why: r.reference.why },
    suspects: r.suspects.map((x) => ({
      title: x.title,
      source: x.source,
      score: x.score,
      evidence: x.evidence.map((e) => e.kind),
    })),
    markdown: renderWhatChangedMarkdown(r),
    panelTitle: panel.panel.title,
    reused,
  };
}

/**
 * "What Changed?" on a run, a checkpoint (it is "now") or a host (environment and benchmarks only): gathers the facts
 * with progress, shows the report in a panel (one per target: running it again refreshes that panel) whose suspects
 * open their evidence; and "Mark as Known-Good" on a baseline.
 */
export function registerWhatChanged(d: WhatChangedDeps): void {
  const panels = new Map<string, WhatChangedPanel>();
  d.track({ dispose: () => [...panels.values()].forEach((p) => p.dispose()) });

  const gather = async (s: Subject): Promise<WhatChangedReport> => {
    const env = d.settings.current.baselines;
    const options: WhatChangedOptions = {
      store: d.store,
      scriptGlobs: env.scriptGlobs,
      extraVariables: env.extraVariables,
      // none set: the custom caches the newest baseline measured (gather's default)
      ...(env.cacheDirs.length ? { cacheDirs: env.cacheDirs } : {}),
      ...(s.nowCheckpoint !== undefined ? { nowCheckpoint: s.nowCheckpoint } : {}),
    };
    const host = { id: d.storeKeyOf(s.host), label: s.host.name, probes: d.hosts.session(s.host).probes };
    const what = s.nowCheckpoint ?? s.run ?? 'the environment';
    const report = await withCancellableProgress(
      `What Changed? ${s.host.name}: ${posix.basename(what) || what}`,
      (signal, progress) => {
        progress('listing, args, metrics, environment…');
        return whatChanged(host, s.run, { ...options, signal });
      },
    );
    // show() and Refresh need a report: a cancel is the command's quiet `cancelled`, as before
    if (!report) throw new KnownGoodError('cancelled', 'What Changed? cancelled');
    return report;
  };

  // A data path as evidence: its listing and fingerprint as they are now, read again whenever VS Code reads the
  // document (a restored editor after a reload too). The other text evidence is kept with the workspace (d.documents).
  d.track(
    registerReadonlyDocuments(EVIDENCE_SCHEME, async (uri) => {
      const ref = fromEvidenceUri(uri);
      if (!ref)
        return 'This is not a What Changed? evidence document this version can read: open it again from the report.\n';
      const host = d.hosts.find(ref.hostId);
      if (!host) return `${ref.path}\n\nHost ${ref.hostId} is no longer configured: its data cannot be read.\n`;
      try {
        const probes = d.hosts.session(host).probes;
        return renderDataEvidence(await readDataEvidence({ label: host.name, probes }, ref.path));
      } catch (e) {
        return `${ref.path}\n\nnot read on ${host.name}: ${messageOf(e)}\n`;
      }
    }),
  );
  const showReadOnly = (name: string, content: string) => d.documents.show(name, content, { preview: true });

  registerRecordLaunches({ command: d.command, hosts: d.hosts, showReadOnly });

  const argsRef = (hostId: string, c: CheckpointLink): ArgsCheckpoint => ({ hostId, path: c.path, label: c.label });

  /** Links name the host by its store key; the views take the settings id of the report's host. */
  const open = async (
    hostId: string,
    run: string | null,
    link: EvidenceLink,
    title: string,
    detail: string,
  ): Promise<unknown> => {
    switch (link.kind) {
      case 'args-diff':
        return d.evidence.openArgsDiff(argsRef(hostId, link.a), argsRef(hostId, link.b));
      case 'env-diff':
        return d.evidence.compareBaseline(hostId, link.baselineId, run);
      case 'bisect':
        return d.evidence.bisect(hostId, link.baselineId, link.packages === true);
      case 'plot':
        return d.evidence.openDashboard(hostId, link.log, link.window, link.series);
      case 'bench-compare':
        return d.evidence.compareBench(hostId, link.referenceId);
      case 'replay':
        // the panel runs a replay link itself (replayOf): the suspect, not the link, says what to replay
        return undefined;
      case 'file': {
        // a file opens as the read-only remote document; a folder (a dataset) is no file, and a file that cannot be
        // read says why: both open as the path's listing and fingerprint
        const uri = vscode.Uri.from(
          toRemoteFileUri({ hostId, path: link.path, maxBytes: d.settings.current.maxOpenBytes }),
        );
        try {
          return await showTextDocument(uri, { preview: true });
        } catch (e) {
          d.log.info(`What Changed?: ${link.path} opens as data evidence (${messageOf(e)})`);
          return showTextDocument(vscode.Uri.from(toEvidenceUri({ hostId, path: link.path })), { preview: true });
        }
      }
      case 'text-diff':
        return executeCommand(
          'vscode.diff',
          d.documents.uri(link.a.name, link.a.text),
          d.documents.uri(link.b.name, link.b.text),
          link.title,
        );
      case 'git': {
        const repo = posix.basename(link.repo) || 'repo';
        if (link.document !== undefined) return showReadOnly(`${repo} commits.diff`, link.document);
        const since = link.since !== null ? `\nchanged since ${new Date(link.since * 1000).toISOString()}` : '';
        return showReadOnly(`${repo} git.txt`, `${title}\n\ngit ${link.repo}${since}\n\n${detail}\n`);
      }
    }
  };

  /**
   * Keeps a panel's report under its id for a restore after a reload (the newest KEPT_MAX panels; a closed one is
   * pushed out by newer ones: a reload disposes panels too, so a dispose cannot tell "closed" from "reloading").
   * Returns what the page keeps: the id only.
   */
  const keep = (id: string, s: Subject, report: WhatChangedReport): WhatChangedPageState => {
    const all = { ...(d.kept.get<Record<string, { at: number; state: unknown }>>(KEPT_KEY) ?? {}) };
    all[id] = {
      at: Date.now(),
      state: {
        v: 1,
        hostId: s.host.id,
        run: s.run,
        ...(s.nowCheckpoint !== undefined ? { nowCheckpoint: s.nowCheckpoint } : {}),
        report,
      },
    };
    const newest = Object.keys(all)
      .sort((x, y) => (all[y]?.at ?? 0) - (all[x]?.at ?? 0))
      .slice(0, KEPT_MAX);
    d.kept
      .update(KEPT_KEY, Object.fromEntries(newest.map((k) => [k, all[k]])))
      .then(undefined, (e: unknown) => d.log.error(`What Changed?: could not keep the report: ${messageOf(e)}`));
    return { v: 1, id };
  };

  /** A panel for a subject's report: a new one, or the one VS Code restored after a reload (`restored`, its id). */
  const panelFor = (
    s: Subject,
    report: WhatChangedReport,
    restored?: { panel: vscode.WebviewPanel; id: string },
  ): WhatChangedPanel => {
    const key = keyOf(s);
    const id = restored?.id ?? newNonce(12);
    // A restored panel's report is already kept as it is: its first render only gives the page its id back.
    let keptAlready = restored !== undefined;
    const panel = new WhatChangedPanel(
      key,
      titleOf(s),
      report,
      {
        open: (link, title, detail) => open(s.host.id, s.run, link, title, detail),
        refresh: () => showOnce(s),
        replay: (suspect) => replayOf(s, suspect),
        log: d.log,
      },
      (p) => {
        if (panels.get(p.key) === p) panels.delete(p.key);
      },
      (r): WhatChangedPageState => {
        if (!keptAlready) return keep(id, s, r);
        keptAlready = false;
        return { v: 1, id };
      },
      restored?.panel,
    );
    panels.set(key, panel);
    return panel;
  };

  /**
   * Prove by Replay / Bisect All Changes from a report: the replay command (its plan, the question, the live
   * terminal); when it ends, the report shown again with the replay's word on the suspect(s) it is about, and kept.
   */
  const replayOf = async (s: Subject, suspect: Suspect | null): Promise<string | undefined> => {
    if (s.run === null) throw new KnownGoodError('usage', 'a replay needs a run: open What Changed? on a run');
    if (suspect && !suspect.subject)
      throw new KnownGoodError('usage', `Prove by Replay: ${suspect.title} is nothing a replay can change`);
    const subject = suspect?.subject ?? null;
    const r = await d.evidence.replay(s.host.id, s.run, subject, suspect?.title ?? 'every change');
    if (!r) return undefined;
    const panel = panels.get(keyOf(s));
    if (panel) panel.show(reportWithProof(panel.report, r.proof, subject, r));
    return proofLine(r.proof);
  };

  const show = async (s: Subject): Promise<WhatChangedOutcome> => {
    const report = await gather(s);
    const existing = panels.get(keyOf(s));
    if (existing) {
      existing.show(report);
      return outcomeOf(s, report, existing, true);
    }
    const panel = panelFor(s, report);
    d.log.info(`What Changed? ${s.host.name} ${s.run ?? '(host)'}: ${report.headline}`);
    return outcomeOf(s, report, panel, false);
  };

  // After a window reload VS Code gives back each report panel with what its page kept: the report is shown again
  // as gathered (its time is on it; Refresh gathers anew). A host gone from the settings, or a state that is not
  // one, closes the panel rather than show a report whose evidence cannot open.
  d.track(
    registerWebviewPanelSerializer(WHAT_CHANGED_VIEW_TYPE, {
      deserializeWebviewPanel: (restored: vscode.WebviewPanel, raw: unknown) => {
        const page = parseWhatChangedPageState(raw);
        const kept = page ? d.kept.get<Record<string, { state: unknown }>>(KEPT_KEY)?.[page.id] : undefined;
        const state = parseWhatChangedPanelState(kept?.state);
        const host = state ? d.hosts.find(state.hostId) : undefined;
        if (!page || !state || !host) {
          const why = !page ? 'the page kept no id' : !state ? 'its report is no longer kept' : 'its host is gone';
          d.log.info(`What Changed?: a report panel from before the reload was not restored (${why})`);
          restored.dispose();
          return Promise.resolve();
        }
        const s: Subject = {
          host,
          run: state.run,
          ...(state.nowCheckpoint !== undefined ? { nowCheckpoint: state.nowCheckpoint } : {}),
        };
        try {
          panelFor(s, state.report as unknown as WhatChangedReport, { panel: restored, id: page.id });
        } catch (e) {
          d.log.error(`What Changed?: could not restore a report panel: ${messageOf(e)}`);
          restored.dispose();
        }
        return Promise.resolve();
      },
    }),
  );

  // A second call on a target still being gathered (a double click, Refresh pressed twice) waits for the first.
  const inFlight = new Map<string, Promise<WhatChangedOutcome>>();
  const showOnce = (s: Subject): Promise<WhatChangedOutcome> => {
    const key = keyOf(s);
    let p = inFlight.get(key);
    if (!p) {
      p = show(s).finally(() => inFlight.delete(key));
      inFlight.set(key, p);
    }
    return p;
  };

  d.command(
    Commands.whatChanged,
    { kinds: ['host', 'run', 'checkpoint'], pick: 'What Changed? on which host?' },
    (t): Promise<WhatChangedOutcome> => showOnce(subjectOf(d, t)),
  );

  d.command(Commands.markBaselineKnownGood, { kinds: ['baseline'] }, async (t): Promise<MarkKnownGoodOutcome> => {
    if (!t) throw new KnownGoodError('usage', 'Mark as Known-Good: pick a baseline in Remote Runs');
    const host = d.hosts.get(t.hostId);
    const key = d.storeKeyOf(host);
    const { baselines } = await d.store.list(key);
    const b = baselines.find((x) => x.baseline.id === t.baselineId)?.baseline;
    if (!b) throw new KnownGoodError('not-found', `no baseline ${t.baselineId} kept for ${host.name}`);
    await new WhatChangedStore(d.store).mark(key, { baselineId: b.id });
    void showInfo(`Baseline "${b.label}" of ${host.name} is known-good: What Changed? compares with it.`);
    return { hostId: host.id, baselineId: b.id };
  });
}
