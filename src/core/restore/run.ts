import { z } from 'zod';
import type { EnvSnapshot } from '../baselines/envProbe';
import { runAction } from '../actions/runner';
import { KnownGoodError } from '../errors';
import { defineProbe, type ProbeRunnerLike } from '../probes/probe';
import { shellQuote } from '../quote';
import type { Transport } from '../transport/types';
import {
  FAILED_PINS_FILE,
  failedPinsOf,
  restorePlan,
  type PackageSource,
  type RestoreOptions,
  type RestorePlan,
} from './plan';
import { normalizeName } from './units';

/*
 * Restore on a host: the facts the pure plan needs (the home folder, what the sources hold, which indexes answer),
 * the plan's script run with its output streamed line by line, and the restored env's `pip freeze` compared with
 * the baseline's packages.
 */

export interface RestoreCheckOptions {
  findLinks: readonly string[];
  indexes: readonly string[];
  /** Names to look up in file:// indexes (one folder each). */
  names: readonly string[];
  timeoutS?: number;
}

export const restoreCheckSchema = z.object({
  available: z.record(z.string(), z.array(z.string())),
  listed: z.array(z.string()),
  unreachable: z.array(z.object({ url: z.string(), error: z.string() })),
  truncated: z.boolean(),
});
export type RestoreCheck = z.infer<typeof restoreCheckSchema>;

export const restoreCheckProbe = defineProbe('restore_check', restoreCheckSchema, (o: RestoreCheckOptions) => [
  ...o.findLinks.map((f) => `--find-links=${f}`),
  ...o.indexes.map((u) => `--index=${u}`),
  ...o.names.map((n) => `--name=${n}`),
  ...(o.timeoutS !== undefined ? [`--timeout=${o.timeoutS}`] : []),
]);

/** What restoring needs of a host (a HostSession fits). */
export interface RestoreHost {
  transport: Transport;
  probes: ProbeRunnerLike;
  label: string;
}

/** The user's home on the host, absolute. */
export async function remoteHome(transport: Transport, signal?: AbortSignal): Promise<string> {
  const r = await transport.exec(['sh', '-c', 'printf %s "$HOME"'], {
    timeoutMs: 30_000,
    ...(signal ? { signal } : {}),
  });
  const home = r.stdout.trim();
  if (r.exitCode !== 0 || !home.startsWith('/'))
    throw new KnownGoodError('probe-failed', `cannot tell the home folder on ${transport.label}: ${r.stderr.trim()}`);
  return home;
}

function sourcesOf(plan: RestorePlan): PackageSource[] {
  const seen = new Map<string, PackageSource>();
  for (const u of plan.units) seen.set(JSON.stringify(u.source), u.source);
  return [...seen.values()];
}

/** A source whose whole content can be listed from the host: no http index can hold what the listing lacks. */
function listable(src: PackageSource): boolean {
  const urls = src.noIndex ? [] : [src.indexUrl, ...src.extraIndexUrls];
  if (!src.noIndex && src.indexUrl === null) return false; // pip's default index
  return urls.every((u) => u === null || u.startsWith('file://'));
}

/** The plan for `snapshot` on its host: the home folder and the sources checked from there, then the pure plan. */
export async function planOnHost(
  host: RestoreHost,
  snapshot: EnvSnapshot,
  opts: Omit<RestoreOptions, 'home' | 'facts'>,
  signal?: AbortSignal,
): Promise<RestorePlan> {
  const home = await remoteHome(host.transport, signal);
  const draft = restorePlan(snapshot, { ...opts, home });
  const sources = sourcesOf(draft);
  const check = await host.probes.run(
    restoreCheckProbe({
      findLinks: [...new Set(sources.flatMap((s) => s.findLinks))],
      indexes: [
        ...new Set(
          sources.flatMap((s) => (s.noIndex ? [] : [s.indexUrl, ...s.extraIndexUrls]).filter((u) => u !== null)),
        ),
      ],
      names: draft.pins.map((p) => p.name),
    }),
    signal ? { signal } : {},
  );
  const everything = sources.length > 0 && sources.every(listable);
  return restorePlan(snapshot, {
    ...opts,
    home,
    facts: {
      ...(everything
        ? {
            available: new Map(Object.entries(check.value.available)),
            availableFrom: check.value.listed.join(', ') || 'the package sources',
          }
        : {}),
      unreachable: check.value.unreachable,
    },
  });
}

