import type { ProbeChoice } from '../probes/catalogue';
import { listRunsProbe } from './listRuns';
import { renderTextTree } from './textTree';

/** Run Probe…'s "List runs": the selected folder, else the host's roots, drawn as the CLI's `ls` draws them. */
export const listRunsChoice: ProbeChoice = {
  id: 'listRuns',
  label: 'List runs',
  detail: 'python/list_runs.py: runs and checkpoints under the roots',
  needs: 'roots',
  call: (ctx) => listRunsProbe(ctx.folder !== undefined ? [ctx.folder] : ctx.roots),
  summarize: (v) => renderTextTree(listRunsProbe([]).parse(v)),
};
