import { isKnownGoodError, KnownGoodError, messageOf } from '../core/errors';
import { localHost, resolveEndpoint, type HostSpec } from '../core/hosts';
import { HostRegistry, type HostSession } from '../core/registry';
import { containerSchema, type ContainerSettings } from '../core/settings';
import { parseSshConfig, readUserSshConfig } from '../core/sshConfig';
import { defaultKnownHostsFile } from '../core/transport/ssh';
import { cliCommands } from './commands';
import { checkArgvUtf8, exitAfterFlush, guardOutput, parseTimeout, printableLines } from './output';
import { terminalPrompts } from './prompts';
import { exitCodeOf, stopOnSignals } from './stop';

export function usage(): string {
  return `known-good — Known Good's core from a terminal

Usage:
${cliCommands.map((c) => `  known-good ${c.usage.padEnd(44)} ${c.summary}`).join('\n')}

HOST is "local", an ~/.ssh/config alias, or user@host[:port].
Options:
  --container KIND:ID     run inside a container: pct:200, docker:NAME, kubectl:POD, custom:"PREFIX WORDS"
  --identity FILE         private key (as ssh -i)
  --known-hosts FILE      known_hosts to verify against (as ssh -o UserKnownHostsFile)
  --accept-new            accept an unknown host key and remember it (never a changed one)
  --python PATH           interpreter on the remote (default python3)
  --timeout SECONDS       stop the command after this long (default 60, at most 86400)
  --json                  machine-readable output where a command has it
  --key KEY               args: the key(s) to show (repeatable; a.b reaches inside)
  --save LABEL            env: keep this snapshot as a baseline (~/.known-good/baselines/<host>/)
  --diff BASELINE         env: compare with a baseline (file, id or label); exit 1 when drifted
  --deep                  env: also import torch (cuDNN and NCCL as loaded, devices; seconds)
  --config tiny|gpu|JSON  bench: the benchmark shape (default tiny on CPU)
  --compile               bench: torch.compile the model (compile time reported on its own)
  --bench CMD             bisect: your own benchmark command instead of the built-in one (with --regex or --jsonl)
  --regex RE              bisect --bench: the speed is the first group of RE in the command's output
  --jsonl PATH:KEY        bisect --bench: the speed is KEY in the jsonl file PATH the command writes
  --repeats N             bisect: runs of each state per round (at least 3, default 3)
  --cpu-clock             bisect: the built-in benchmark's speed per CPU-second of its process, not wall time
                          (a shared CPU host; blind to changes that only cost waiting, e.g. fewer threads)
  --packages              bisect: the packages that differ from the restored env (restore --run first)
  --run                   restore: run the plan (without it the plan is only printed)
  --job JOBID             fleet: the Slurm job whose nodes to use
  --nodes LIST            fleet: only these nodes (n[1-4],gpu7); without --job, nodes outside jobs (srun -w)
  --slurm-conf FILE       fleet: SLURM_CONF on the login node
`;
}

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

/** Splits options from positional words; everything after `--` is positional and untouched. */
export function parseArgs(argv: string[]): { positional: string[]; rest: string[]; options: CliOptions } {
  const options: CliOptions = { acceptNew: false, python: 'python3', timeoutMs: 60000, json: false };
  const positional: string[] = [];
  let rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new KnownGoodError('settings', `${a} needs a value`);
      return v;
    };
    if (a === '--') {
      rest = argv.slice(i + 1);
      break;
    } else if (a === '--container') options.container = parseContainer(value());
    else if (a === '--identity' || a === '-i') options.identity = value();
    else if (a === '--known-hosts') options.knownHosts = value();
    else if (a === '--accept-new') options.acceptNew = true;
    else if (a === '--python') options.python = value();
    else if (a === '--timeout') options.timeoutMs = parseTimeout(value());
    else if (a === '--json') options.json = true;
    else if (a === '--key') (options.keys ??= []).push(value());
    else if (a === '--config') options.config = value();
    else if (a === '--compile') options.compile = true;
    else if (a === '--save') options.save = value();
    else if (a === '--diff') options.diff = value();
    else if (a === '--deep') options.deep = true;
    else if (a === '--bench') options.bench = value();
    else if (a === '--packages') options.packages = true;
    else if (a === '--run') options.run = true;
    else if (a === '--regex') options.regex = value();
    else if (a === '--jsonl') options.jsonl = value();
    else if (a === '--repeats') options.repeats = parseRepeats(value());
    else if (a === '--cpu-clock') options.cpuClock = true;
    else if (a === '--job') options.job = value();
    else if (a === '--nodes') options.nodes = value();
    else if (a === '--slurm-conf') options.slurmConf = value();
    else if (a.startsWith('--') && positional.length < 2) throw new KnownGoodError('settings', `unknown option ${a}`);
    else positional.push(a);
  }
  return { positional, rest, options };
}

