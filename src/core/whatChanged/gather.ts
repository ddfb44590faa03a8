import { posix } from 'node:path';
import { ckptArgsProbe } from '../args/argsProbe';
import { argsPathOf } from '../args/target';
import { envSnapshotProbe, type EnvSnapshot } from '../baselines/envProbe';
import { gpuHealthProbe } from '../hardware/gpuProbe';
import type { Baseline, BaselineStore, ThroughputResult } from '../baselines/store';
import { messageOf } from '../errors';
import { historyReduction, metricsLogsOf, stitchReductions, type HistoryPart } from '../metrics/history';
import { metricsReduceProbe, type MetricsReduction } from '../metrics/metricsProbe';
import type { ProbeCall, ProbeRunnerLike } from '../probes/probe';
import { listRunsProbe, type RunEntry, type RunsListing } from '../runs/listRuns';
import { trainingStep } from '../runs/model';
import { analyze } from './analyze';
import { dataPathsOf } from './causes/args';
import { resumePair } from './causes/restart';
import { resumeFactsProbe } from './resumeFacts';
import { pickReference } from './reference';
import { logShifts, mainChangepoint } from './throughput';
import type { ArgsFact, CheckpointFact, DataRecord, KnownGoodMarks, ResumeSide, WhatChangedFacts } from './facts';
import { whatChangedProbe, type LaunchRecord, type WhatChangedProbeResult } from './factsProbe';
import type { UnknownFact, WhatChangedReport } from './model';
import { restoredEnvProbePath } from '../restore/plan';
import { WhatChangedStore } from './store';

/** How many of the newest baselines What Changed? checks for a restored env (one stat each). */
const RESTORED_CHECKED = 5;

/** What gathering needs of a host: its stable id (baselines are kept by it), a name, and its probe runner. */
export interface WhatChangedHost {
  id: string;
  label: string;
  probes: ProbeRunnerLike;
}

export interface WhatChangedOptions {
  /** Baselines, benchmark results, known-good marks and kept data fingerprints; none: the environment is unknown. */
  store?: BaselineStore;
  /** A baseline id to take as the known-good reference (overrides the marks). */
  baselineId?: string;
  /** Training scripts to hash besides the globs the baselines were captured with. */
  scriptGlobs?: readonly string[];
  extraVariables?: readonly string[];
  cacheDirs?: readonly string[];
  /** "What changed?" on a checkpoint (its label or path): it is "now"; later checkpoints and log lines are left out. */
  nowCheckpoint?: string;
  /** Checkpoints whose args are read (an even sample beyond; default 100). */
  maxCheckpointsRead?: number;
  /** Keep the data fingerprints taken now for later reports (default true with a store). */
  keepData?: boolean;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Every checkpoint with a training step below the run folder, ascending, and the files of its metrics history
 * (metricsLogsOf: the rule the dashboard follows too), oldest launch first.
 */
export function checkpointsOf(listing: RunsListing): { checkpoints: CheckpointFact[]; logs: string[] } {
  const root = listing.roots[0];
  const out: CheckpointFact[] = [];
  if (!root?.entry) return { checkpoints: out, logs: [] };
  const stack: RunEntry[] = [...(root.entry.children ?? [])];
  while (stack.length) {
    const e = stack.pop()!;
    const abs = posix.join(root.path, e.path);
    const step = trainingStep(e);
    if (e.role === 'checkpoint' && step !== undefined && !e.pathB64) {
      out.push({ label: e.name, path: abs, argsPath: argsPathOf(e, abs), step, mtime: e.mtime });
    } else if (e.kind === 'dir' && e.children) stack.push(...e.children);
  }
  out.sort((a, b) => a.step - b.step || a.label.localeCompare(b.label));
  const logs = metricsLogsOf(root.entry).map((e) => posix.join(root.path, e.path));
  return { checkpoints: out, logs };
}

/** First, last and evenly spaced between: the checkpoints whose args are read for a run with very many. */
export function sampleCheckpoints(cks: readonly CheckpointFact[], max: number): CheckpointFact[] {
  if (cks.length <= max) return [...cks];
  const out = new Set<CheckpointFact>();
  for (let i = 0; i < max; i++) out.add(cks[Math.round((i * (cks.length - 1)) / (max - 1))]!);
  return [...out];
}

function settle<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; why: string }> {
  return p.then(
    (value) => ({ ok: true as const, value }),
    (e: unknown) => ({ ok: false as const, why: messageOf(e) }),
  );
}

