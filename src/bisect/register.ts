import * as vscode from 'vscode';
import type { Baseline, BaselineStore } from '../core/baselines/store';
import type { CustomBenchmark } from '../core/bench/customBenchmark';
import type { BisectChange, BisectEvent } from '../core/bisect/engine';
import { envBisect, noBaseline, type BisectBenchmark, type EnvBisectOutcome } from '../core/bisect/envBisect';
import { bisectEventLine } from '../core/bisect/render';
import { KnownGoodError, messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { bisectPackagesOfBaseline, type BaselinePackageBisect } from '../core/restore/packageBisect';
import type { TargetOf } from '../core/runs/targets';
import { BaselineCommands, BisectCommands } from '../constants';
import { pickBenchmark } from '../shared/benchmark';
import type { RegisterCommand } from '../shared/commands';
import type { Documents } from '../shared/documents';
import type { Hosts } from '../shared/hosts';
import type { SettingsAccess } from '../shared/settings';
import { openLiveTerminal, type LiveTerminal } from '../shared/liveTerminal';
import { executeCommand, showError, showQuickPick } from '../window';

/** What the environment bisect needs from the extension. */
export interface BisectDeps {
  command: RegisterCommand;
  track<T extends vscode.Disposable>(d: T): T;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'error'>;
  settings: SettingsAccess;
  store: BaselineStore;
  storeKeyOf(host: HostSpec): string;
  /** Reports open as read-only documents kept with the workspace (back after a reload). */
  documents: Pick<Documents, 'showReplacing'>;
}

/** What tests read of a finished package bisect (the command's result). */
export interface PackageBisectRunOutcome {
  terminalName: string;
  uri: string;
  markdown: string;
  result: Omit<BaselinePackageBisect, 'markdown'>;
  screen: string;
}

/** What tests read of a finished bisect (the command's result). */
export interface BisectRunOutcome {
  terminalName: string;
  /** The report; absent when the bisect could not measure (`error`). */
  uri?: string;
  outcome?: EnvBisectOutcome;
  /** Why it could not measure, when the baseline's own interpreter is the problem (Restore Known Good… offered). */
  error?: string;
  screen: string;
}

/** The baseline a command was invoked on, or the one the user picks among the host's. */
async function chooseBaseline(d: BisectDeps, t: TargetOf<'host' | 'baseline'>, what: string) {
  const host = d.hosts.get(t.hostId);
  const { baselines } = await d.store.list(d.storeKeyOf(host));
  if (baselines.length === 0) throw noBaseline(host.name);
  if (t.kind === 'baseline') {
    const baseline = baselines.find((b) => b.baseline.id === t.baselineId)?.baseline;
    if (!baseline) throw new KnownGoodError('not-found', `no baseline ${t.baselineId} for ${host.name}`);
    return { host, baseline };
  }
  const pick = await showQuickPick(
    baselines.map((b) => ({ label: b.baseline.label, description: b.baseline.capturedAt, b: b.baseline })),
    { placeHolder: `${what} of ${host.name} against which baseline?` },
  );
  return pick ? { host, baseline: pick.b } : undefined;
}

export function registerBisect(d: BisectDeps): void {
  d.command(
    BisectCommands.environment,
    { kinds: ['host', 'baseline'], pick: 'Bisect the environment of which host?' },
    async (t) => {
      const chosen = await chooseBaseline(d, t, 'Bisect the environment');
      if (!chosen) return undefined;
      const benchmark = await pickBenchmark(d.settings);
      if (!benchmark) return undefined;
      return run(d, chosen.host, chosen.baseline, benchmark);
    },
  );
  d.command(
    BisectCommands.packages,
    { kinds: ['host', 'baseline'], pick: 'Bisect the packages of which host?' },
    async (t) => {
      const chosen = await chooseBaseline(d, t, 'Bisect the packages');
      if (!chosen) return undefined;
      // the package bisect reads the speed from the command's output: the user's command with its regex
      const benchmark = await pickBenchmark(d.settings, 'custom');
      if (benchmark?.kind !== 'custom' || benchmark.bench.regex === undefined)
        throw new KnownGoodError(
          'settings',
          'Bisect Packages runs your benchmark command in each state: set knownGood.benchmark.command and ' +
            'knownGood.benchmark.throughputRegex (the speed is read from its output)',
        );
      return runPackages(d, chosen.host, chosen.baseline, benchmark.bench);
    },
  );
}

/** `samples: false` where the caller prints each run itself (the package bisect's onLine). */
function eventWriter(pty: LiveTerminal, unit: string, samples = true) {
  return (e: BisectEvent, changes: readonly BisectChange[]) => {
    if (e.kind === 'sample' && !samples) return;
    const line = bisectEventLine(e, changes, { unit });
    if (!line) return;
    pty.write(e.kind === 'done' ? `\x1b[1m${line}\x1b[0m\n` : `${line}\n`);
  };
}

async function runPackages(
  d: BisectDeps,
  host: HostSpec,
  baseline: Baseline,
  bench: CustomBenchmark,
): Promise<PackageBisectRunOutcome> {
  const session = d.hosts.session(host);
  const name = `Known Good: Bisect Packages @ ${host.name}`;
  const pty = openLiveTerminal(name);
  pty.write(
    `Bisecting the packages of ${host.name} (${host.python}) against the env restored from "${baseline.label}"\n`,
  );
  try {
    const r = await bisectPackagesOfBaseline(session, baseline, {
      bench,
      restoreHint: `Known Good: Restore Known Good… on baseline "${baseline.label}", then Run`,
      signal: pty.abort.signal,
      onLine: (l) => pty.write(`${l}\n`),
      onEvent: eventWriter(pty, '', false),
    });
    const uri = (await d.documents.showReplacing(`${host.name} packages bisect.md`, r.markdown, { preview: false }))
      .document.uri;
    d.log.info(`package bisect ${host.name} vs ${baseline.label}: ${r.headline}`);
    const { markdown: _md, ...rest } = r;
    return { terminalName: name, uri: uri.toString(), markdown: r.markdown, result: rest, screen: pty.screen };
  } catch (e) {
    pty.write(`\x1b[31m${messageOf(e)}\x1b[0m\n`);
    throw e;
  } finally {
    pty.end();
  }
}

async function run(
  d: BisectDeps,
  host: HostSpec,
  baseline: Parameters<typeof envBisect>[1],
  benchmark: BisectBenchmark,
): Promise<BisectRunOutcome> {
  const session = d.hosts.session(host);
  const name = `Known Good: Bisect @ ${host.name}`;
  const unit = benchmark.kind === 'builtin' ? 'tok/s' : '';
  const pty = openLiveTerminal(name);
  pty.write(`Bisecting the environment of ${host.name} against baseline "${baseline.label}"\n`);
  try {
    const outcome = await envBisect({ ...session, python: host.python, label: host.name }, baseline, {
      benchmark,
      extraVariables: d.settings.current.baselines.extraVariables,
      signal: pty.abort.signal,
      onText: (text) => pty.write(text.endsWith('\n') ? text : `${text}\n`),
      onEvent: eventWriter(pty, unit),
    });
    if (!outcome.report) pty.write(`${outcome.headline}\n`);
    const uri = (await d.documents.showReplacing(`${host.name} bisect.md`, outcome.markdown, { preview: false }))
      .document.uri;
    d.log.info(`bisect ${host.name} vs ${baseline.label}: ${outcome.headline}`);
    return { terminalName: name, uri: uri.toString(), outcome, screen: pty.screen };
  } catch (e) {
    pty.write(`\x1b[31m${messageOf(e)}\x1b[0m\n`);
    // The baseline's own interpreter lost torch: no interpreter setting helps; rebuilding the baseline's env does.
    if (e instanceof KnownGoodError && typeof e.detail?.['baselineInterpreter'] === 'string') {
      d.log.error(`bisect ${host.name} vs ${baseline.label}: ${e.message}`);
      const restore = 'Restore Known Good…';
      void showError(e.message, restore).then((choice) => {
        if (choice === restore)
          void executeCommand(BaselineCommands.restoreEnv, { hostId: host.id, baselineId: baseline.id });
      });
      return { terminalName: name, error: e.message, screen: pty.screen };
    }
    throw e;
  } finally {
    pty.end();
  }
}
