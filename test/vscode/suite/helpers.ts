// Shared by the extension-host tests: the extension under test, its test API, and settings changes that wait
// for the extension to see them.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { KnownGoodTestApi as KnownGoodApi } from '../../../src/api';
import type { TreeNode } from '../../../src/shared/treeSection';

export type { KnownGoodApi, TreeNode };

export const EXTENSION_ID = 'known-good.known-good';

export function extension(): vscode.Extension<unknown> {
  const ext = vscode.extensions.getExtension(EXTENSION_ID);
  assert.ok(ext, `extension ${EXTENSION_ID} is not loaded (extensionDevelopmentPath wrong?)`);
  return ext;
}

/** What activate() returns under test (ExtensionMode.Test): the test hooks of src/api.ts. */
export async function activated(): Promise<KnownGoodApi> {
  return (await extension().activate()) as KnownGoodApi;
}

/** A node's children (the root's without `node`) with their TreeItems and labels, in tree order. */
export async function rows(
  api: KnownGoodApi,
  node?: TreeNode,
): Promise<{ node: TreeNode; label: string; item: vscode.TreeItem }[]> {
  // Through the interface VS Code itself uses, so the provider may go async without breaking the tests.
  const tree: vscode.TreeDataProvider<TreeNode> = api.tree;
  const children = (await tree.getChildren(node)) ?? [];
  return Promise.all(
    children.map(async (n) => {
      const item = await tree.getTreeItem(n);
      const label = typeof item.label === 'string' ? item.label : (item.label?.label ?? '');
      return { node: n, label, item };
    }),
  );
}

export async function setSetting(key: string, value: unknown): Promise<void> {
  await vscode.workspace.getConfiguration('knownGood').update(key, value, vscode.ConfigurationTarget.Global);
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > until)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The test sshd the runner started (test/support/sshd.ts) and passed in through the environment. */
export interface TestSshHost {
  port: number;
  user: string;
  /** The sessions' HOME on the test host: where its `~/.known-good/` is. */
  home: string;
  identityFile: string;
  knownHostsFile: string;
}

export function testSshHost(): TestSshHost {
  const raw = process.env['KG_TEST_SSHD'];
  assert.ok(
    raw,
    'KG_TEST_SSHD is not set: the runner (scripts/vscode/run-tests.ts or electron.ts) starts the test sshd',
  );
  return JSON.parse(raw) as TestSshHost;
}

/**
 * A node's children once the host has been listed: the first call starts the listing and shows a placeholder
 * ("Listing checkpoint roots…", "Connecting…"); poll until no placeholder is left. Feature sections are left out.
 */
export async function settledRows(
  api: KnownGoodApi,
  node: TreeNode | undefined,
  timeoutMs = 45_000,
): ReturnType<typeof rows> {
  const all = await waitFor(
    'the host listing',
    async () => {
      const r = await rows(api, node);
      return r.some((x) => x.node.kind === 'message' && x.label.endsWith('…')) ? undefined : r;
    },
    timeoutMs,
  );
  // Feature sections (Baselines, …) that features hang under each host are not part of the listing.
  return all.filter((x) => x.node.kind !== 'section');
}
