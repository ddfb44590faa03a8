import { bisectEventLine } from '../../core/bisect/render';
import { KnownGoodError, messageOf } from '../../core/errors';
import { setupFromFacts } from '../../core/replay/fromFacts';
import { launchesText } from '../../core/replay/sources';
import { shellQuote } from '../../core/quote';
import { gpuSlotLabel, parseGpuChoice } from '../../core/replay/gpus';
import { durationText, planReplay, runReplay, RUN_TIMEOUT_MS } from '../../core/replay/replay';
import { analyze } from '../../core/whatChanged/analyze';
import { gatherFacts } from '../../core/whatChanged/gather';
import { BaselineStore } from '../../core/baselines/store';
import { flag, jsonOption, valued, type CliOptions } from '../options';
import { printable, printableLines } from '../output';
import { cliBaselineDir } from './env';
import type { CliCommand } from './types';

// replay's own options, kept beside the command that reads them
declare module '../options' {
  interface CliOptions {
    /** replay: the current command as the person confirms it (`--launch`), its folder, a Hydra/LightningCLI script. */
    launch?: string;
    cwd?: string;
    script?: string;
    interpreter?: string;
  }
}

/** Text of many lines, each made printable on its own (printableLines is for one message: it escapes the breaks). */
function eachLine(text: string): string {
  return text.replace(/\n$/, '').split('\n').map(printable).join('\n');
}

function positiveInt(name: string, v: string, max: number): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new KnownGoodError('settings', `${name} ${v}: a whole number 1–${max}`);
  return n;
}

/** Each run's limit: `--run-timeout`, else the core's default; never the global --timeout (it bounds the gathering). */
export function runTimeoutMs(o: Pick<CliOptions, 'runTimeoutS'>): number {
  return o.runTimeoutS !== undefined ? o.runTimeoutS * 1000 : RUN_TIMEOUT_MS;
}

/**
 * `known-good replay HOST RUN [--change ID…] [--steps N] [--json]`: the run resumed from its known-good checkpoint in
 * the known-good launch, in the current one and in states between, interleaved, until one change is left and
 * confirmed (docs/replay.md). The plan first on stderr, each run and decision as they come; the report on stdout.
 * Exit 0 when a culprit is found and confirmed, 1 otherwise.
 */
