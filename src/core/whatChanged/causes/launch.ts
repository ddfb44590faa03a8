import type { Restart } from '../../metrics/restarts';
import { argCategory, envCategory, inertArgWhy, isBookkeepingArg, packageCategory } from '../categories';
import type { WhatChangedFacts } from '../facts';
import type { LaunchRecord, LaunchRecords } from '../factsProbe';
import type { ChangeTime, EvidenceLink, SuspectCategory, WhatChangedReport } from '../model';
import { isoOf, type Draft } from './draft';

/*
 * Cause: the launches. What each launch of the run started with, as recorded (python/kg_record.py, other tools' own
 * records) and as the live process shows it (/proc): command line, process environment, interpreter, torch, driver,
 * packages, loaded libraries and uncommitted code, compared around each restart.
 */

/** `--key value`, `--key=value` and bare `--flag` of a command line; the program and positionals left out. */
export function flagsOf(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!/^--?[A-Za-z]/.test(a)) continue;
    const eq = a.indexOf('=');
    if (eq > 0) out.set(a.slice(0, eq), a.slice(eq + 1));
    else if (i + 1 < argv.length && !/^--?[A-Za-z]/.test(argv[i + 1]!)) out.set(a, argv[++i]!);
    else out.set(a, 'true');
  }
  return out;
}

/** A launch record as lines to compare side by side: one fact a line, sorted, so a diff shows what differs. */
export function launchText(r: LaunchRecord): string {
  const lines = [
    `# ${r.source} launch${r.time !== null ? ` at ${isoOf(r.time)}` : ''}${r.where ? ` (${r.where})` : ''}`,
  ];
  if (r.argv.length) lines.push('', '## command line', ...r.argv.map((a) => `  ${a}`));
  if (r.cwd) lines.push('', `cwd: ${r.cwd}`);
  const facts: [string, string | null][] = [
    ['interpreter', r.interpreter],
    ['python', r.python],
    ['torch', r.torch],
    ['driver', r.driver],
    ['git HEAD', r.gitHead],
    ['uncommitted diff sha256', r.gitDiff],
  ];
  for (const [k, v] of facts) if (v !== null) lines.push(`${k}: ${v}`);
  const section = (name: string, m: Record<string, string>) => {
    const keys = Object.keys(m).sort();
    if (keys.length) lines.push('', `## ${name}`, ...keys.map((k) => `${k}=${m[k]}`));
  };
  section('config', r.config);
  section('environment', r.env);
  section('packages', r.packages);
  section('loaded libraries', r.libs);
  return lines.join('\n') + '\n';
}

/** Hydra's overrides (`trainer.precision=32`, `+x=1`, `~y`) as flags. */
function overridesOf(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const o of argv) {
    const eq = o.indexOf('=');
    if (eq > 0) out.set(o.slice(0, eq).replace(/^[+~]+/, ''), o.slice(eq + 1));
    else out.set(o.replace(/^[+~]+/, ''), o.startsWith('~') ? '(deleted)' : 'true');
  }
  return out;
}

/** The restart a later launch record begins: by order when they pair one to one, else the first restart after it. */
function restartOf(records: readonly LaunchRecord[], i: number, restarts: readonly Restart[]): Restart | undefined {
  if (restarts.length === records.length - 1) return restarts[i - 1];
  const t = records[i]!.time;
  if (t === null) return undefined;
  const next = records[i + 1]?.time ?? Infinity;
  return restarts.find((r) => r.time !== null && r.time >= t && r.time < next);
}

/**
 * The launch records (python/kg_record.py) around each restart compared: command-line flags, the process
 * environment, interpreter, torch, driver, packages and uncommitted code. Resume bookkeeping is listed, never ranked;
 * a flag the checkpoint's args already show is left to them.
 */
