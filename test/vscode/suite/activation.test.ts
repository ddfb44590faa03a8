import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { activated, extension } from './helpers';

describe('activation', () => {
  it('loads the extension under development and activates it', async () => {
    const ext = extension();
    assert.equal((ext.packageJSON as { name: string }).name, 'known-good');
    await activated();
    assert.equal(ext.isActive, true);
  });

  it('contributes the Remote Runs view (focusable once activated)', async () => {
    await activated();
    // The view's focus command exists only when the view is registered in the Known Good container.
    await vscode.commands.executeCommand('knownGood.remoteRuns.focus');
  });
});
