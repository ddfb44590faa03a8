import { z } from 'zod';
import { KnownGoodError } from './errors';
import { parseBaselineSettings, type BaselineSettings } from './baselines/settings';
import { slurmSettingsSchema } from './fleet/settings';
import { describeIssues } from './util/zod';

export const containerSchema = z
  .object({
    kind: z.enum(['pct', 'docker', 'kubectl', 'custom']),
    id: z.string().min(1).optional(),
    command: z.string().min(1).optional(),
  })
  .superRefine((c, ctx) => {
    if (c.kind === 'custom' && !c.command)
      ctx.addIssue({ code: 'custom', path: ['command'], message: 'kind "custom" needs a command' });
    if (c.kind !== 'custom' && !c.id)
      ctx.addIssue({ code: 'custom', path: ['id'], message: `kind "${c.kind}" needs an id` });
  });
export type ContainerSettings = z.infer<typeof containerSchema>;

export const hostSettingsSchema = z.object({
  name: z.string().trim().min(1),
  host: z.string().trim().min(1),
  port: z.number().int().min(1).max(65535).optional(),
  user: z.string().min(1).optional(),
  identityFile: z.string().min(1).optional(),
  proxyJump: z.string().min(1).optional(),
  python: z.string().min(1).optional(),
  container: containerSchema.optional(),
  roots: z.array(z.string().min(1)).optional(),
  /** The host is a Slurm login node (Fleet: the nodes of a job). */
  slurm: slurmSettingsSchema.optional(),
});
export type HostSettings = z.infer<typeof hostSettingsSchema>;

export interface ParsedHosts {
  hosts: HostSettings[];
  /** One message per bad entry, naming the setting and the field; the other entries still load. */
  problems: string[];
}

export function parseHostsSetting(raw: unknown): ParsedHosts {
  if (raw === undefined || raw === null) return { hosts: [], problems: [] };
  if (!Array.isArray(raw)) return { hosts: [], problems: ['knownGood.hosts: expected an array of host entries'] };
  const hosts: HostSettings[] = [];
  const problems: string[] = [];
  const names = new Set<string>();
  raw.forEach((entry: unknown, i) => {
    const r = hostSettingsSchema.safeParse(entry);
    const name =
      typeof entry === 'object' && entry !== null && typeof (entry as { name?: unknown }).name === 'string'
        ? ` ("${(entry as { name: string }).name}")`
        : '';
    if (!r.success) {
      problems.push(`knownGood.hosts[${i}]${name}: ${describeIssues(r.error)}`);
      return;
    }
    if (names.has(r.data.name)) {
      problems.push(`knownGood.hosts[${i}]${name}: name: another host is already called "${r.data.name}"`);
      return;
    }
    names.add(r.data.name);
    hosts.push(r.data);
  });
  return { hosts, problems };
}

const rootsSchema = z.array(z.string().min(1));

/** Where checkpoints are looked for when a host names no roots (`knownGood.defaultRoots`'s default). */
export const DEFAULT_ROOTS: readonly string[] = ['/workspace/checkpoints'];

/*
 * Workspace trust. A folder's `.vscode/settings.json` is written by whoever wrote the repository: in a workspace the
 * person has not trusted (VS Code's Restricted Mode), no value from it may choose a program Known Good runs, an
 * argument word of one, the machine it runs on, or whether code inside a file is executed. Every `knownGood.*`
 * setting is in exactly one of the two tables below (test/unit/trust.unit.test.ts checks them against package.json,
 * whose `capabilities.untrustedWorkspaces.restrictedConfigurations` must list exactly CODE_RUNNING_SETTINGS), so a
 * new setting cannot arrive without this decision.
 */

/** How far a setting is shared: package.json's `scope` (absent there means `window`). */
export type SettingScope = 'application' | 'machine' | 'machine-overridable' | 'window' | 'resource';

export interface CodeRunningSetting {
  key: string;
  /**
   * `application`: only the person's own user settings, never a workspace's (nor a remote machine's: Known Good
   * prefers to run in the local extension host, `extensionKind: ["ui", …]`, and VS Code reads `machine` and
   * `machine-overridable` settings of a remote window from the remote's settings only). `window`: a trusted
   * workspace may set it (a team's benchmark command is normal).
   */
  scope: SettingScope;
  /** Why its value runs code. */
  why: string;
}

/**
 * Settings whose value becomes a program, an argument of one, the machine commands run on, or the decision to
 * execute code inside a file. package.json lists them in `restrictedConfigurations`: in Restricted Mode VS Code hands
 * the extension only the user's own value of each.
 */
