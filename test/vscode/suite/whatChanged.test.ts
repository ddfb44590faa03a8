import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { CaptureOutcome, MarkKnownGoodOutcome, RecordLaunchesOutcome, WhatChangedOutcome } from '../../../src/api';
import { writeStory } from '../../support/whatChangedStory';
import { activated, waitFor } from './helpers';

function reportTabs(): vscode.Tab[] {
  return vscode.window.tabGroups.all
    .flatMap((g) => g.tabs)
    .filter((t) => t.input instanceof vscode.TabInputWebview && t.input.viewType.endsWith('knownGood.whatChanged'));
}

describe('What Changed?', () => {
  let dir: string;
  let run: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kg-why-ext-'));
    run = writeStory(dir).run;
  });
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    rmSync(dir, { recursive: true, force: true });
  });

  it('on a run resolves to the report: 0.34× and the dataset change first; again, the same panel is refreshed', async () => {
    await activated();
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    const target = { target: { kind: 'run', hostId: 'local', path: run } };
    const first = await vscode.commands.executeCommand<WhatChangedOutcome>('knownGood.whatChanged', target);
    assert.ok(first, 'the command resolved to nothing (see the Known Good log)');
    assert.equal(first.verdict, 'regression');
    assert.match(first.headline, /^4\.3K tok\/s now vs 12\.8K at step_600 \(0\.34×\)/);
    assert.equal(first.suspects[0]?.title, 'dataset openwebtext-10k → openwebtext-dedup-v2');
    assert.deepEqual(first.suspects[0]?.evidence, ['args-diff', 'file', 'plot']);
    assert.ok(first.markdown.startsWith(`**${first.headline}**`));
    assert.equal(first.reused, false);
    await waitFor('the report tab', () => reportTabs().length === 1 || undefined);

    const again = await vscode.commands.executeCommand<WhatChangedOutcome>('knownGood.whatChanged', target);
    assert.equal(again.reused, true);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(reportTabs().length, 1, 'a second run on the same run piled up a tab');
  });

  it('on a checkpoint takes it as now: before the shift nothing dropped', async () => {
    await activated();
    const ckpt = { target: { kind: 'checkpoint', hostId: 'local', path: join(run, 'step_500'), label: 'step_500' } };
    const r = await vscode.commands.executeCommand<WhatChangedOutcome>('knownGood.whatChanged', ckpt);
    assert.ok(r);
    assert.equal(r.nowCheckpoint, join(run, 'step_500'));
    assert.notEqual(r.verdict, 'regression', r.headline);
    assert.equal(r.reused, false);
    await waitFor('a second report tab (another target)', () => reportTabs().length === 2 || undefined);
  });

  it('Mark as Known-Good on a baseline makes it the reference of the next report', async () => {
    await activated();
    const captured = await vscode.commands.executeCommand<CaptureOutcome | undefined>(
      'knownGood.baselines.capture',
      { hostId: 'local' },
      { label: 'why known good' },
    );
    assert.ok(captured, 'the baseline was not captured');
    const marked = await vscode.commands.executeCommand<MarkKnownGoodOutcome | undefined>(
      'knownGood.whatChanged.markBaseline',
      { hostId: 'local', baselineId: captured.id },
    );
    assert.deepEqual(marked, { hostId: 'local', baselineId: captured.id });
    const r = await vscode.commands.executeCommand<WhatChangedOutcome>('knownGood.whatChanged', { hostId: 'local' });
    assert.ok(r);
    assert.equal(r.run, null);
    assert.equal(r.reference.kind, 'marked-baseline', r.reference.why);
    assert.equal(r.reference.label, 'baseline "why known good"');
    // no other test sees it (the mark of a baseline that is gone is ignored)
    rmSync(captured.file, { force: true });
  });

  it('Record Launches of This Run… answered by its options: the line names the run and where the records go', async () => {
    await activated();
    const r = await vscode.commands.executeCommand<RecordLaunchesOutcome>(
      'knownGood.whatChanged.recordLaunches',
      { target: { kind: 'run', hostId: 'local', path: run } },
      { where: 'home', copy: false },
    );
    assert.ok(r, 'the command resolved to nothing (see the Known Good log)');
    assert.equal(r.run, run);
    assert.equal(r.home, true);
    assert.ok(r.script.endsWith('/.known-good/bin/kg_record.py'), r.script);
    assert.ok(r.line.endsWith(` --run ${run} --home --`), r.line);
    await waitFor(
      'the setup document',
      () =>
        vscode.window.tabGroups.all.flatMap((g) => g.tabs).some((t) => t.label === 'record-launches.md') || undefined,
    );
  });
});
