import type { SuspectCategory } from './model';

/*
 * How much a kind of change is known to move throughput: the second part of a suspect's score, after "it changed
 * where the metric shifted". The weights order the categories; they are shown with every score, never hidden.
 */
export const CATEGORY_WEIGHT: Record<SuspectCategory, number> = {
  'torch-build': 30,
  driver: 30,
  hardware: 30,
  compile: 25,
  memory: 25,
  attention: 25,
  dtype: 25,
  shape: 25,
  'host-sync': 20,
  dataset: 20,
  dataloader: 20,
  'compile-cache': 20,
  resume: 20,
  frequency: 15,
  launch: 15,
  'runtime-env': 15,
  framework: 15,
  code: 15,
  python: 15,
  host: 10,
  other: 5,
};

export const CATEGORY_TEXT: Record<SuspectCategory, string> = {
  'torch-build': 'the torch/CUDA build',
  driver: 'the GPU driver',
  hardware: 'the GPUs',
  compile: 'torch.compile/inductor settings',
  memory: 'gradient checkpointing, offload or ZeRO stage',
  attention: 'the attention backend',
  dtype: 'the precision',
  shape: 'the batch/sequence shape',
  'host-sync': 'a host sync in the loop',
  dataset: 'the dataset',
  dataloader: 'the dataloader',
  'compile-cache': 'a compile cache',
  resume: 'the resume path',
  frequency: 'logging/eval/save frequency',
  launch: 'the launch command',
  'runtime-env': 'NCCL/CUDA/TORCH variables',
  framework: 'a framework package',
  code: 'the training code',
  python: 'the Python interpreter',
  host: 'the host',
  other: 'another setting',
};

/** One line each: why a change of this kind can move speed (shown with every ranked suspect; docs/what-changed.md). */
export const CATEGORY_WHY: Record<SuspectCategory, string> = {
  'torch-build': 'other kernels (cuBLAS, cuDNN, NCCL) and codegen for the same model',
  driver: 'the driver decides clocks, kernel launch cost and which CUDA features work',
  hardware: 'other GPUs, links or memory set the ceiling',
  compile: 'eager mode runs one kernel per op; compiled graphs fuse them and skip Python',
  memory: 'recomputing activations (or moving state to the CPU) trades speed for memory: often 20–40% slower',
  attention: 'a fused attention kernel against the math path is often a 2× difference',
  dtype: 'fp32 matmuls run at a fraction of bf16/fp16 tensor-core speed',
  shape: 'fewer samples a step means less work per launch: the GPU waits on the host',
  'host-sync': '.item()/.cpu() each step makes the host wait for the GPU and stalls the queue of kernels',
  dataset: 'other samples: other lengths, padding (tokens a step), decoding cost',
  dataloader: 'fewer workers move loading and collation onto the training loop',
  'compile-cache': 'a lost cache recompiles kernels at start',
  resume:
    'a resume can load state onto another device or dtype than the launch before had it: AdamW step counters on the GPU make every step wait for it',
  frequency: 'each log, eval or save stops the training loop',
  launch: 'launcher flags set precision, processes and devices without touching the script',
  'runtime-env': 'CUDA_LAUNCH_BLOCKING, NCCL and allocator settings change how kernels run',
  framework: 'a framework release changes the training loop around the model',
  code: 'the training loop itself changed',
  python: 'another interpreter runs the host side of the loop',
  host: 'another machine, or other load on it',
  other: 'not a kind known to move speed',
};

/**
 * Resume bookkeeping: what a resumed launch says differently without running differently (where to start, how far
 * to go, what to resume from, where to write, seeds, names, ports). Listed as a difference, never ranked.
 */
const BOOKKEEPING_ARG =
  /^(start\w*|\w*_?start(_step|_iter|_epoch)?|(max|total|num_train|train|num)_?(steps|iters?|epochs?)|steps|iters|epochs|max_epochs|resume\w*|\w*_resume|ckpt_path|resume_from_checkpoint|init_from|output_dir|out_dir|\w*_?seed|seed\w*|run_?name|run_?id|\w*_?port|master_addr|logging_dir|log_dir|tensorboard_dir|save_dir|ckpt_dir|checkpoint_dir)$/i;

/** Whether an args key is resume bookkeeping (resuming says it differently every time). */
export function isBookkeepingArg(key: string): boolean {
  return BOOKKEEPING_ARG.test(key.split('.').pop() ?? key);
}

