import * as vscode from 'vscode';
import type { Container } from '../container';
import { throughputBenchProbe, type BenchConfig, type BenchResult } from '../core/bench/benchProbe';
import { compareThroughput, comparisonChoice, formatRate } from '../core/bench/compare';
import {
  customBenchmarkSchema,
  throughputFromJsonl,
  throughputFromOutput,
  type ThroughputReading,
} from '../core/bench/customBenchmark';
import type { Baseline, BaselineStore, ThroughputResult } from '../core/baselines/store';
import { KnownGoodError, messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { describeIssues } from '../core/probes/probe';
import { newNonce } from '../core/probes/runner';
import {
  BENCH_PRESETS,
  benchRecord,
  benchSummary,
  comparisonDocument,
  customRecord,
  parseBenchConfig,
  resultLabel,
  sampleOf,
} from '../core/terminal/bench';
import { probeTerminalCommand, shellTerminalCommand } from '../core/terminal/command';
import { parseFramedResult, terminalName } from '../core/terminal/probes';
import type { RunnerExit } from '../core/terminal/runner';
import { baselineStore } from '../terminal/register';
import { runInTerminal } from '../terminal/run';
import { hostFor, targetOf } from '../terminal/target';
import {
  getConfiguration,
  registerTextDocumentContentProvider,
  showInfo,
  showInputBox,
  showQuickPick,
  showTextDocument,
} from '../window';
import { registerLiveThroughput } from './live';
import { whyFailed } from '../core/transport/collect';

export const BenchCommands = {
  run: 'knownGood.bench.run',
  runCustom: 'knownGood.bench.runCustom',
  compare: 'knownGood.bench.compareWithBaseline',
} as const;

const SCHEME = 'knownGood-bench';

/** Read-only comparison documents, by URI. */
class ComparisonDocuments implements vscode.TextDocumentContentProvider {
  private readonly docs = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  put(uri: vscode.Uri, text: string): void {
    this.docs.set(uri.toString(), text);
    this.changed.fire(uri);
  }
  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.docs.get(uri.toString()) ?? '(this comparison is no longer open: run Compare with Baseline again)';
  }
}

export interface BenchRunOutcome {
  terminalName: string;
  exit: RunnerExit;
  tokensPerSec?: number;
  /** Where the result was kept. */
  file?: string;
  result?: ThroughputResult;
  /** `4.3K tok/s now vs 12.8K tok/s at baseline "good-run" (0.34×)` when there is a reference. */
  comparison?: string;
  error?: string;
  screen: string;
}

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

