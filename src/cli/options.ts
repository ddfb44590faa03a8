import { parseArgs } from 'node:util';
import { KnownGoodError } from '../core/errors';
import type { GpuChoice } from '../core/replay/gpus';
import { containerSchema, type ContainerSettings } from '../core/settings';
import { parseTimeout, printable } from './output';

/** What a command line asked for: every command reads the fields of its own options table. */
export interface CliOptions {
  container?: ContainerSettings;
  identity?: string;
  knownHosts?: string;
  acceptNew: boolean;
  python: string;
  timeoutMs: number;
  json: boolean;
  /** args/diff: `--key`, repeatable. */
  keys?: string[];
  /** env: label to save the snapshot under. */
  save?: string;
  /** env: the baseline to compare with. */
  diff?: string;
  /** env: the probe imports torch. */
  deep?: boolean;
  /** bench: tiny, gpu or a JSON object of options. */
  config?: string;
  /** bench: torch.compile the model. */
  compile?: boolean;
  /** bisect: the user's own benchmark command, and where its speed is. */
  bench?: string;
  regex?: string;
  jsonl?: string;
  /** bisect: runs of each state per round. */
  repeats?: number;
  /** bisect: the built-in benchmark on the process's CPU clock. */
  cpuClock?: boolean;
  /** bisect: the packages between the restored env and now, not the environment variables. */
  packages?: boolean;
  /** restore: run the plan, not only print it. */
  run?: boolean;
  /** fleet: the Slurm job. */
  job?: string;
  /** fleet: a hostlist of nodes. */
  nodes?: string;
  /** fleet: SLURM_CONF on the login node. */
  slurmConf?: string;
  /** replay: only these change ids (`--change`, repeatable). */
  changes?: string[];
  /** replay: optimizer steps a run makes past the reference checkpoint. */
  steps?: number;
  /** replay: the checkpoint to resume from (label or path). */
  reference?: string;
  /** replay: the key of the speed in the run's jsonl log. */
  speedKey?: string;
  /** replay: the script's own flag for a role (`--resume-flag --ckpt`). */
  resumeFlag?: string;
  outputFlag?: string;
  stepsFlag?: string;
  /** replay: the limit on each run, in seconds (`--run-timeout`; not the global --timeout). */
  runTimeoutS?: number;
  /** replay: print the plan, run nothing. */
  dryRun?: boolean;
  /** replay: which GPUs the runs go to (auto, none, or indexes). */
  gpus?: GpuChoice;
  /** replay/bisect: the smallest relative difference that counts. */
  threshold?: number;
}

/**
 * One option of a command: how it is spelled, the line `--help` shows for it, and where its value goes in CliOptions.
 * The same entry parses the command line and writes the help, so the two cannot drift apart.
 */
export type CliOption =
  | { kind: 'flag'; name: string; short?: string; help: string; set(o: CliOptions): void }
  | {
      kind: 'value';
      name: string;
      short?: string;
      /** The value's placeholder in the help: `FILE`, `SECONDS`. */
      value: string;
      help: string;
      /** Called once per occurrence, in order (a repeatable option collects; the others keep the last). */
      set(o: CliOptions, value: string): void;
    };

export function flag(name: string, help: string, set: (o: CliOptions) => void): CliOption {
  return { kind: 'flag', name, help, set };
}

export function valued(name: string, value: string, help: string, set: (o: CliOptions, v: string) => void): CliOption {
  return { kind: 'value', name, value, help, set };
}

/** The subset of a command the parser and the help need (CliCommand has these). */
export interface OptionsOwner {
  name: string;
  usage: string;
  summary: string;
  options: readonly CliOption[];
}

export function parseContainer(text: string): ContainerSettings {
  const i = text.indexOf(':');
  const kind = i < 0 ? text : text.slice(0, i);
  const rest = i < 0 ? '' : text.slice(i + 1);
  const r = containerSchema.safeParse(kind === 'custom' ? { kind, command: rest } : { kind, id: rest });
  if (!r.success)
    throw new KnownGoodError(
      'settings',
      `--container ${text}: expected pct:ID, docker:NAME, kubectl:POD or custom:"PREFIX"`,
    );
  return r.data;
}

/** How every command reaches its host: the same options for all of them. */
export const hostOptions: readonly CliOption[] = [
  valued(
    'container',
    'KIND:ID',
    'run inside a container: pct:200, docker:NAME, kubectl:POD, custom:"PREFIX WORDS"',
    (o, v) => (o.container = parseContainer(v)),
  ),
  { ...valued('identity', 'FILE', 'private key (as ssh -i)', (o, v) => (o.identity = v)), short: 'i' },
  valued(
    'known-hosts',
    'FILE',
    'known_hosts to verify against (as ssh -o UserKnownHostsFile)',
    (o, v) => (o.knownHosts = v),
  ),
  flag('accept-new', 'accept an unknown host key and remember it (never a changed one)', (o) => (o.acceptNew = true)),
  valued('python', 'PATH', 'interpreter on the remote (default python3)', (o, v) => (o.python = v)),
  valued(
    'timeout',
    'SECONDS',
    'stop the command after this long (default 60, at most 86400)',
    (o, v) => (o.timeoutMs = parseTimeout(v)),
  ),
];

