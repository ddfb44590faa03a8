import * as vscode from 'vscode';
import type { CaptureOutcome, CompareOutcome } from '../api';
import { z } from 'zod';
import { captureSnapshot, saveBaseline } from '../core/baselines/capture';
import { baselineDescription, defaultLabel, diffDocuments, shortTime } from '../core/baselines/documents';
import type { StoredBaseline } from '../core/baselines/store';
import type { EnvRef } from '../core/baselines/uri';
import { KnownGoodError } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import { showInfo, showInputBox, showQuickPick, showWarning } from '../window';
import type { TargetOf } from '../core/runs/targets';
import { withCancellableProgress } from '../shared/progress';
import type { BaselinesFeature } from './common';
import { envUri } from './content';
import { BaselineCommands } from '../constants';
import { registerRestoreCommand } from './restore';

/** A baseline with the host it belongs to. */
export interface HostBaseline {
  spec: HostSpec;
  storeHost: string;
  stored: StoredBaseline;
}

const labelArg = z.object({ label: z.string().min(1) });
/** A compare about a run (What Changed?'s evidence, tests): its training process's variables are read too. */
const runArg = z.object({ run: z.string().min(1) });

/** What the commands offer the rest of the feature (wired out through BaselinesApi). */
export interface BaselineDiffs {
  /** Opens the usual environment diff (drift summary on top) of two refs. */
  openDiff(left: EnvRef, right: EnvRef, names: [string, string], title: string): Promise<CompareOutcome>;
}

