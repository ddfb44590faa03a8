import { join } from 'node:path';
import type { Container } from '../container';
import { envSnapshotProbe, type EnvSnapshot } from '../core/baselines/envProbe';
import { saveBaseline } from '../core/baselines/capture';
import { BaselineStore } from '../core/baselines/store';
import { messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { newNonce } from '../core/util/nonce';
import { probeTerminalCommand } from '../core/terminal/command';
import {
  parseFramedResult,
  probeChoice,
  PROBES,
  terminalName,
  type ProbeChoice,
  type ProbeContext,
} from '../core/terminal/probes';
import type { RunnerExit } from '../core/terminal/runner';
import { showInfo, showInputBox, showQuickPick } from '../window';
import { runInTerminal } from '../shared/terminal';
import { hostFor, targetOf } from '../terminal/target';

export const TerminalCommands = {
  runProbe: 'knownGood.probes.run',
} as const;

/** What "Run Probe…" resolves to (the extension-host tests read it through executeCommand). */
export interface ProbeRunOutcome {
  terminalName: string;
  probe: string;
  exit: RunnerExit;
  /** The probe's parsed result, when the run printed one. */
  result?: unknown;
  error?: string;
  /** What the terminal showed. */
  screen: string;
}

export function baselineStore(c: Container): BaselineStore {
  return new BaselineStore(join(c.context.globalStorageUri.fsPath, 'baselines'));
}

export function registerTerminal(c: Container): void {
  c.command(TerminalCommands.runProbe, (node?: unknown, second?: unknown) =>
    runProbe(c, node, typeof second === 'string' ? second : undefined),
  );
}

async function pickProbe(): Promise<ProbeChoice | undefined> {
  const pick = await showQuickPick(
    PROBES.map((p) => ({ label: p.label, detail: p.detail, choice: p })),
    { placeHolder: 'Run which probe? (it runs in a terminal, its result is kept)', matchOnDetail: true },
  );
  return pick?.choice;
}

async function runProbe(
  c: Container,
  node: unknown,
  probeId: string | undefined,
): Promise<ProbeRunOutcome | undefined> {
  const target = targetOf(node);
  const host = await hostFor(c, target, 'Run the probe on which host?');
  if (!host) return undefined;
  const choice = probeId !== undefined ? probeChoice(probeId) : await pickProbe();
  if (!choice) return undefined;
  const ctx: ProbeContext = {
    hostLabel: host.name,
    roots: host.roots,
    ...(target.folder !== undefined ? { folder: target.folder } : {}),
    ...(target.checkpoint !== undefined ? { checkpoint: target.checkpoint } : {}),
  };
  if (choice.needs === 'checkpoint' && ctx.checkpoint === undefined) {
    const path = await showInputBox({
      prompt: `Checkpoint path on ${host.name}`,
      placeHolder: '/workspace/checkpoints/run/step_1000',
      ignoreFocusOut: true,
    });
    if (!path) return undefined;
    ctx.checkpoint = path;
  }
  if (choice.needs === 'roots' && ctx.folder === undefined && ctx.roots.length === 0) {
    const path = await showInputBox({
      prompt: `Folder to list on ${host.name}`,
      placeHolder: '/workspace/checkpoints',
      ignoreFocusOut: true,
    });
    if (!path) return undefined;
    ctx.folder = path;
  }
  return runProbeInTerminal(c, host, choice, ctx);
}

export async function runProbeInTerminal(
  c: Container,
  host: HostSpec,
  choice: ProbeChoice,
  ctx: ProbeContext,
): Promise<ProbeRunOutcome> {
  const session = c.registry.session(host);
  const call = choice.call(ctx);
  const nonce = newNonce();
  const name = terminalName(choice.label, host.name);
  let result: unknown;
  let error: string | undefined;
  const run = runInTerminal(name, session, probeTerminalCommand(host.python, call.probe, call.args, nonce), {
    nonce,
    epilogue: (exit, runner) => {
      if (exit.error !== undefined) return undefined;
      try {
        result = parseFramedResult(call, runner.framed(), host.name).value;
      } catch (e) {
        error = messageOf(e);
        throw e;
      }
      return `── ${choice.label} ──\n${choice.summarize(result, ctx)}`;
    },
  });
  const exit = await run.done;
  c.log.info(`${name}: exit ${exit.exitCode ?? exit.exitSignal ?? exit.error ?? '?'}${error ? `, ${error}` : ''}`);
  if (result !== undefined) handOver(c, host, choice, result);
  return {
    terminalName: name,
    probe: call.probe,
    exit,
    ...(result !== undefined ? { result } : {}),
    ...(error !== undefined ? { error } : {}),
    screen: run.pty.screen,
  };
}

/** The result goes on to the feature that owns it: an environment snapshot can become a baseline. */
function handOver(c: Container, host: HostSpec, choice: ProbeChoice, result: unknown): void {
  if (choice.id !== 'envSnapshot') return;
  const snapshot: EnvSnapshot = envSnapshotProbe().parse(result);
  void (async () => {
    const action = await showInfo(`Environment snapshot of ${host.name} captured.`, 'Save as Baseline');
    if (action !== 'Save as Baseline') return;
    const label = await showInputBox({
      prompt: 'Baseline label',
      value: `known good ${new Date().toISOString().slice(0, 10)}`,
    });
    if (!label) return;
    await saveSnapshotAsBaseline(c, host, snapshot, label);
  })().catch((e: unknown) => c.log.error(`Save as Baseline: ${messageOf(e)}`));
}

export async function saveSnapshotAsBaseline(
  c: Container,
  host: HostSpec,
  snapshot: EnvSnapshot,
  label: string,
): Promise<string> {
  const { stored: saved } = await saveBaseline(baselineStore(c), c.registry.session(host), snapshot, label, {
    copyToRemote: false,
  });
  c.log.info(`baseline "${label}" of ${host.name} saved to ${saved.file}`);
  c.tree.refresh();
  return saved.file;
}
