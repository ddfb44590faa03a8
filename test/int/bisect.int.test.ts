import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { captureSnapshot, type CaptureHost } from '../../src/core/baselines/capture';
import { BaselineStore, type Baseline } from '../../src/core/baselines/store';
import { budgetRounds } from '../../src/core/bisect/engine';
import { envBisect, type EnvBisectHost, type BisectBenchmark } from '../../src/core/bisect/envBisect';
import { bisectEventLine, renderBisectMarkdown } from '../../src/core/bisect/render';
import { ProbeRunner } from '../../src/core/probes/runner';
import { shellQuote } from '../../src/core/quote';
import { SshPool } from '../../src/core/transport/ssh';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { TORCH_PYTHON, requireTorch } from '../support/require';
import { startSshd, type TestSshd } from '../support/sshd';
import { ANOMALY_AGENT, TINY_CPU_BENCH } from '../support/tinyBench';

/*
 * The environment bisect against a real sshd: the baseline is captured with one BASH_ENV, "now" is another (six
 * differences), and every state is a real process on the host. Two benchmarks:
 * - a command whose speed is a pure function of its environment (deterministic: the search, the env words and their
 *   quoting, the secret applied but never shown);
 * - the real CPU benchmark (python/throughput_bench.py) with a real slowdown: PYTHONPATH gained a folder whose
 *   sitecustomize.py turns on autograd anomaly detection as torch finishes importing (a debugging leftover): every
 *   op records a Python traceback in the benchmark's own thread, work that costs the same CPU time at any load. Read
 *   on the process's CPU clock, at a threshold set by this machine's measured A/A spread.
 */

/*
 * `npm run bench -- --only bisect` on this shared 2-core machine (load 6–10): 9 runs of one env with the tiny shape
 * spread 130 % in wall time and 51 % on the CPU clock; a 3-run state spans 28 % on the CPU clock (the median of every
 * 3 of the runs), and under two more CPU hogs a harmless state's median read −28 % against good's. At the default 5 %
 * a harmless half reads "unclear" below good about half the time and the engine stops, honestly, as inconclusive;
 * 50 % is above that noise and below the agent's effect (CPU clock, seen here: 7.2K–10.1K tok/s without it, 1.9K–3.2K
 * with it). A GIL-spinning agent was tried first: its cost is the spinning thread's CPU share, which the neighbours'
 * load takes away (−29 % to −50 % under two hogs), so it was no steadier than wall time.
 */
const THRESHOLD = 0.5;

const planTextOf = (shown: string[]) => shown.find((t) => t.startsWith('Differences from the baseline')) ?? '';

const SECRET = 'hf_bisectSecretValue0123456789abcdef';
const TINY = TINY_CPU_BENCH;

