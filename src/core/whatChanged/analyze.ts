import { computeDrift } from '../baselines/drift';
import { formatRate } from '../bench/compare';
import type { ReducedSeries } from '../metrics/metricsProbe';
import { restartsFromTimes, type Restart } from '../metrics/restarts';
import { pointTimes } from '../metrics/speedFromTime';
import {
  argCategory,
  CATEGORY_WEIGHT,
  isBookkeepingArg,
  envCategory,
  packageCategory,
  throughputRank,
} from './categories';
import { findChangepoints, medianOf, type Changepoint } from './changepoints';
import type { LaunchRecord, LaunchRecords } from './factsProbe';
import type { WhatChangedFacts } from './facts';
import type {
  ChangeTime,
  CosmeticChange,
  EvidenceLink,
  ReferencePoint,
  Suspect,
  SuspectCategory,
  ThroughputSummary,
  UnknownFact,
  WhatChangedReport,
} from './model';
import { isoOf, link, type Draft } from './causes/draft';
import { argsDrafts, changedDataPaths } from './causes/args';
import { gitDrafts } from './causes/code';
import { envDrafts } from './causes/environment';
import { dataDrafts } from './causes/data';
import { pickBaseline, pickReference } from './reference';
import {
  benchOf,
  CHANGEPOINT_WHY,
  DROP_RATIO,
  launchesOf,
  logSeriesOf,
  mainChangepoint,
  seriesChangepoints,
  slowdownOf,
  speedRatioOf,
} from './throughput';
import { formatLevel, formatRatio, scoreOf, windowOf } from './scoring';

// ------------------------------------------------------------------------------------------------ analysis

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
function launchDrafts(facts: WhatChangedFacts, launches: LaunchRecords | undefined, argsDr: readonly Draft[]): Draft[] {
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
function runningOf(r: LaunchRecord): { pid: number | null; command: string; libs: string[]; started: number | null } {
  return {
    pid: r.pid ?? null,
    command: r.argv.join(' ').slice(0, 400),
    libs: Object.entries(r.libs).map(([k, v]) => `${k} ${v}`),
    started: r.time,
  };
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
    const push = (category: SuspectCategory | 'cosmetic', title: string, detail: string, cosmeticWhy?: string) =>
      out.push({
        source: 'launch',
        category,
        title: `${title}${at}`,
        detail,
        when,
        evidence,
        ...(cosmeticWhy ? { cosmeticWhy } : {}),
      });
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
        push('cosmetic', title, detail, 'resume bookkeeping: where a launch starts, ends, resumes from and writes');
      else {
        const cat = argCategory(key, va, vb);
        push(
          cat === 'other' ? 'launch' : cat,
          title,
          detail,
          cat === 'cosmetic' ? 'names, places or times of the run itself' : undefined,
        );
      }
    }
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
      push(
        cat,
        title,
        `the environment launch ${i + 1} started with, against launch ${i}'s`,
        cat === 'cosmetic' ? 'a variable that does not change speed' : undefined,
      );
    }
    const pairs: [string, string | null, string | null, SuspectCategory][] = [
      ['interpreter', a.interpreter, b.interpreter, 'python'],
      ['python', a.python?.split(' ')[0] ?? null, b.python?.split(' ')[0] ?? null, 'python'],
      ['torch', a.torch, b.torch, 'torch-build'],
      ['driver', a.driver, b.driver, 'driver'],
    ];
    for (const [name, va, vb, cat] of pairs)
      if (va !== vb && va !== null && vb !== null)
        push(cat, `launch: ${name} ${va} → ${vb}`, `launch ${i} ran ${name} ${va}, launch ${i + 1} ${vb}`);
    let pk = 0;
    for (const k of [...new Set([...Object.keys(a.packages), ...Object.keys(b.packages)])].sort()) {
      if (a.packages[k] === b.packages[k] || pk++ >= 10) continue;
      push(
        packageCategory(k),
        `launch: package ${k} ${a.packages[k] ?? '(absent)'} → ${b.packages[k] ?? '(absent)'}`,
        `installed when launch ${i + 1} started`,
      );
    }
    // what ran, not what is installed: the CUDA libraries the live process mapped (python/live_process.py), by
    // library (libcudnn.so.9.1.0 and libcudnn.so.9.8.0 are one library at two versions)
    const la = loadedLibraries(a.libs);
    const lb = loadedLibraries(b.libs);
    for (const k of [...new Set([...Object.keys(la), ...Object.keys(lb)])].sort())
      if (la[k] !== lb[k] && Object.keys(la).length && Object.keys(lb).length)
        push(
          'torch-build',
          `loaded ${k} ${la[k] ?? '(not loaded)'} → ${lb[k] ?? '(not loaded)'}`,
          `the shared libraries process ${a.pid ?? '?'} and process ${b.pid ?? '?'} mapped (/proc/PID/maps)`,
        );
    if (a.gitHead === b.gitHead && a.gitDiff !== b.gitDiff)
      push(
        'code',
        'launch: uncommitted changes differ',
        `the uncommitted diff of the script's checkout (sha256 ${a.gitDiff ?? 'none'} → ${b.gitDiff ?? 'none'})`,
      );
  }
  return out;
}

