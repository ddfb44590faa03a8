import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { bisect, budgetRounds, budgetRuns, type BisectChange, type Measure } from '../../src/core/bisect/engine';
import { shellJoin } from '../../src/core/quote';
import { stateOf } from '../../src/core/replay/changes';
import { setupFromFacts } from '../../src/core/replay/fromFacts';
import { planReplay, runReplay, type ReplayHost, type ReplaySetup } from '../../src/core/replay/replay';
import { applyOverrides, overridesFor, STACKS } from '../../src/core/replay/stacks';
import { SshPool } from '../../src/core/transport/ssh';
import type { Transport } from '../../src/core/transport/types';
import { analyze } from '../../src/core/whatChanged/analyze';
import { gatherFacts } from '../../src/core/whatChanged/gather';
import { endpointOf, recordingPrompts, sshOptions } from '../../test/support/hosts';
import { makeReplayRun, type ReplayKind } from '../../test/support/replayRuns';
import { TORCH_PYTHON, requireTorch } from '../../test/support/require';
import { opensshArgs, startSshd, type TestSshd } from '../../test/support/sshd';
import { median, MeasuredProbeRunner, takeRequestCosts, type BenchResult } from '../context';

/*
 * Replay (issue 33) on this machine's CPU with the replay int test's loop (test/support/replay/train.py, Debian's
 * python3-torch), over a real sshd on loopback:
 * - the plan: what planReplay asks of the host (its requests, each one's cost, all sent at once) against reading the
 *   same facts by hand with `ssh HOST CMD` (the checkout's diff against the known-good commit and the reference
 *   checkpoint, then nvidia-smi): a login each;
 * - per kind of change (a flag, a variable, committed code, an uncommitted edit, data; the second launch also changes
 *   --lr, which costs nothing, so two changes): the replay to a culprit named and confirmed, against the same runs
 *   (each state's argv and environment, the same steps from the same checkpoint) typed by hand one `ssh HOST CMD` at
 *   a time — the replay's overhead per run (its guard, the speed read from the log, the code copies); the rounds and
 *   runs against the budget ⌈log₂ D⌉ + 2;
 * - slots: one bisect of four flags of the loop (one of them, --work 8, costs speed) with the engine on 2 slots against
 *   1, each run pinned to CPU N with `taskset -c N` in an argv this file builds: the speed-up of side by side.
 * Figures are printed, never asserted (this machine is shared: ratios, counts).
 */

const run = promisify(execFile);
const THRESHOLD = 0.25;
const STEPS = 12;
const KINDS: readonly ReplayKind[] = ['arg', 'env', 'code', 'uncommitted', 'data'];
/** The replay's runs typed by hand for each kind: its first ones (good and now states both among them). */
const BY_HAND = 6;

/** The transport with its exec and spawn calls counted, and each exec's wall time: the requests that are not probes. */
function counted(t: Transport): { transport: Transport; take: () => { n: number; execMs: number[] } } {
  let n = 0;
  let execMs: number[] = [];
  const transport = new Proxy(t, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver) as unknown;
      if ((key === 'exec' || key === 'spawn') && typeof v === 'function')
        return async (...a: unknown[]) => {
          n++;
          const t0 = performance.now();
          const r = await (v as (...x: unknown[]) => Promise<unknown>).apply(target, a);
          if (key === 'exec') execMs.push(performance.now() - t0);
          return r;
        };
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    transport,
    take: () => {
      const out = { n, execMs };
      n = 0;
      execMs = [];
      return out;
    },
  };
}

/** `ssh … user@127.0.0.1 CMD` with the OpenSSH client, as a person types it: a login each time. */
const ssh = (s: TestSshd, command: string) => run('ssh', opensshArgs(s, command), { maxBuffer: 64 << 20 });