/** A restore script's limit: a torch family over a slow link takes a while, but not forever. */
export const RESTORE_TIMEOUT_MS = 3 * 3600_000;

export interface ScriptOptions {
  /** The host's interpreter, which runs the guard (python/kg_guard.py); default python3. */
  python?: string;
  timeoutMs?: number;
}

/**
 * Runs `script` with sh on the host under the guard (bounded, owned: core/actions/runner.ts), each output line
 * (stdout and stderr) to `onLine`; resolves to the exit code, or throws how it was stopped.
 */
export async function runScript(
  transport: Transport,
  script: string,
  onLine: (line: string) => void,
  signal?: AbortSignal,
  opts: ScriptOptions = {},
): Promise<number | null> {
  const rest = { stdout: '', stderr: '' };
  const r = await runAction(
    transport,
    { argv: ['sh', '-c', script], timeoutMs: opts.timeoutMs ?? RESTORE_TIMEOUT_MS },
    {
      python: opts.python ?? 'python3',
      ...(signal ? { signal } : {}),
      onOutput: (text, stream) => {
        rest[stream] += text;
        let i: number;
        while ((i = rest[stream].indexOf('\n')) >= 0) {
          onLine(rest[stream].slice(0, i).replace(/\r$/, ''));
          rest[stream] = rest[stream].slice(i + 1);
        }
      },
    },
  );
  for (const stream of ['stdout', 'stderr'] as const) if (rest[stream]) onLine(rest[stream]);
  if (r.ended === 'cancelled' || signal?.aborted)
    throw new KnownGoodError('cancelled', `restore cancelled: ${r.message}`);
  if (r.ended !== 'exited')
    throw new KnownGoodError(r.ended === 'timeout' ? 'timeout' : 'connection-lost', `the restore script ${r.message}`);
  return r.exitCode;
}

/** The restored env's packages, as its installer lists them (`pip freeze --all`, or uv's). */
export async function freezeOf(transport: Transport, plan: RestorePlan, signal?: AbortSignal): Promise<string> {
  const py = `${plan.envDir}/bin/python`;
  const argv =
    plan.tool === 'uv'
      ? ['uv', 'pip', 'freeze', '--python', py]
      : [py, '-m', 'pip', 'freeze', '--all', '--disable-pip-version-check'];
  const r = await transport.exec(argv, { timeoutMs: 120_000, ...(signal ? { signal } : {}) });
  if (r.exitCode !== 0)
    throw new KnownGoodError('probe-failed', `pip freeze in ${plan.envDir} failed: ${r.stderr.trim().slice(-500)}`);
  return r.stdout;
}

export interface FreezeDifference {
  name: string;
  baseline: string | null;
  restored: string | null;
  why: string;
}

export interface FreezeComparison {
  identical: boolean;
  /** Packages the restored env holds as the baseline recorded them. */
  same: number;
  differences: FreezeDifference[];
}

/** `name==version` lines of a freeze (a `name @ url` line is a direct install: its version is the URL). */
export function parseFreeze(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const commented = /^#.*\(([A-Za-z0-9._-]+)==([^)\s]+)\)/.exec(line); // pip: "# Editable install … (name==1.0)"
    if (commented) out.set(normalizeName(commented[1]!), commented[2]!);
    if (!line || line.startsWith('#') || line.startsWith('-')) continue;
    const pin = /^([A-Za-z0-9._-]+)==(\S+)$/.exec(line);
    if (pin) out.set(normalizeName(pin[1]!), pin[2]!);
    const at = /^([A-Za-z0-9._-]+)\s*@\s*(\S+)$/.exec(line);
    if (at) out.set(normalizeName(at[1]!), `@ ${at[2]!}`);
  }
  return out;
}

/**
 * The restored env against the baseline's packages: identical, or each difference named with why (an editable
 * install the plan named, a package no source had, a local build tag the index adds).
 */
