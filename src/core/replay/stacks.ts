import { KnownGoodError } from '../errors';
import { flagValue, overrideValue, withFlag, withoutFlag, withOverride } from './argv';

/*
 * How a replay makes a launch do what it needs, per training stack (docs/replay.md "Overrides"): resume from the
 * reference checkpoint, write into the replay's own folder, stop after N steps. One table: every override a replay
 * makes is one of these, shown in the plan before anything runs. A plain script's flags are its own: the table lists
 * the names such scripts use, the launch says which one it has, and the person can name another.
 */

export type Stack = 'plain' | 'lightning' | 'hf' | 'hydra';

export type OverrideRole = 'resume' | 'output' | 'steps';

export interface StackTable {
  readonly stack: Stack;
  readonly title: string;
  /** Flag (or Hydra key) names for each role, the usual one first. */
  readonly names: Readonly<Record<OverrideRole, readonly string[]>>;
  /** How a new flag is written: `--x v`, `--x=v` (LightningCLI's jsonargparse takes both), Hydra's `x=v`. */
  readonly style: 'space' | 'eq' | 'override';
  /** What the steps flag counts: every optimizer step from the start (so a resume at step S stops at S + N). */
  readonly steps: 'total';
  /** Where the table's rows come from, for the docs and the plan. */
  readonly source: string;
}

export const STACKS: Readonly<Record<Stack, StackTable>> = {
  plain: {
    stack: 'plain',
    title: 'a plain script (argparse flags)',
    names: {
      resume: ['--resume', '--resume_from', '--init_from', '--ckpt_path', '--checkpoint', '--load'],
      output: ['--out_dir', '--output_dir', '--save_dir', '--ckpt_dir', '--checkpoint_dir', '--log_dir'],
      steps: ['--steps', '--max_steps', '--max_iters', '--num_steps', '--total_steps', '--iters'],
    },
    style: 'space',
    steps: 'total',
    source: 'the flag names nanoGPT-, torchtitan- and HF-example-style scripts use; the launch shows which it has',
  },
  lightning: {
    stack: 'lightning',
    title: 'LightningCLI',
    names: {
      resume: ['--ckpt_path'],
      output: ['--trainer.default_root_dir'],
      steps: ['--trainer.max_steps'],
    },
    style: 'eq',
    steps: 'total',
    source: "LightningCLI's `fit --ckpt_path`, `--trainer.default_root_dir`, `--trainer.max_steps` (Trainer flags)",
  },
  hf: {
    stack: 'hf',
    title: 'a Hugging Face Trainer script (HfArgumentParser / TrainingArguments)',
    names: {
      resume: ['--resume_from_checkpoint'],
      output: ['--output_dir'],
      steps: ['--max_steps'],
    },
    style: 'space',
    steps: 'total',
    source: 'TrainingArguments fields: resume_from_checkpoint, output_dir, max_steps',
  },
  hydra: {
    stack: 'hydra',
    title: 'a Hydra app (key=value overrides)',
    names: {
      resume: ['ckpt_path', 'trainer.ckpt_path', 'resume_from'],
      output: ['hydra.run.dir'],
      steps: ['trainer.max_steps', 'max_steps', 'steps'],
    },
    style: 'override',
    steps: 'total',
    source:
      "Hydra's `hydra.run.dir`; the app's own keys for the checkpoint and the step count (Lightning-Hydra-template names)",
  },
};

/** Which stack a command line is, from its words. */
export function stackOf(argv: readonly string[]): Stack {
  if (argv.some((w) => w.startsWith('--trainer.') || w === 'fit') || argv.includes('--ckpt_path')) return 'lightning';
  if (argv.some((w) => /^--(output_dir|per_device_train_batch_size|resume_from_checkpoint)(=|$)/.test(w))) return 'hf';
  if (argv.some((w) => /^\+{0,2}[A-Za-z_][\w.]*=/.test(w) && !w.startsWith('-'))) return 'hydra';
  return 'plain';
}

function valueOf(table: StackTable, argv: readonly string[], name: string): string | undefined {
  return table.style === 'override' ? overrideValue(argv, name) : flagValue(argv, name);
}

/** The name the launch uses for `role`, if it names one of the table's; else undefined. */
export function roleName(table: StackTable, argv: readonly string[], role: OverrideRole): string | undefined {
  return table.names[role].find((n) => valueOf(table, argv, n) !== undefined);
}

export interface Override {
  readonly role: OverrideRole;
  readonly name: string;
  readonly value: string;
  /** In words, for the plan: `--resume /…/step_600.pt (resume from the reference checkpoint)`. */
  readonly text: string;
}

const WHY: Readonly<Record<OverrideRole, string>> = {
  resume: 'resume from the reference checkpoint',
  output: "write into the replay's own folder",
  steps: 'stop after the replay window',
};

/**
 * The overrides for one replay run: each role's name is the launch's own (`names` given by the person win), else the
 * table's usual one, which the script may not know: the plan says which were guessed.
 */
export function overridesFor(
  table: StackTable,
  argv: readonly string[],
  values: Readonly<Record<OverrideRole, string>>,
  names: Partial<Readonly<Record<OverrideRole, string>>> = {},
): { overrides: Override[]; guessed: OverrideRole[] } {
  const overrides: Override[] = [];
  const guessed: OverrideRole[] = [];
  for (const role of ['resume', 'output', 'steps'] as const) {
    const named = names[role] ?? roleName(table, argv, role);
    if (named === undefined) guessed.push(role);
    const name = named ?? table.names[role][0]!;
    overrides.push({ role, name, value: values[role], text: `${displayOf(table, name, values[role])} (${WHY[role]})` });
  }
  return { overrides, guessed };
}

function displayOf(table: StackTable, name: string, value: string): string {
  return table.style === 'space' ? `${name} ${value}` : `${name}=${value}`;
}

/** argv without the flag (or Hydra key) `name` and its value: a run that starts fresh drops the launch's resume. */
export function withoutName(table: StackTable, argv: readonly string[], name: string): string[] {
  return table.style === 'override'
    ? argv.filter((w) => !w.replace(/^\+*/, '').startsWith(`${name}=`))
    : withoutFlag(argv, name);
}

/** argv with the overrides applied, each where the launch has it, else appended in the stack's style. */
export function applyOverrides(table: StackTable, argv: readonly string[], overrides: readonly Override[]): string[] {
  let out = [...argv];
  for (const o of overrides) {
    if (!o.name) throw new KnownGoodError('internal', `no ${o.role} name`);
    out =
      table.style === 'override'
        ? withOverride(out, o.name, o.value)
        : withFlag(out, o.name, o.value, table.style === 'eq' ? 'eq' : 'space');
  }
  return out;
}
