/** Every command and view id: one place, matched by package.json contributes (test/unit/commandIds.unit.test.ts). */
export const VIEW_REMOTE_RUNS = 'knownGood.remoteRuns';
/** The dashboard's webview panel type (serializer, onWebviewPanel activation). */
export const DASHBOARD_VIEW_TYPE = 'knownGood.dashboard';
/** The "What Changed?" report's webview panel type. */
export const WHAT_CHANGED_VIEW_TYPE = 'knownGood.whatChanged';

export const Commands = {
  refresh: 'knownGood.remoteRuns.refresh',
  revealNewest: 'knownGood.remoteRuns.revealNewest',
  copyPath: 'knownGood.remoteRuns.copyPath',
  openFile: 'knownGood.remote.openFile',
  loadMore: 'knownGood.remote.loadMore',
  selectPython: 'knownGood.hosts.selectPython',
  showLog: 'knownGood.hosts.showLog',
  openDashboard: 'knownGood.dashboard.open',
  retry: 'knownGood.hosts.retry',
  connect: 'knownGood.hosts.connect',
  disconnect: 'knownGood.hosts.disconnect',
  addHost: 'knownGood.hosts.add',
  removeHost: 'knownGood.hosts.remove',
  editHost: 'knownGood.hosts.edit',
  addRoot: 'knownGood.hosts.addRoot',
  removeRoot: 'knownGood.hosts.removeRoot',
  argsOpen: 'knownGood.args.open',
  argsSelectForCompare: 'knownGood.args.selectForCompare',
  argsCompareWithSelected: 'knownGood.args.compareWithSelected',
  argsCompare: 'knownGood.args.compare',
  argsCompareWithPrevious: 'knownGood.args.compareWithPrevious',
  argsShowChanged: 'knownGood.args.showChanged',
  whatChanged: 'knownGood.whatChanged',
  markBaselineKnownGood: 'knownGood.whatChanged.markBaseline',
  recordLaunches: 'knownGood.whatChanged.recordLaunches',
} as const;

/** Fleet: the nodes of a Slurm job (src/fleet). */
export const FleetCommands = {
  compareNodes: 'knownGood.fleet.compareNodes',
  benchmark: 'knownGood.fleet.benchmark',
  saveBaseline: 'knownGood.fleet.saveBaseline',
  compareBaseline: 'knownGood.fleet.compareWithBaseline',
  compareNode: 'knownGood.fleet.compareNodeWithMajority',
  refresh: 'knownGood.fleet.refresh',
} as const;

/** Environment baselines and cache archives (src/baselines). */
export const BaselineCommands = {
  capture: 'knownGood.baselines.capture',
  compare: 'knownGood.baselines.compare',
  compareTwo: 'knownGood.baselines.compareTwo',
  open: 'knownGood.baselines.open',
  rename: 'knownGood.baselines.rename',
  delete: 'knownGood.baselines.delete',
  backupCache: 'knownGood.baselines.backupCache',
  restoreCache: 'knownGood.baselines.restoreCache',
  restoreEnv: 'knownGood.baselines.restoreEnv',
  /** Run on a restore plan's document (its editor title): the plan run as Restore Known Good… would. */
  runRestorePlan: 'knownGood.baselines.runRestorePlan',
} as const;

/** The throughput benchmark (src/bench). */
export const BenchCommands = {
  run: 'knownGood.bench.run',
  runCustom: 'knownGood.bench.runCustom',
  compare: 'knownGood.bench.compareWithBaseline',
} as const;

/** The environment bisect (src/bisect). */
export const BisectCommands = {
  environment: 'knownGood.bisect.environment',
  packages: 'knownGood.bisect.packages',
} as const;

/** Replay (issue 33, src/replay): the run resumed from its known-good checkpoint, each kind of change bisected. */
export const ReplayCommands = {
  /** Prove by Replay: a What Changed? suspect's change(s) (extra `{ subject, title }`). */
  prove: 'knownGood.replay.prove',
  /** Bisect All Changes: every change between the two recorded launches, and the restart itself. */
  all: 'knownGood.replay.all',
} as const;

/** Run Probe… in a terminal (src/probes). */
export const ProbeCommands = {
  runProbe: 'knownGood.probes.run',
} as const;

/** The Get Started walkthrough (src/walkthrough; package.json contributes.walkthroughs). */
export const WalkthroughCommands = {
  getStarted: 'knownGood.getStarted',
} as const;
/**
 * True while Remote Runs has a host besides This machine: the walkthrough's "Add a GPU machine" is checked off by it
 * (completionEvents `onContext:`), so an Add Host… started and cancelled checks nothing.
 */
export const HAS_REMOTE_HOST_CONTEXT = 'knownGood.hasRemoteHost';
export const WALKTHROUGH_ID = 'knownGood.start';
/** VS Code's own Workspace Trust editor (offered when Restricted Mode is why a command cannot run). */
export const MANAGE_WORKSPACE_TRUST = 'workbench.trust.manage';
