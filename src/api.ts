import type { ThroughputResult } from './core/baselines/store';
import type { HostRegistry } from './core/registry';
import type { KnownGoodSettings } from './core/settings';
import type * as vscode from 'vscode';
import type { HostMessage, InitMessage, RunData } from './core/dashboard/protocol';
import type { RunsListing } from './core/runs/listRuns';
import type { TreeNode } from './shared/treeSection';
import type { RunnerExit } from './core/terminal/runner';

/*
 * What Known Good's commands resolve to (through executeCommand) and what activate() returns. Types only: the
 * extension-host tests import them from here, so a change to an outcome shows as a type error in the tests too.
 */

/** `knownGood.probes.run`. */
export interface ProbeRunOutcome {
  terminalName: string;
  probe: string;
  exit: RunnerExit;
  /** The probe's parsed result, when the run printed one. */
  result?: unknown;
  error?: string;
  /** What the terminal showed. */
  screen: string;
}

/** `knownGood.bench.run` and `knownGood.bench.runCustom`. */
export interface BenchRunOutcome {
  terminalName: string;
  exit: RunnerExit;
  tokensPerSec?: number;
  /** Where the result was kept. */
  file?: string;
  result?: ThroughputResult;
  /** `4.3K tok/s now vs 12.8K tok/s at baseline "good-run" (0.34×)` when there is a reference. */
  comparison?: string;
  error?: string;
  screen: string;
}

/** `knownGood.baselines.capture`. */
export interface CaptureOutcome {
  hostId: string;
  id: string;
  label: string;
  file: string;
  remotePath?: string;
  remoteWarning?: string;
}

/** `knownGood.baselines.compare` and `knownGood.baselines.compareTwo`. */
/** Restore Known Good (issue 26): the plan shown, and when it was run, how the restored env compares. */
export interface RestoreOutcome {
  envDir: string;
  pins: number;
  /** The plan's notes: what it cannot restore as recorded (editable installs, missing packages, an old driver). */
  notes: string[];
  /** The plan's document (untitled, shell script). */
  document: string;
  /** Set when it ran: the script's exit code and the freeze comparison's text. */
  exitCode?: number | null;
  freeze?: string;
  /** Set when the benchmark ran after the restore: restored, at the baseline, now. */
  speeds?: { line: string; restored?: number; baseline?: number; now?: number; errors: string[] };
  /** The restore's report document (markdown), when the script ended well. */
  report?: string;
  reportText?: string;
}

export interface CompareOutcome {
  unchanged: boolean;
  differingLines: number;
  headline: string;
  left: string;
  right: string;
}

/** `knownGood.whatChanged`: the report the panel shows, in brief. */
export interface WhatChangedOutcome {
  hostId: string;
  /** The run folder; null for a report on the host. */
  run: string | null;
  /** The checkpoint taken as "now", when the command ran on one. */
  nowCheckpoint?: string;
  verdict: 'regression' | 'steady' | 'unknown';
  /** The report's first line, as the panel shows it big. */
  headline: string;
  /** The known-good reference and why it was taken (`marked-baseline`, `changepoint`, …). */
  reference: { kind: string; label: string; why: string };
  /** Ranked, highest score first. */
  suspects: { title: string; source: string; score: number; evidence: string[] }[];
  /** What "Copy as Markdown" copies. */
  markdown: string;
  /** The panel's title; `reused`: an open panel on the same target was revealed and refreshed. */
  panelTitle: string;
  reused: boolean;
}

/** `knownGood.whatChanged.markBaseline`. */
export interface MarkKnownGoodOutcome {
  hostId: string;
  baselineId: string;
}

/** `knownGood.whatChanged.recordLaunches`: where kg_record.py is on the host and the line shown. */
export interface RecordLaunchesOutcome {
  hostId: string;
  run: string;
  /** The records go to ~/.known-good/runs/… on the host, not into the run folder. */
  home: boolean;
  script: string;
  /** kg_record.py is at `script` now. */
  present: boolean;
  /** What to put in front of the launch (ends in `--`). */
  line: string;
}

