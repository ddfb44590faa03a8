import { findBaseline } from '../../core/baselines/lookup';
import { BaselineStore } from '../../core/baselines/store';
import { parseBenchConfig } from '../../core/bench/records';
import { customBenchmarkSchema } from '../../core/bench/customBenchmark';
import { bisectEventLine } from '../../core/bisect/render';
import { envBisect, type BisectBenchmark } from '../../core/bisect/envBisect';
import { KnownGoodError } from '../../core/errors';
import { describeIssues } from '../../core/util/zod';
import { flag, jsonOption, valued, type CliOptions } from '../options';
import { printable, printableLines } from '../output';
import { cliBaselineDir } from './env';
import { packageBisectCli, regexOption } from './restore';
import type { CliCommand } from './types';

function parseRepeats(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 3 || n > 50)
    throw new KnownGoodError('settings', `--repeats ${v}: a whole number 3–50`);
  return n;
}

function benchmarkOf(options: CliOptions): BisectBenchmark {
  if (options.bench === undefined) {
    if (options.regex !== undefined || options.jsonl !== undefined)
      throw new KnownGoodError('settings', '--regex and --jsonl go with --bench CMD');
  } else if (options.cpuClock)
    throw new KnownGoodError('settings', "--cpu-clock is the built-in benchmark's: not with --bench");
  if (options.bench === undefined) {
    return {
      kind: 'builtin',
      ...(options.config !== undefined ? { config: parseBenchConfig(options.config) } : {}),
      ...(options.cpuClock ? { clock: 'cpu' as const } : {}),
    };
  }
  let jsonl: { path: string; key: string } | undefined;
  if (options.jsonl !== undefined) {
    const at = options.jsonl.lastIndexOf(':');
    if (at <= 0) throw new KnownGoodError('settings', `--jsonl ${options.jsonl}: expected PATH:KEY`);
    jsonl = { path: options.jsonl.slice(0, at), key: options.jsonl.slice(at + 1) };
  }
  const r = customBenchmarkSchema.safeParse({
    command: options.bench,
    ...(options.regex !== undefined ? { regex: options.regex } : {}),
    ...(jsonl ? { jsonl } : {}),
  });
  if (!r.success)
    throw new KnownGoodError('settings', `--bench: ${describeIssues(r.error)} (--regex RE or --jsonl PATH:KEY)`);
  return { kind: 'custom', bench: r.data };
}

/**
 * `known-good bisect HOST BASELINE [--bench CMD --regex RE | --jsonl PATH:KEY] [--config …] [--repeats N] [--json]`:
 * which of the environment differences from a baseline costs the speed (docs/bisect.md). The plan, each run and each
 * decision on stderr as they come; the report (markdown, or JSON with `--json`) on stdout. Exit 0 when a culprit is
 * found and confirmed, 1 otherwise (no single change explains it, not reproduced, inconclusive, nothing to bisect).
 */
export const bisectCommand: CliCommand = {
  name: 'bisect',
  usage: 'bisect HOST BASELINE [--bench CMD] [--packages] [--json]',
  summary: 'which environment difference from a baseline costs the speed (benchmark runs)',
  options: [
    valued(
      'bench',
      'CMD',
      'your own benchmark command instead of the built-in one (with --regex or --jsonl)',
      (o, v) => (o.bench = v),
    ),
    regexOption,
    valued(
      'jsonl',
      'PATH:KEY',
      'with --bench: the speed is KEY in the jsonl file PATH the command writes',
      (o, v) => (o.jsonl = v),
    ),
    valued(
      'repeats',
      'N',
      'runs of each state per round (at least 3, default 3)',
      (o, v) => (o.repeats = parseRepeats(v)),
    ),
    flag(
      'cpu-clock',
      "the built-in benchmark's speed per CPU-second of its process, not wall time\n" +
        '(a shared CPU host; blind to changes that only cost waiting, e.g. fewer threads)',
      (o) => (o.cpuClock = true),
    ),
    valued('config', 'tiny|gpu|JSON', "the built-in benchmark's shape (default tiny on CPU)", (o, v) => (o.config = v)),
    flag(
      'packages',
      'the packages that differ from the restored env (known-good restore, its plan run, first; needs --bench, --regex)',
      (o) => (o.packages = true),
    ),
    jsonOption('the report as JSON instead of Markdown'),
  ],
  async run(ctx) {
    if (ctx.options.packages) return packageBisectCli(ctx);
    const { session, positional, options, out, err } = ctx;
    const word = positional[0];
    if (!word) throw new KnownGoodError('settings', 'bisect: BASELINE is missing (a file, an id or a label)');
    const store = new BaselineStore(cliBaselineDir());
    const { baseline } = await findBaseline(store, session.transport.id, word);
    const benchmark = benchmarkOf(options);
    const unit = benchmark.kind === 'builtin' ? 'tok/s' : '';
    {
      const o = await envBisect({ ...session, python: session.spec.python, label: session.label }, baseline, {
        benchmark,
        signal: ctx.signal,
        runTimeoutMs: options.timeoutMs,
        ...(options.repeats !== undefined ? { repeats: options.repeats } : {}),
        onText: (t) => err.write(t.replace(/\n$/, '').split('\n').map(printable).join('\n') + '\n'),
        onEvent: (e, changes) => {
          if (e.kind === 'done') return;
          const line = bisectEventLine(e, changes, { unit });
          if (line !== undefined) err.write(printableLines(line) + '\n');
        },
      });
      err.write(printableLines(o.headline) + '\n');
      if (options.json) {
        const { markdown: _md, ...rest } = o;
        out.write(JSON.stringify(rest, null, 2) + '\n');
      } else out.write(printableLines(o.markdown) + '\n');
      return o.report?.verdict.kind === 'culprit' && o.report.confirmation?.confirmed ? 0 : 1;
    }
  },
};