export function registerBaselineCommands(f: BaselinesFeature): BaselineDiffs {
  const { command, hosts, log, store, section, content } = f;

  const refresh = (hostId: string) => f.refresh(section.groupNode(hostId));

  /** The baseline a target names (a Baselines node, or `{ hostId, baselineId }` from tests and Compare Now). */
  async function baselineOf(t: TargetOf<'baseline'>): Promise<HostBaseline> {
    const spec = hosts.get(t.hostId);
    const storeHost = f.storeKeyOf(spec);
    return { spec, storeHost, stored: await store.get(storeHost, t.baselineId) };
  }

  async function baselinesOf(among: readonly HostSpec[]): Promise<HostBaseline[]> {
    const out: HostBaseline[] = [];
    for (const spec of among) {
      let storeHost: string;
      try {
        storeHost = f.storeKeyOf(spec);
      } catch {
        continue;
      }
      const { baselines, problems } = await store.list(storeHost);
      for (const p of problems) log.warn(`baseline ${p.file}: ${p.message}`);
      for (const stored of baselines) out.push({ spec, storeHost, stored });
    }
    return out;
  }

  async function pickBaseline(placeHolder: string, among: HostBaseline[]): Promise<HostBaseline | undefined> {
    if (!among.length) {
      void showInfo('No environment baselines yet: capture one first (Known Good: Capture Environment Baseline).');
      return undefined;
    }
    const items: (vscode.QuickPickItem & { b?: HostBaseline })[] = [];
    let host: string | undefined;
    for (const b of among) {
      if (b.spec.id !== host) {
        items.push({ label: b.spec.name, kind: vscode.QuickPickItemKind.Separator });
        host = b.spec.id;
      }
      items.push({
        label: b.stored.baseline.label,
        description: baselineDescription(b.stored.baseline),
        detail: shortTime(b.stored.baseline.capturedAt),
        b,
      });
    }
    return (await showQuickPick(items, { placeHolder, matchOnDescription: true, ignoreFocusOut: true }))?.b;
  }

  async function openDiff(
    left: EnvRef,
    right: EnvRef,
    names: [string, string],
    title: string,
  ): Promise<CompareOutcome> {
    const docs = diffDocuments(await content.side(left), await content.side(right));
    const l = envUri({ view: 'diff', side: 'left', left, right, name: names[0] });
    const r = envUri({ view: 'diff', side: 'right', left, right, name: names[1] });
    await vscode.commands.executeCommand('vscode.diff', l, r, title, { preview: false });
    log.info(`${title}: ${docs.summaryText.trimEnd().replace(/\n/g, ' | ')}`);
    // The summary already heads both sides of the diff; the notification says the verdict in one line and offers
    // the same summary as a rendered page, so nothing steals focus from the diff itself.
    const notify = docs.drift.unchanged ? showInfo(docs.headline) : showWarning(docs.headline, {}, 'Show Summary');
    void notify.then((choice) => {
      if (choice !== 'Show Summary') return;
      void vscode.commands.executeCommand(
        'markdown.showPreviewToSide',
        envUri({ view: 'summary', left, right, name: 'environment drift' }),
      );
    });
    return {
      unchanged: docs.drift.unchanged,
      differingLines: docs.drift.differingLines,
      headline: docs.headline,
      left: l.toString(),
      right: r.toString(),
    };
  }

  async function compareWithNow(b: HostBaseline, run?: string): Promise<CompareOutcome | undefined> {
    const session = hosts.session(b.spec);
    const settings = f.settings.current.baselines;
    const snapshot = await withCancellableProgress(`Capturing the environment of ${b.spec.name} now`, (signal) =>
      captureSnapshot(session, { ...settings, signal, ...(run !== undefined ? { run } : {}) }),
    );
    if (!snapshot) return undefined;
    // The newest "now" of the host: the dashboards showing it compare with this one from here on (the host's part
    // only: one run's training process is not every run's).
    store.announceSnapshot(b.storeHost, { ...snapshot, liveRun: null });
    const now = content.remember({
      snapshot,
      title: `now (${shortTime(snapshot.capturedAt)})`,
      hostLabel: session.label,
    });
    const label = b.stored.baseline.label;
    return openDiff(
      { kind: 'baseline', hostId: b.storeHost, id: b.stored.baseline.id },
      now,
      [label, 'now'],
      `${b.spec.name}: "${label}" ↔ now`,
    );
  }

  const captureOn = { kinds: ['host'], pick: 'Capture the environment of which host?' } as const;
  command(BaselineCommands.capture, captureOn, async (t, call): Promise<CaptureOutcome | undefined> => {
    const spec = hosts.get(t.hostId);
    const given = labelArg.safeParse(call.extra);
    const typed = given.success
      ? given.data.label
      : await showInputBox({
          title: `Capture Environment Baseline (${spec.name})`,
          prompt: 'A name for this baseline, e.g. what works on it',
          value: defaultLabel(new Date()),
          ignoreFocusOut: true,
          validateInput: (v) => (v.trim() ? undefined : 'Give the baseline a name'),
        });
    const label = typed?.trim();
    if (!label) return undefined;
    const session = hosts.session(spec);
    const settings = f.settings.current.baselines;
    const saved = await withCancellableProgress(`Capturing the environment of ${spec.name}`, async (signal, report) => {
      report('reading versions, packages, GPUs, variables, scripts and caches…');
      const snapshot = await captureSnapshot(session, { ...settings, signal });
      report(settings.copyToRemote ? 'saving (and copying to ~/.known-good/baselines/ on the host)…' : 'saving…');
      return saveBaseline(store, session, snapshot, label, { copyToRemote: settings.copyToRemote, signal });
    });
    if (!saved) return undefined;
    const { baseline, file } = saved.stored;
    refresh(spec.id);
    log.info(
      `baseline "${label}" of ${spec.name} saved to ${file}${saved.remotePath ? `, copy at ${saved.remotePath}` : ''}`,
    );
    if (saved.remoteWarning) log.warn(saved.remoteWarning);
    const msg = `Saved baseline "${label}" of ${spec.name}${saved.remotePath ? ` (copy on the host: ${saved.remotePath})` : ''}.`;
    const shown = saved.remoteWarning
      ? showWarning(`${msg} ${saved.remoteWarning}`, {}, 'Compare Now')
      : showInfo(msg, 'Compare Now');
    void shown.then((choice) => {
      if (choice === 'Compare Now')
        void vscode.commands.executeCommand(BaselineCommands.compare, { hostId: spec.id, baselineId: baseline.id });
    });
    return {
      hostId: spec.id,
      id: baseline.id,
      label,
      file,
      ...(saved.remotePath ? { remotePath: saved.remotePath } : {}),
      ...(saved.remoteWarning ? { remoteWarning: saved.remoteWarning } : {}),
    };
  });

  command(
    BaselineCommands.compare,
    { kinds: ['baseline', 'host', 'run'] },
    async (t, call): Promise<CompareOutcome | undefined> => {
      // On a run, the run's training process (if one runs now) is compared too, beside a new login.
      const run = t?.kind === 'run' ? t.path : runArg.safeParse(call.extra).data?.run;
      const b =
        t?.kind === 'baseline'
          ? await baselineOf(t)
          : await pickBaseline(
              'Compare the environment now with which baseline?',
              await baselinesOf(t ? [hosts.get(t.hostId)] : hosts.all()),
            );
      return b && compareWithNow(b, run);
    },
  );

  registerRestoreCommand(f, async (t) =>
    t?.kind === 'baseline'
      ? await baselineOf(t)
      : await pickBaseline(
          'Restore the environment of which baseline?',
          await baselinesOf(t ? [hosts.get(t.hostId)] : hosts.all()),
        ),
  );

  command(
    BaselineCommands.compareTwo,
    { kinds: ['baseline'] },
    async (t, call): Promise<CompareOutcome | undefined> => {
      const chosen: HostBaseline[] = [];
      const given = call.selection.length ? call.selection : t ? [t] : [];
      for (const s of given) {
        if (s.kind !== 'baseline') continue;
        const b = await baselineOf(s);
        if (!chosen.some((x) => x.stored.baseline.id === b.stored.baseline.id)) chosen.push(b);
      }
      const all = chosen.length >= 2 ? [] : await baselinesOf(hosts.all());
      while (chosen.length < 2) {
        const rest = all.filter((x) => !chosen.some((y) => y.stored.baseline.id === x.stored.baseline.id));
        const b = await pickBaseline(
          chosen.length
            ? `Compare "${chosen[0]!.stored.baseline.label}" with…`
            : 'First baseline (the one that worked)',
          rest,
        );
        if (!b) return undefined;
        chosen.push(b);
      }
      // Older on the left: the diff reads "what changed since".
      const [a, b] = chosen
        .slice(0, 2)
        .sort((x, y) => x.stored.baseline.capturedAt.localeCompare(y.stored.baseline.capturedAt)) as [
        HostBaseline,
        HostBaseline,
      ];
      const la = a.stored.baseline.label;
      const lb = b.stored.baseline.label;
      return openDiff(
        { kind: 'baseline', hostId: a.storeHost, id: a.stored.baseline.id },
        { kind: 'baseline', hostId: b.storeHost, id: b.stored.baseline.id },
        [la, lb],
        `"${la}" (${a.spec.name}) ↔ "${lb}" (${b.spec.name})`,
      );
    },
  );

  command(BaselineCommands.open, { kinds: ['baseline'] }, async (t) => {
    const b = t ? await baselineOf(t) : await pickBaseline('Open which baseline?', await baselinesOf(hosts.all()));
    if (!b) return undefined;
    const uri = envUri({
      view: 'open',
      ref: { kind: 'baseline', hostId: b.storeHost, id: b.stored.baseline.id },
      name: b.stored.baseline.label,
    });
    await vscode.commands.executeCommand('vscode.open', uri, { preview: true });
    return uri.toString();
  });

  command(BaselineCommands.rename, { kinds: ['baseline'] }, async (t, call) => {
    if (!t) throw new KnownGoodError('usage', 'Rename Baseline works on a baseline in Remote Runs');
    const b = await baselineOf(t);
    const given = labelArg.safeParse(call.extra);
    const label = (
      given.success
        ? given.data.label
        : await showInputBox({
            title: 'Rename Baseline',
            value: b.stored.baseline.label,
            validateInput: (v) => (v.trim() ? undefined : 'Give the baseline a name'),
          })
    )?.trim();
    if (!label || label === b.stored.baseline.label) return undefined;
    const saved = await store.rename(b.storeHost, b.stored.baseline.id, label);
    refresh(b.spec.id);
    return saved.file;
  });

  command(BaselineCommands.delete, { kinds: ['baseline'] }, async (t) => {
    if (!t) throw new KnownGoodError('usage', 'Delete Baseline works on a baseline in Remote Runs');
    const b = await baselineOf(t);
    const answer = await showWarning(
      `Delete baseline "${b.stored.baseline.label}" of ${b.spec.name}?`,
      {
        modal: true,
        detail: `Captured ${shortTime(b.stored.baseline.capturedAt)}. The file ${b.stored.file} is removed; a copy on the host (~/.known-good/baselines/), if any, is kept.`,
      },
      'Delete',
    );
    if (answer !== 'Delete') return false;
    await store.delete(b.storeHost, b.stored.baseline.id);
    refresh(b.spec.id);
    return true;
  });
  return { openDiff };
}
