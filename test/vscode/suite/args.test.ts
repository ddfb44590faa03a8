import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { activated, extension, settledRows, setSetting, waitFor } from './helpers';

// Checkpoints written by scripts/demo/write_checkpoint.py (real torch format, stdlib only) on "This machine".
function writeCheckpoint(file: string, step: number, lr: number): void {
  const script = join(extension().extensionPath, 'scripts', 'demo', 'write_checkpoint.py');
  const args = JSON.stringify({ lr, batch_size: 32, warmup: 2000, model: 'gpt-small' });
  execFileSync('python3', [script, file, '--step', String(step), '--args-json', args]);
}

function diffTabs(): vscode.TabInputTextDiff[] {
  return vscode.window.tabGroups.all
    .flatMap((g) => g.tabs)
    .map((t) => t.input)
    .filter(
      (i): i is vscode.TabInputTextDiff => i instanceof vscode.TabInputTextDiff && i.original.scheme === 'knownGood',
    );
}

async function textOf(uri: vscode.Uri): Promise<string> {
  return (await vscode.workspace.openTextDocument(uri)).getText();
}

describe('checkpoint args', () => {
  let dir: string;
  let a: { hostId: string; path: string };
  let b: { hostId: string; path: string };

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kg-args-ext-'));
    mkdirSync(join(dir, 'run-a'));
    a = { hostId: 'local', path: join(dir, 'run-a', 'step_600.pt') };
    b = { hostId: 'local', path: join(dir, 'run-a', 'step_690.pt') };
    writeCheckpoint(a.path, 600, 3e-4);
    writeCheckpoint(b.path, 690, 1.5e-4);
  });
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await setSetting('localRoots', undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('Open Args opens a read-only knownGood: document with the args', async () => {
    await activated();
    const uri = await vscode.commands.executeCommand<vscode.Uri>('knownGood.args.open', a);
    assert.equal(uri.scheme, 'knownGood');
    const editor = await waitFor('the args editor', () =>
      vscode.window.activeTextEditor?.document.uri.toString() === uri.toString()
        ? vscode.window.activeTextEditor
        : undefined,
    );
    const text = editor.document.getText();
    assert.match(text, /^\/\/ Known Good: args of step_600$/m);
    assert.match(text, /^ {2}"lr": 0\.0003,$/m);
    assert.match(text, /^\/\/ host: {5}This machine$/m);
    assert.equal(editor.document.languageId, 'jsonc');
  });

  it('Select for Compare, then Compare with Selected opens a diff editor with both sides', async () => {
    await activated();
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('knownGood.args.selectForCompare', a);
    await vscode.commands.executeCommand('knownGood.args.compareWithSelected', b);
    const diff = await waitFor('a knownGood diff tab', () => diffTabs()[0]);
    const tab = vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.input === diff);
    assert.equal(tab?.label, 'args: step_600 ↔ step_690 (This machine/run-a)');
    const left = await textOf(diff.original);
    const right = await textOf(diff.modified);
    assert.match(left, /"lr": 0\.0003,/);
    assert.match(right, /"lr": 0\.00015,/);
    // one header on both sides (both checkpoints named), so only args differ
    assert.match(right, /^\/\/ B: step_690 \(This machine\) /m);
    const header = (t: string) => t.split('\n').filter((l) => l.startsWith('//'));
    assert.deepEqual(header(left), header(right));
  });

  it('Compare Args on two selected checkpoints and Show Changed Args Only', async () => {
    await activated();
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('knownGood.args.compare', b, [b, a]);
    const diff = await waitFor('a knownGood diff tab', () => diffTabs()[0]);
    // plain refs carry no step numbers: the selection's order (tree nodes: the lower step on the left)
    assert.match(await textOf(diff.original), /"lr": 0\.00015,/);
    assert.match(await textOf(diff.modified), /"lr": 0\.0003,/);
    const uri = await vscode.commands.executeCommand<vscode.Uri>('knownGood.args.showChanged', a, [a, b]);
    const text = await textOf(uri);
    assert.match(text, /^ {2}lr: 0\.0003 → 0\.00015$/m);
    assert.doesNotMatch(text, /batch_size/);
  });

  it('Compare with Previous Step from the Remote Runs tree, and the click command of a checkpoint', async () => {
    const api = await activated();
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await setSetting('localRoots', [dir]);
    await waitFor('localRoots', () => (api.registry.hosts()[0]?.roots[0] === dir ? true : undefined));
    await vscode.commands.executeCommand('knownGood.remoteRuns.refresh');
    const host = (await settledRows(api, undefined)).find((r) => r.label === 'This machine')!;
    const root = (await settledRows(api, host.node))[0]!;
    const run = (await settledRows(api, root.node)).find((r) => r.label === 'run-a')!;
    const steps = await settledRows(api, run.node);
    const s690 = steps.find((r) => r.label === 'step_690.pt');
    assert.ok(s690, `checkpoints: ${steps.map((s) => s.label).join(', ')}`);
    assert.equal(s690.item.command?.command, 'knownGood.args.open');
    assert.match(String(s690.item.contextValue), /\bcheckpoint\b/);

    await vscode.commands.executeCommand('knownGood.args.compareWithPrevious', s690.node);
    const diff = await waitFor('a knownGood diff tab', () => diffTabs()[0]);
    assert.match(await textOf(diff.original), /^\/\/ A: step_600 \(This machine\) /m);
    assert.match(await textOf(diff.modified), /"lr": 0\.00015,/);
  });

  it('a file that is not a checkpoint: the document says why', async () => {
    await activated();
    const junk = join(dir, 'notes.pt');
    writeFileSync(junk, 'not a checkpoint\n');
    const uri = await vscode.commands.executeCommand<vscode.Uri>('knownGood.args.open', {
      hostId: 'local',
      path: junk,
    });
    const text = await textOf(uri);
    assert.match(text, /^\/\/ Known Good: could not read the args of notes$/m);
    assert.match(text, /not a checkpoint/);
  });
});
