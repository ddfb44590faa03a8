import { z } from 'zod';
import { defineProbe } from '../probes/probe';
import { redactTree } from '../redact';

/** Formats python/ckpt_args.py can read. */
export const ckptFormats = [
  'torch-zip',
  'torch-legacy',
  'lightning',
  'hf-folder',
  'safetensors',
  'dcp-metadata',
  'pickle',
  // a folder (or custom_checkpoint_N.pkl) of accelerate's save_state; a peft adapter folder (adapter_config.json)
  'accelerate',
  'peft',
] as const;
export type CkptFormat = (typeof ckptFormats)[number];

/** A JSON value as Python writes it: numbers may be NaN or ±Infinity (parsePythonJson keeps them). */
export type ArgValue = null | boolean | number | string | ArgValue[] | { [key: string]: ArgValue };
export const argValueSchema: z.ZodType<ArgValue> = z.lazy(() =>
  z.union([
    z.null(),
    z.boolean(),
    // z.number() refuses NaN and Infinity: args carry them on purpose (a NaN loss scale, an inf clip)
    z.custom<number>((v) => typeof v === 'number'),
    z.string(),
    z.array(argValueSchema),
    z.record(z.string(), argValueSchema),
  ]),
);

/**
 * What python/ckpt_args.py shows in place of a value the checkpoint's pickle shares and that was already shown:
 * `{"$ref": PATH}`, PATH a JSONPath into the shown args of where it is shown in full (`$` the args, `.key` or
 * `["key"]`, `[index]`), e.g. `{"$ref": "$.model.layers[0]"}`; a cycle refers to its ancestor. A hostile 4 KB file
 * that references one value 2^18 times stays 4 KB of args this way. A result that has any says so in a warning.
 */
export interface ArgRef {
  $ref: string;
}

export function isArgRef(v: ArgValue): v is ArgRef & { [key: string]: ArgValue } {
  return (
    v !== null &&
    typeof v === 'object' &&
    !Array.isArray(v) &&
    typeof v['$ref'] === 'string' &&
    Object.keys(v).length === 1
  );
}

/**
 * An enum member, as python/ckpt_args.py shows it: its class (`module.Class`) and either its value (`Class(V)`, how
 * Python's Enum pickles a member: the member's name is not in the file) or its name (`getattr(Class, "NAME")`, early
 * Python 3.11 and `enum.pickle_by_enum_name`: the value is not in the file).
 */
export type ArgEnum = { $enum: string; value: ArgValue } | { $enum: string; name: string };

export function isArgEnum(v: ArgValue): v is ArgEnum & { [key: string]: ArgValue } {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || typeof v['$enum'] !== 'string') return false;
  const keys = Object.keys(v);
  if (keys.length !== 2) return false;
  return 'value' in v || typeof v['name'] === 'string';
}

export const ckptArgsSchema = z.object({
  // a newer probe may know more formats: keep the text rather than refuse the result
  format: z.union([z.enum(ckptFormats), z.string()]),
  path: z.string(),
  bytes: z.number(),
  key: z.string().nullable(),
  // python/ckpt_args.py redacts on the host; again here for a result from an older probe
  args: argValueSchema.transform((v) => redactTree(v)),
  argsType: z.string().nullable(),
  step: z.number().nullable(),
  epoch: z.number().nullable(),
  tensors: z.object({ count: z.number(), bytes: z.number() }),
  topLevelKeys: z.array(z.string()),
  unsafeGlobals: z.array(z.string()),
  warnings: z.array(z.string()),
  bytesRead: z.number(),
  mtime: z.number(),
  // the base model a peft adapter names (its base_model_name_or_path); absent from an older probe's result
  baseModel: z.string().nullable().default(null),
  // what `--stat` answers for the path, taken before the read (the args cache's key); absent from the torch fallback
  stat: z.object({ bytes: z.number(), mtime: z.number() }).optional(),
});
export type CkptArgs = z.infer<typeof ckptArgsSchema>;

export interface CkptArgsOptions {
  /** Keys to show (`--key`, repeatable; a dotted path reaches inside). Default: the first of args, config, … */
  keys?: readonly string[];
  /** The whole checkpoint object, tensors as {dtype, shape, bytes}. */
  all?: boolean;
}

/** The python/ modules ckpt_args.py imports (they travel with it). */
export const CKPT_ARGS_MODULES = [
  'ckpt_convert',
  'ckpt_formats',
  'kg_pickle',
  'kg_pickle_objects',
  'kg_pickle_reader',
  'kg_redact',
];

/**
 * Reads a checkpoint's args on the host without torch and without the weights: only the pickle (or the
 * safetensors header) is read, and nothing in the file is ever run. See python/ckpt_args.py.
 */
export const ckptArgsProbe = defineProbe(
  'ckpt_args',
  ckptArgsSchema,
  (path: string, options: CkptArgsOptions = {}) => {
    // '--' is not needed: the probe takes one positional PATH, and a path starting with '-' is made explicit
    const args = [path.startsWith('-') ? `./${path}` : path];
    for (const k of options.keys ?? []) args.push('--key', k);
    if (options.all) args.push('--all');
    return args;
  },
  { modules: CKPT_ARGS_MODULES },
);
