import { z } from 'zod';
import { defineProbe } from '../probes/probe';

/*
 * python/resume_facts.py: what a checkpoint says about the state a resume loads, read from its pickle without
 * loading a tensor: each optimizer state's tensors by storage location and dtype per state key, its param groups'
 * values, the weights' locations, and the scheduler, loader and RNG state it holds. See the probe's docstring.
 */

// Python writes NaN and ±Infinity on purpose (a param group may hold them): z.number() would refuse them.
const anyNumber = z.custom<number>((v) => typeof v === 'number');

/** Tensors at one storage location with one dtype. `location` is null where the file does not say (safetensors). */
export const tensorWhereSchema = z.object({
  location: z.string().nullable(),
  dtype: z.string(),
  count: z.number(),
});
export type TensorWhere = z.infer<typeof tensorWhereSchema>;

/** One state key (`step`, `exp_avg`, `momentum_buffer`...) over every parameter that has state. */
export const stateKeySchema = z.object({
  /** `tensor`, `number` (a plain Python number: `step` before torch 1.12), `mixed` or `other`. */
  kind: z.string(),
  tensors: z.array(tensorWhereSchema),
  numbers: z.number(),
  other: z.number(),
});
export type StateKeyFacts = z.infer<typeof stateKeySchema>;

/** A param group's value as data; a tensor value (a tensor lr) by its metadata. */
export type ParamValue =
  | null
  | boolean
  | number
  | string
  | ParamValue[]
  | { $tensor: { location: string | null; dtype: string; shape: number[] } };
export const paramValueSchema: z.ZodType<ParamValue> = z.lazy(() =>
  z.union([
    z.null(),
    z.boolean(),
    anyNumber,
    z.string(),
    z.array(paramValueSchema),
    z.object({
      $tensor: z.object({ location: z.string().nullable(), dtype: z.string(), shape: z.array(z.number()) }),
    }),
  ]),
);

export const optimizerFactsSchema = z.object({
  /** Where the state was found: `optimizer`, `optimizer_states[0]`, `optimizer.pt`, `optimizer.bin`... */
  source: z.string(),
  paramsWithState: z.number(),
  state: z.record(z.string(), stateKeySchema),
  paramGroups: z.array(z.object({ params: z.number().nullable(), values: z.record(z.string(), paramValueSchema) })),
  paramGroupCount: z.number(),
});
export type OptimizerFacts = z.infer<typeof optimizerFactsSchema>;

export const weightsFactsSchema = z.object({
  source: z.string(),
  tensors: z.number(),
  bytes: z.number(),
  where: z.array(tensorWhereSchema),
});
export type WeightsFacts = z.infer<typeof weightsFactsSchema>;

export const resumeFactsSchema = z.object({
  path: z.string(),
  // torch-zip, torch-legacy, pickle, lightning, hf-folder, accelerate, folder, safetensors: kept as text
  format: z.string(),
  bytes: z.number(),
  mtime: z.number().nullable(),
  step: z.number().nullable(),
  optimizers: z.array(optimizerFactsSchema),
  weights: z.array(weightsFactsSchema),
  /** The keys (or a folder's file names) holding scheduler, data-loader and RNG state. */
  scheduler: z.array(z.string()),
  loader: z.array(z.string()),
  rng: z.array(z.string()),
  topLevelKeys: z.array(z.string()),
  unsafeGlobals: z.array(z.string()),
  warnings: z.array(z.string()),
  bytesRead: z.number(),
});
export type ResumeFacts = z.infer<typeof resumeFactsSchema>;

/** The python/ modules resume_facts.py imports, their imports included (they travel with it). */
export const RESUME_FACTS_MODULES = [
  'ckpt_convert',
  'ckpt_formats',
  'kg_pickle',
  'kg_pickle_objects',
  'kg_pickle_reader',
];

/**
 * The resume-path facts of one checkpoint (a file, or a Hugging Face / accelerate checkpoint folder), read on its
 * host by the stdlib probe: nothing in the file runs and no tensor is loaded.
 */
export const resumeFactsProbe = defineProbe(
  'resume_facts',
  resumeFactsSchema,
  // one positional PATH: a path starting with '-' is made explicit so that it is never read as an option
  (path: string) => [path.startsWith('-') ? `./${path}` : path],
  { modules: RESUME_FACTS_MODULES },
);
