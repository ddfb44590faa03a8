import { baselineTitle } from '../baselines/documents';
import type { Baseline } from '../baselines/store';
import { bisect, type BisectChange, type BisectEvent, type BisectReport } from '../bisect/engine';
import { bisectHeadline, renderBisectMarkdown } from '../bisect/render';
import { redactText } from '../redact';
import { KnownGoodError } from '../errors';
import { shellJoin, shellQuote } from '../quote';
import type { Transport } from '../transport/types';
import { actionFailure, runAction, type ActionResult } from '../actions/runner';
import { envLabelOf, type PackageSource } from './plan';
import { checkPackageName, checkVersion, requirementLine, shownValue } from './validate';
import { throughputFromOutput, type CustomBenchmark } from '../bench/customBenchmark';
import { inVenvCommand, parseFreeze, planOnHost, type RestoreHost } from './run';
import { isTorchFamily, packageUnits } from './units';

/*
 * The package bisect (issue 26): the packages that differ between the known-good env (a restored one) and the
 * current one, bisected with the engine on a benchmark. Every state is one working venv switched in place: its
 * packages start as the good env's, and a state applies the bad env's versions of some units (the torch family and
 * `==`-pinned sets move as one). Every wheel either side needs is downloaded once into a wheelhouse, and every
 * switch installs from there alone (`--no-index`): nothing is downloaded twice, and a state is the two envs' own
 * versions, never a resolver's third choice.
 */

export interface PackageBisectOptions {
  /** The known-good env's interpreter (a restored env's bin/python). */
  goodPython: string;
  /** The current env's interpreter. */
  badPython: string;
  /** The interpreter the working venv is made from (the good env's base Python). */
  basePython: string;
  /** Absolute folder on the host for the working venv (`env/`) and the wheelhouse (`wheels/`). */
  workDir: string;
  /** The benchmark, run in the working venv as if activated; its speed read from its output by `regex`. */
  bench: CustomBenchmark;
  /** Where the wheels come from, in pip's terms (the restore plan's sources; several are merged). */
  sources: readonly PackageSource[];
  /** name → names it pins with `==` (from both snapshots): moved together. */
  pins?: Readonly<Record<string, readonly string[]>>;
  repeats?: number;
  threshold?: number;
  /** Each benchmark run's limit (default an hour; TERM, then KILL after the guard's grace). */
  runTimeoutMs?: number;
  signal?: AbortSignal;
  onEvent?: (e: BisectEvent, changes: readonly PackageChange[]) => void;
  /** Installer output and each benchmark's speed, for the terminal. */
  onLine?: (line: string) => void;
}

export interface PackageChange extends BisectChange {
  /** name → [good version, bad version]; null where the env lacks it. */
  readonly packages: Readonly<Record<string, readonly [string | null, string | null]>>;
}

export interface PackageBisectResult {
  changes: PackageChange[];
  report: BisectReport;
  /** Packages left out: installed from a URL or a folder, not a wheel either env can be rebuilt from. */
  skipped: string[];
  /** Names or versions that are not what pip freeze writes (checked as the restore plan checks them): not used. */
  refused: RefusedPackage[];
  wheelhouse: string;
  /** Wheel switches made (each a pip call with `--no-index`). */
  switches: number;
}

/** What of `pip freeze` is read: a few thousand packages' lines. */
const FREEZE_BYTES = 4 * 1024 * 1024;
/** A step's limit (a pip download of a torch family is the longest). */
const STEP_TIMEOUT_MS = 3_600_000;

/** One step on the host under the guard (bounded, owned, output capped: core/actions/runner.ts); throws unless 0. */
async function run(
  transport: Transport,
  python: string,
  argv: readonly string[],
  what: string,
  signal?: AbortSignal,
  keepBytes?: number,
): Promise<ActionResult> {
  const r = await runAction(
    transport,
    { argv, timeoutMs: STEP_TIMEOUT_MS, ...(keepBytes ? { capBytes: keepBytes, tailBytes: keepBytes } : {}) },
    { python, ...(signal ? { signal } : {}) },
  );
  const failed = actionFailure(r, what, transport.label);
  if (failed) throw failed;
  return r;
}

function sourceWords(sources: readonly PackageSource[]): string[] {
  const words: string[] = [];
  const indexes = [...new Set(sources.flatMap((s) => (s.noIndex ? [] : [s.indexUrl, ...s.extraIndexUrls])))].filter(
    (u): u is string => u !== null,
  );
  if (sources.every((s) => s.noIndex)) words.push('--no-index');
  else if (indexes[0])
    words.push('--index-url', indexes[0], ...indexes.slice(1).flatMap((u) => ['--extra-index-url', u]));
  for (const f of new Set(sources.flatMap((s) => s.findLinks))) words.push('--find-links', f);
  return words;
}

