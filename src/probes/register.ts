import type * as vscode from 'vscode';
import { envSnapshotProbe, type EnvSnapshot } from '../core/baselines/envProbe';
import { messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import type { TargetOf } from '../core/runs/targets';
import { newNonce } from '../core/util/nonce';
import { probeTerminalCommand } from '../core/terminal/command';
import { parseFramedResult, terminalName, type ProbeChoice, type ProbeContext } from '../core/probes/catalogue';
import { probeChoice, PROBES } from './choices';
import type { ProbeRunOutcome } from '../api';
import { ProbeCommands } from '../constants';
import type { RegisterCommand } from '../shared/commands';
import type { Hosts } from '../shared/hosts';
import { runInTerminal } from '../shared/terminal';
import { showInfo, showInputBox, showQuickPick } from '../window';

/** What Run Probe needs: hosts, the log, and the baselines capability for a snapshot's "Save as Baseline". */
export interface ProbesDeps {
  command: RegisterCommand;
  hosts: Hosts;
  log: Pick<vscode.LogOutputChannel, 'info' | 'error'>;
  baselines: { save(host: HostSpec, snapshot: EnvSnapshot, label: string): Promise<string> };
}

export function registerProbes(d: ProbesDeps): void {
  d.command(
    ProbeCommands.runProbe,
    { kinds: ['host', 'root', 'run', 'checkpoint'], pick: 'Run the probe on which host?' },
    (target, call) => runProbe(d, target, typeof call.extra === 'string' ? call.extra : undefined),
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
  d: ProbesDeps,
  target: TargetOf<'host' | 'root' | 'run' | 'checkpoint'>,
  probeId: string | undefined,
): Promise<ProbeRunOutcome | undefined> {
  const host = d.hosts.get(target.hostId);
  const choice = probeId !== undefined ? probeChoice(probeId) : await pickProbe();
  if (!choice) return undefined;
  const ctx: ProbeContext = {
    hostLabel: host.name,
    roots: host.roots,
    ...(target.kind === 'root' || target.kind === 'run' ? { folder: target.path } : {}),
    ...(target.kind === 'checkpoint' ? { checkpoint: target.path } : {}),
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
  return runProbeInTerminal(d, host, choice, ctx);
}

async function runProbeInTerminal(
  d: ProbesDeps,
  host: HostSpec,
  choice: ProbeChoice,
  ctx: ProbeContext,
): Promise<ProbeRunOutcome> {
  const session = d.hosts.session(host);
  const call = choice.call(ctx);
  const nonce = newNonce();
  const name = terminalName(choice.label, host.name);
  let result: unknown;
  let error: string | undefined;
  const run = runInTerminal(name, session, probeTerminalCommand(host.python, call, nonce), {
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
  d.log.info(`${name}: exit ${exit.exitCode ?? exit.exitSignal ?? exit.error ?? '?'}${error ? `, ${error}` : ''}`);
  if (result !== undefined) handOver(d, host, choice, result);
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
function handOver(d: ProbesDeps, host: HostSpec, choice: ProbeChoice, result: unknown): void {
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
    await d.baselines.save(host, snapshot, label);
  })().catch((e: unknown) => d.log.error(`Save as Baseline: ${messageOf(e)}`));
}