export function launchDrafts(
  facts: WhatChangedFacts,
  launches: LaunchRecords | undefined,
  argsDr: readonly Draft[],
): Draft[] {
  const out: Draft[] = [];
  if (!launches) return out;
  const shown = new Set(argsDr.map((d) => d.title.split(' ')[0]!.replace(/^.*\./, '')));
  if (launches.exists) out.push(...comparedLaunches(facts, launches.records, launches.path, 'kg_record', shown));
  // what other tools recorded, each source on its own; a key kg_record's flags or the args already show is theirs
  for (const d of out)
    shown.add(
      d.title
        .replace(/^launch: -*/, '')
        .split(' ')[0]!
        .replace(/-/g, '_'),
    );
  const sources = [...new Set(launches.others.map((r) => r.source))];
  for (const src of sources) {
    const recs = launches.others.filter((r) => r.source === src);
    out.push(...comparedLaunches(facts, recs, recs[recs.length - 1]?.where ?? launches.path, src, shown));
  }
  // the run's training process as earlier reports saw it running and as it runs now: a new PID is a restart
  const live = liveSequence(facts.liveHistory ?? [], launches.live?.records ?? []);
  out.push(...comparedLaunches(facts, live, live[live.length - 1]?.where ?? '/proc', 'live', shown));
  return out;
}

/** A live process as the report lists it: `PID 1234: python3 train.py --lr 3e-4 (libcudnn.so.9.1.0 9.1.0, …)`. */
function runningOf(r: LaunchRecord): {
  pid: number | null;
  command: string;
  libs: string[];
  started: number | null;
} {
  return {
    pid: r.pid ?? null,
    command: r.argv.join(' ').slice(0, 400),
    libs: Object.entries(r.libs).map(([k, v]) => `${k} ${v}`),
    started: r.time,
  };
}

/** The report's summary of the launch records: where they are, how many, and the training process running now. */
export function launchSummaryOf(launches: LaunchRecords | undefined): Pick<WhatChangedReport, 'launches'> {
  return launches
    ? {
        launches: {
          recorded: launches.exists,
          path: launches.path,
          records: launches.records.length,
          ...(launches.live?.records.length ? { running: launches.live.records.map(runningOf) } : {}),
        },
      }
    : {};
}

/** A process's mapped libraries by library (`libcudnn`), each with its versions (a path when its name says none). */
export function loadedLibraries(libs: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [file, v] of Object.entries(libs).sort(([x], [y]) => x.localeCompare(y))) {
    const lib = file.replace(/\.so(\.\d+)*$/, '');
    out[lib] = out[lib] !== undefined ? `${out[lib]}, ${v}` : v;
  }
  return out;
}

/**
 * The launches the live processes tell, once each (PID and start time), oldest first: the kept ones and the oldest
 * process running now (python/live_process.py lists them oldest first). A process started beside it (a `tail -f` of
 * the log, a shell in the run folder) is no launch, as for the polls' LiveWatch.
 */
export function liveSequence(kept: readonly LaunchRecord[], now: readonly LaunchRecord[]): LaunchRecord[] {
  const out: LaunchRecord[] = [];
  for (const r of [...kept, ...now.slice(0, 1)])
    if (!out.some((o) => o.pid === r.pid && o.time === r.time)) out.push(r);
  return out.sort((a, b) => (a.time ?? 0) - (b.time ?? 0));
}

/** A difference between two launches, before it is dated and given its evidence. */
interface LaunchDiff {
  category: SuspectCategory | 'cosmetic';
  title: string;
  detail: string;
  cosmeticWhy?: string | undefined;
  /** A flag that changes no step's cost (inertArgWhy). */
  inert?: boolean;
}

/** Consecutive launch records of one source compared (see launchDrafts). */
function comparedLaunches(
  facts: WhatChangedFacts,
  recs: readonly LaunchRecord[],
  path: string,
  source: string,
  shown: ReadonlySet<string>,
): Draft[] {
  const out: Draft[] = [];
  if (recs.length < 2) return out;
  const restarts = facts.log?.restarts ?? [];
  const own = source === 'kg_record';
  // a live process has no file to open: /proc/PID is gone once it ends
  const fileLink: EvidenceLink[] =
    source === 'live'
      ? []
      : [
          {
            kind: 'file',
            title: own ? `launch records ${path}` : `${source} records ${path}`,
            hostId: facts.host.id,
            path,
          },
        ];
  for (let i = 1; i < recs.length; i++) {
    const a = recs[i - 1]!;
    const b = recs[i]!;
    const r = restartOf(recs, i, restarts);
    const evidence: EvidenceLink[] = [
      {
        kind: 'text-diff',
        title: `${source} launch ${i} ↔ ${i + 1}`,
        hostId: facts.host.id,
        a: { name: `${source} launch ${i}.txt`, text: launchText(a) },
        b: { name: `${source} launch ${i + 1}.txt`, text: launchText(b) },
      },
      ...fileLink,
    ];
    const at = r ? ` (restart at step ${r.step})` : b.time !== null ? ` (launch of ${isoOf(b.time)})` : '';
    const when: ChangeTime = r
      ? {
          text: `at the restart at step ${r.step} (launch records ${i} → ${i + 1})`,
          steps: { from: r.prevStep ?? r.step - 1, to: r.step },
        }
      : b.time !== null
        ? { text: `launch of ${isoOf(b.time)}`, time: { from: b.time, to: b.time } }
        : { text: `between launch records ${i} and ${i + 1}` };
    const diffs = [
      ...flagDiffs(a, b, i, source, shown),
      ...envDiffs(a, b, i),
      ...versionDiffs(a, b, i),
      ...libraryDiffs(a, b),
      ...codeDiffs(a, b),
    ];
    for (const d of diffs)
      out.push({
        source: 'launch',
        category: d.category,
        title: `${d.title}${at}`,
        detail: d.detail,
        when,
        evidence,
        ...(d.cosmeticWhy ? { cosmeticWhy: d.cosmeticWhy } : {}),
        ...(d.inert ? { inert: true } : {}),
      });
  }
  return out;
}

