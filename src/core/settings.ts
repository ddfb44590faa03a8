import { z } from 'zod';
import { slurmSettingsSchema } from './fleet/settings';
import { describeIssues } from './probes/probe';

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

/** The settings the core needs, read once per change and parsed here (never cast). */
export interface KnownGoodSettings {
  hosts: HostSettings[];
  defaultRoots: string[];
  knownHostsFile: string | undefined;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  includeSshConfigHosts: boolean;
  problems: string[];
}

export function parseSettings(get: (key: string) => unknown): KnownGoodSettings {
  const parsed = parseHostsSetting(get('hosts'));
  const problems = [...parsed.problems];
  const num = (key: string, dflt: number): number => {
    const v = get(key);
    if (v === undefined || v === null) return dflt;
    if (typeof v === 'number' && Number.isFinite(v) && v > 0) return v;
    problems.push(`knownGood.${key}: expected a positive number of seconds, got ${JSON.stringify(v)}`);
    return dflt;
  };
  const rootsRaw = get('defaultRoots');
  const roots = rootsSchema.safeParse(rootsRaw ?? ['/workspace/checkpoints']);
  if (!roots.success) problems.push(`knownGood.defaultRoots: ${describeIssues(roots.error)}`);
  const kh = get('knownHostsFile');
  return {
    hosts: parsed.hosts,
    defaultRoots: roots.success ? roots.data : ['/workspace/checkpoints'],
    knownHostsFile: typeof kh === 'string' && kh.trim() ? kh.trim() : undefined,
    connectTimeoutMs: num('connectTimeoutSeconds', 15) * 1000,
    commandTimeoutMs: num('commandTimeoutSeconds', 60) * 1000,
    includeSshConfigHosts: get('includeSshConfigHosts') !== false,
    problems,
  };
}
