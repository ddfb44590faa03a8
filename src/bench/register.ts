import * as vscode from 'vscode';
import type { BenchRunOutcome } from '../api';
import { BenchCommands } from '../constants';
import type { BenchConfig, BenchResult } from '../core/bench/benchProbe';
import { benchProcess } from '../core/bench/run';
import { comparisonChoice, formatRate } from '../core/bench/compare';
import {
  customBenchmarkOf,
  throughputFromJsonl,
  throughputFromOutput,
  type ThroughputReading,
} from '../core/bench/customBenchmark';
import type { BaselineStore, ThroughputResult } from '../core/baselines/store';
import { KnownGoodError, messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import type { ResolvedTarget } from '../core/runs/listings';
import type { CommandTarget } from '../core/runs/targets';
import {
  BENCH_PRESETS,
  benchRecord,
  benchSummary,
  comparisonDocument,
  customRecord,
  parseBenchConfig,
  sampleOf,
} from '../core/bench/records';
import { shellTerminalCommand } from '../core/terminal/command';
import type { RunnerExit } from '../core/terminal/runner';
import { terminalName } from '../core/probes/catalogue';
import { runInTerminal, showInTerminal } from '../shared/terminal';
import { showInfo, showInputBox, showQuickPick } from '../window';
import { registerLiveThroughput } from './live';
import { benchReferences, keepResult, type BenchReference } from '../core/bench/references';
import type { CustomBenchmark } from '../core/bench/customBenchmark';
import type { RegisterCommand } from '../shared/commands';
import type { Documents } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import { whyFailed } from '../core/transport/collect';

/** Optional arguments (tests, other commands): `{ config: 'tiny' | {...}, label, compile }`. */
interface BenchArgs {
  config?: string | BenchConfig;
  label?: string;
  compile?: boolean;
  reference?: string;
}

function argsOf(v: unknown): BenchArgs {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {};
}

/** What the benchmark commands and live throughput need from the extension. */
export interface BenchDeps {
  command: RegisterCommand;
  track<T extends vscode.Disposable>(d: T): T;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'error'>;
  settings: SettingsAccess;
  /** Results are kept with the host's baselines. */
  store: BaselineStore;
  storeKeyOf(host: HostSpec): string;
  /** A target as its host's listing has it (Listings.resolve): live throughput follows a run's metrics log. */
  resolve(target: CommandTarget): ResolvedTarget | undefined;
  /** Remote Runs: live throughput follows its selection while it is visible. */
  view: Pick<vscode.TreeView<unknown>, 'selection' | 'visible' | 'onDidChangeSelection' | 'onDidChangeVisibility'>;
  /** Comparisons open as read-only documents kept with the workspace (back after a reload). */
  documents: Pick<Documents, 'show'>;
}

export function registerBench(d: BenchDeps): void {
  const on = (placeHolder: string) => ({ kinds: ['host'], pick: placeHolder }) as const;
  d.command(BenchCommands.run, on('Run the throughput benchmark on which host?'), (t, call) =>
    runBench(d, d.hosts.get(t.hostId), argsOf(call.extra)),
  );
  d.command(BenchCommands.runCustom, { kinds: ['host'] }, async (t, call) => {
    const bench = customBenchmarkOf(d.settings.current.benchmark);
    const host = t ? d.hosts.get(t.hostId) : await d.hosts.pick('Run your benchmark command on which host?');
    return host && runCustom(d, bench, host, argsOf(call.extra));
  });
  d.command(BenchCommands.compare, on('Compare the throughput of which host?'), (t, call) =>
    compare(d, d.hosts.get(t.hostId), argsOf(call.extra)),
  );
  registerLiveThroughput(d);
}

async function pickConfig(): Promise<BenchConfig | undefined> {
  const items = [
    ...BENCH_PRESETS.map((p) => ({ label: p.label, detail: p.detail, config: p.config })),
    {
      label: 'Custom JSON…',
      detail: '{"layers": 24, "width": 2048, "seq": 4096, "batch": 4, "compile": true, "attention": "flex"}',
      config: undefined,
    },
  ];
  const pick = await showQuickPick(items, { placeHolder: 'Benchmark configuration' });
  if (!pick) return undefined;
  if (pick.config) return pick.config;
  const text = await showInputBox({
    prompt:
      'Benchmark options as JSON: layers, width, heads, seq, batch, vocab, steps, warmup, dtype, device, compile, attention',
    value: '{"device": "cuda", "layers": 12, "width": 1024}',
    ignoreFocusOut: true,
    validateInput: (v) => {
      try {
        parseBenchConfig(v);
        return undefined;
      } catch (e) {
        return messageOf(e);
      }
    },
  });
  return text ? parseBenchConfig(text) : undefined;
}

/** Keeps a result with the host's baselines and compares it with the reference result, if there is one. */
async function keepAndCompare(
  d: BenchDeps,
  host: HostSpec,
  record: Parameters<BaselineStore['appendResult']>[1],
): Promise<{ kept: { file: string; result: ThroughputResult }; comparison?: string }> {
  return keepResult(d.store, d.storeKeyOf(host), record);
}

async function runBench(d: BenchDeps, host: HostSpec, args: BenchArgs): Promise<BenchRunOutcome | undefined> {
  const config =
    args.config !== undefined
      ? typeof args.config === 'string'
        ? parseBenchConfig(args.config, args.compile)
        : parseBenchConfig(JSON.stringify(args.config), args.compile)
      : await pickConfig();
  if (!config) return undefined;
  const session = d.hosts.session(host);
  const name = terminalName('Throughput benchmark', host.name);
  let kept: { file: string; result: ThroughputResult } | undefined;
  let bench: BenchResult | undefined;
  let comparison: string | undefined;
  let error: string | undefined;
  const { runner } = benchProcess({ transport: session.transport, python: host.python, label: host.name }, config, {
    epilogue: async (exit, result) => {
      if (exit.error !== undefined) return undefined;
      try {
        bench = result().value;
        const label =
          args.label ??
          `${formatRate(bench.tokensPerSec.median)} tok/s ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`;
        ({ kept, comparison } = await keepAndCompare(
          d,
          host,
          benchRecord(bench, { hostId: d.storeKeyOf(host), hostLabel: host.name, label }),
        ));
        const lines = [...benchSummary(bench), `kept with the baselines of ${host.name} as "${label}"`];
        if (comparison) lines.push(comparison);
        return `── throughput ──\n${lines.join('\n')}`;
      } catch (e) {
        error = messageOf(e);
        throw e;
      }
    },
  });
  const run = showInTerminal(name, runner);
  const exit = await run.done;
  if (kept) {
    void showInfo(
      `${host.name}: ${comparison ?? `${formatRate(sampleOf(kept.result)!.tokensPerSec)} tok/s kept`}`,
      'Compare with Baseline',
    ).then((a) => {
      if (a) void vscode.commands.executeCommand(BenchCommands.compare, { hostId: host.id });
    });
  }
  return outcomeOf(name, exit, run.pty.screen, { kept, comparison, error });
}

/** What a benchmark run in a terminal returns to its caller (the API and the tests). */
function outcomeOf(
  terminalName: string,
  exit: RunnerExit,
  screen: string,
  o: { kept?: { file: string; result: ThroughputResult }; comparison?: string; error?: string },
): BenchRunOutcome {
  const { kept, comparison, error } = o;
  return {
    terminalName,
    exit,
    ...(kept ? { file: kept.file, result: kept.result, tokensPerSec: sampleOf(kept.result)!.tokensPerSec } : {}),
    ...(comparison !== undefined ? { comparison } : {}),
    ...(error !== undefined ? { error } : {}),
    screen,
  };
}

async function runCustom(
  d: BenchDeps,
  bench: CustomBenchmark,
  host: HostSpec,
  args: BenchArgs,
): Promise<BenchRunOutcome | undefined> {
  const session = d.hosts.session(host);
  const name = terminalName('Benchmark command', host.name);
  let kept: { file: string; result: ThroughputResult } | undefined;
  let comparison: string | undefined;
  let error: string | undefined;
  const run = runInTerminal(name, session, shellTerminalCommand(bench.command), {
    epilogue: async (exit, runner) => {
      if (exit.error !== undefined) return undefined;
      try {
        let reading: ThroughputReading | undefined;
        let source: 'regex' | 'jsonl';
        if (bench.jsonl) {
          source = 'jsonl';
          // The end of the log is enough for the last values; a line cut at the start is skipped by the parser.
          const tail = await session.transport.exec(['tail', '-c', '4194304', bench.jsonl.path], { timeoutMs: 30_000 });
          if (tail.exitCode !== 0)
            throw new KnownGoodError('not-found', `could not read ${bench.jsonl.path}: ${whyFailed(tail)}`);
          reading = throughputFromJsonl(tail.stdout, bench.jsonl.key, bench.lastN);
        } else {
          source = 'regex';
          reading = throughputFromOutput(runner.output, bench.regex!, bench.lastN);
        }
        if (!reading) {
          throw new KnownGoodError(
            'bad-output',
            source === 'regex'
              ? `no throughput matched knownGood.benchmark.throughputRegex ${bench.regex!}`
              : `no "${bench.jsonl!.key}" values in ${bench.jsonl!.path}`,
          );
        }
        const label =
          args.label ??
          `${formatRate(reading.tokensPerSec)} tok/s (own command) ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`;
        ({ kept, comparison } = await keepAndCompare(
          d,
          host,
          customRecord(reading, {
            hostId: d.storeKeyOf(host),
            hostLabel: host.name,
            label,
            command: bench.command,
            source,
            exitCode: exit.exitCode,
          }),
        ));
        const lines = [
          `${formatRate(reading.tokensPerSec)} tok/s: median of the last ${reading.used.length} of ${reading.found} values (${source})`,
          `kept with the baselines of ${host.name} as "${label}"`,
        ];
        if (comparison) lines.push(comparison);
        return `── throughput ──\n${lines.join('\n')}`;
      } catch (e) {
        error = messageOf(e);
        throw e;
      }
    },
  });
  const exit = await run.done;
  return outcomeOf(name, exit, run.pty.screen, { kept, comparison, error });
}

/** Opens the comparison of the newest result with a reference as a read-only document; resolves to its text. */
async function compare(
  d: BenchDeps,
  host: HostSpec,
  args: BenchArgs,
): Promise<{ uri: string; text: string } | undefined> {
  const choice = comparisonChoice(await benchReferences(d.store, d.storeKeyOf(host)), host.name);
  if (choice.kind === 'info') {
    void showInfo(choice.message);
    return undefined;
  }
  const { newest, others } = choice;
  let ref: BenchReference | undefined;
  if (args.reference !== undefined) {
    ref = others.find((r) => r.result.id === args.reference || r.label === args.reference);
    if (!ref) throw new KnownGoodError('not-found', `no kept result ${args.reference} for ${host.name}`);
  } else {
    const pick = await showQuickPick(
      others.map((r) => ({
        label: r.isBaseline ? `$(pass) baseline "${r.label}"` : r.label,
        description: `${formatRate(sampleOf(r.result)!.tokensPerSec)} tok/s`,
        detail: r.result.at,
        ref: r,
      })),
      { placeHolder: `Compare "${newest.label}" (${formatRate(sampleOf(newest.result)!.tokensPerSec)} tok/s) with…` },
    );
    ref = pick?.ref;
  }
  if (!ref) return undefined;
  const text = comparisonDocument(newest, ref, host.name);
  // labels such as `12.8K tok/s …` hold slashes: the name is one path segment, so the tab shows all of it
  const name = `${host.name} throughput vs ${ref.label}`.replace(/[\\/:*?"<>|]/g, '_');
  const editor = await d.documents.show(`${name}.md`, text, { preview: true });
  return { uri: editor.document.uri.toString(), text };
}
