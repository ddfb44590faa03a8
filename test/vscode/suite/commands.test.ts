import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { activated, extension } from './helpers';

interface Manifest {
  contributes: { commands: { command: string }[] };
}

describe('commands', () => {
  it('registers every command contributed in package.json', async () => {
    await activated();
    const contributed = (extension().packageJSON as Manifest).contributes.commands.map((c) => c.command);
    assert.ok(contributed.length > 0, 'package.json contributes no commands');
    const registered = new Set(await vscode.commands.getCommands(true));
    const missing = contributed.filter((c) => !registered.has(c));
    assert.deepEqual(
      missing,
      [],
      `contributed in package.json but not registered by activate(): ${missing.join(', ')}`,
    );
  });
});