export function compareFreeze(
  baseline: Readonly<Record<string, string | null>>,
  freeze: string,
  plan?: RestorePlan,
): FreezeComparison {
  const restored = parseFreeze(freeze);
  const base = new Map(Object.entries(baseline).map(([k, v]) => [normalizeName(k), v]));
  const noted = new Map((plan?.notes ?? []).filter((n) => n.name).map((n) => [normalizeName(n.name!), n.message]));
  const differences: FreezeDifference[] = [];
  let same = 0;
  for (const [name, version] of base) {
    const got = restored.get(name) ?? null;
    if (got === version) {
      same++;
      continue;
    }
    const why =
      got === null
        ? (noted.get(name) ?? 'not in the restored env')
        : version !== null && got.split('+')[0] === version && got.includes('+')
          ? `the index's build ${got} of the recorded ${version}`
          : `restored as ${got}, recorded as ${version ?? '(no version)'}`;
    differences.push({ name, baseline: version, restored: got, why });
  }
  for (const [name, got] of restored)
    if (!base.has(name)) differences.push({ name, baseline: null, restored: got, why: 'not in the baseline' });
  differences.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { identical: differences.length === 0, same, differences };
}

export function freezeComparisonText(c: FreezeComparison): string {
  if (c.identical) return `pip freeze of the restored env: identical to the baseline (${c.same} packages)`;
  const lines = [`pip freeze of the restored env: ${c.same} packages as recorded, ${c.differences.length} differ:`];
  for (const d of c.differences)
    lines.push(`  ${d.name}: baseline ${d.baseline ?? '—'}, restored ${d.restored ?? '—'} (${d.why})`);
  return lines.join('\n');
}

/** `PATH=<env>/bin:$PATH VIRTUAL_ENV=<env> sh -c CMD`: a command run in a venv as if it were activated. */
export function inVenvCommand(envDir: string, command: string): string {
  return `VIRTUAL_ENV=${shellQuote(envDir)} PATH=${shellQuote(`${envDir}/bin`)}:"$PATH" sh -c ${shellQuote(command)}`;
}

/** `restored: 284K tok/s vs 285K at baseline, 190K now` — the figure the user reads first. */
export function restoredSpeedLine(s: { restored?: number; baseline?: number; now?: number }, unit = 'per s'): string {
  const f = (x: number) =>
    x >= 1e6
      ? `${(x / 1e6).toFixed(2)}M`
      : x >= 1e4
        ? `${Math.round(x / 1e3)}K`
        : x >= 100
          ? x.toFixed(0)
          : x.toPrecision(3);
  const parts = [`restored: ${s.restored === undefined ? '—' : f(s.restored)} ${unit}`];
  const rest: string[] = [];
  if (s.baseline !== undefined) rest.push(`${f(s.baseline)} at baseline`);
  if (s.now !== undefined) rest.push(`${f(s.now)} now`);
  return rest.length ? `${parts[0]} vs ${rest.join(', ')}` : parts[0]!;
}

/** What an earlier restore left in an env folder: whether it is there, its venv, the packages it could not install. */
export interface EarlierEnv {
  exists: boolean;
  venv: boolean;
  failed: string[];
}

/** The env folder of `plan` as an earlier restore left it (three reads on the host; nothing runs from it). */
export async function earlierEnv(transport: Transport, plan: RestorePlan, signal?: AbortSignal): Promise<EarlierEnv> {
  const o = { timeoutMs: 30_000, ...(signal ? { signal } : {}) };
  const [dir, venv, failed] = await Promise.all([
    transport.exec(['test', '-e', plan.envDir], o),
    transport.exec(['test', '-x', `${plan.envDir}/bin/python`], o),
    transport.exec(['head', '-c', '65536', '--', `${plan.envDir}/${FAILED_PINS_FILE}`], o),
  ]);
  return {
    exists: dir.exitCode === 0,
    venv: venv.exitCode === 0,
    failed: failed.exitCode === 0 ? failedPinsOf(failed.stdout) : [],
  };
}

/** `2 pinned packages could not be installed: kg-echo==1.0, kg-golf==1.0` (the first ten named). */
export function failedPinsText(failed: readonly string[]): string {
  const shown = failed.slice(0, 10).join(', ');
  return (
    `${failed.length} pinned package${failed.length === 1 ? '' : 's'} could not be installed: ${shown}` +
    (failed.length > 10 ? ` and ${failed.length - 10} more` : '')
  );
}