export async function benchReplay(): Promise<BenchResult[]> {
  requireTorch();
  const root = mkdtempSync(join(tmpdir(), 'kg-bench-replay-'));
  const sshd = await startSshd();
  const pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
  const c = counted(pool.transport(endpointOf(sshd), 'bench-sshd'));
  const probes = new MeasuredProbeRunner(c.transport, { python: TORCH_PYTHON, timeoutMs: 120_000 });
  const host: ReplayHost = { transport: c.transport, probes, label: 'bench-sshd', python: TORCH_PYTHON };
  const out: BenchResult[] = [];
  try {
    const dirs = new Map(KINDS.map((k) => [k, makeReplayRun(root, k, { harmless: true })]));
    const setups = new Map<ReplayKind, ReplaySetup>();
    for (const [kind, dir] of dirs) {
      const facts = await gatherFacts({ id: c.transport.id, label: host.label, probes }, dir, {});
      setups.set(kind, setupFromFacts(facts, analyze(facts), { steps: STEPS, threshold: THRESHOLD }));
    }
    out.push(await planLine(host, setups.get('uncommitted')!, sshd, c.take));
    for (const kind of KINDS) out.push(await kindLine(kind, host, setups.get(kind)!, sshd, root, c.take));
    out.push(await slotsLine(dirs.get('arg')!, root));
  } finally {
    probes.dispose();
    pool.dispose();
    await sshd.stop();
    rmSync(root, { recursive: true, force: true });
  }
  return out;
}

/** planReplay 5 times (the uncommitted kind: its checkout has an edit to list) against the same facts by hand. */
async function planLine(
  host: ReplayHost,
  s: ReplaySetup,
  sshd: TestSshd,
  take: () => { n: number; execMs: number[] },
): Promise<BenchResult> {
  const N = 5;
  await planReplay(host, s); // the helper's modules for these probes compiled once, as after the first click
  takeRequestCosts();
  take();
  const ours: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await planReplay(host, s);
    ours.push(performance.now() - t0);
  }
  const costs = takeRequestCosts();
  const execs = take().n / N;
  const probeN = Object.values(costs).reduce((a, x) => a + x.n, 0) / N;
  const hand: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await ssh(
      sshd,
      `cd ${shellJoin([s.now.cwd])} && git rev-parse --show-toplevel && git diff --name-status ` +
        `${shellJoin([s.good.gitHead ?? 'HEAD'])} -- . && git status --porcelain && ls -l -- ${shellJoin([s.reference.path])}`,
    );
    await ssh(sshd, 'nvidia-smi --query-gpu=index,uuid,memory.used,utilization.gpu --format=csv,noheader || true');
    hand.push(performance.now() - t0);
  }
  return {
    case: 'replay: the plan (what the host holds: the checkout against the known-good commit, the checkpoint, the GPUs)',
    ours_ms: median(ours),
    usual_ms: median(hand),
    request_ms: costs,
    note:
      `${probeN} probe requests (${Object.keys(costs).join(', ')}) and ${execs} exec, all sent at once: one wait; ` +
      `by hand 2 ssh logins (git diff/status + ls, nvidia-smi); medians of ${N}`,
  };
}

/** One replay of the kind's run to a confirmed culprit, and its first runs again by hand over ssh. */
async function kindLine(
  kind: ReplayKind,
  host: ReplayHost,
  s: ReplaySetup,
  sshd: TestSshd,
  root: string,
  take: () => { n: number; execMs: number[] },
): Promise<BenchResult> {
  const plan = await planReplay(host, s);
  const table = STACKS[plan.stack];
  // The same runs by hand: the launch as now with the changes not applied taken back and the same three overrides,
  // in the run folder (its code as now: by hand a code state would also need the old files checked out). The known-good
  // and the current state alternate, half before the replay and half after, so a load that moves meanwhile weighs on
  // both sides alike.
  let handN = 0;
  const byHand = async (applied: ReadonlySet<string>): Promise<number> => {
    const state = stateOf(s.now, plan.changes, applied, plan.stack);
    const { overrides } = overridesFor(
      table,
      state.argv,
      {
        resume: s.reference.path,
        output: join(root, 'by-hand', kind, String(++handN)),
        steps: String(s.reference.step + s.steps),
      },
      s.names,
    );
    const argv = applyOverrides(table, state.argv, overrides);
    const env = [
      'env',
      ...state.env.unset.flatMap((k) => ['-u', k]),
      ...Object.entries(state.env.set).map(([k, v]) => `${k}=${v}`),
    ];
    const t = performance.now();
    await ssh(sshd, `cd ${shellJoin([s.now.cwd])} && ${shellJoin([...env, ...argv])}`);
    return performance.now() - t;
  };
  const good = new Set<string>();
  const now = new Set(plan.changes.map((c) => c.id));
  const hand: number[] = [];
  for (let i = 0; i < BY_HAND / 2; i++) hand.push(await byHand(i % 2 ? now : good));
  takeRequestCosts();
  take();
  const t0 = performance.now();
  const o = await runReplay(host, await planReplay(host, s), s);
  const ms = performance.now() - t0;
  const costs = takeRequestCosts();
  const { n: execs, execMs } = take();
  for (let i = 0; i < BY_HAND / 2; i++) hand.push(await byHand(i % 2 ? good : now));
  const probeN = Object.values(costs).reduce((a, x) => a + x.n, 0);
  const d = plan.changes.length;
  const r = o.report;
  const found = r?.verdict.kind === 'culprit' && r.confirmation?.confirmed ? 'confirmed' : 'NOT confirmed';
  const budget = budgetRuns(d, r?.repeats);
  const handRun = hand.reduce((a, x) => a + x, 0) / hand.length;
  const perRun = ms / Math.max(1, o.runs.length);
  return {
    case: `replay: ${kind} change (+ a harmless --lr), ${d} changes, to a confirmed culprit`,
    ours_ms: ms,
    usual_ms: handRun * o.runs.length,
    request_ms: costs,
    note:
      `${o.runs.length} runs, ${perRun.toFixed(0)} ms a run against ${handRun.toFixed(0)} ms by hand (${hand.length} ` +
      `runs of the good and the current state, one ssh each, half before the replay, half after): ` +
      `${(perRun - handRun).toFixed(0)} ms a run more; requests: ${probeN} probe and ${execs} exec or spawn ` +
      `(${((probeN + execs) / Math.max(1, o.runs.length)).toFixed(1)} a run: the guarded run, its speed read, a code ` +
      `copy per state), a speed read ${median(execMs).toFixed(0)} ms (median of ${execMs.length} exec); ` +
      `${r?.rounds.length ?? 0} rounds of budget ${budgetRounds(d)} (⌈log₂ ${d}⌉ + 2), runs ${((o.runs.length / budget) * 100).toFixed(0)} % ` +
      `of the budget's ${budget} before extensions; ${found}: ${r?.verdict.ids.join(', ') ?? o.headline}`,
  };
}