/** The Fleet commands on a Slurm job (`knownGood.fleet.*`): the document they opened, and what it says. */
export interface FleetOutcome {
  view: 'matrix' | 'bench' | 'drift' | 'node';
  hostId: string;
  jobId: string;
  /** The opened document's URI (for `node`: the diff's right side). */
  uri: string;
  /** The document's text (for `node`: the drift headline). */
  text: string;
  /** Nodes that answered. */
  nodes: string[];
  /** Nodes that did not, with why (also listed in the document). */
  failed: { node: string; message: string }[];
  /** Compare Nodes: the odd nodes and their differing fields; compare with baseline: the drifted nodes. */
  outliers?: { node: string; fields: string[] }[];
  /** Save Fleet Baseline: where it was written. */
  file?: string;
}

/**
 * What activate() returns to other extensions: nothing yet. The services behind the commands are not an API; a
 * public surface, when there is one, gets its own types here.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface KnownGoodApi {}

/**
 * What activate() returns while VS Code runs the extension's own tests (ExtensionMode.Test), and only then: the
 * host registry, the parsed settings, Remote Runs' data provider and the open dashboards.
 */
export interface KnownGoodTestApi extends KnownGoodApi {
  readonly registry: HostRegistry;
  settings(): KnownGoodSettings;
  readonly tree: RemoteRunsTestApi;
  /** The open dashboards (what they received and posted). */
  readonly dashboard: DashboardTestApi;
}

/** Remote Runs' data provider, as the extension-host tests drive it. */
export interface RemoteRunsTestApi extends vscode.TreeDataProvider<TreeNode> {
  /** Re-renders a node (the whole tree without one); no remote call. */
  refresh(node?: TreeNode): void;
  /** Forgets listings (of one host, or all): the next expansion lists again. */
  reload(hostId?: string): void;
  /** Lists a host now (or waits for the listing in flight). */
  ensureListing(hostId: string): Promise<RunsListing | undefined>;
}

/** What a test may set on a dashboard it opens. */
export interface DashboardOpenOptions {
  /** The preview's read budget in bytes; undefined: the probe's default (tests set a small one). */
  previewBytes?: number | undefined;
  /**
   * Awaited before the exact reads start. Tests hold them back with it, to see a preview reach the page first
   * (on a fast disk the exact read of a test-sized log beats the page's ready).
   */
  beforeExact?: (() => Promise<void>) | undefined;
}

/** A run named without a tree node: by other extensions, tests and the restored panels. */
export interface DashboardTarget {
  hostId: string;
  logPath: string;
  label?: string;
}

/** The extension-host tests' view of the dashboards (through KnownGoodApi). */
export interface DashboardTestApi {
  panels(): readonly PanelProbe[];
  /**
   * `previewBytes`: the preview's read budget for this panel (tests make a few-MB log sample); `beforeExact`: the
   * exact reads wait for it (see DashboardOpenOptions).
   */
  open(targets: readonly DashboardTarget[], options?: DashboardOpenOptions): Promise<PanelProbe>;
}

/** What the extension-host tests read: the handshake and every message that crossed. */
export interface PanelProbe {
  readonly title: string;
  readonly runs: readonly string[];
  /** Types of the valid messages received from the webview, oldest first. */
  readonly received: readonly string[];
  /** Messages that failed validation and were dropped. */
  readonly dropped: number;
  readonly posted: readonly string[];
  readonly lastPosted: HostMessage | undefined;
  readonly lastInit: InitMessage | undefined;
  /** ms from opening to the first init posted with plot data (a preview for a large log). */
  readonly firstDataMs: number | undefined;
  /** ms from opening until the webview had exact data for every run (undefined while any run is a preview). */
  readonly exactDataMs: number | undefined;
  /**
   * What the first read gave each run (a preview for a sampled log), before any exact read replaced it; whether
   * the first init carried it depends on how soon the page said ready.
   */
  readonly firstData: readonly RunData[] | undefined;
  /** The first init posted (the one firstDataMs measures). */
  readonly firstInit: InitMessage | undefined;
  /** The last runData posted. */
  readonly lastRunData: (HostMessage & { type: 'runData' }) | undefined;
  /** Follow polls ended so far, each with its look for new training processes done. */
  readonly pollsDone: number;
  /** Handles `raw` as if the webview had posted it (validation included). */
  simulate(raw: unknown): void;
}