export const CODE_RUNNING_SETTINGS: readonly CodeRunningSetting[] = [
  {
    key: 'knownGood.benchmark.command',
    scope: 'window',
    why: "run by the host's sh -c (Run My Benchmark Command, bisects, a restored env's speed)",
  },
  {
    key: 'knownGood.localPython',
    scope: 'application',
    why: 'the program every probe of "This machine" runs as',
  },
  {
    key: 'knownGood.allowTorchLoad',
    scope: 'application',
    why: "turns on torch.load of checkpoints: the person's consent to unpickling files on their hosts",
  },
  {
    key: 'knownGood.knownHostsFile',
    scope: 'application',
    why: 'decides which host keys are accepted, so which machine receives the commands (and is appended to)',
  },
];

/**
 * The code-running setting a failure is about (a KnownGoodError's `detail.setting`), if any: in Restricted Mode the
 * workspace's value of it was withheld, which may be why it is missing.
 */
export function codeRunningSettingOf(detail: Record<string, unknown> | undefined): string | undefined {
  const key = detail?.['setting'];
  return CODE_RUNNING_SETTINGS.find((s) => s.key === key)?.key;
}

/**
 * A command that runs the code of a run on its host (Prove by Replay, Bisect All Changes: the training script the
 * launch records name) refuses in Restricted Mode, as VS Code's own run and debug do: the folder was not trusted, so
 * nothing started from it runs code. The error says what would have run; the registrar offers Manage Workspace Trust.
 */
export function refuseInRestrictedMode(restricted: boolean, what: string): void {
  if (restricted)
    throw new KnownGoodError(
      'usage',
      `This folder is in Restricted Mode: ${what}, so Known Good does not start it here. Trust the folder to run it.`,
      { restricted: what },
    );
}

/** What a refused command would have run (the error of refuseInRestrictedMode), if it is one. */
export function restrictedRefusalOf(detail: Record<string, unknown> | undefined): string | undefined {
  const what = detail?.['restricted'];
  return typeof what === 'string' ? what : undefined;
}

/**
 * Settings a workspace may set in any mode: each is data that reaches a process only as a validated argument word
 * (`--cache-dir=…`), a path that is listed or read, a number or a switch of what is shown.
 */
export const DATA_SETTINGS: readonly string[] = [
  // how many spare processes the resident helper keeps: a number from 1 to 8
  'knownGood.helper.spares',
  // a regular expression over the command's output, a jsonl path read and a key in it
  'knownGood.benchmark.throughputRegex',
  'knownGood.benchmark.throughputJsonl',
  'knownGood.benchmark.throughputKey',
  // a baseline copy written only to ~/.known-good/baselines/ on the host
  'knownGood.baselines.copyToRemote',
  // globs, variable names and folders a probe receives as `--flag=value` words
  'knownGood.env.scriptGlobs',
  'knownGood.env.extraVariables',
  'knownGood.env.cacheDirs',
  // a team's host list is normal in a repository; its code-running fields are CODE_RUNNING_HOST_FIELDS
  'knownGood.hosts',
  // folders listed
  'knownGood.defaultRoots',
  'knownGood.localRoots',
  // limits and display
  'knownGood.connectTimeoutSeconds',
  'knownGood.commandTimeoutSeconds',
  'knownGood.includeSshConfigHosts',
  'knownGood.sortSteps',
  'knownGood.maxEntries',
  'knownGood.maxOpenBytes',
  'knownGood.autoRefreshSeconds',
];

/**
 * Fields of a `knownGood.hosts` entry that run code: `python` is the program of every probe, `container` the prefix
 * of every command (`custom` a program of its own; the others choose where everything runs), `slurm.binDir` holds
 * the srun/squeue that are run, `slurm.conf` can name plugins srun loads, `slurm.allowNodesOutsideJobs` starts
 * allocations on nodes outside the person's jobs. A host list can only be restricted whole by VS Code, and a team's
 * list is worth keeping: in Restricted Mode the entries a workspace provides lose these fields instead (taking them
 * from the user's own entry of the same name and host, if there is one).
 */
export const CODE_RUNNING_HOST_FIELDS = [
  'python',
  'container',
  'slurm.binDir',
  'slurm.conf',
  'slurm.allowNodesOutsideJobs',
] as const;
export type CodeRunningHostField = (typeof CODE_RUNNING_HOST_FIELDS)[number];

