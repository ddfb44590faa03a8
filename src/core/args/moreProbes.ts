import { z } from 'zod';
import { defineProbe } from '../probes/probe';
import { CKPT_ARGS_MODULES, ckptArgsSchema } from './argsProbe';

/** Why a `./` is put before a path that starts with `-`: the probes take one positional PATH. */
function pathArg(path: string): string {
  return path.startsWith('-') ? `./${path}` : path;
}

export const ckptStatSchema = z.object({
  path: z.string(),
  bytes: z.number(),
  mtime: z.number(),
  dir: z.boolean(),
});
export type CkptStat = z.infer<typeof ckptStatSchema>;

/**
 * `ckpt_args.py PATH --stat`: size and newest mtime only (a folder's: of itself and the files the reader reads), what
 * the args cache is keyed by. One round trip through the resident helper, nothing read.
 */
export const ckptStatProbe = defineProbe('ckpt_args', ckptStatSchema, (path: string) => [pathArg(path), '--stat'], {
  modules: CKPT_ARGS_MODULES,
});

/**
 * The fallback through the host's own torch (python/ckpt_args_torch.py): `torch.load(weights_only=True, mmap=True)`,
 * or with `unsafe` weights_only=False, which runs code from the file. Run it one-shot (`runOnce`): torch's import
 * and memory then leave with the process instead of staying in the resident helper.
 */
export const ckptArgsTorchProbe = defineProbe(
  'ckpt_args_torch',
  ckptArgsSchema,
  (path: string, options: { keys?: readonly string[]; unsafe?: boolean } = {}) => {
    const args = [pathArg(path)];
    for (const k of options.keys ?? []) args.push('--key', k);
    if (options.unsafe) args.push('--unsafe');
    return args;
  },
  { modules: ['kg_redact'] },
);