function parseRepeats(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 3 || n > 50)
    throw new KnownGoodError('settings', `--repeats ${v}: a whole number 3–50`);
  return n;
}

/** `HOST:/abs/path` → host and path; `user@host:2222` stays a host (the part after `:` must start with `/`). */
export function splitHostPath(word: string): { host: string; path?: string } {
  const m = /^([^/]*?):(\/.*)$/s.exec(word);
  return m ? { host: m[1]!, path: m[2]! } : { host: word };
}

export function hostFromCli(host: string, options: CliOptions): HostSpec {
  if (host === 'local') {
    return { ...localHost([], options.python), ...(options.container ? { container: options.container } : {}) };
  }
  const configText = readUserSshConfig();
  const ssh = resolveEndpoint(
    host,
    parseSshConfig(configText),
    options.identity ? { identityFile: options.identity } : {},
  );
  return {
    id: `cli:${host}`,
    name: host,
    source: 'cli',
    ssh,
    ...(options.container ? { container: options.container } : {}),
    python: options.python,
    roots: [],
  };
}

export function openSession(host: string, options: CliOptions): { session: HostSession; registry: HostRegistry } {
  const registry = new HostRegistry({
    commandTimeoutMs: options.timeoutMs,
    ssh: {
      knownHostsFiles: [options.knownHosts ?? defaultKnownHostsFile()],
      connectTimeoutMs: 15000,
      prompts: terminalPrompts(options.acceptNew),
    },
  });
  const spec = hostFromCli(host, options);
  registry.setHosts([spec]);
  return { session: registry.session(spec), registry };
}

async function main(argv: string[]): Promise<number> {
  checkArgvUtf8(argv);
  const [command, ...args] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(usage());
    return command ? 0 : 2;
  }
  const { positional, rest, options } = parseArgs(args);
  const host = positional[0];
  if (!host) throw new KnownGoodError('settings', `${command}: HOST is missing\n\n${usage()}`);
  const first = splitHostPath(host);
  const { session, registry } = openSession(first.host, options);
  const sessions = new Map<string, HostSession>([[first.host, session]]);
  const open = (word: string): { session: HostSession; path?: string } => {
    const hp = splitHostPath(word);
    let s = sessions.get(hp.host);
    if (!s) {
      const spec = { ...hostFromCli(hp.host, options), id: `cli:${hp.host}` };
      registry.setHosts([...registry.hosts(), spec]);
      s = registry.session(spec);
      sessions.set(hp.host, s);
    }
    return { session: s, ...(hp.path !== undefined ? { path: hp.path } : {}) };
  };
  const stop = stopOnSignals(process.stderr);
  try {
    const cmd = cliCommands.find((c) => c.name === command);
    if (!cmd) throw new KnownGoodError('settings', `unknown command ${command}\n\n${usage()}`);
    const code = await cmd.run({
      session,
      ...(first.path !== undefined ? { path: first.path } : {}),
      open,
      registry,
      positional: positional.slice(1),
      rest,
      options,
      signal: stop.signal,
      out: process.stdout,
      err: process.stderr,
    });
    const sig = stop.received();
    return sig ? exitCodeOf(sig) : code;
  } catch (e) {
    const sig = stop.received();
    if (sig && isKnownGoodError(e, 'cancelled')) {
      process.stderr.write(`known-good: ${printableLines(messageOf(e))}\n`);
      return exitCodeOf(sig);
    }
    throw e;
  } finally {
    stop.dispose();
    registry.dispose();
  }
}

if (require.main === module) {
  guardOutput();
  main(process.argv.slice(2)).then(
    (code) => exitAfterFlush(code),
    (e: unknown) => {
      process.stderr.write(`known-good: ${printableLines(messageOf(e))}\n`);
      exitAfterFlush(e instanceof KnownGoodError && e.code === 'settings' ? 2 : 255);
    },
  );
}
