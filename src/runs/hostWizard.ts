import { statSync } from 'node:fs';
import * as vscode from 'vscode';
import {
  containerText,
  hostEntryOf,
  hostNameProblem,
  listKeyFiles,
  shortHostName,
  type KeyChoice,
} from '../core/hostEntry';
import { parseUserHostPort, resolveEndpoint, sshAddress } from '../core/hosts';
import type { HostSettings } from '../core/settings';
import { expandHome, parseSshConfig, readUserSshConfig } from '../core/sshConfig';
import { createQuickPick, showInputBox, showOpenDialog, showQuickPick } from '../window';

export interface WizardStart {
  /** The settings entry being edited (Edit Host on a settings host). */
  previous?: HostSettings;
  /** An address to start from (Edit Host on an ssh-config host: its alias). */
  target?: string;
  defaultRoots: string[];
  /** Names other hosts already use. */
  taken: string[];
}

const STEPS = 6;

/**
 * Add Host / Edit Host: address (an ~/.ssh/config alias or user@host[:port]), the name shown in the tree (offered:
 * the alias, else user@host; Edit Host renames), key (a private key of ~/.ssh or named by ~/.ssh/config, a typed
 * path, the SSH agent, or Browse…), container, Python, roots. Returns the settings entry, or undefined when cancelled.
 */
export async function hostWizard(start: WizardStart): Promise<HostSettings | undefined> {
  const { previous } = start;
  const verb = previous || start.target ? 'Edit Host' : 'Add Host';
  const title = (n: number, what: string) => `${verb} (${n}/${STEPS}): ${what}`;
  const sshConfig = parseSshConfig(readUserSshConfig());

  let target = previous?.host ?? start.target;
  if (!target) {
    const typeIt: vscode.QuickPickItem & { alias?: string } = { label: '$(edit) Enter user@host[:port]…' };
    const aliases = sshConfig.hosts.map((h) => ({
      label: h.alias,
      description: sshAddress(resolveEndpoint(h.alias, sshConfig)),
      alias: h.alias,
    }));
    if (aliases.length) {
      const pick = await showQuickPick([...aliases, typeIt], {
        title: title(1, 'address'),
        placeHolder: 'A host from ~/.ssh/config, or type an address',
        ignoreFocusOut: true,
      });
      if (!pick) return undefined;
      target = pick.alias;
    }
  }
  if (!target || previous) {
    target = await showInputBox({
      title: title(1, 'address'),
      prompt: 'An ~/.ssh/config alias, or user@host[:port]',
      placeHolder: 'gpu-box or root@10.0.0.5:22',
      ...(target ? { value: target } : {}),
      ignoreFocusOut: true,
      validateInput: (v) =>
        v.trim() && parseUserHostPort(v.trim()) ? undefined : 'Expected an alias or user@host[:port]',
    });
    if (!target) return undefined;
  }
  target = target.trim();

  // Baselines and benchmark results are kept by the host's address (its transport id), not by this name: a rename
  // keeps them.
  const name = await showInputBox({
    title: title(2, 'name'),
    prompt: 'The name shown in Remote Runs',
    value: previous?.name ?? start.target ?? shortHostName(target, start.taken),
    ignoreFocusOut: true,
    validateInput: (v) => hostNameProblem(v, start.taken),
  });
  if (name === undefined) return undefined;

  const key = await pickKey(title(3, 'key'), target, previous?.identityFile, sshConfig);
  if (!key) return undefined;

  const container = await showInputBox({
    title: title(4, 'container (optional)'),
    prompt: 'Run inside a container: pct:200, docker:NAME or kubectl:POD; empty for none',
    value: containerText(previous?.container),
    ignoreFocusOut: true,
    validateInput: (v) =>
      !v.trim() || /^(pct|docker|kubectl):\S+$/.test(v.trim())
        ? undefined
        : 'Expected pct:ID, docker:NAME or kubectl:POD',
  });
  if (container === undefined) return undefined;
  const python = await showInputBox({
    title: title(5, 'Python (optional)'),
    prompt: 'Interpreter on the remote (empty: python3; "Select Remote Python" can find one later)',
    value: previous?.python ?? '',
    ignoreFocusOut: true,
  });
  if (python === undefined) return undefined;
  const roots = await showInputBox({
    title: title(6, 'checkpoint roots'),
    prompt: 'Comma-separated folders on the remote',
    value: (previous?.roots ?? start.defaultRoots).join(', '),
    ignoreFocusOut: true,
  });
  if (roots === undefined) return undefined;
  return hostEntryOf({ name: name.trim(), target, key, container, python, roots }, previous);
}

