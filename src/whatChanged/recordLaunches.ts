import * as vscode from 'vscode';
import type { RecordLaunchesOutcome } from '../api';
import { Commands } from '../constants';
import { KnownGoodError } from '../core/errors';
import {
  KG_RECORD_DIR,
  kgRecordFiles,
  placeKgRecord,
  recordLines,
  recordSetupText,
} from '../core/whatChanged/recordLaunches';
import type { RegisterCommand } from '../shared/commands';
import type { Hosts } from '../shared/hosts';
import { withCancellableProgress } from '../shared/progress';
import { showInfo, showInputBox, showQuickPick } from '../window';

/** Options a test or another command passes instead of answering the questions. */
interface Answers {
  where?: 'run' | 'home';
  copy?: boolean;
}

function answersOf(extra: unknown): Answers {
  if (typeof extra !== 'object' || extra === null) return {};
  const o = extra as Record<string, unknown>;
  return {
    ...(o['where'] === 'run' || o['where'] === 'home' ? { where: o['where'] } : {}),
    ...(typeof o['copy'] === 'boolean' ? { copy: o['copy'] } : {}),
  };
}

/**
 * "Record Launches of This Run…": says what kg_record.py records and where, puts it on the host when asked, and shows
 * the line to put in front of the launch (with Copy Line). Every question can be answered by the call's options.
 */
export function registerRecordLaunches(d: {
  command: RegisterCommand;
  hosts: Hosts;
  showReadOnly(name: string, content: string): Thenable<unknown>;
}): void {
  d.command(
    Commands.recordLaunches,
    { kinds: ['host', 'run'], pick: 'Record launches of a run on which host?' },
    async (t, call): Promise<RecordLaunchesOutcome | undefined> => {
      const host = d.hosts.get(t.hostId);
      const given = answersOf(call.extra);
      const run =
        t.kind === 'run'
          ? t.path
          : await showInputBox({
              prompt: `The run folder on ${host.name} whose launches are recorded`,
              value: host.roots[0] ?? '',
              ignoreFocusOut: true,
              validateInput: (v) => (v.startsWith('/') ? undefined : 'an absolute path on the host'),
            });
      if (!run) return undefined;
      let where = given.where;
      if (!where) {
        const pick = await showQuickPick(
          [
            {
              label: 'Inside the run folder',
              description: `${run}/.known-good/launches.jsonl`,
              detail: 'What Changed? reads them with the run; they travel with it when it is copied',
              where: 'run' as const,
            },
            {
              label: 'In my home folder on the host',
              description: '~/.known-good/runs/HASH/launches.jsonl (HASH from the run path)',
              detail: 'Nothing is written in the run folder (a shared or read-only run)',
              where: 'home' as const,
            },
          ],
          { placeHolder: `Where should kg_record.py keep the launch records of ${run}?`, ignoreFocusOut: true },
        );
        if (!pick) return undefined;
        where = pick.where;
      }
      const session = d.hosts.session(host);
      const look = (copy: boolean) =>
        withCancellableProgress(
          copy ? `Copying kg_record.py to ${host.name}…` : `Looking for kg_record.py on ${host.name}…`,
          (signal) => placeKgRecord(session.transport, host.python, { copy, signal }),
        );
      let place = await look(false);
      if (!place) return undefined;
      let copy = given.copy;
      if (copy === undefined) {
        const modules = Object.keys(kgRecordFiles()).length - 1;
        const pick = await showQuickPick(
          [
            {
              label: place.present ? 'Update the copy on the host' : 'Copy kg_record.py to the host',
              description: `${place.dir} (with the ${modules} modules it imports; stdlib only)`,
              copy: true,
            },
            {
              label: place.present ? 'Keep the copy there' : 'Show the line only',
              description: place.present ? place.script : `I will put kg_record.py there myself (${KG_RECORD_DIR})`,
              copy: false,
            },
          ],
          { placeHolder: `kg_record.py ${place.present ? 'is' : 'is not'} on ${host.name}`, ignoreFocusOut: true },
        );
        if (!pick) return undefined;
        copy = pick.copy;
      }
      if (copy) {
        const copied = await look(true);
        if (!copied) return undefined;
        place = copied;
      }
      if (!place.present && copy) throw new KnownGoodError('probe-failed', `kg_record.py is not at ${place.script}`);
      const home = where === 'home';
      const lines = recordLines({ python: host.python, script: place.script, run, home });
      await d.showReadOnly('record-launches.md', recordSetupText({ host: host.name, run, place, home, lines }));
      if (given.where === undefined)
        void showInfo(`Put this in front of the launch: ${lines.prefix}`, 'Copy Line').then(async (b) => {
          if (b) await vscode.env.clipboard.writeText(`${lines.prefix} `);
        });
      return { hostId: host.id, run, home, script: place.script, present: place.present, line: lines.prefix };
    },
  );
}
