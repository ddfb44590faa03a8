import { findBaseline } from '../../core/baselines/lookup';
import { BaselineStore } from '../../core/baselines/store';
import { KnownGoodError } from '../../core/errors';
import { whatChanged } from '../../core/whatChanged/gather';
import { renderWhatChangedMarkdown } from '../../core/whatChanged/render';
import { jsonOption } from '../options';
import { printableTree } from '../output';
import { jsonOut } from './args';
import { cliBaselineDir } from './env';
import type { CliCommand } from './types';

/**
 * `known-good why HOST [RUN [BASELINE]] [--json]`: "What changed?" on a run (or, without RUN, on the host: its
 * environment and benchmark results) — the ranked causes of a regression, as
 * Markdown (what the extension's "Copy as Markdown" gives) or as the report model. Baselines and benchmark results
 * are the CLI's own (`~/.known-good/baselines/<host>/`); BASELINE (file, id or label) is taken as the known-good
 * reference. Exit 1 when there is a regression to explain, 0 when there is none, 3 when it cannot be told.
 */
export const whyCommand: CliCommand = {
  name: 'why',
  usage: 'why HOST [RUN [BASELINE]] [--json]',
  summary: 'what changed: the ranked causes of a regression (exit 1 regression, 0 none, 3 unknown)',
  options: [jsonOption('the report model as JSON instead of Markdown')],
  async run({ session, path, positional, options, out }) {
    // no RUN: the host alone (environment and benchmarks)
    const run = path ?? positional[0] ?? null;
    if (run !== null && !run.startsWith('/') && !run.startsWith('~'))
      throw new KnownGoodError('settings', `why: the run folder must be an absolute path on the host, got ${run}`);
    const word = path !== undefined ? positional[0] : positional[1];
    const store = new BaselineStore(cliBaselineDir());
    // Resolve the baseline first: a typo fails in milliseconds, not after gathering.
    const chosen = word !== undefined ? await findBaseline(store, session.transport.id, word) : undefined;
    const report = await whatChanged({ id: session.transport.id, label: session.label, probes: session.probes }, run, {
      store,
      timeoutMs: options.timeoutMs,
      ...(chosen ? { baselineId: chosen.baseline.id } : {}),
    });
    // text: names and values from the host shown with their control characters escaped
    out.write(options.json ? jsonOut(report) + '\n' : renderWhatChangedMarkdown(printableTree(report)));
    return report.verdict === 'regression' ? 1 : report.verdict === 'steady' ? 0 : 3;
  },
};