/** `--json`, in the words of the command that has it. */
export function jsonOption(help = 'machine-readable output (JSON)'): CliOption {
  return flag('json', help, (o) => (o.json = true));
}

const helpOption: CliOption = {
  ...flag('help', "this command's usage and options", () => undefined),
  short: 'h',
};

/** Every option a command takes, in the order its help lists them: its own, then the host options. */
export function optionsOf(command: OptionsOwner): readonly CliOption[] {
  return [...command.options, ...hostOptions, helpOption];
}

export interface CommandLine {
  /** `--help` or `-h` was given (before any `--`): nothing else is checked. */
  help: boolean;
  positional: string[];
  /** Words after `--`, untouched. */
  rest: string[];
  options: CliOptions;
}

export function defaultOptions(): CliOptions {
  return { acceptNew: false, python: 'python3', timeoutMs: 60000, json: false };
}

/**
 * The words after `known-good COMMAND`, read against that command's table. `node:util` parseArgs splits them (an
 * option's value may start with `-`, as `--timeout -1` or `--regex -?[0-9]+`; everything after `--` is positional);
 * the strict checks are ours, so that an option of another command is refused with the command's name and where its
 * options are listed, not node's generic wording.
 */
export function parseCommandLine(command: OptionsOwner, argv: readonly string[]): CommandLine {
  const table = optionsOf(command);
  const { tokens } = parseArgs({
    args: [...argv],
    options: Object.fromEntries(
      table.map((o) => [
        o.name,
        { type: o.kind === 'flag' ? 'boolean' : 'string', multiple: true, ...(o.short ? { short: o.short } : {}) },
      ]),
    ),
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const terminator = tokens.findIndex((t) => t.kind === 'option-terminator');
  const before = terminator < 0 ? tokens : tokens.slice(0, terminator);
  const result: CommandLine = { help: false, positional: [], rest: [], options: defaultOptions() };
  if (before.some((t) => t.kind === 'option' && t.name === helpOption.name)) return { ...result, help: true };
  for (const t of before) {
    if (t.kind === 'positional') {
      result.positional.push(t.value);
      continue;
    }
    if (t.kind !== 'option') continue;
    const spec = table.find((o) => o.name === t.name);
    const spelled = spec && (t.rawName === `--${spec.name}` || (spec.short && t.rawName === `-${spec.short}`));
    if (!spec || !spelled) {
      // `-json` is read as the group -j -s -o -n: name the word as typed
      const word = t.rawName.startsWith('--') ? t.rawName : argv[t.index]!;
      throw new KnownGoodError(
        'settings',
        `${printable(word)} is not an option of ${command.name} (see known-good ${command.name} --help)`,
      );
    }
    if (spec.kind === 'flag') {
      if (t.value !== undefined) throw new KnownGoodError('settings', `${t.rawName} takes no value`);
      spec.set(result.options);
    } else {
      // `--identity -- cmd`: the value was left out, `--` is not a key file
      if (t.value === undefined || (!t.inlineValue && t.value === '--'))
        throw new KnownGoodError('settings', `${t.rawName} needs a value (${t.rawName} ${spec.value})`);
      spec.set(result.options, t.value);
    }
  }
  if (terminator >= 0) {
    for (const t of tokens.slice(terminator + 1)) if (t.kind === 'positional') result.rest.push(t.value);
  }
  return result;
}

function optionLines(options: readonly CliOption[], width: number): string[] {
  return options.map((o) => {
    const words = `${o.short ? `-${o.short}, ` : '    '}--${o.name}${o.kind === 'value' ? ` ${o.value}` : ''}`;
    const [first, ...more] = o.help.split('\n');
    return [`  ${words.padEnd(width)}  ${first}`, ...more.map((l) => `  ${''.padEnd(width)}  ${l}`)].join('\n');
  });
}

function columnWidth(options: readonly CliOption[]): number {
  return Math.max(...options.map((o) => 6 + o.name.length + (o.kind === 'value' ? 1 + o.value.length : 0)));
}

export const HOST_WORDS = 'HOST is "local", an ~/.ssh/config alias, or user@host[:port].';

/** `known-good COMMAND --help`: its usage, what it does, and every option of its table. */
export function commandHelp(command: OptionsOwner): string {
  const all = optionsOf(command);
  const width = columnWidth(all);
  const own = command.options;
  return [
    `Usage: known-good ${command.usage}`,
    '',
    `${command.summary}.`,
    '',
    ...(own.length ? ['Options:', ...optionLines(own, width), ''] : []),
    'Host options:',
    ...optionLines([...hostOptions, helpOption], width),
    '',
    HOST_WORDS,
    '',
  ].join('\n');
}

/** The host options as `known-good --help` lists them, and how to see the rest. */
export function hostOptionsHelp(): string {
  const width = columnWidth(hostOptions);
  return [
    'Options of every command:',
    ...optionLines(hostOptions, width),
    '',
    "known-good COMMAND --help (or -h) lists that command's own options.",
    '',
  ].join('\n');
}
