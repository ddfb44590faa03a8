import { registerCacheCommands } from './cache';
import { registerBaselineCommands } from './commands';
import { registerEnvContent } from './content';
import type { BaselinesDeps } from './common';
import { BaselinesSection } from './section';
import { saveSnapshot, type BaselinesApi } from './save';

export type { BaselinesDeps } from './common';
export type { BaselinesApi, SnapshotSide } from './save';

/**
 * Environment baselines: the Baselines node under each host, the knownGood-env: documents, the commands. Returns
 * what other features may ask of baselines (save a snapshot as one), wired by the container.
 */
export function registerBaselines(d: BaselinesDeps): BaselinesApi {
  const { provider: content, disposable } = registerEnvContent(d.store, d.kept);
  d.track(disposable);
  const section = new BaselinesSection(d.store, (hostId) => {
    const spec = d.hosts.find(hostId);
    try {
      return spec && d.storeKeyOf(spec);
    } catch {
      return undefined;
    }
  });
  d.track(d.registerSection(section));
  // a benchmark result is kept by the benchmark commands: its host's Baselines lists it from then on
  d.track(
    d.store.onDidChange((change) => {
      if (change.kind === 'result') for (const g of section.groupNodesOf(change.hostId)) d.refresh(g);
    }),
  );
  const feature = { ...d, section, content };
  const diffs = registerBaselineCommands(feature);
  registerCacheCommands(feature);
  return {
    save: (host, snapshot, label) => saveSnapshot(feature, host, snapshot, label),
    diffSnapshots: (left, right, title) =>
      diffs.openDiff(content.remember(left), content.remember(right), [left.title, right.title], title),
  };
}
