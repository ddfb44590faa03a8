import { join } from 'node:path';
import { BaselineStore } from '../core/baselines/store';
import type { Container } from '../container';
import { registerCacheCommands } from './cache';
import { registerBaselineCommands } from './commands';
import { storeHostOf } from './common';
import { registerEnvContent } from './content';
import { BaselinesSection } from './section';

/** Environment baselines: the Baselines node under each host, the knownGood-env: documents, the commands. */
export function registerBaselines(c: Container): void {
  const store = new BaselineStore(join(c.context.globalStorageUri.fsPath, 'baselines'));
  const { provider: content, disposable } = registerEnvContent(store);
  c.track(disposable);
  const section = new BaselinesSection(store, (hostId) => storeHostOf(c, hostId));
  c.track(c.tree.registerSection(section));
  const feature = { c, store, section, content };
  registerBaselineCommands(feature);
  registerCacheCommands(feature);
}
