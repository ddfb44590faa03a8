import * as vscode from 'vscode';
import type { BaselineStore } from '../core/baselines/store';
import { customBenchmarkOf } from '../core/bench/customBenchmark';
import { envBisect, noBaseline, type BisectBenchmark, type EnvBisectOutcome } from '../core/bisect/envBisect';
import { bisectEventLine } from '../core/bisect/render';
import { KnownGoodError, messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { BisectCommands } from '../constants';
import type { RegisterCommand } from '../shared/commands';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import { createTerminal, registerTextDocumentContentProvider, showQuickPick, showTextDocument } from '../window';

/** What the environment bisect needs from the extension. */
export interface BisectDeps {
  command: RegisterCommand;
  track<T extends vscode.Disposable>(d: T): T;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'error'>;
  settings: SettingsAccess;
  store: BaselineStore;
  storeKeyOf(host: HostSpec): string;
}

/** What tests read of a finished bisect (the command's result). */
export interface BisectRunOutcome {
  terminalName: string;
  uri: string;
  outcome: EnvBisectOutcome;
  screen: string;
}

const SCHEME = 'knownGood-bisect';

/** Reports as read-only documents: `knownGood-bisect:/<host> bisect.md?<n>`. */
class Reports implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private n = 0;
  add(name: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({
      scheme: SCHEME,
      path: `/${name.replace(/[/\\]/g, '_')}.md`,
      query: String(++this.n),
    });
    this.texts.set(uri.toString(), text);
    return uri;
  }
  provideTextDocumentContent(uri: vscode.Uri): string {
    return (
      this.texts.get(uri.toString()) ?? 'This bisect report is gone (the window was reloaded): run the bisect again.'
    );
  }
}

/**
 * A terminal that shows the bisect as it runs (the plan, each run's speed, each decision); closing it cancels the
 * bisect. The engine owns the work; this only prints.
 */
class BisectTerminal implements vscode.Pseudoterminal {
  private readonly writes = new vscode.EventEmitter<string>();
  private readonly closes = new vscode.EventEmitter<number | void>();
  readonly onDidWrite = this.writes.event;
  readonly onDidClose = this.closes.event;
  readonly abort = new AbortController();
  private readonly opened: Promise<void>;
  private resolveOpen!: () => void;
  private ended = false;
  screen = '';
  constructor() {
    this.opened = new Promise((r) => (this.resolveOpen = r));
  }
  open(): void {
    this.resolveOpen();
  }
  close(): void {
    this.abort.abort();
  }
  handleInput(): void {
    if (this.ended) this.closes.fire();
  }
  write(text: string): void {
    this.screen += text;
    void this.opened.then(() => this.writes.fire(text.replace(/\r?\n/g, '\r\n')));
  }
  end(): void {
    this.ended = true;
    this.write('\x1b[2mPress any key to close this terminal.\x1b[0m\n');
  }
}

export function registerBisect(d: BisectDeps): void {
  const reports = new Reports();
  d.track(registerTextDocumentContentProvider(SCHEME, reports));
  d.command(
    BisectCommands.environment,
    { kinds: ['host', 'baseline'], pick: 'Bisect the environment of which host?' },
    async (t) => {
      const host = d.hosts.get(t.hostId);
      const key = d.storeKeyOf(host);
      const { baselines } = await d.store.list(key);
      if (baselines.length === 0) throw noBaseline(host.name);
      let baseline =
        t.kind === 'baseline' ? baselines.find((b) => b.baseline.id === t.baselineId)?.baseline : undefined;
      if (t.kind === 'baseline' && !baseline)
        throw new KnownGoodError('not-found', `no baseline ${t.baselineId} for ${host.name}`);
      if (!baseline) {
        const pick = await showQuickPick(
          baselines.map((b) => ({ label: b.baseline.label, description: b.baseline.capturedAt, b: b.baseline })),
          { placeHolder: `Bisect the environment of ${host.name} against which baseline?` },
        );
        if (!pick) return undefined;
        baseline = pick.b;
      }
      const benchmark = await pickBenchmark(d);
      if (!benchmark) return undefined;
      return run(d, reports, host, baseline, benchmark);
    },
  );
}

async function pickBenchmark(d: BisectDeps): Promise<BisectBenchmark | undefined> {
  const own = d.settings.current.benchmark.command;
  if (!own) return { kind: 'builtin' };
  const pick = await showQuickPick(
    [
      {
        label: 'The built-in benchmark',
        detail: "python/throughput_bench.py with the baseline's recorded shape",
        own: false,
      },
      { label: 'Your benchmark command', detail: own, own: true },
    ],
    { placeHolder: 'Measure each state with…' },
  );
  if (!pick) return undefined;
  return pick.own ? { kind: 'custom', bench: customBenchmarkOf(d.settings.current.benchmark) } : { kind: 'builtin' };
}

async function run(
  d: BisectDeps,
  reports: Reports,
  host: HostSpec,
  baseline: Parameters<typeof envBisect>[1],
  benchmark: BisectBenchmark,
): Promise<BisectRunOutcome> {
  const session = d.hosts.session(host);
  const name = `Known Good: Bisect @ ${host.name}`;
  const unit = benchmark.kind === 'builtin' ? 'tok/s' : '';
  const pty = new BisectTerminal();
  const terminal = createTerminal({ name, pty, iconPath: new vscode.ThemeIcon('debug-alt') });
  terminal.show(true);
  pty.write(`Bisecting the environment of ${host.name} against baseline "${baseline.label}"\n`);
  try {
    const outcome = await envBisect({ ...session, python: host.python, label: host.name }, baseline, {
      benchmark,
      extraVariables: d.settings.current.baselines.extraVariables,
      signal: pty.abort.signal,
      onText: (text) => pty.write(text.endsWith('\n') ? text : `${text}\n`),
      onEvent: (e, changes) => {
        if (e.kind === 'sample' || e.kind === 'done') {
          const line = bisectEventLine(e, changes, { unit });
          if (line) pty.write(`${e.kind === 'done' ? '\x1b[1m' : ''}${line}\x1b[0m\n`);
          return;
        }
        const line = bisectEventLine(e, changes, { unit });
        if (line) pty.write(`${line}\n`);
      },
    });
    if (!outcome.report) pty.write(`${outcome.headline}\n`);
    const uri = reports.add(`${host.name} bisect`, outcome.markdown);
    await showTextDocument(uri, { preview: false });
    d.log.info(`bisect ${host.name} vs ${baseline.label}: ${outcome.headline}`);
    return { terminalName: name, uri: uri.toString(), outcome, screen: pty.screen };
  } catch (e) {
    pty.write(`\x1b[31m${messageOf(e)}\x1b[0m\n`);
    throw e;
  } finally {
    pty.end();
  }
}