export function registerBench(c: Container): void {
  const docs = new ComparisonDocuments();
  c.track(registerTextDocumentContentProvider(SCHEME, docs));
  c.command(BenchCommands.run, (node?: unknown, extra?: unknown) => runBench(c, node, argsOf(extra)));
  c.command(BenchCommands.runCustom, (node?: unknown, extra?: unknown) => runCustom(c, node, argsOf(extra)));
  c.command(BenchCommands.compare, (node?: unknown, extra?: unknown) => compare(c, docs, node, argsOf(extra)));
  registerLiveThroughput(c);
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

function hostKey(c: Container, host: HostSpec): string {
  return c.registry.session(host).transport.id;
}

/** The reference a new result is compared with: the newest result kept with a baseline, else none. */
async function referenceFor(
  c: Container,
  host: HostSpec,
  exceptId: string,
): Promise<{ result: ThroughputResult; label: string } | undefined> {
  const refs = (await references(c, host)).filter((r) => r.result.id !== exceptId && r.isBaseline);
  return refs[0];
}

/** Keeps a result with the host's baselines and compares it with the reference result, if there is one. */
async function keepAndCompare(
  c: Container,
  host: HostSpec,
  record: Parameters<BaselineStore['appendResult']>[1],
): Promise<{ kept: { file: string; result: ThroughputResult }; comparison?: string }> {
  const kept = await baselineStore(c).appendResult(hostKey(c, host), record);
  const ref = await referenceFor(c, host, kept.result.id);
  if (!ref) return { kept };
  return {
    kept,
    comparison: compareThroughput(sampleOf(kept.result)!, { ...sampleOf(ref.result)!, label: ref.label }).text,
  };
}

interface Reference {
  result: ThroughputResult;
  label: string;
  isBaseline: boolean;
}

/** Every result of a host a new one can be compared with, newest first; those kept with a baseline first. */
async function references(c: Container, host: HostSpec): Promise<Reference[]> {
  const store = baselineStore(c);
  const key = hostKey(c, host);
  const baselines: Baseline[] = (await store.list(key)).baselines.map((b) => b.baseline);
  const out: Reference[] = [];
  const seen = new Set<string>();
  for (const b of baselines) {
    for (const t of [...(b.throughput ?? [])].reverse()) {
      if (seen.has(t.id) || !sampleOf(t)) continue;
      seen.add(t.id);
      out.push({ result: t, label: b.label, isBaseline: true });
    }
  }
  const results = (await store.listResults(key)).results.map((r) => r.result).reverse();
  for (const r of results) {
    if (seen.has(r.id) || !sampleOf(r)) continue;
    seen.add(r.id);
    out.push({
      result: r,
      label: resultLabel(r, baselines),
      isBaseline: r.baselineId !== null && baselines.some((b) => b.id === r.baselineId),
    });
  }
  return out.sort((a, b) => Number(b.isBaseline) - Number(a.isBaseline));
}

async function runBench(c: Container, node: unknown, args: BenchArgs): Promise<BenchRunOutcome | undefined> {
  const host = await hostFor(c, targetOf(node), 'Run the throughput benchmark on which host?');
  if (!host) return undefined;
  const config =
    args.config !== undefined
      ? typeof args.config === 'string'
        ? parseBenchConfig(args.config, args.compile)
        : parseBenchConfig(JSON.stringify(args.config), args.compile)
      : await pickConfig();
  if (!config) return undefined;
  const session = c.registry.session(host);
  const call = throughputBenchProbe(config);
  const nonce = newNonce();
  const name = terminalName('Throughput benchmark', host.name);
  let kept: { file: string; result: ThroughputResult } | undefined;
  let bench: BenchResult | undefined;
  let comparison: string | undefined;
  let error: string | undefined;
  const run = runInTerminal(name, session, probeTerminalCommand(host.python, call.probe, call.args, nonce), {
    nonce,
    epilogue: async (exit, runner) => {
      if (exit.error !== undefined) return undefined;
      try {
        bench = parseFramedResult(call, runner.framed(), host.name).value;
        const label =
          args.label ??
          `${formatRate(bench.tokensPerSec.median)} tok/s ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`;
        ({ kept, comparison } = await keepAndCompare(
          c,
          host,
          benchRecord(bench, { hostId: hostKey(c, host), hostLabel: host.name, label }),
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
  const exit = await run.done;
  if (kept) {
    void showInfo(
      `${host.name}: ${comparison ?? `${formatRate(sampleOf(kept.result)!.tokensPerSec)} tok/s kept`}`,
      'Compare with Baseline',
    ).then((a) => {
      if (a) void vscode.commands.executeCommand(BenchCommands.compare, { hostId: host.id });
    });
  }
  return {
    terminalName: name,
    exit,
    ...(kept ? { file: kept.file, result: kept.result, tokensPerSec: sampleOf(kept.result)!.tokensPerSec } : {}),
    ...(comparison !== undefined ? { comparison } : {}),
    ...(error !== undefined ? { error } : {}),
    screen: run.pty.screen,
  };
}

/** `knownGood.benchmark.*` settings, parsed by the core schema. */
function customSettings() {
  const cfg = getConfiguration('knownGood.benchmark');
  const command = cfg.get<string>('command')?.trim();
  if (!command)
    throw new KnownGoodError(
      'settings',
      'set knownGood.benchmark.command first (e.g. cd /workspace && python train.py --max-steps 30)',
    );
  const regex = cfg.get<string>('throughputRegex')?.trim();
  const jsonl = cfg.get<string>('throughputJsonl')?.trim();
  const key = cfg.get<string>('throughputKey')?.trim() || 'tok_per_s';
  const r = customBenchmarkSchema.safeParse({
    command,
    ...(regex ? { regex } : {}),
    ...(jsonl ? { jsonl: { path: jsonl, key } } : {}),
  });
  if (!r.success) throw new KnownGoodError('settings', `knownGood.benchmark: ${describeIssues(r.error)}`);
  return r.data;
}

async function runCustom(c: Container, node: unknown, args: BenchArgs): Promise<BenchRunOutcome | undefined> {
  const bench = customSettings();
  const host = await hostFor(c, targetOf(node), 'Run your benchmark command on which host?');
  if (!host) return undefined;
  const session = c.registry.session(host);
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
          c,
          host,
          customRecord(reading, {
            hostId: hostKey(c, host),
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
  return {
    terminalName: name,
    exit,
    ...(kept ? { file: kept.file, result: kept.result, tokensPerSec: sampleOf(kept.result)!.tokensPerSec } : {}),
    ...(comparison !== undefined ? { comparison } : {}),
    ...(error !== undefined ? { error } : {}),
    screen: run.pty.screen,
  };
}

/** Opens the comparison of the newest result with a reference as a read-only document; resolves to its text. */
async function compare(
  c: Container,
  docs: ComparisonDocuments,
  node: unknown,
  args: BenchArgs,
): Promise<{ uri: string; text: string } | undefined> {
  const host = await hostFor(c, targetOf(node), 'Compare the throughput of which host?');
  if (!host) return undefined;
  const choice = comparisonChoice(await references(c, host), host.name);
  if (choice.kind === 'info') {
    void showInfo(choice.message);
    return undefined;
  }
  const { newest, others } = choice;
  let ref: Reference | undefined;
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
  // Labels such as `12.8K tok/s …` hold slashes: one path segment, so the tab shows the whole title.
  const title = `${host.name} throughput vs ${ref.label}`.replace(/[\\/:*?"<>|]/g, '_');
  const uri = vscode.Uri.from({ scheme: SCHEME, path: `/${title}.md` });
  docs.put(uri, text);
  await showTextDocument(uri, { preview: true });
  return { uri: uri.toString(), text };
}