/** The other fields of a host entry: where to connect and what to list (tested: every schema field is in one). */
export const DATA_HOST_FIELDS: readonly string[] = [
  'name',
  'host',
  'port',
  'user',
  // a key file read here; only a signature leaves this machine
  'identityFile',
  // a hop whose host key is checked like any other
  'proxyJump',
  'roots',
  'slurm.partition',
  'slurm.maxNodesPerStep',
  'slurm.concurrency',
  'slurm.nodeTimeoutS',
];

/** What the extension knows of workspace trust when it reads the settings (the VS Code layer fills it in). */
export interface SettingsTrust {
  /** vscode.workspace.isTrusted. */
  trusted: boolean;
  /** The effective `knownGood.hosts` is the workspace's (or a folder's), not the user's. */
  hostsFromWorkspace: boolean;
  /** `knownGood.hosts` in the user's own settings (inspect().globalValue). */
  userHosts: unknown;
}

/** A host entry of the workspace whose code-running fields are not used in Restricted Mode. */
export interface RestrictedHost {
  name: string;
  ignored: CodeRunningHostField[];
}

type Entry = Record<string, unknown>;
const isEntry = (v: unknown): v is Entry => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The workspace's host entries as Restricted Mode uses them: each code-running field is taken from the user's own
 * entry with the same name and host, or left out; the entries, their order and every other field are kept. Works on
 * the raw setting (before parsing), so a field is dropped whatever its value.
 */
export function restrictWorkspaceHosts(
  workspaceHosts: unknown,
  userHosts: unknown,
): { hosts: unknown; restricted: RestrictedHost[] } {
  if (!Array.isArray(workspaceHosts)) return { hosts: workspaceHosts, restricted: [] };
  const own = (Array.isArray(userHosts) ? userHosts : []).filter(isEntry);
  const restricted: RestrictedHost[] = [];
  const hosts = workspaceHosts.map((entry: unknown) => {
    if (!isEntry(entry)) return entry;
    const mine = own.find((u) => u['name'] === entry['name'] && u['host'] === entry['host']);
    const out: Entry = { ...entry, ...(isEntry(entry['slurm']) ? { slurm: { ...entry['slurm'] } } : {}) };
    const ignored: CodeRunningHostField[] = [];
    for (const field of CODE_RUNNING_HOST_FIELDS) {
      const [top, sub] = field.split('.') as [string, string | undefined];
      const key = sub ?? top;
      // `slurm.conf` lives in the entry's `slurm` object (already a copy in `out`), `python` in the entry itself
      const holder = sub === undefined ? out : isEntry(out[top]) ? out[top] : undefined;
      if (holder?.[key] === undefined) continue;
      const mineHolder = sub === undefined ? mine : isEntry(mine?.[top]) ? mine[top] : undefined;
      const theirs = mineHolder?.[key];
      // the same value in the user's own entry is the user's choice, not the workspace's
      if (theirs !== undefined && JSON.stringify(theirs) === JSON.stringify(holder[key])) continue;
      if (theirs === undefined) delete holder[key];
      else holder[key] = theirs;
      ignored.push(field);
    }
    if (ignored.length) restricted.push({ name: typeof entry['name'] === 'string' ? entry['name'] : '?', ignored });
    return out;
  });
  return { hosts, restricted };
}
/**
 * `knownGood.helper.spares`: children the resident helper keeps forked ahead of need on a host once idle (kg_pool
 * MAX_SPARES is the same 8). Each is a process in the host's ps holding ~2 MB of its own (docs/architecture.md "What
 * runs on a host"); 4 serve a burst after a pause nearly as fast as the 24 the helper once kept.
 */
export const DEFAULT_HELPER_SPARES = 4;
export const helperSparesSchema = z.number().int().min(1).max(8);

/** `knownGood.benchmark.*` as typed (trimmed, empty → undefined); core/bench validates it when a run needs it. */
export interface BenchmarkSettings {
  command: string | undefined;
  throughputRegex: string | undefined;
  throughputJsonl: string | undefined;
  throughputKey: string;
}

/**
 * Every `knownGood.*` setting, read once per configuration change and parsed here (never cast): a bad value falls
 * back to its default and is reported in `problems`, named by key; the other settings still apply.
 */