/** The report, from the facts: pure, no I/O. */
export function analyze(facts: WhatChangedFacts, generatedAt = new Date()): WhatChangedReport {
  const unknown: UnknownFact[] = [...facts.unknown];
  const logSeries = logSeriesOf(facts.log);
  const series = seriesChangepoints(logSeries, launchesOf(facts.log));
  const main = mainChangepoint(series);
  const ref0 = pickReference(facts, main);
  const base = pickBaseline(facts, ref0.time);
  const reference: ReferencePoint = {
    ...ref0,
    baseline: base
      ? { id: base.baseline.id, label: base.baseline.label, capturedAt: base.baseline.capturedAt, why: base.why }
      : null,
  };
  const cks = facts.checkpoints;
  const refCk = ref0.checkpoint ? cks.find((c) => c.label === ref0.checkpoint!.label) : undefined;
  const nowCk = cks[cks.length - 1];
  const tpSeries = logSeries.find((s) => s.key === main?.key);
  const win = main ? windowOf(main.cp, cks, tpSeries) : undefined;

  // throughput
  const tp = series.find((s) => s.throughput);
  let logTp: ThroughputSummary['log'] = null;
  if (tp && facts.log) {
    const raw = logSeries.find((s) => s.key === tp.key)!;
    const rawTimes = pointTimes(raw, logSeries);
    const levelAt = (step: number): number => {
      const cps = tp.changepoints;
      const idx = cps.findIndex((c) => step <= c.at);
      if (idx >= 0) return cps[idx]!.before;
      if (cps.length) return cps[cps.length - 1]!.after;
      return (
        findChangepoints(raw.x, raw.last, {
          launches: restartsFromTimes(raw.x, raw.t).map((r) => r.step),
          ...(rawTimes ? { times: rawTimes } : {}),
        }).lastLevel ?? NaN
      );
    };
    const refStep = refCk?.step ?? (main ? main.cp.at : raw.x[0]!);
    const reference = levelAt(refStep);
    const nowLevel = levelAt(Infinity);
    logTp = { key: tp.key, reference, now: nowLevel, ratio: reference ? nowLevel / reference : null };
    // A restarted run: is it slower in its latest launch than in the one before (their medians, warm-up left out),
    // or did it slow down inside its latest launch? A shift inside an earlier launch that the latest kept is the level
    // the run settled at, not a change to explain (the real steady loop ran 18% faster for its first 200 steps).
    const launches = [...new Set([...launchesOf(facts.log), ...restartsFromTimes(raw.x, raw.t).map((r) => r.step)])]
      .filter((l) => l > raw.x[0]!)
      .sort((a, b) => a - b);
    const latest = launches[launches.length - 1];
    if (latest !== undefined) {
      const prevStart = launches.length > 1 ? launches[launches.length - 2]! : -Infinity;
      const launchLevel = (lo: number, hi: number) =>
        medianOf(raw.last.filter((v, i) => raw.x[i]! >= lo && raw.x[i]! < hi && Number.isFinite(v)).slice(2));
      const inLatest = tp.changepoints.filter((c) => c.at >= latest && slowdownOf(tp.key, c) > 1 / DROP_RATIO);
      const prev = launchLevel(prevStart, latest);
      const last = launchLevel(latest, Infinity);
      if (!inLatest.length && Number.isFinite(prev) && Number.isFinite(last))
        logTp = { key: tp.key, reference: prev, now: last, ratio: prev ? last / prev : null, byLaunch: true };
    }
  }
  if (!facts.log && facts.run !== null && !unknown.some((u) => u.fact.startsWith('metrics log')))
    unknown.push({ fact: 'metrics log', why: `no train log found in ${facts.run}` });
  const bench = benchOf(facts, ref0.time);
  // A regression is a slowdown: throughput down, or step time up, by DROP_RATIO at least; a rise or a shift of the
  // loss is no regression to explain.
  const dropped =
    (logTp !== null && speedRatioOf(logTp) < DROP_RATIO) || (bench?.ratio != null && bench.ratio < DROP_RATIO);
  const verdict: WhatChangedReport['verdict'] = dropped
    ? 'regression'
    : logTp === null && bench?.ratio == null && !series.length
      ? 'unknown'
      : 'steady';

  // facts that differ
  const fingerprints = new Map((facts.probe?.paths ?? []).map((p) => [p.path, p]));
  const drafts: Draft[] = [];
  const argsDr = argsDrafts(facts, refCk, nowCk, main, fingerprints, unknown);
  drafts.push(...argsDr);
  if (facts.env.now && base) {
    const drift = computeDrift(base.baseline.snapshot, facts.env.now);
    drafts.push(...envDrafts(facts, base, drift, unknown));
    for (const e of drift.errors)
      unknown.push({ fact: `environment: ${e.part} (${e.side})`, why: e.message ?? 'failed' });
  } else if (!base) {
    unknown.push({
      fact: 'environment at the reference',
      why: 'no baseline saved for this host: capture one (Known Good: Capture Environment Baseline, or known-good env HOST --save LABEL)',
    });
  }
  drafts.push(...gitDrafts(facts, ref0.time, unknown));
  const launches = facts.probe?.launches?.[0];
  drafts.push(...launchDrafts(facts, launches, argsDr));
  if (launches && !launches.exists && (facts.log?.restarts?.length ?? 0) > 0)
    unknown.push({
      fact: 'command line and process environment of each launch',
      why: `not recorded for this run: launch it through kg_record.py (python3 kg_record.py --run ${facts.run ?? 'RUN'} -- CMD …) to see them next time`,
    });
  drafts.push(...dataDrafts(facts, ref0.time, changedDataPaths(facts, refCk, nowCk), unknown));

  const evidencePlot: EvidenceLink[] =
    main && facts.log
      ? [
          {
            kind: 'plot',
            title: `${main.key} zoomed at step ${main.cp.at}`,
            hostId: facts.host.id,
            log: facts.log.path,
            series: main.key,
            window: zoom(main.cp, tpSeries),
            marks: [main.cp.at],
          },
        ]
      : [];
  const benchLink: EvidenceLink[] =
    bench?.reference && bench.now
      ? [
          {
            kind: 'bench-compare',
            title: 'benchmark now vs reference',
            hostId: facts.host.id,
            referenceId: bench.reference.id,
            nowId: bench.now.id,
          },
        ]
      : [];

  const suspects: Suspect[] = [];
  const unranked: (CosmeticChange | Suspect)[] = [];
  let n = 0;
  for (const d of drafts) {
    if (d.category === 'cosmetic') {
      unranked.push({ source: d.source, title: d.title, why: d.cosmeticWhy ?? 'cosmetic' });
      continue;
    }
    const s = scoreOf(d, main, win);
    const evidence = [...d.evidence];
    if (s.coincides) evidence.push(...evidencePlot);
    if (d.category === 'torch-build' || d.category === 'driver' || d.category === 'hardware')
      evidence.push(...benchLink);
    const suspect: Suspect = {
      id: `s${++n}`,
      source: d.source,
      category: d.category,
      title: d.title,
      detail: d.detail,
      when: d.when,
      evidence,
      ...s,
    };
    if (verdict === 'regression') suspects.push(suspect);
    else unranked.push(suspect);
  }
  suspects.sort(
    (a, b) =>
      Number(a.ruledOut) - Number(b.ruledOut) ||
      b.score - a.score ||
      CATEGORY_WEIGHT[b.category] - CATEGORY_WEIGHT[a.category] ||
      a.id.localeCompare(b.id),
  );

  const throughput: ThroughputSummary = { log: logTp, bench, dropped };
  // what is known to have changed at each restart: the args whose change lies between the checkpoints around it
  const restarts = (facts.log?.restarts ?? []).map((r) => {
    const changed = [...suspects, ...unranked]
      .filter((u): u is Suspect => 'when' in u && u.when.steps !== undefined)
      .filter((u) => u.when.steps!.from < r.step && u.when.steps!.to >= (r.prevStep ?? r.step))
      .map((u) => u.title);
    return {
      step: r.step,
      time: r.time,
      gapSeconds: r.gapSeconds,
      signals: r.signals,
      ...(r.source !== undefined ? { source: r.source } : {}),
      changed,
    };
  });
  const report: WhatChangedReport = {
    schema: 1,
    headline: '',
    verdict,
    host: facts.host,
    run: facts.run,
    generatedAt: generatedAt.toISOString(),
    reference,
    now: {
      checkpoint: nowCk ? link(nowCk) : null,
      time: facts.remoteNow,
      envCapturedAt: facts.env.now?.capturedAt ?? null,
      log: facts.log?.path ?? null,
    },
    throughput,
    changepoints: { method: 'binary-segmentation', why: CHANGEPOINT_WHY, series },
    ...(restarts.length ? { restarts } : {}),
    ...(facts.log?.sources && facts.log.sources.length > 1 ? { logSources: facts.log.sources } : {}),
    ...(launches
      ? {
          launches: {
            recorded: launches.exists,
            path: launches.path,
            records: launches.records.length,
            ...(launches.live?.records.length ? { running: launches.live.records.map(runningOf) } : {}),
          },
        }
      : {}),
    suspects,
    unranked,
    unknown,
    gathered: {
      ...facts.gathered,
      checkpointsRead: facts.args.filter((a) => a.args !== null).length,
      checkpoints: cks.length,
    },
  };
  report.headline = headline(report, main);
  return report;
}

