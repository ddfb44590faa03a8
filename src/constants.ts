/** Command and view ids: one place, matched by package.json contributes. */
export const VIEW_REMOTE_RUNS = 'knownGood.remoteRuns';

export const Commands = {
  refresh: 'knownGood.remoteRuns.refresh',
  selectPython: 'knownGood.hosts.selectPython',
  showLog: 'knownGood.hosts.showLog',
} as const;
