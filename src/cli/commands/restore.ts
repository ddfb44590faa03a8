import { findBaseline } from '../../core/baselines/lookup';
import { BaselineStore, type Baseline } from '../../core/baselines/store';
import { bisectEventLine, bisectHeadline } from '../../core/bisect/render';
import { KnownGoodError } from '../../core/errors';
import type { HostSession } from '../../core/registry';
import { bisectPackagesOfBaseline } from '../../core/restore/packageBisect';
import { envLabelOf, planDocument, planScript, refusedLines } from '../../core/restore/plan';
import { compareFreeze, freezeComparisonText, freezeOf, planOnHost, runScript } from '../../core/restore/run';
import { restoredSpeeds, restoredSpeedsText } from '../../core/restore/speeds';
import { flag, jsonOption, valued, type CliOption, type CliOptions } from '../options';
import { printable, printableLines } from '../output';
import { cliBaselineDir } from './env';
import type { CliCommand, CliContext } from './types';

async function baselineOf(session: HostSession, word: string | undefined, what: string): Promise<Baseline> {
  if (!word) throw new KnownGoodError('settings', `${what}: BASELINE is missing (a file, an id or a label)`);
  const store = new BaselineStore(cliBaselineDir());
  return (await findBaseline(store, session.transport.id, word)).baseline;
}

async function referenceOf(store: BaselineStore, hostId: string): Promise<{ reference?: string }> {
  const ref = await store.reference(hostId);
  return ref ? { reference: ref.resultId } : {};
}

function title(b: Baseline): string {
  return `baseline "${b.label}" (${b.capturedAt})`;
}

/** `--regex RE`, which restore and bisect read alike. */
export const regexOption: CliOption = valued(
  'regex',
  'RE',
  "with --bench: the speed is the first group of RE in the command's output",
  (o, v) => (o.regex = v),
);

/** The user's benchmark with `--bench CMD --regex RE`; the speed is the first group of RE in its output. */
function benchOf(options: CliOptions): { command: string; regex: string; lastN: number } | undefined {
  if (options.bench === undefined) return undefined;
  if (options.regex === undefined)
    throw new KnownGoodError('settings', '--bench CMD needs --regex RE here: the speed is read from its output');
  return { command: options.bench, regex: options.regex, lastN: 10 };
}

/**
 * `known-good restore HOST BASELINE [--run] [--bench CMD --regex RE] [--json]`: the plan that rebuilds the
 * baseline's Python environment in `~/.known-good/envs/<label>` (printed; nothing is installed), or with `--run` the
 * plan run with its progress on stderr (after the values of the baseline it refused), then `pip freeze` of the restored env against the baseline, and with
 * `--bench` the benchmark in the restored env and now. Exit 0 when restored identical (or, without --run, when the
 * plan has no blocker), 1 otherwise.
 */
export const restoreCommand: CliCommand = {
  name: 'restore',
  usage: 'restore HOST BASELINE [--run [--bench CMD --regex RE]] [--json]',
  summary: "rebuild a baseline's Python environment in a fresh venv (the plan; --run runs it)",
  options: [
    flag('run', 'run the plan (without it the plan is only printed)', (o) => (o.run = true)),
    valued(
      'bench',
      'CMD',
      'with --run: your benchmark, run in the restored env and now (with --regex)',
      (o, v) => (o.bench = v),
    ),
    regexOption,
    jsonOption(),
  ],
  async run({ session, positional, options, signal, out, err }) {
    const baseline = await baselineOf(session, positional[0], 'restore');
    const plan = await planOnHost(session, baseline.snapshot, { label: envLabelOf(baseline.label) });
    const blockers = plan.notes.filter((n) => n.severity === 'blocker');
    if (!options.run) {
      out.write(
        options.json
          ? JSON.stringify({ plan }, null, 2) + '\n'
          : printableLines(planDocument(plan, title(baseline))) + '\n',
      );
      return blockers.length ? 1 : 0;
    }
    // What the baseline held that the plan will not use is said before the install starts, not only in --json.
    for (const line of refusedLines(plan)) err.write(printable(line) + '\n');
    const exitCode = await runScript(
      session.transport,
      planScript(plan, title(baseline)),
      (l) => err.write(printableLines(l) + '\n'),
      signal,
      { python: session.spec.python },
    );
    if (exitCode !== 0) {
      if (options.json) out.write(JSON.stringify({ plan, exitCode }, null, 2) + '\n');
      else err.write(`the restore script stopped (exit ${exitCode})\n`);
      return 1;
    }
    const comparison = compareFreeze(
      baseline.snapshot.packages.packages,
      await freezeOf(session.transport, plan),
      plan,
    );
    const bench = benchOf(options);
    const store = new BaselineStore(cliBaselineDir());
    const speeds = bench
      ? await restoredSpeeds(
          { ...session, python: session.spec.python, runTimeoutMs: options.timeoutMs },
          {
            envDir: plan.envDir,
            nowPython: session.spec.python,
            baseline,
            benchmark: { kind: 'custom', bench },
            results: (await store.listResults(session.transport.id)).results.map((r) => r.result),
            ...(await referenceOf(store, session.transport.id)),
          },
        )
      : undefined;
    if (options.json) out.write(JSON.stringify({ plan, exitCode, comparison, speeds }, null, 2) + '\n');
    else {
      out.write(printableLines(freezeComparisonText(comparison)) + '\n');
      if (speeds) out.write(printableLines(restoredSpeedsText(speeds)) + '\n');
      out.write(`restored env: ${printable(plan.envDir)}\n`);
    }
    return comparison.identical ? 0 : 1;
  },
};

/**
 * `known-good bisect HOST BASELINE --packages --bench CMD --regex RE [--repeats N] [--json]`: the packages that
 * differ between the restored env (`known-good restore … --run` first) and the host's interpreter, bisected with
 * the benchmark. Exit 0 when a culprit is found and confirmed.
 */
export async function packageBisectCli({
  session,
  positional,
  options,
  signal,
  out,
  err,
}: CliContext): Promise<number> {
  const baseline = await baselineOf(session, positional[0], 'bisect --packages');
  const bench = benchOf(options);
  if (!bench) throw new KnownGoodError('settings', 'bisect --packages needs --bench CMD --regex RE');
  {
    const r = await bisectPackagesOfBaseline(session, baseline, {
      bench,
      restoreHint: `known-good restore ${session.label} ${positional[0]!} --run`,
      signal,
      ...(options.repeats !== undefined ? { repeats: options.repeats } : {}),
      onLine: (l) => err.write(printableLines(l) + '\n'),
      onEvent: (e, changes) => {
        if (e.kind === 'done') return;
        const line = bisectEventLine(e, changes, {});
        if (line !== undefined && e.kind !== 'sample') err.write(printableLines(line) + '\n');
      },
    });
    err.write(printableLines(bisectHeadline(r.report)) + '\n');
    if (options.json) {
      const { markdown: _md, ...rest } = r;
      out.write(JSON.stringify(rest, null, 2) + '\n');
    } else out.write(printableLines(r.markdown) + '\n');
    return r.report.verdict.kind === 'culprit' && r.report.confirmation?.confirmed ? 0 : 1;
  }
}