/** Args keys that never explain a regression: names, places and times of the run itself. */
const COSMETIC_ARG =
  /(^|[._])(run_?name|run_?id|exp(eriment)?_?name|wandb\w*|project|notes?|tags?|out(put)?_?dir|log_?dir|save_?dir|ckpt_?dir|checkpoint_?dir|logging_dir|resume\w*|init_from|time\w*|date|timestamp|start_time|step|global_step|iter(ation)?|epoch|hostname|job_?id|slurm\w*|local_rank|rank)$/i;

/** Values that are only a temp path or a time stamp. */
const COSMETIC_VALUE = /^(\/tmp\/|\/var\/tmp\/|\d{4}-\d{2}-\d{2}[T _]\d{2}[:-]?\d{2})/;

const ARG_RULES: [RegExp, SuspectCategory][] = [
  [
    /grad(ient)?_?(ckpt|checkpoint)|activation_?(ckpt|checkpoint)|recompute|offload|zero_?stage|(^|_)zero($|_)|fsdp_?cpu/i,
    'memory',
  ],
  [/compile|inductor|dynamo|cuda_?graph|triton/i, 'compile'],
  [
    /(log|logging|eval|evaluation|save|val|print)_?(every|steps|interval|freq|frequency|strategy|iters?)$/i,
    'frequency',
  ],
  [/pack(ing|ed)?($|_)|group_by_length/i, 'dataset'],
  [/attn|attention|sdpa|flash|xformers/i, 'attention'],
  [/dtype|precision|amp\b|(^|_)amp|bf16|fp16|fp8|half|mixed/i, 'dtype'],
  // how many processes and GPUs a launch spreads over (accelerate's config, torchrun's flags): before `num_proc`
  [/^(num_processes|num_machines|nproc_per_node|nnodes|world_size|gpu_ids|distributed_type|use_cpu)$/i, 'hardware'],
  [/workers|prefetch|pin_memory|num_proc|persistent/i, 'dataloader'],
  [/data|corpus|tokeni[sz]er|vocab_file|shard|train_file|val_file|eval_file/i, 'dataset'],
  [
    /batch|seq|block_size|context|max_len|ctx|micro|grad(ient)?_acc|accum|n_embd|n_layer|n_head|hidden|width|layers|heads|d_model/i,
    'shape',
  ],
];

/**
 * Settings that change what a step computes, never what it costs: the learning rate and its schedule and warm-up,
 * the optimizer's coefficients (betas, eps, weight decay). The same kernels run on other numbers.
 */
const INERT_ARG =
  /(^|_)(lr|learning_rate)($|_)|^(betas?\d?|adam_beta\d|adam_epsilon|eps|epsilon|weight_decay|wd|warmup\w*|\w+_warmup(_\w+)?|lr_?schedule\w*|scheduler(_type)?|schedule|decay_lr|cosine\w*)$/i;

/** A stop of the loop every N steps (not logging: a log line often reads the loss, a host sync every time). */
const STOP_EVERY = /^(eval|evaluation|save|val|ckpt|checkpoint)_?(every|steps|interval|freq|frequency|iters?)$/i;

/** Logging, eval or save frequency as a number of steps between (a `*_freq` is one too). */
function stepsApart(v: unknown): number | null {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : null;
}

/**
 * Why a change of an args key (or launch flag) cannot change what a step costs, or null when it can or may. `window`:
 * the steps between two points of the speed series (the report's levels are medians that leave single slow windows
 * out), when known.
 */
export function inertArgWhy(key: string, from: unknown, to: unknown, window?: number): string | null {
  const leaf = key.split('.').pop() ?? key;
  if (INERT_ARG.test(leaf))
    return 'changes what a step computes, not what it costs: learning rate, schedule, warm-up, betas and weight decay are numbers the same kernels use';
  const freq = ARG_RULES.find(([, c]) => c === 'frequency')![0];
  if (!freq.test(leaf)) return null;
  const [a, b] = [stepsApart(from), stepsApart(to)];
  if (a === null || b === null) return null;
  if (b >= a) return `stops the loop less often (every ${a} → ${b} steps): fewer stops cannot make a step slower`;
  if (STOP_EVERY.test(leaf) && window !== undefined && window > 0 && b >= 4 * window)
    return `an eval or save every ${b} steps stops at most one speed window in ${Math.floor(b / window)}: the level is a median, which leaves such windows out`;
  return null;
}