export interface KnownGoodSettings {
  hosts: HostSettings[];
  defaultRoots: string[];
  knownHostsFile: string | undefined;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  includeSshConfigHosts: boolean;
  /** Roots of "This machine" (undefined: defaultRoots). */
  localRoots: string[] | undefined;
  /** Interpreter of "This machine" (undefined: python3). */
  localPython: string | undefined;
  /** `knownGood.sortSteps` is not "oldestFirst". */
  newestFirst: boolean;
  maxEntries: number;
  maxOpenBytes: number;
  /** 0: off. */
  autoRefreshSeconds: number;
  allowTorchLoad: boolean;
  /** `knownGood.helper.spares` (applies when a host's helper next starts). */
  helperSpares: number;
  baselines: Omit<BaselineSettings, 'problems'>;
  benchmark: BenchmarkSettings;
  problems: string[];
  /** The workspace is not trusted (VS Code's Restricted Mode). */
  restrictedMode: boolean;
  /** In Restricted Mode: the workspace's host entries whose code-running fields are not used. */
  restrictedHosts: RestrictedHost[];
}

/**
 * `trust` absent: a trusted workspace (the CLI, tests). Untrusted, with the host list from the workspace: the
 * entries lose their code-running fields (restrictWorkspaceHosts); VS Code itself already withholds the workspace's
 * values of CODE_RUNNING_SETTINGS.
 */
export function parseSettings(get: (key: string) => unknown, trust?: SettingsTrust): KnownGoodSettings {
  const restrictedMode = trust !== undefined && !trust.trusted;
  const restriction =
    restrictedMode && trust.hostsFromWorkspace
      ? restrictWorkspaceHosts(get('hosts'), trust.userHosts)
      : { hosts: get('hosts'), restricted: [] };
  const parsed = parseHostsSetting(restriction.hosts);
  const problems = [...parsed.problems];
  const num = (key: string, dflt: number, min = Number.MIN_VALUE, what = 'a positive number of seconds'): number => {
    const v = get(key);
    if (v === undefined || v === null) return dflt;
    if (typeof v === 'number' && Number.isFinite(v) && v >= min) return v;
    problems.push(`knownGood.${key}: expected ${what}, got ${JSON.stringify(v)}`);
    return dflt;
  };
  const text = (key: string): string | undefined => {
    const v = get(key);
    return typeof v === 'string' && v.trim() ? v.trim() : undefined;
  };
  const rootsRaw = get('defaultRoots');
  const roots = rootsSchema.safeParse(rootsRaw ?? DEFAULT_ROOTS);
  if (!roots.success) problems.push(`knownGood.defaultRoots: ${describeIssues(roots.error)}`);
  const local = get('localRoots');
  const localRoots =
    Array.isArray(local) && local.length && local.every((x) => typeof x === 'string') ? local : undefined;
  const { problems: baselineProblems, ...baselines } = parseBaselineSettings(get);
  const sparesRaw = get('helper.spares');
  const spares = helperSparesSchema.safeParse(sparesRaw ?? DEFAULT_HELPER_SPARES);
  if (!spares.success) {
    problems.push(`knownGood.helper.spares: expected a whole number from 1 to 8, got ${JSON.stringify(sparesRaw)}`);
  }
  const settings: KnownGoodSettings = {
    hosts: parsed.hosts,
    defaultRoots: roots.success ? roots.data : [...DEFAULT_ROOTS],
    knownHostsFile: text('knownHostsFile'),
    connectTimeoutMs: num('connectTimeoutSeconds', 15) * 1000,
    commandTimeoutMs: num('commandTimeoutSeconds', 60) * 1000,
    includeSshConfigHosts: get('includeSshConfigHosts') !== false,
    localRoots,
    localPython: text('localPython'),
    newestFirst: get('sortSteps') !== 'oldestFirst',
    maxEntries: num('maxEntries', 5000, 1, 'a positive number of entries'),
    maxOpenBytes: num('maxOpenBytes', 4 * 1024 * 1024, 1, 'a positive number of bytes'),
    autoRefreshSeconds: num('autoRefreshSeconds', 0, 0, 'a number of seconds (0: off)'),
    allowTorchLoad: get('allowTorchLoad') === true,
    helperSpares: spares.success ? spares.data : DEFAULT_HELPER_SPARES,
    baselines,
    benchmark: {
      command: text('benchmark.command'),
      throughputRegex: text('benchmark.throughputRegex'),
      throughputJsonl: text('benchmark.throughputJsonl'),
      throughputKey: text('benchmark.throughputKey') ?? 'tok_per_s',
    },
    problems,
    restrictedMode,
    restrictedHosts: restriction.restricted,
  };
  problems.push(...baselineProblems);
  return settings;
}