/** The same bisect on 1 slot and on 2, each run of the loop pinned to its slot's CPU. */
async function slotsLine(dir: string, root: string): Promise<BenchResult> {
  const name = 'replay: engine slots, 2 side by side (taskset -c 0 / -c 1) vs 1 at a time, 4 flags of the loop';
  if (cpus().length < 2 || !existsSync('/usr/bin/taskset'))
    return { case: name, ours_ms: 1, usual_ms: 1, note: 'not measured: needs 2 CPUs and /usr/bin/taskset' };
  const changes: BisectChange[] = [
    { id: 'lr', label: '--lr 0.0001' },
    { id: 'batch', label: '--batch 8 (as the default)' },
    { id: 'work', label: '--work 8' },
    { id: 'save', label: '--save_every 1000' },
  ];
  const flags: Record<string, string[]> = {
    lr: ['--lr', '0.0001'],
    batch: ['--batch', '8'],
    work: ['--work', '8'],
    save: ['--save_every', '1000'],
  };
  let n = 0;
  const measure: Measure = async (applied, signal, slot = 0) => {
    const outDir = join(root, 'slots', String(++n));
    const argv = [
      '-c',
      String(slot),
      TORCH_PYTHON,
      'train.py',
      '--data',
      'data/a.txt',
      '--resume',
      'ckpt/step_48.pt',
      '--steps',
      String(48 + STEPS),
      '--log_every',
      '3',
      '--out_dir',
      outDir,
      ...changes.flatMap((c) => (applied.has(c.id) ? flags[c.id]! : [])),
    ];
    await run('/usr/bin/taskset', argv, { cwd: dir, ...(signal ? { signal } : {}) });
    const values = readFileSync(join(outDir, 'train_log.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { tok_s: number }).tok_s);
    return median(values.slice(Math.floor(values.length / 2)));
  };
  const timed = async (slots: number) => {
    const t0 = performance.now();
    const r = await bisect(changes, measure, { threshold: THRESHOLD, slots });
    return { ms: performance.now() - t0, r };
  };
  const one = await timed(1);
  const two = await timed(2);
  const said = (x: typeof one) =>
    `${x.r.runs} runs, ${(x.ms / 1000).toFixed(0)} s, ${x.r.verdict.kind} ${x.r.verdict.ids.join(',')}` +
    `${x.r.confirmation?.confirmed ? ' confirmed' : ''}`;
  return {
    case: name,
    ours_ms: two.ms,
    usual_ms: one.ms,
    note: `2 slots: ${said(two)}; 1 slot: ${said(one)}; runs per second ${((two.r.runs / two.ms) * 1000).toFixed(2)} vs ${((one.r.runs / one.ms) * 1000).toFixed(2)}`,
  };
}
