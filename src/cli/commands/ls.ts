import { listRunsProbe } from '../../core/runs/listRuns';
import { renderTextTree } from '../../core/runs/textTree';
import type { CliCommand } from './types';
import { jsonOption } from '../options';
import { printable, printableTree } from '../output';

export const lsCommand: CliCommand = {
  name: 'ls',
  usage: 'ls HOST[:ROOT] [options] [ROOT…] [--json]',
  summary: 'list checkpoint roots as the Remote Runs tree shows them',
  options: [jsonOption('the listing as JSON (with the interpreter that made it)')],
  async run({ session, path, positional, options, out }) {
    const roots = [...(path ? [path] : []), ...positional];
    if (roots.length === 0) roots.push('/workspace/checkpoints');
    const r = await session.probes.runOnce(listRunsProbe(roots, { depth: 3 }), { timeoutMs: options.timeoutMs });
    if (options.json) {
      out.write(JSON.stringify({ ...r.value, python: r.python }, null, 2) + '\n');
    } else {
      out.write(renderTextTree(printableTree(r.value), { hostLabel: printable(session.label) }));
      if (!r.value.roots.every((x) => x.status === 'ok' || x.status === 'empty' || x.status === 'no-checkpoints'))
        return 1;
    }
    return 0;
  },
};