/** The category of an args key (dotted for nested keys), or `cosmetic` (bookkeeping, names, or inert: inertArgWhy). */
export function argCategory(key: string, from: unknown, to: unknown, window?: number): SuspectCategory | 'cosmetic' {
  const leaf = key.split('.').pop() ?? key;
  if (isBookkeepingArg(leaf) || COSMETIC_ARG.test(leaf)) return 'cosmetic';
  if (inertArgWhy(leaf, from, to, window) !== null) return 'cosmetic';
  // the key wins over the value: data on a node's /tmp or scratch is still data
  for (const [re, cat] of ARG_RULES) if (re.test(leaf)) return cat;
  const values = [from, to].filter((v): v is string => typeof v === 'string');
  if (values.length === 2 && values.every((v) => COSMETIC_VALUE.test(v))) return 'cosmetic';
  return 'other';
}

/** Variables of the families known to move throughput; the rest (HF_*, WANDB_*) are cosmetic for speed. */
export function envCategory(name: string): SuspectCategory | 'cosmetic' {
  if (/^(NCCL_|CUDA_|TORCH_|PYTORCH_|TORCHINDUCTOR_|TRITON_|CUBLAS|CUDNN|NVIDIA_)/.test(name)) return 'runtime-env';
  if (/^(OMP_|MKL_|KMP_)/.test(name)) return 'runtime-env';
  if (/^(WANDB_|HF_HUB_|HF_TOKEN|TERM|PWD|OLDPWD|SSH_|SHLVL|_)$|^(WANDB_|SSH_)/.test(name)) return 'cosmetic';
  return 'other';
}

/** Packages whose change is as good as a torch/CUDA build change, or close to it. */
export function packageCategory(name: string): SuspectCategory {
  if (name === 'torch' || /^nvidia-/.test(name)) return 'torch-build';
  if (/^(pytorch-)?triton$/.test(name)) return 'compile';
  if (/^(flash-attn|flash_attn|xformers)$/.test(name)) return 'attention';
  if (/^(transformers|deepspeed|accelerate|megatron|apex|numpy|datasets|tokenizers)/.test(name)) return 'framework';
  return 'other';
}

/**
 * Seconds per step (or iteration, or batch): a speed where lower is faster. Not `train/time` nor `train_time`: that
 * is a clock (Lightning's ThroughputMonitor logs the seconds since the launch began as `train/time`), which resets at
 * every restart and so read as a 0.5× "speed-up" at the restart of every Lightning run.
 */
const STEP_TIME =
  /(^|[_/ .-])(step|iter(ation)?|batch)[_/ .-]?time(_s|_sec)?$|time[_/ .-]?per[_/ .-]?(step|iter|batch)|s(ec(ond)?s?)?[_/ .-]?per[_/ .-]?(step|iter)|s\/it$/;

/** tok/s and other throughput series of a metrics log, most specific first (step time last: 0.5). */
/** An eval/validation series: logged at its own steps (Lightning's validate/* count eval batches), never the run's speed. */
export const EVAL_KEY = /(^|[/_.])(eval|val|valid|validate|validation|test)([/_.]|$)/i;

export function throughputRank(key: string): number {
  if (EVAL_KEY.test(key)) return 0;
  // a speed derived from wall times ranks as what it counts: `tokens/s (from wall time)`
  const k = key.toLowerCase().replace(/ \(from wall time\)$/, '');
  // the speed of an eval or validation pass is not the training's (HF logs eval/samples_per_second at each eval)
  if (/(^|[/._-])(eval|evaluation|val|valid|validation|validate|test)[/._-]/.test(k)) return 0;
  if (/tok(en)?s?[_/ .-]?(per[_ ]?)?s(ec(ond)?)?$|tokens_per_sec|tok_s|tps$/.test(k)) return 3;
  if (/throughput/.test(k)) return 2;
  // `train/samples` (a running count) is no speed: a separator or `per` before the s
  if (/samples?([_/ .-]|[_ ]?per[_ ]?)s(ec(ond)?)?$/.test(k)) return 1.5;
  if (/it[_/]s$|(steps?|batch(es)?)[_/ ]?per[_/ ]?s|^steps?\/s$/.test(k)) return 1;
  if (STEP_TIME.test(k)) return 0.5;
  return 0;
}

/** +1 when a higher value is faster (tok/s, samples/s), −1 when lower is (step time), 0 for no speed at all. */
export function speedDirection(key: string): 1 | -1 | 0 {
  const r = throughputRank(key);
  return r === 0 ? 0 : r === 0.5 ? -1 : 1;
}
