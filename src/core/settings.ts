import { z } from 'zod';
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
}

export function parseSettings(get: (key: string) => unknown): KnownGoodSettings {
  const parsed = parseHostsSetting(get('hosts'));
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
  };
  problems.push(...baselineProblems);
  return settings;
}
