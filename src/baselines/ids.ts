/** The baselines feature's command ids (matched by package.json contributes). */
export const BaselineCommands = {
  capture: 'knownGood.baselines.capture',
  compare: 'knownGood.baselines.compare',
  compareTwo: 'knownGood.baselines.compareTwo',
  open: 'knownGood.baselines.open',
  rename: 'knownGood.baselines.rename',
  delete: 'knownGood.baselines.delete',
  backupCache: 'knownGood.baselines.backupCache',
  restoreCache: 'knownGood.baselines.restoreCache',
} as const;

export const SECTION_ID = 'baselines';
