import { homedir } from 'node:os';
import { join } from 'node:path';
import { captureSnapshot, containerText } from '../../core/baselines/capture';
import { baselineTitle, diffDocuments, shortTime, snapshotDocument } from '../../core/baselines/documents';
import type { EnvSnapshot } from '../../core/baselines/envProbe';
import { findBaseline } from '../../core/baselines/lookup';
import { BaselineStore } from '../../core/baselines/store';
import type { CliCommand } from './types';
import { flag, jsonOption, valued } from '../options';
import { printable, printableTree } from '../output';

/** The CLI's own baselines: `~/.known-good/baselines/<host>/` (the extension keeps its own in global storage). */
export function cliBaselineDir(): string {
  return join(homedir(), '.known-good', 'baselines');
}

/**
 * `known-good env HOST`: the canonical snapshot text; `--save LABEL` keeps it as a baseline; `--diff BASELINE`
 * prints the drift summary against a baseline and exits 1 when anything drifted (0 when unchanged), so a job
 * script can refuse to start on a machine that moved.
 */
export const envCommand: CliCommand = {
  name: 'env',
  usage: 'env HOST [--save LABEL] [--diff BASELINE] [--deep] [--json]',
  summary: 'environment snapshot; keep it as a baseline, or diff against one',
  options: [
    valued(
      'save',
      'LABEL',
      'keep this snapshot as a baseline (~/.known-good/baselines/<host>/)',
      (o, v) => (o.save = v),
    ),
    valued(
      'diff',
      'BASELINE',
      'compare with a baseline (file, id or label); exit 1 when drifted',
      (o, v) => (o.diff = v),
    ),
    flag('deep', 'also import torch (cuDNN and NCCL as loaded, devices; seconds)', (o) => (o.deep = true)),
    jsonOption(),
  ],
  async run({ session, options, signal, out, err }) {
    const store = new BaselineStore(cliBaselineDir());
    const hostKey = session.transport.id;
    // Resolve the baseline before the capture: a typo fails in milliseconds, not after a snapshot.
    const against = options.diff !== undefined ? await findBaseline(store, hostKey, options.diff) : undefined;
    const snapshot: EnvSnapshot = await captureSnapshot(session, {
      scriptGlobs: [],
      extraVariables: [],
      cacheDirs: [],
      signal,
      timeoutMs: options.timeoutMs,
      ...(options.deep ? { deep: true } : {}),
    });
    let code = 0;
    if (against) {
      // text output: names and values from the hosts shown with their control characters escaped
      const text = (s: EnvSnapshot) => (options.json ? s : printableTree(s));
      const docs = diffDocuments(
        { snapshot: text(against.baseline.snapshot), title: printable(`baseline ${baselineTitle(against.baseline)}`) },
        { snapshot: text(snapshot), title: `now (${shortTime(snapshot.capturedAt)})` },
      );
      if (options.json)
        out.write(
          JSON.stringify({ unchanged: docs.drift.unchanged, drift: docs.drift, baseline: against.file }, null, 2) +
            '\n',
        );
      else out.write(docs.summaryText);
      code = docs.drift.unchanged ? 0 : 1;
    } else if (options.save === undefined) {
      out.write(
        options.json
          ? JSON.stringify(snapshot, null, 2) + '\n'
          : snapshotDocument({
              snapshot: printableTree(snapshot),
              title: printable(`${session.label}, ${shortTime(snapshot.capturedAt)}`),
            }),
      );
    }
    if (options.save !== undefined) {
      const label = options.save.trim() || `baseline ${shortTime(snapshot.capturedAt)}`;
      const saved = await store.save({
        label,
        host: hostKey,
        hostLabel: session.spec.name,
        container: containerText(session.spec.container),
        snapshot,
      });
      (against || options.json ? err : out).write(
        printable(`saved baseline ${saved.baseline.id} "${label}" to ${saved.file}`) + '\n',
      );
    }
    return code;
  },
};