/**
 * Gathers the facts in three rounds of requests sent together through the host's resident helper (each round is
 * one round trip plus the slowest request's work; nothing imports torch):
 * 1. the run's listing and the environment snapshot (the local baselines, results and marks are read before; the
 *    snapshot goes on beside round 2, which needs only the listing);
 * 2. the metrics log reduced on the host and the args of every checkpoint (an even sample of at most 100);
 * 3. what_changed.py on the paths those args name, the git checkouts of the run and the scripts, and torch's
 *    version.py (when that torch was installed), with git's "changed since" at the reference time; beside it, for a
 *    restarted run, resume_facts.py on the checkpoint before the restart and the first after (two requests).
 * A request that fails becomes an unknown fact with its reason; only the listing's failure leaves nothing to do.
 */
export async function gatherFacts(
  host: WhatChangedHost,
  run: string | null,
  options: WhatChangedOptions = {},
): Promise<WhatChangedFacts> {
  const started = performance.now();
  const unknown: UnknownFact[] = [];
  const opts = {
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
  let requests = 0;
  const call = <R>(c: ProbeCall<R>, fresh = false) => {
    requests++;
    return settle(host.probes.run(c, fresh ? { ...opts, fresh } : opts).then((o) => o.value));
  };
  const wcStore = options.store ? new WhatChangedStore(options.store) : undefined;

  // ---- local reads (no round trip)
  const [baselineList, results, marks, dataHistory, liveHistory] = await Promise.all([
    options.store ? options.store.list(host.id) : Promise.resolve({ baselines: [], problems: [] }),
    options.store ? options.store.listResults(host.id) : Promise.resolve({ results: [], problems: [] }),
    wcStore ? wcStore.marks(host.id) : Promise.resolve<KnownGoodMarks>({}),
    wcStore && run !== null ? wcStore.dataHistory(host.id, run) : Promise.resolve<DataRecord[]>([]),
    wcStore && run !== null ? wcStore.liveHistory(host.id, run) : Promise.resolve<LaunchRecord[]>([]),
  ]);
  const baselines: Baseline[] = baselineList.baselines.map((b) => b.baseline);
  for (const p of [...baselineList.problems, ...results.problems])
    unknown.push({ fact: `stored file ${p.file}`, why: p.message });
  const bench: ThroughputResult[] = results.results.map((r) => r.result);

  // ---- round 1
  const uniq = (xs: Iterable<string>) => [...new Set(xs)];
  const scriptGlobs = uniq([...(options.scriptGlobs ?? []), ...baselines.flatMap((b) => b.snapshot.scripts.patterns)]);
  // The snapshot is not needed before round 3: it runs on beside round 2 (it is the slowest request of round 1).
  // In a new login, as Compare Environment's: the host as a launch now finds it, not as the helper started.
  const envP = call(
    envSnapshotProbe({
      scripts: scriptGlobs,
      // custom caches are named by position (custom1, …): the newest baseline's, in its order, unless given
      cacheDirs:
        options.cacheDirs ??
        (baselines[0]?.snapshot.caches ?? [])
          .filter((c) => /^custom\d+$/.test(c.name))
          .sort((a, b) => Number(a.name.slice(6)) - Number(b.name.slice(6)))
          .map((c) => c.path),
      extraVars: uniq([...(options.extraVariables ?? []), ...baselines.flatMap((b) => b.snapshot.env.extraRequested)]),
    }),
    true,
  );
  // The GPUs now and the run's GPU timeline: needs nothing else, so it runs beside everything
  const gpuP = call(gpuHealthProbe(run !== null ? { timeline: run } : {}));
  // A host with no run: the environment and the benchmarks only.
  const listing = run !== null ? await call(listRunsProbe([run], { depth: 3 })) : undefined;

  let rounds = 1;
  const roundMs = [Math.round(performance.now() - started)];
  if (listing && !listing.ok) unknown.push({ fact: `listing of ${run}`, why: listing.why });
  else if (listing?.ok && listing.value.roots[0]?.status !== 'ok')
    unknown.push({ fact: `listing of ${run}`, why: listing.value.roots[0]?.message ?? 'not listed' });
  const remoteNow = listing?.ok ? listing.value.now : Date.now() / 1000;
  const found = listing?.ok ? checkpointsOf(listing.value) : { checkpoints: [], logs: [] };
  const logs = found.logs;
  let checkpoints = found.checkpoints;
  let upTo: number | undefined;
  if (options.nowCheckpoint !== undefined) {
    // "What changed?" on a checkpoint: it is "now"; later checkpoints and log lines are left out.
    const at = checkpoints.find((c) => c.label === options.nowCheckpoint || c.path === options.nowCheckpoint);
    if (at) {
      upTo = at.step;
      checkpoints = checkpoints.filter((c) => c.step <= at.step);
    } else if (listing?.ok) {
      unknown.push({ fact: `checkpoint ${options.nowCheckpoint}`, why: `not found in ${run}: the latest is taken` });
    }
  }
  if (listing?.ok && !checkpoints.length)
    unknown.push({ fact: 'checkpoints', why: `no checkpoint with a step in ${run}` });
  if (run === null) unknown.push({ fact: 'metrics log and checkpoints', why: 'no run given: the host only' });

  // ---- round 2
  const toRead = sampleCheckpoints(checkpoints, options.maxCheckpointsRead ?? 100);
  if (toRead.length < checkpoints.length) {
    unknown.push({
      fact: `args of ${checkpoints.length - toRead.length} of ${checkpoints.length} checkpoints`,
      why: `not read: an even sample of ${toRead.length} was (a change is placed between the sampled checkpoints)`,
    });
  }
  let parts: ({ ok: true; value: MetricsReduction } | { ok: false; why: string })[] = [];
  let argsFacts: ArgsFact[] = [];
  if (logs.length || toRead.length) {
    // every file of the history, beside the args: one round
    const reduce = (path: string) =>
      call(
        metricsReduceProbe({
          path,
          x: 'step',
          buckets: 2000,
          ...(upTo !== undefined ? { window: { from: 0, to: upTo } } : {}),
        }),
      );
    // The history's files one after another: each reduction already splits a large file over the host's CPUs, and
    // five at once oversubscribed them (bench "stitching": the cold report of 5 launches took 1.83× one file's).
    const reduceAll = async () => {
      const out: Awaited<ReturnType<typeof reduce>>[] = [];
      for (const path of logs) out.push(await reduce(path));
      return out;
    };
    const [reduced, args] = await Promise.all([
      reduceAll(),
      Promise.all(toRead.map((c) => call(ckptArgsProbe(c.argsPath)))),
    ]);
    parts = reduced;
    rounds++;
    roundMs.push(Math.round(performance.now() - started - roundMs.reduce((a, b) => a + b, 0)));
    argsFacts = toRead.map((c, i) => {
      const a = args[i]!;
      return a.ok
        ? { label: c.label, step: c.step, args: a.value.args }
        : { label: c.label, step: c.step, args: null, error: a.why };
    });
    for (const a of argsFacts) if (a.error) unknown.push({ fact: `args of ${a.label}`, why: a.error });
  }
  const read: HistoryPart[] = [];
  parts.forEach((r, i) => {
    if (r.ok) read.push({ path: logs[i]!, reduction: r.value });
    else unknown.push({ fact: `metrics log ${logs[i]!}`, why: r.why });
  });
  let logFact: WhatChangedFacts['log'] = null;
  if (read.length) {
    const history = stitchReductions(read);
    logFact = {
      path: read[read.length - 1]!.path,
      reduction: historyReduction(read, history),
      sources: read.map((p) => p.path),
      restarts: history.restarts,
    };
  }

  // ---- round 3: needs the reference (from the changepoints) and the paths the args name
  const envNow = await envP;
  if (!envNow.ok) unknown.push({ fact: 'environment now', why: envNow.why });
  const envSnapshot: EnvSnapshot | null = envNow.ok ? envNow.value : null;
  const partial = {
    checkpoints,
    env: { now: envSnapshot, baselines },
    bench,
    marks,
    ...(options.baselineId ? { chosenBaselineId: options.baselineId } : {}),
  };
  const main = logFact ? mainChangepoint(logShifts(logFact).changepoints) : undefined;
  const ref = pickReference(partial, main);
  const paths = new Set<string>();
  for (const a of argsFacts) {
    const isEdge = a.label === ref.checkpoint?.label || a.label === checkpoints[checkpoints.length - 1]?.label;
    if (isEdge) for (const p of dataPathsOf(a.args).values()) paths.add(p);
  }
  const gitTargets = uniq([
    ...(run !== null ? [run] : []),
    ...(envSnapshot?.scripts.files.map((f) => posix.dirname(f.path)) ?? []),
  ]);
  const stats = [
    ...(envSnapshot?.torch.location ? [`${envSnapshot.torch.location}/version.py`] : []),
    // whether an env was restored from the newest baselines: their package suspects then offer the package bisect
    ...baselines.slice(0, RESTORED_CHECKED).map((b) => restoredEnvProbePath(b.label)),
  ];
  // the resume state of the checkpoints around the restart (the shift's, else the latest): two requests beside it
  const pair = resumePair(checkpoints, logFact?.restarts ?? [], main?.cp.launch);
  if (pair && 'missing' in pair)
    unknown.push({ fact: `resume state at the restart at step ${pair.restart.step}`, why: pair.missing });
  const resumeSides = pair && !('missing' in pair) ? [pair.before, pair.after] : [];
  const [facts, ...resumeRead] = await Promise.all([
    call(
      whatChangedProbe({
        paths: [...paths],
        git: gitTargets,
        stats,
        ...(run !== null ? { launches: [run] } : {}),
        ...(ref.time !== null ? { since: ref.time } : {}),
      }),
    ),
    ...resumeSides.map((c) => call(resumeFactsProbe(c.path))),
  ]);
  const side = (i: number): ResumeSide => {
    const r = resumeRead[i]!;
    return r.ok
      ? { checkpoint: resumeSides[i]!, facts: r.value }
      : { checkpoint: resumeSides[i]!, facts: null, error: r.why };
  };
  const resume =
    pair && !('missing' in pair) ? { restart: pair.restart.step, before: side(0), after: side(1) } : undefined;
  rounds++;
  roundMs.push(Math.round(performance.now() - started - roundMs.reduce((a, b) => a + b, 0)));
  let probe: WhatChangedProbeResult | null = null;
  if (facts.ok) probe = facts.value;
  else unknown.push({ fact: 'data fingerprints and git state', why: facts.why });

  const gpu = await gpuP;
  if (!gpu.ok) unknown.push({ fact: 'the GPUs (clocks, throttling, other processes)', why: gpu.why });

  if (wcStore && probe && run !== null && options.keepData !== false) {
    try {
      await wcStore.saveData(host.id, run, { at: probe.now, paths: probe.paths });
    } catch (e) {
      unknown.push({ fact: 'keeping the data fingerprints for later reports', why: messageOf(e) });
    }
    // the run's training process seen now (the oldest working in the run; one started beside it is no launch): kept
    // once per process, so that the next report after a restart compares
    try {
      for (const r of probe.launches?.[0]?.live?.records.slice(0, 1) ?? [])
        await wcStore.saveLive(host.id, run, r, liveHistory);
    } catch (e) {
      unknown.push({ fact: 'keeping the live process for later reports', why: messageOf(e) });
    }
  }
  return {
    host: { id: host.id, label: host.label },
    run,
    remoteNow,
    checkpoints,
    args: argsFacts,
    log: logFact,
    env: { now: envSnapshot, baselines },
    bench,
    marks,
    ...(options.baselineId ? { chosenBaselineId: options.baselineId } : {}),
    probe,
    dataHistory,
    liveHistory,
    ...(resume ? { resume } : {}),
    gpu: gpu.ok ? gpu.value : null,
    unknown,
    gathered: { roundTrips: rounds, requests, elapsedMs: Math.round(performance.now() - started), roundMs },
  };
}

/**
 * "Known Good: What Changed?": the entry point an adapter (command, webview) and the CLI call. On a run: `run` is its
 * folder; on a checkpoint: its run folder and `nowCheckpoint`; on a host: `run` null (environment and benchmarks
 * only). Resolves to the report model; `renderWhatChangedMarkdown` (render.ts) shows it.
 */
export async function whatChanged(
  host: WhatChangedHost,
  run: string | null,
  options: WhatChangedOptions = {},
): Promise<WhatChangedReport> {
  return analyze(await gatherFacts(host, run, options));
}

/**
 * Keeps the fingerprints of the data a run's newest checkpoint names, for later reports to compare with: what an
 * adapter calls beside "Capture Environment Baseline" so that the data is kept with the baseline. Two round trips
 * (listing and args, then the fingerprints); resolves to the number of paths kept.
 */
export async function keepDataFingerprints(
  host: WhatChangedHost,
  run: string,
  store: BaselineStore,
  options: Pick<WhatChangedOptions, 'timeoutMs' | 'signal'> = {},
): Promise<number> {
  const opts = {
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
  const listing = await host.probes.run(listRunsProbe([run], { depth: 3 }), opts);
  const newest = checkpointsOf(listing.value).checkpoints.pop();
  if (!newest) return 0;
  const args = await host.probes.run(ckptArgsProbe(newest.argsPath), opts);
  const paths = [...new Set(dataPathsOf(args.value.args).values())];
  if (!paths.length) return 0;
  const probe = await host.probes.run(whatChangedProbe({ paths }), opts);
  await new WhatChangedStore(store).saveData(host.id, run, { at: probe.value.now, paths: probe.value.paths });
  return probe.value.paths.length;
}