export const replayCommand: CliCommand = {
  name: 'replay',
  usage:
    "replay HOST RUN [--launch 'CMD …' [--cwd DIR] | --script PATH] [--change ID…] [--steps N] [--gpus auto|none|0,1,3] [--dry-run] [--json]",
  summary: 'prove which change costs the speed by resuming the run from its known-good checkpoint',
  options: [
    valued(
      'launch',
      "'CMD …'",
      "the current training command, split into words as a shell would (quotes, backslashes, NAME=value first) but never run by one: no pipes, ;, $VAR, globs or ~ (default: the run's launch records)",
      (o, v) => (o.launch = v),
    ),
    valued('cwd', 'DIR', 'the folder that command runs in (default: the run folder), or one a record lacks', (o, v) => {
      o.cwd = v;
    }),
    valued('script', 'PATH', 'the script of a Hydra or LightningCLI run (their configs do not record it)', (o, v) => {
      o.script = v;
    }),
    valued('interpreter', 'PATH', "the python that runs --script (default: the host's --python)", (o, v) => {
      o.interpreter = v;
    }),
    valued('change', 'ID', 'bisect only this change (repeatable; the plan lists the ids)', (o, v) =>
      (o.changes ??= []).push(v),
    ),
    valued(
      'steps',
      'N',
      'optimizer steps each run makes past the checkpoint (default: ten logging intervals)',
      (o, v) => (o.steps = positiveInt('--steps', v, 1_000_000)),
    ),
    valued(
      'reference',
      'CKPT',
      'resume from this checkpoint (label or path; default: the last before the restart)',
      (o, v) => (o.reference = v),
    ),
    valued(
      'speed-key',
      'KEY',
      "the speed's key in the run's jsonl log (default: the report's)",
      (o, v) => (o.speedKey = v),
    ),
    valued(
      'regex',
      'RE',
      'the speed is the first group of RE in what each run prints (instead of its jsonl log)',
      (o, v) => (o.regex = v),
    ),
    valued(
      'resume-flag',
      'FLAG',
      "the script's own flag for the checkpoint to resume from",
      (o, v) => (o.resumeFlag = v),
    ),
    valued('output-flag', 'FLAG', "the script's own flag for its output folder", (o, v) => (o.outputFlag = v)),
    valued('steps-flag', 'FLAG', "the script's own flag for the step count", (o, v) => (o.stepsFlag = v)),
    valued('repeats', 'N', 'runs of each state per round (at least 3, default 3)', (o, v) => {
      o.repeats = positiveInt('--repeats', v, 50);
      if (o.repeats < 3) throw new KnownGoodError('settings', '--repeats: at least 3');
    }),
    valued('threshold', 'F', 'the smallest relative difference that counts (default 0.05)', (o, v) => {
      const f = Number(v);
      if (!(f > 0 && f < 1)) throw new KnownGoodError('settings', `--threshold ${v}: a fraction between 0 and 1`);
      o.threshold = f;
    }),
    valued(
      'gpus',
      'auto|none|LIST',
      'where the runs go: auto (default) the free GPUs, side by side; none: one at a time as launched; LIST (0,1,3): these GPUs even when busy',
      (o, v) => {
        try {
          o.gpus = parseGpuChoice(v);
        } catch (e) {
          throw new KnownGoodError('settings', messageOf(e));
        }
      },
    ),
    valued(
      'run-timeout',
      'SECONDS',
      `the limit on each run, its start-up included (default ${durationText(RUN_TIMEOUT_MS)})`,
      (o, v) => (o.runTimeoutS = positiveInt('--run-timeout', v, 7 * 24 * 3600)),
    ),
    flag('dry-run', 'print the plan (launches, overrides, changes), run nothing', (o) => (o.dryRun = true)),
    jsonOption('the outcome as JSON'),
  ],
  async run({ session, path, positional, options, signal, out, err }) {
    const run = path ?? positional[0];
    if (!run || !run.startsWith('/'))
      throw new KnownGoodError(
        'settings',
        `replay: RUN must be an absolute path on the host${run ? `, got ${run}` : ''}`,
      );
    const host = { id: session.transport.id, label: session.label, probes: session.probes };
    const facts = await gatherFacts(host, run, {
      store: new BaselineStore(cliBaselineDir()),
      timeoutMs: options.timeoutMs,
      signal,
    });
    const report = analyze(facts);
    const names = {
      ...(options.resumeFlag ? { resume: options.resumeFlag } : {}),
      ...(options.outputFlag ? { output: options.outputFlag } : {}),
      ...(options.stepsFlag ? { steps: options.stepsFlag } : {}),
    };
    const setup = setupFromFacts(facts, report, {
      ...(options.launch !== undefined ? { launch: options.launch } : {}),
      ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
      ...(options.script !== undefined ? { script: options.script } : {}),
      python: options.interpreter ?? session.spec.python,
      ...(options.steps !== undefined ? { steps: options.steps } : {}),
      ...(Object.keys(names).length ? { names } : {}),
      ...(options.changes ? { only: options.changes } : {}),
      ...(options.reference !== undefined ? { reference: options.reference } : {}),
      ...(options.speedKey !== undefined ? { key: options.speedKey } : {}),
      ...(options.regex !== undefined ? { regex: options.regex } : {}),
      ...(options.repeats !== undefined ? { repeats: options.repeats } : {}),
      ...(options.threshold !== undefined ? { threshold: options.threshold } : {}),
      runTimeoutMs: runTimeoutMs(options),
    });
    const setupGpus = options.gpus !== undefined ? { ...setup, gpus: options.gpus } : setup;
    const replayHost = {
      transport: session.transport,
      probes: session.probes,
      label: session.label,
      python: session.spec.python,
    };
    const plan = await planReplay(replayHost, setupGpus, signal);
    // where each launch came from, and the flags that give the same launches again (kept by the person, per run)
    const repeat = setup.launches.repeat
      ? `Repeat with: known-good replay ${shellQuote(session.label)} ${shellQuote(run)} ${setup.launches.repeat}\n`
      : '';
    const launches = `${launchesText(setup.launches)}\n${repeat}`;
    if (options.dryRun) {
      out.write(
        options.json
          ? JSON.stringify({ plan, setup: setupGpus }, null, 2) + '\n'
          : `${eachLine(launches)}\n${eachLine(plan.text)}\n`,
      );
      return 0;
    }
    err.write(eachLine(launches) + '\n');
    const t0 = Date.now();
    const slotLabel = gpuSlotLabel(plan.gpus);
    const o = await runReplay(replayHost, plan, setupGpus, {
      signal,
      onText: (t) => err.write(eachLine(t) + '\n'),
      onEvent: (e, changes) => {
        if (e.kind === 'done') return;
        const line = bisectEventLine(e, changes, slotLabel ? { slotLabel } : {});
        if (line !== undefined) err.write(printableLines(line) + '\n');
      },
    });
    const wallS = (Date.now() - t0) / 1000;
    err.write(`${printableLines(o.headline)}\n${o.runs.length} runs, ${wallS.toFixed(0)} s\n`);
    if (options.json) out.write(JSON.stringify({ ...o, markdown: undefined, wallS }, null, 2) + '\n');
    else out.write(eachLine(o.markdown) + '\n');
    return o.report?.verdict.kind === 'culprit' && o.report.confirmation?.confirmed ? 0 : 1;
  },
};
