/** Command and view ids: one place, matched by package.json contributes. */
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