function zoom(cp: Changepoint, s: ReducedSeries | undefined): { from: number; to: number } {
  const lo = s?.x[0] ?? cp.segmentBefore[0];
  const hi = s?.x[s.x.length - 1] ?? cp.segmentAfter[1];
  const span = Math.max((hi - lo) * 0.1, cp.firstAfter - cp.at);
  return { from: Math.max(lo, Math.floor(cp.at - span)), to: Math.min(hi, Math.ceil(cp.firstAfter + span)) };
}

/** The restart the slowdown came with: the changepoint's launch, or the latest one when launches were compared. */
function restartOfDrop(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined) {
  const rs = report.restarts ?? [];
  if (main?.cp.launch !== undefined) return rs.find((r) => r.step === main.cp.launch) ?? rs[rs.length - 1];
  return report.throughput.log?.byLaunch ? rs[rs.length - 1] : undefined;
}

/**
 * A slowdown at a restart where nothing recorded differs: said so, with what was not recorded, rather than a suspect
 * of another time promoted to first.
 */
function honestTail(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string | null {
  const r = restartOfDrop(report, main);
  if (!r) return null;
  const atRestart = report.suspects.some(
    (s) => !s.ruledOut && (s.coincides || (s.when.steps && s.when.steps.from < r.step && s.when.steps.to >= r.step)),
  );
  if (atRestart) return null;
  const l = report.launches;
  const missing =
    l && !l.recorded
      ? '; not recorded for this run: command line, process environment (record launches to see it next time)'
      : l && l.recorded
        ? '; its launch records show no difference either'
        : '';
  return `; nothing recorded at the restart at step ${r.step} differs${missing}`;
}

function suspectTail(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const honest = honestTail(report, main);
  if (honest !== null) return honest;
  const top = report.suspects[0];
  if (!top) return '; no recorded change explains it (see what could not be gathered)';
  if (top.ruledOut) {
    const n = report.suspects.length;
    return `; no recorded change at the shift explains it (${n} changed at other times, listed)`;
  }
  const src = top.source;
  if (top.coincides && main) return `; changed at step ${main.cp.at}: ${top.title} (${src}, ${top.when.text})`;
  return `; first suspect: ${top.title} (${src}, ${top.when.text})`;
}

export function headline(report: WhatChangedReport, main: { key: string; cp: Changepoint } | undefined): string {
  const t = report.throughput;
  const ref = report.reference.label;
  if (report.verdict === 'unknown') {
    const n = report.unranked.length;
    const why = report.unknown.find((u) => /metrics log|listing/.test(u.fact));
    return `Cannot tell whether throughput dropped: no metrics log${why ? ` (${why.why})` : ''} and no benchmark pair${n ? `; ${n} difference${n === 1 ? '' : 's'} since ${ref} listed, not ranked` : ''}`;
  }
  if (report.verdict === 'steady') {
    const n = report.unranked.length;
    const file = report.now.log?.split('/').pop();
    const shifts = report.changepoints.series.some((s) => s.changepoints.length);
    const what = !file ? 'no metrics log' : shifts ? `no slowdown in ${file}` : `no changepoint in ${file}`;
    const shift =
      main && t.log && main.key === t.log.key && main.cp.ratio !== null
        ? `${main.key} ${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)} at step ${main.cp.at}`
        : undefined;
    const rise = !shift
      ? ''
      : slowdownOf(main!.key, main!.cp) > 0 && t.log?.byLaunch
        ? ` (${shift}, inside an earlier launch; the latest launch runs at ${formatLevel(t.log.now)}, ${formatRatio(t.log.ratio ?? 1)}× the one before)`
        : ` (${shift}, not slower)`;
    const listed = n ? `; ${n} difference${n === 1 ? '' : 's'} since ${ref} listed, not ranked` : '';
    // say what the "no drop" rests on: a log without tok/s and no benchmark pair cannot show one
    const drop =
      t.log || t.bench?.ratio != null
        ? 'No throughput drop'
        : 'No throughput measured (no tok/s series, no benchmark pair)';
    return `${drop}${rise} and ${what}: nothing to explain${listed}`;
  }
  if (t.log && t.log.ratio !== null && speedRatioOf(t.log) < DROP_RATIO) {
    const tok = throughputRank(t.log.key) === 3;
    const unit = tok ? ' tok/s' : ` ${t.log.key}`;
    const f = tok ? formatRate : formatLevel;
    return `${f(t.log.now)}${unit} now vs ${f(t.log.reference)} at ${ref} (${formatRatio(t.log.ratio)}×)${suspectTail(report, main)}`;
  }
  if (t.bench?.reference && t.bench.now && t.bench.ratio !== null) {
    return `benchmark ${formatRate(t.bench.now.tokensPerSec)} tok/s now vs ${formatRate(t.bench.reference.tokensPerSec)} at ${t.bench.reference.at} (${formatRatio(t.bench.ratio)}×)${suspectTail(report, main)}`;
  }
  if (main) {
    const r = main.cp.ratio !== null ? ` (${formatRatio(main.cp.ratio)}×)` : '';
    return `${main.key} ${formatLevel(main.cp.before)} → ${formatLevel(main.cp.after)} at step ${main.cp.at}${r}${suspectTail(report, main)}`;
  }
  return `A change to explain${suspectTail(report, main)}`;
}