void describe('environment bisect through a real sshd', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let dir: string;
  let bashEnv: string;
  let baseEnv: string;
  let host: EnvBisectHost;
  let baseline: Baseline;

  const setRemoteEnv = (lines: string[]) => writeFileSync(bashEnv, `${baseEnv}\n${lines.join('\n')}\n`);
  const good = () => [
    'export WANDB_MODE=online',
    'export NCCL_DEBUG=INFO',
    `export TORCH_HOME=${join(dir, 'torch-home-a')}`,
  ];
  /** Now: six differences; `slow` puts the agent on PYTHONPATH. */
  const now = (slow: boolean) => [
    'export WANDB_MODE=disabled',
    'unset NCCL_DEBUG',
    `export TORCH_HOME=${shellQuote(join(dir, "torch home 'b'"))}`,
    'export HF_HUB_OFFLINE=1',
    `export HF_TOKEN=${SECRET}`,
    slow ? `export PYTHONPATH=${join(dir, 'agent')}` : 'export OMP_DISPLAY_ENV=FALSE',
  ];

  before(async () => {
    requireTorch();
    dir = mkdtempSync(join(tmpdir(), 'kg-bisect-'));
    mkdirSync(join(dir, 'agent'));
    writeFileSync(join(dir, 'agent', 'sitecustomize.py'), ANOMALY_AGENT);
    sshd = await startSshd();
    bashEnv = join(sshd.dir, 'bash_env');
    baseEnv = readFileSync(bashEnv, 'utf8');
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const transport = pool.transport(endpointOf(sshd), 'test-sshd');
    const probes = new ProbeRunner(transport, { python: TORCH_PYTHON, timeoutMs: 120000, resident: false });
    const capture: CaptureHost = { spec: { name: 'test-sshd', roots: [] }, transport, probes };
    host = { ...capture, python: TORCH_PYTHON, label: 'test-sshd' };
    setRemoteEnv(good());
    const snapshot = await captureSnapshot(capture, { scriptGlobs: [], extraVariables: [], cacheDirs: [] });
    const store = new BaselineStore(join(dir, 'store'));
    baseline = (await store.save({ label: 'known good', host: transport.id, hostLabel: 'test-sshd', snapshot }))
      .baseline;
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function run(benchmark: BisectBenchmark, threshold?: number) {
    const shown: string[] = [];
    const t0 = Date.now();
    const o = await envBisect(host, baseline, {
      benchmark,
      ...(threshold !== undefined ? { threshold } : {}),
      onText: (t) => shown.push(t),
      onEvent: (e, changes) => shown.push(bisectEventLine(e, changes, { unit: 'tok/s' }) ?? ''),
    });
    const wallS = (Date.now() - t0) / 1000;
    const all = shown.join('\n') + o.markdown + JSON.stringify(o);
    assert.doesNotMatch(all, new RegExp(SECRET), 'the secret is never shown in clear');
    return { o, wallS, shown: shown.join('\n') };
  }

  void it('a command whose speed follows HF_TOKEN: the six changes, the culprit found and confirmed, the secret applied and never shown', async () => {
    setRemoteEnv(now(false));
    // 50 when HF_TOKEN is the secret (read from a file on the host, so the command's text does not hold it): the
    // run only slows when the real value reached the process.
    writeFileSync(join(dir, 'secret'), SECRET);
    const command = `if [ "$HF_TOKEN" = "$(cat ${shellQuote(join(dir, 'secret'))})" ]; then echo "speed 50"; else echo "speed 100"; fi`;
    const { o, shown } = await run({ kind: 'custom', bench: { command, regex: 'speed (\\d+)', lastN: 10 } });
    assert.deepEqual(
      o.changes.map((c) => c.name),
      ['HF_HUB_OFFLINE', 'HF_TOKEN', 'NCCL_DEBUG', 'OMP_DISPLAY_ENV', 'TORCH_HOME', 'WANDB_MODE'],
    );
    assert.match(shown, /Budget: 5 rounds \(⌈log₂ 6⌉ \+ 2\)/);
    const r = o.report!;
    assert.equal(r.verdict.kind, 'culprit', o.headline);
    assert.deepEqual(r.verdict.ids, ['env:HF_TOKEN']);
    assert.equal(r.confirmation?.confirmed, true);
    assert.ok(r.rounds.length <= budgetRounds(6));
    assert.match(o.headline, /^Culprit: HF_TOKEN=<redacted sha256:[0-9a-f]{12}> \(added\) — confirmed/);
    // The value with a quote and a space went through as one word: the state "all reverted" has TORCH_HOME as at
    // the baseline, "all applied" as now — the speed would not split otherwise.
    assert.match(o.markdown, /TORCH_HOME: .*torch-home-a → .*torch home 'b'/);
  });

  void it('the real CPU benchmark on the CPU clock, PYTHONPATH with an anomaly-detecting sitecustomize among six changes → that culprit, confirmed', async () => {
    setRemoteEnv(now(true));
    const { o, wallS } = await run({ kind: 'builtin', config: TINY, clock: 'cpu' }, THRESHOLD);
    const r = o.report!;
    console.log(
      `env bisect, real benchmark (CPU clock): ${r.rounds.length} rounds (budget ${r.budget.rounds}), ${r.runs} runs, ${wallS.toFixed(0)} s; ${o.headline}`,
    );
    console.log(renderBisectMarkdown(r, { unit: 'tok/s' }));
    assert.ok(r.rounds.length <= r.budget.rounds);
    assert.equal(r.verdict.kind, 'culprit', o.headline);
    assert.deepEqual(r.verdict.ids, ['env:PYTHONPATH'], o.headline);
    assert.equal(r.confirmation?.confirmed, true, o.markdown);
    assert.match(o.benchmark, /tokens per CPU-second/);
  });

  void it('the real CPU benchmark, six harmless changes → "not reproduced" (or no single change), with the numbers', async () => {
    setRemoteEnv(now(false));
    const { o, wallS } = await run({ kind: 'builtin', config: TINY, clock: 'cpu' }, THRESHOLD);
    const r = o.report!;
    console.log(
      `env bisect, all harmless: ${r.rounds.length} rounds, ${r.runs} runs, ${wallS.toFixed(0)} s; ${o.headline}`,
    );
    // a difference never reproduced is said so, never "no single change explains it"
    assert.match(
      o.headline,
      r.verdict.kind === 'not-reproduced' ? /^Not reproduced: good \d/ : /^No single change explains it/,
    );
    // Never a confirmed culprit or group among changes that cost nothing.
    assert.ok(!(r.verdict.kind === 'culprit' || (r.verdict.kind === 'group' && r.confirmation?.confirmed)), o.headline);
    assert.match(o.markdown, /good \d[\d.]*[KMG]? tok\/s, bad \d/i);
  });

  void it('a hostile baseline: names that are env options or assignments are refused and nothing they say runs (issue 31 item 3)', async () => {
    setRemoteEnv(good());
    const marker = join(dir, 'hostile-ran');
    const now = await captureSnapshot(host, { scriptGlobs: [], extraVariables: [], cacheDirs: [] });
    const hostileVars: Record<string, string> = {
      ...now.env.vars,
      [`-S/bin/sh -c "touch ${marker}" #`]: 'x',
      [`--chdir=${dir}`]: 'y',
      'PATH=/evil:/usr/bin': 'z',
      KG_GOOD_VAR: 'a',
    };
    const hostile: Baseline = { ...baseline, snapshot: { ...now, env: { ...now.env, vars: hostileVars } } };
    // the run prints its working folder and PATH: neither may be what the file said
    const command = 'echo "speed 100 cwd=$(pwd) path=$PATH"';
    const shown: string[] = [];
    const o = await envBisect(host, hostile, {
      benchmark: { kind: 'custom', bench: { command, regex: 'speed (\\d+)', lastN: 1 } },
      now,
      onText: (t) => shown.push(t),
    });
    assert.deepEqual(
      o.changes.map((c) => c.name),
      ['KG_GOOD_VAR'],
    );
    const refused = o.skipped.filter((s) => s.why.startsWith('refused: '));
    assert.equal(refused.length, 3, JSON.stringify(o.skipped));
    for (const s of refused) assert.match(s.why, /is not a variable name/);
    assert.equal(existsSync(marker), false, 'a name never runs a command');
    const out = shown.join('');
    assert.doesNotMatch(out, new RegExp(`cwd=${dir}\\b`), 'a name never changes the folder');
    assert.doesNotMatch(out, /path=\/evil/, 'a name never changes PATH');
    assert.match(planTextOf(shown), /left out: "-S\/bin\/sh -c .*refused/);
  });
});
