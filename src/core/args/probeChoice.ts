import type { ProbeChoice } from '../probes/catalogue';
import { ckptArgsProbe } from './argsProbe';
import { renderArgsDocument } from './render';

/** Run Probe…'s "Checkpoint args": the args document of the selected (or asked for) checkpoint. */
export const ckptArgsChoice: ProbeChoice = {
  id: 'ckptArgs',
  label: 'Checkpoint args',
  detail: 'python/ckpt_args.py: the args saved in a checkpoint (no torch, weights not read)',
  needs: 'checkpoint',
  call: (ctx) => ckptArgsProbe(ctx.checkpoint ?? ''),
  summarize: (v, ctx) =>
    renderArgsDocument(ckptArgsProbe('').parse(v), { host: ctx.hostLabel, capturedAt: new Date() }),
};