/** The command-line flags (Hydra's overrides) and the launch config; a key the args already show is theirs. */
function flagDiffs(
  a: LaunchRecord,
  b: LaunchRecord,
  i: number,
  source: string,
  shown: ReadonlySet<string>,
): LaunchDiff[] {
  const out: LaunchDiff[] = [];
  const own = source === 'kg_record';
  // Hydra's overrides are `key=value` without dashes
  const fa = source === 'hydra' ? overridesOf(a.argv) : flagsOf(a.argv);
  const fb = source === 'hydra' ? overridesOf(b.argv) : flagsOf(b.argv);
  for (const [k, v] of Object.entries(a.config)) if (!fa.has(k)) fa.set(`${source}:${k}`, v);
  for (const [k, v] of Object.entries(b.config)) if (!fb.has(k)) fb.set(`${source}:${k}`, v);
  for (const k of [...new Set([...fa.keys(), ...fb.keys()])].sort()) {
    const va = fa.get(k);
    const vb = fb.get(k);
    if (va === vb) continue;
    const name = k.replace(/^\w+:/, '');
    const key = name.replace(/^-+/, '').replace(/-/g, '_').replace(/^.*\./, '');
    if (shown.has(key)) continue;
    const title = `${own ? 'launch' : `${source} ${k.startsWith(source + ':') ? 'config' : 'launch'}`}: ${name} ${va ?? '(absent)'} → ${vb ?? '(absent)'}`;
    const what = k.startsWith(`${source}:`) ? 'the launch config' : 'the command line';
    const detail = `${what} of launch ${i} said ${va === undefined ? 'no ' + name : `${name} ${va}`}, launch ${i + 1} ${vb === undefined ? 'no ' + name : `${name} ${vb}`}`;
    if (isBookkeepingArg(key))
      out.push({
        category: 'cosmetic',
        title,
        detail,
        cosmeticWhy: 'resume bookkeeping: where a launch starts, ends, resumes from and writes',
      });
    else {
      const cat = argCategory(key, va, vb);
      const inert = cat === 'cosmetic' ? inertArgWhy(key, va, vb) : null;
      out.push({
        category: cat === 'other' ? 'launch' : cat,
        title,
        detail,
        cosmeticWhy: cat === 'cosmetic' ? (inert ?? 'names, places or times of the run itself') : undefined,
        ...(inert !== null ? { inert: true } : {}),
      });
    }
  }
  return out;
}

/** The process environment each launch started with. */
function envDiffs(a: LaunchRecord, b: LaunchRecord, i: number): LaunchDiff[] {
  const out: LaunchDiff[] = [];
  for (const k of [...new Set([...Object.keys(a.env), ...Object.keys(b.env)])].sort()) {
    const va = a.env[k];
    const vb = b.env[k];
    if (va === vb) continue;
    const title =
      va === undefined
        ? `process env: ${k}=${vb} added`
        : vb === undefined
          ? `process env: ${k}=${va} removed`
          : `process env: ${k} ${va} → ${vb}`;
    const cat = envCategory(k);
    out.push({
      category: cat,
      title,
      detail: `the environment launch ${i + 1} started with, against launch ${i}'s`,
      cosmeticWhy: cat === 'cosmetic' ? 'a variable that does not change speed' : undefined,
    });
  }
  return out;
}