/** The differing packages as the engine's changes: one per unit. */
export function packageChanges(
  good: ReadonlyMap<string, string>,
  bad: ReadonlyMap<string, string>,
  pins: Readonly<Record<string, readonly string[]>> = {},
): { changes: PackageChange[]; skipped: string[]; refused: RefusedPackage[] } {
  const names = [...new Set([...good.keys(), ...bad.keys()])].filter((n) => good.get(n) !== bad.get(n));
  const skipped = names.filter((n) => good.get(n)?.startsWith('@') || bad.get(n)?.startsWith('@'));
  // What pip freeze printed reaches pip only as a checked `name==version` (a name such as `--index-url=…` is refused)
  const refused: RefusedPackage[] = [];
  const refusedNames = new Set<string>();
  for (const n of names) {
    if (skipped.includes(n)) continue;
    const why =
      checkPackageName(n) ??
      [good.get(n), bad.get(n)].map((v) => (v === undefined ? null : checkVersion(v))).find((x) => x !== null);
    if (!why) continue;
    refused.push({ name: shownValue(n), why: `${why}: refused` });
    refusedNames.add(n);
  }
  const usable = names.filter((n) => !skipped.includes(n) && !refusedNames.has(n));
  const changes = packageUnits(usable, pins).map((unit): PackageChange => {
    const packages = Object.fromEntries(unit.map((n) => [n, [good.get(n) ?? null, bad.get(n) ?? null] as const]));
    const text = unit.map((n) => `${n} ${good.get(n) ?? '(none)'} → ${bad.get(n) ?? '(none)'}`).join(', ');
    const torch = unit.some(isTorchFamily) && unit.length > 1;
    return {
      id: unit.join('+'),
      label: torch ? `torch family (${unit.length} packages)` : text,
      ...(torch ? { detail: text } : {}),
      packages,
    };
  });
  return { changes, skipped, refused };
}

export interface RefusedPackage {
  /** As shown (control characters escaped). */
  name: string;
  why: string;
}

export async function packageBisect(transport: Transport, o: PackageBisectOptions): Promise<PackageBisectResult> {
  const say = o.onLine ?? (() => undefined);
  // The package bisect reads the command's own output; a jsonl file the command writes is the env bisect's reader.
  const regex = o.bench.regex;
  if (regex === undefined)
    throw new KnownGoodError('settings', 'the package bisect reads the speed from the output: give --regex RE');
  const freeze = async (py: string) =>
    parseFreeze(
      (
        await run(
          transport,
          o.basePython,
          [py, '-m', 'pip', 'freeze', '--all', '--disable-pip-version-check'],
          `pip freeze of ${py}`,
          o.signal,
          FREEZE_BYTES,
        )
      ).stdout,
    );
  const good = await freeze(o.goodPython);
  const bad = await freeze(o.badPython);
  const { changes, skipped, refused } = packageChanges(good, bad, o.pins);
  if (changes.length === 0) throw new KnownGoodError('usage', 'the two envs hold the same packages: nothing to bisect');
  say(`${changes.length} package change(s) between ${o.goodPython} and ${o.badPython}`);
  for (const s of skipped) say(`  left out (installed from a URL, not a wheel): ${s}`);
  for (const r of refused) say(`  left out: ${r.name} ${r.why}`);

  const wheels = `${o.workDir}/wheels`;
  const env = `${o.workDir}/env`;
  const envPy = `${env}/bin/python`;
  // Each wheel once: pip download skips a file the folder already holds.
  const goodPins = [...good]
    .filter(([, v]) => !v.startsWith('@'))
    .map(([n, v]) => requirementLine(n, v))
    .filter((l): l is string => l !== null);
  const badPins = changes.flatMap((c) =>
    Object.entries(c.packages)
      .filter(([, [, b]]) => b !== null)
      .map(([n, [, b]]) => `${n}==${b!}`),
  );
  await run(transport, o.basePython, ['mkdir', '-p', '--', wheels], 'making the wheelhouse', o.signal);
  say(`downloading ${goodPins.length + badPins.length} wheels into ${wheels} (each once)`);
  // One download per side: a resolver refuses two versions of one name in a single call.
  for (const pins of [goodPins, badPins])
    await run(
      transport,
      o.basePython,
      [
        o.goodPython,
        '-m',
        'pip',
        'download',
        '--disable-pip-version-check',
        '--no-deps',
        '-d',
        wheels,
        ...sourceWords(o.sources),
        ...pins,
      ],
      'pip download',
      o.signal,
    );
  await run(transport, o.basePython, ['rm', '-rf', '--', env], 'clearing the working env', o.signal);
  await run(transport, o.basePython, [o.basePython, '-m', 'venv', env], 'making the working env', o.signal);
  const fromWheels = [
    envPy,
    '-m',
    'pip',
    'install',
    '--disable-pip-version-check',
    '--no-deps',
    '--no-index',
    '--find-links',
    wheels,
  ];
  await run(
    transport,
    o.basePython,
    [...fromWheels, ...goodPins],
    'installing the good env into the working env',
    o.signal,
  );

  // What the working env holds now, for the changed names only: a switch touches only what differs.
  const current = new Map<string, string | null>(
    changes.flatMap((c) => Object.entries(c.packages).map(([n, [g]]) => [n, g])),
  );
  let switches = 0;
  const measure = async (applied: ReadonlySet<string>, signal?: AbortSignal): Promise<number> => {
    const remove: string[] = [];
    const install: string[] = [];
    for (const c of changes)
      for (const [n, [g, b]] of Object.entries(c.packages)) {
        const want = applied.has(c.id) ? b : g;
        if (current.get(n) === want) continue;
        if (want === null) remove.push(n);
        else install.push(`${n}==${want}`);
        current.set(n, want);
      }
    if (remove.length || install.length) {
      switches++;
      const steps = [
        ...(remove.length
          ? [shellJoin([envPy, '-m', 'pip', 'uninstall', '-y', '--disable-pip-version-check', ...remove])]
          : []),
        ...(install.length ? [shellJoin([...fromWheels, ...install])] : []),
      ];
      await run(
        transport,
        o.basePython,
        ['sh', '-c', steps.join(' && ')],
        `switching the working env (${[...remove, ...install].join(' ')})`,
        signal,
      );
    }
    const r = await runAction(
      transport,
      { argv: ['sh', '-c', inVenvCommand(env, o.bench.command)], timeoutMs: o.runTimeoutMs ?? STEP_TIMEOUT_MS },
      { python: o.basePython, ...(signal ? { signal } : {}) },
    );
    const stopped = r.ended === 'exited' ? undefined : actionFailure(r, 'the benchmark', transport.label);
    if (stopped) throw stopped;
    const speed = throughputFromOutput(`${r.stdout}\n${r.stderr}`, regex, o.bench.lastN)?.tokensPerSec;
    if (r.exitCode !== 0 || speed === undefined)
      throw new KnownGoodError(
        'probe-failed',
        `the benchmark ${shellQuote(o.bench.command)} ${r.exitCode !== 0 ? `failed (${r.message})` : `printed nothing that ${regex} reads`}: ${(r.stderr || r.stdout).trim().slice(-500)}`,
      );
    say(`  ${applied.size ? [...applied].join(', ') : 'good'}: ${speed}`);
    return speed;
  };
  const report = await bisect(changes, measure, {
    ...(o.repeats !== undefined ? { repeats: o.repeats } : {}),
    ...(o.threshold !== undefined ? { threshold: o.threshold } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.onEvent ? { onEvent: (e: BisectEvent) => o.onEvent!(e, changes) } : {}),
  });
  return { changes, report, skipped, refused, wheelhouse: wheels, switches };
}