async function pickKey(
  title: string,
  target: string,
  current: string | undefined,
  sshConfig: ReturnType<typeof parseSshConfig>,
): Promise<KeyChoice | undefined> {
  type Item = vscode.QuickPickItem & { choice?: KeyChoice; browse?: true; typed?: string };
  const configKeys = sshConfig.lookup(parseUserHostPort(target)?.host ?? target)?.identityFiles ?? [];
  const named = [...configKeys, ...sshConfig.hosts.flatMap((h) => h.identityFiles)];
  const files = [...new Set([...(current ? [current] : []), ...listKeyFiles(undefined, named)])];
  const items: Item[] = [
    ...files.map((path) => ({
      label: `$(key) ${path}`,
      ...(path === current
        ? { description: 'current' }
        : named.includes(path)
          ? { description: 'named in ~/.ssh/config' }
          : {}),
      choice: { kind: 'file', path } as const,
    })),
    {
      label: '$(shield) Use the SSH agent',
      description: configKeys.length
        ? `and ${configKeys.join(', ')} from ~/.ssh/config`
        : 'and the default ~/.ssh keys',
      choice: { kind: 'agent' },
    },
    { label: '$(folder-opened) Browse…', description: 'another private key file', browse: true },
  ];
  const pick = await pickWithTypedPath(items, title, `The key for ${target}, or type a key file's path`);
  if (!pick) return undefined;
  if (pick.typed !== undefined) return { kind: 'file', path: pick.typed };
  if (pick.choice) return pick.choice;
  const uris = await showOpenDialog({
    title: 'Private key file',
    openLabel: 'Use This Key',
    canSelectMany: false,
    // Where keys usually are; the dialog falls back to the home folder when there is no ~/.ssh.
    defaultUri: vscode.Uri.file(files[0]?.replace(/\/[^/]+$/, '') ?? `${process.env['HOME'] ?? '/'}/.ssh`),
  });
  const path = uris?.[0]?.fsPath;
  return path ? { kind: 'file', path } : undefined;
}

/**
 * A picker that also takes a typed path (`~/keys/gpu`, `/etc/keys/a`): while the text looks like a path, an entry for
 * it comes first; Enter on it takes the path when it is a file there, and says so on the entry when it is not.
 */
async function pickWithTypedPath<T extends vscode.QuickPickItem & { typed?: string }>(
  items: T[],
  title: string,
  placeholder: string,
): Promise<T | undefined> {
  const qp = createQuickPick<T>();
  qp.title = title;
  qp.placeholder = placeholder;
  qp.ignoreFocusOut = true;
  qp.items = items;
  const typedItem = (value: string, problem?: string): T =>
    ({
      label: value,
      description: problem ?? 'the key file typed',
      alwaysShow: true,
      typed: expandHome(value),
    }) as T;
  const looksLikePath = (v: string) => /^(~|\.{0,2}\/)/.test(v);
  qp.onDidChangeValue((v) => {
    const value = v.trim();
    qp.items = looksLikePath(value) ? [typedItem(value), ...items] : items;
  });
  try {
    return await new Promise<T | undefined>((resolvePick) => {
      qp.onDidHide(() => resolvePick(undefined));
      qp.onDidAccept(() => {
        const pick = qp.selectedItems[0];
        if (pick?.typed !== undefined && !isFile(pick.typed)) {
          const problem = typedItem(pick.label, `no file at ${pick.typed}`);
          qp.items = [problem, ...items];
          return;
        }
        resolvePick(pick);
        qp.hide();
      });
      qp.show();
    });
  } finally {
    qp.dispose();
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