/** Interpreter, python, torch and driver, then the first ten packages that differ. */
function versionDiffs(a: LaunchRecord, b: LaunchRecord, i: number): LaunchDiff[] {
  const out: LaunchDiff[] = [];
  const pairs: [string, string | null, string | null, SuspectCategory][] = [
    ['interpreter', a.interpreter, b.interpreter, 'python'],
    ['python', a.python?.split(' ')[0] ?? null, b.python?.split(' ')[0] ?? null, 'python'],
    ['torch', a.torch, b.torch, 'torch-build'],
    ['driver', a.driver, b.driver, 'driver'],
  ];
  for (const [name, va, vb, cat] of pairs)
    if (va !== vb && va !== null && vb !== null)
      out.push({
        category: cat,
        title: `launch: ${name} ${va} → ${vb}`,
        detail: `launch ${i} ran ${name} ${va}, launch ${i + 1} ${vb}`,
      });
  let pk = 0;
  for (const k of [...new Set([...Object.keys(a.packages), ...Object.keys(b.packages)])].sort()) {
    if (a.packages[k] === b.packages[k] || pk++ >= 10) continue;
    out.push({
      category: packageCategory(k),
      title: `launch: package ${k} ${a.packages[k] ?? '(absent)'} → ${b.packages[k] ?? '(absent)'}`,
      detail: `installed when launch ${i + 1} started`,
    });
  }
  return out;
}

/**
 * What ran, not what is installed: the CUDA libraries the live process mapped (python/live_process.py), by library
 * (libcudnn.so.9.1.0 and libcudnn.so.9.8.0 are one library at two versions).
 */
function libraryDiffs(a: LaunchRecord, b: LaunchRecord): LaunchDiff[] {
  const out: LaunchDiff[] = [];
  const la = loadedLibraries(a.libs);
  const lb = loadedLibraries(b.libs);
  for (const k of [...new Set([...Object.keys(la), ...Object.keys(lb)])].sort())
    if (la[k] !== lb[k] && Object.keys(la).length && Object.keys(lb).length)
      out.push({
        category: 'torch-build',
        title: `loaded ${k} ${la[k] ?? '(not loaded)'} → ${lb[k] ?? '(not loaded)'}`,
        detail: `the shared libraries process ${a.pid ?? '?'} and process ${b.pid ?? '?'} mapped (/proc/PID/maps)`,
      });
  return out;
}

const UNCOMMITTED_DIFFER = 'launch: uncommitted changes differ';

/** The uncommitted diff of the script's checkout, at the same HEAD. */
function codeDiffs(a: LaunchRecord, b: LaunchRecord): LaunchDiff[] {
  if (a.gitHead === b.gitHead && a.gitDiff !== b.gitDiff)
    return [
      {
        category: 'code',
        title: UNCOMMITTED_DIFFER,
        detail: `the uncommitted diff of the script's checkout (sha256 ${a.gitDiff ?? 'none'} → ${b.gitDiff ?? 'none'})`,
      },
    ];
  return [];
}

/**
 * One suspect per edit: where the code cause compared the uncommitted edits file by file (causes/code.ts), a launch
 * record's "uncommitted changes differ" names the same edits by a hash only. It is folded into them — its launch diff
 * kept as their evidence, the restart it dates said in their detail — instead of ranking beside them.
 */
export function foldUncommittedLaunches(drafts: readonly Draft[]): Draft[] {
  const edits = drafts.filter((d) => d.source === 'code' && d.category !== 'cosmetic' && /uncommitted/.test(d.title));
  const launch = drafts.filter((d) => d.source === 'launch' && d.title.startsWith(UNCOMMITTED_DIFFER));
  if (!edits.length || !launch.length) return [...drafts];
  const said = launch.map((d) => `${d.when.text}, ${d.detail}`).join('; ');
  return drafts
    .filter((d) => !launch.includes(d))
    .map((d) =>
      edits.includes(d)
        ? {
            ...d,
            detail: `${d.detail}; the launch records agree: ${said}`,
            evidence: [...d.evidence, ...launch.flatMap((l) => l.evidence.filter((e) => e.kind === 'text-diff'))],
          }
        : d,
    );
}