export interface BaselinePackageBisect extends PackageBisectResult {
  /** The restored env the good side is. */
  envDir: string;
  headline: string;
  markdown: string;
}

/**
 * The package bisect of a host's interpreter against the env restored from `baseline` (Restore Known Good… or
 * `known-good restore … --run` first): the CLI's `bisect --packages` and the extension's Bisect Packages… both call
 * this. Throws `usage` when no restored env is there.
 */
export async function bisectPackagesOfBaseline(
  host: RestoreHost & { spec: { python: string } },
  baseline: Baseline,
  o: Omit<PackageBisectOptions, 'goodPython' | 'badPython' | 'basePython' | 'workDir' | 'sources' | 'pins'> & {
    /** How the user restores it, for the message when no restored env is there. */
    restoreHint: string;
  },
): Promise<BaselinePackageBisect> {
  const plan = await planOnHost(host, baseline.snapshot, { label: envLabelOf(baseline.label) }, o.signal);
  const good = `${plan.envDir}/bin/python`;
  const there = await host.transport.exec(['test', '-x', good], {
    timeoutMs: 30_000,
    ...(o.signal ? { signal: o.signal } : {}),
  });
  if (there.exitCode !== 0)
    throw new KnownGoodError('usage', `no restored env at ${plan.envDir}: restore it first (${o.restoreHint})`);
  const r = await packageBisect(host.transport, {
    ...o,
    goodPython: good,
    badPython: host.spec.python,
    basePython: plan.python.command,
    workDir: `${plan.envDir}-bisect`,
    sources: [...new Map(plan.units.map((u) => [JSON.stringify(u.source), u.source])).values()],
    pins: baseline.snapshot.packages.pins,
  });
  const subject = `packages of ${host.label} vs ${baselineTitle(baseline)}`;
  const md = renderBisectMarkdown(r.report, { subject });
  const head = [
    `Good: the restored env ${plan.envDir}. Bad: ${host.spec.python}. Benchmark: ${redactText(o.bench.command)} ` +
      `(speed from regex ${o.bench.regex ?? '—'}). ${r.switches} env switches from the wheelhouse ${r.wheelhouse}.`,
    ...(r.skipped.length
      ? ['', 'Left out (installed from a URL, not a wheel):', ...r.skipped.map((s) => `- ${s}`)]
      : []),
    ...(r.refused.length ? ['', 'Refused:', ...r.refused.map((x) => `- ${x.name} ${x.why}`)] : []),
    '',
  ];
  const lines = md.split('\n');
  return {
    ...r,
    envDir: plan.envDir,
    headline: bisectHeadline(r.report),
    markdown: [...lines.slice(0, 4), ...head, ...lines.slice(4)].join('\n'),
  };
}
