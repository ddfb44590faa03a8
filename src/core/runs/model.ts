import { isHostSettingsFailure } from '../transport/sshErrors';
import { formatAge, formatBytes, formatExactBytes, formatLocalTime, naturalCompare } from '../util/format';
import { printableName } from './format';
import type { RootListing, RunEntry, RunsListing } from './listRuns';

/*
 * The Remote Runs tree without VS Code: Host → root → run → checkpoint → files. The VS Code provider maps each node
 * to a TreeItem one to one (label, description, tooltip, codicon, contextValue, collapsible) and asks `childrenOf`
 * for the children; the CLI renders the same nodes as text. Nodes are plain data with a `kind` discriminant.
 */

export type HostState = 'disconnected' | 'connecting' | 'listing' | 'connected' | 'error';
export type Collapsible = 'none' | 'collapsed' | 'expanded';

interface NodeBase {
  /** Unique in the tree and stable across refreshes (TreeItem.id), so expansion state survives a refresh. */
  id: string;
  label: string;
  description?: string;
  tooltip?: string;
  /** A codicon id (`package`, `loading~spin`). */
  icon: string;
  /** `;`-separated tokens that package.json menus match: `viewItem =~ /\bcheckpoint\b/`. */
  contextValue: string;
  collapsible: Collapsible;
}

export interface HostInfo {
  id: string;
  label: string;
  state: HostState;
  /** `user@host:port`, container, python: shown as the description. */
  detail?: string;
  /** The failure, for state `error`. */
  error?: string;
  /** Its KnownGoodError code: a connection failure's row opens Edit Host… (isHostSettingsFailure). */
  errorCode?: string;
  /** Nothing to connect to (this machine): its state is never "not connected". */
  local?: boolean;
}

export interface HostNode extends NodeBase {
  kind: 'host';
  host: HostInfo;
}

export interface RootNode extends NodeBase {
  kind: 'root';
  hostId: string;
  listing: RootListing;
  remotePath: string;
  remotePathB64?: string;
}

/** A node for one entry of a listing (run folder, checkpoint, folder inside a checkpoint, file or link). */
export interface EntryNode extends NodeBase {
  kind: 'run' | 'checkpoint' | 'folder' | 'file';
  hostId: string;
  /** The root listing the entry belongs to. */
  root: RootListing;
  entry: RunEntry;
  /** Absolute path on the remote (text; U+FFFD where the name is not UTF-8). */
  remotePath: string;
  /** The exact bytes of remotePath, base64, when it is not UTF-8. */
  remotePathB64?: string;
  /** Below a checkpoint: its parts, not checkpoints of their own. */
  inCheckpoint: boolean;
  /** A folder past the listing's depth: expanding it needs one more listing (of `remotePath`). */
  needsListing: boolean;
}

export type MessageSeverity = 'info' | 'warning' | 'error' | 'loading' | 'more';
export interface MessageNode extends NodeBase {
  kind: 'message';
  /** The host the message is about (its parent's host): commands invoked on it (Retry, Add Root) act there. */
  hostId: string;
  severity: MessageSeverity;
  /** What the message offers: `retry` (host failed), `editHost` (its connection failed), `addRoot` (root missing). */
  action?: 'retry' | 'addRoot' | 'editHost';
}

export type RunsNode = HostNode | RootNode | EntryNode | MessageNode;

export interface ModelOptions {
  /** Newest step first (default) or last. */
  newestFirst?: boolean;
  /** Current time in epoch ms on the remote's clock (ages in descriptions); default Date.now(). */
  now?: number;
}

const ICON: Record<string, string> = {
  'train-log': 'graph-line',
  metrics: 'graph',
  stdout: 'output',
  log: 'output',
  config: 'settings-gear',
  weights: 'file-binary',
  other: 'file',
};

const ROLE_TOKENS: Record<string, string> = {
  'train-log': 'log;jsonl;trainLog;openable',
  metrics: 'jsonl;metrics;openable',
  stdout: 'log;stdout;openable',
  log: 'log;openable',
  config: 'config;openable',
  weights: 'weights',
  other: 'other',
  link: 'link',
};

function idOf(...parts: string[]): string {
  return JSON.stringify(parts);
}

/** The id of the node for `rel` (an entry's path, '' for the root itself) below a root of a host. */
export function nodeId(hostId: string, rootPath: string, rel: string): string {
  return rel === '' ? idOf('root', hostId, rootPath) : idOf('entry', hostId, rootPath, rel);
}

/** The id of a host's row. */
export function hostNodeId(hostId: string): string {
  return idOf('host', hostId);
}

/** Whether a row opens by itself the first time it is shown (a root does: `rootNode`'s collapsible). */
export function opensByDefault(id: string): boolean {
  return id.startsWith(`${idOf('root').slice(0, -1)},`);
}

/** The id of the node an entry of a root listing gets (what grafts are kept by). */
export function entryNodeId(hostId: string, root: Pick<RootListing, 'path'>, entry: RunEntry): string {
  return entry.pathB64 !== undefined
    ? idOf('entry', hostId, root.path, entryKey(entry))
    : nodeId(hostId, root.path, entry.path);
}

function entryKey(entry: RunEntry): string {
  return entry.pathB64 !== undefined ? `b64:${entry.pathB64}` : entry.path;
}

function joinRemote(root: string, rel: string): string {
  if (rel === '') return root;
  return root.endsWith('/') ? root + rel : `${root}/${rel}`;
}

function b64Bytes(b64: string): Buffer {
  return Buffer.from(b64, 'base64');
}

/** An entry's absolute path on the remote, and its exact bytes (base64) when they are not UTF-8. */
export function remotePathOf(root: RootListing, entry: RunEntry): { remotePath: string; remotePathB64?: string } {
  const remotePath = joinRemote(root.path, entry.path);
  if (!entry.pathB64 && !root.pathB64) return { remotePath };
  const rootRaw = root.pathB64 ? b64Bytes(root.pathB64) : Buffer.from(root.path, 'utf8');
  const relRaw = entry.pathB64 ? b64Bytes(entry.pathB64) : Buffer.from(entry.path, 'utf8');
  const sep = rootRaw.length > 0 && rootRaw[rootRaw.length - 1] === 0x2f ? [] : [Buffer.from('/')];
  const raw = entry.path === '' ? rootRaw : Buffer.concat([rootRaw, ...sep, relRaw]);
  return { remotePath, remotePathB64: raw.toString('base64') };
}

/** The entry's name as one printable line (`\n`, `\xff` escaped). */
export function displayName(entry: Pick<RunEntry, 'name' | 'nameB64'>): string {
  return printableName(entry.name, entry.nameB64 ? b64Bytes(entry.nameB64) : undefined);
}

function ageOf(entry: RunEntry, now: number): string | undefined {
  return entry.mtime === null ? undefined : formatAge(entry.mtime * 1000, now);
}

function sizeText(entry: RunEntry): string {
  return (entry.sizeComplete === false ? '≥ ' : '') + formatBytes(entry.size);
}

const SPECIAL_WORDS: Record<string, string> = {
  fifo: 'FIFO (named pipe)',
  socket: 'socket',
  'char-device': 'character device',
  'block-device': 'block device',
};

function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

function tooltipOf(entry: RunEntry, where: { remotePath: string; remotePathB64?: string }, what: string): string {
  const raw = where.remotePathB64 ? b64Bytes(where.remotePathB64) : undefined;
  const lines = [printableName(where.remotePath, raw), what];
  if (entry.kind !== 'symlink' || entry.targetKind === 'file') {
    lines.push(
      entry.kind === 'dir' && entry.sizeComplete === false
        ? `at least ${formatExactBytes(entry.size)} (not all of it was listed)`
        : `${formatExactBytes(entry.size)} (${formatBytes(entry.size)})`,
    );
  }
  if (entry.mtime !== null) lines.push(`modified ${formatLocalTime(entry.mtime * 1000)}`);
  if (entry.kind === 'symlink')
    lines.push(`link to ${entry.target ?? '?'}${entry.targetKind === 'missing' ? ' (missing)' : ''}`);
  if (entry.omitted)
    lines.push(`${entry.omitted.toLocaleString('en-US')} more not listed (cut at the listing's max entries)`);
  if (entry.escaped) lines.push('the path holds bytes that are not UTF-8: shown as \\xNN');
  if (entry.error) lines.push(entry.error);
  return lines.join('\n');
}

/** Checkpoints below an entry (itself included), counted through the listing. */
export function countCheckpoints(entry: RunEntry): number {
  let n = 0;
  const stack = [entry];
  while (stack.length) {
    const e = stack.pop()!;
    if (e.role === 'checkpoint') n++;
    if (e.children) stack.push(...e.children);
  }
  return n;
}

const isVersionDir = (e: RunEntry) => e.kind === 'dir' && e.layout === 'lightning-version';

/** `version`: Lightning's version_N (one launch); `logs`: the lightning_logs/ folder holding them; else undefined. */
function lightningPart(entry: RunEntry): 'version' | 'logs' | undefined {
  if (isVersionDir(entry)) return 'version';
  const dirs = (entry.children ?? []).filter((c) => c.kind === 'dir');
  return entry.name === 'lightning_logs' && dirs.length > 0 && dirs.every(isVersionDir) ? 'logs' : undefined;
}

/** Lightning versions (launches) in a run folder: its lightning_logs/version_N folders. */
function lightningVersions(entry: RunEntry): number {
  const logs = (entry.children ?? []).find((c) => lightningPart(c) === 'logs');
  return logs ? (logs.children ?? []).filter(isVersionDir).length : 0;
}

/** The entry's training step; none for a save counter (accelerate's checkpoint_N), which only orders. */
export function trainingStep(entry: RunEntry): number | undefined {
  return entry.stepIsIndex ? undefined : entry.step;
}

function maxStep(entry: RunEntry): number | undefined {
  let best: number | undefined;
  const stack = [...(entry.children ?? [])];
  while (stack.length) {
    const e = stack.pop()!;
    if (e.role === 'checkpoint' && trainingStep(e) !== undefined && (best === undefined || e.step! > best))
      best = e.step;
    if (e.role !== 'checkpoint' && e.children) stack.push(...e.children);
  }
  return best;
}

// ---------------------------------------------------------------------------------------------------------------
// Hosts

export function hostNode(host: HostInfo): HostNode {
  const icon =
    host.state === 'connected'
      ? 'vm-active'
      : host.state === 'connecting' || host.state === 'listing'
        ? 'loading~spin'
        : host.state === 'error'
          ? 'error'
          : 'vm-outline';
  const stateText: Record<HostState, string> = {
    disconnected: host.local ? '' : 'not connected: open it to connect',
    connecting: 'connecting…',
    listing: 'listing…',
    connected: 'connected',
    error: 'failed',
  };
  // A host not connected yet says so only in its tooltip (and its outline icon): after a reload every host starts
  // so, and one is connected when its row is opened. This machine has nothing to connect.
  const quiet = host.state === 'connected' || host.state === 'disconnected';
  const tooltip = [host.label, host.detail, stateText[host.state], host.error].filter(Boolean).join('\n');
  return {
    kind: 'host',
    id: idOf('host', host.id),
    label: host.label,
    description: quiet ? host.detail : [host.detail, stateText[host.state]].filter(Boolean).join(' · '),
    tooltip,
    icon,
    contextValue: `host;${host.state}`,
    collapsible: 'collapsed',
    host,
  };
}

function message(
  hostId: string,
  parentId: string,
  code: string,
  severity: MessageSeverity,
  label: string,
  extra: { tooltip?: string; action?: 'retry' | 'addRoot' | 'editHost' } = {},
): MessageNode {
  const icon = { info: 'info', warning: 'warning', error: 'error', loading: 'loading~spin', more: 'ellipsis' }[
    severity
  ];
  return {
    kind: 'message',
    hostId,
    id: `${parentId}#${code}`,
    label,
    tooltip: extra.tooltip ?? label,
    icon,
    // An Edit Host… row still offers Retry (its inline button and menu match `retry`).
    contextValue: [
      'message',
      severity,
      ...(extra.action === 'editHost' ? ['retry', 'editHost'] : extra.action ? [extra.action] : []),
    ].join(';'),
    collapsible: 'none',
    severity,
    ...(extra.action ? { action: extra.action } : {}),
  };
}

/**
 * A host's children: its roots once listed; while it connects or lists, one loading line; on failure one error line
 * with the whole message as its tooltip and a Retry action (a click on a connection failure opens Edit Host…). Never empty, so the tree never looks like it hangs.
 */
export function hostChildren(host: HostInfo, listing: RunsListing | undefined): RunsNode[] {
  const hid = idOf('host', host.id);
  if (host.state === 'error') {
    return [
      message(host.id, hid, 'error', 'error', host.error ?? 'failed', {
        action: isHostSettingsFailure(host.errorCode) ? 'editHost' : 'retry',
        tooltip: host.error ?? 'failed',
      }),
    ];
  }
  if (host.state === 'connecting') return [message(host.id, hid, 'loading', 'loading', 'Connecting…')];
  if (!listing) {
    if (host.state === 'disconnected') return [message(host.id, hid, 'disconnected', 'info', 'Not connected')];
    return [message(host.id, hid, 'loading', 'loading', 'Listing checkpoint roots…')];
  }
  if (listing.roots.length === 0)
    return [message(host.id, hid, 'no-roots', 'info', 'No checkpoint roots: add one', { action: 'addRoot' })];
  return listing.roots.map((r) => rootNode(host.id, r));
}

// ---------------------------------------------------------------------------------------------------------------
// Roots

const ROOT_STATUS_TEXT: Record<RootListing['status'], string> = {
  ok: '',
  missing: 'not found',
  denied: 'permission denied',
  'not-a-directory': 'not a folder',
  empty: 'empty',
  'no-checkpoints': 'no checkpoints',
  error: 'failed',
};

export function rootNode(hostId: string, listing: RootListing): RootNode {
  const { remotePath, remotePathB64 } = listing.entry
    ? remotePathOf(listing, listing.entry)
    : { remotePath: listing.path, ...(listing.pathB64 ? { remotePathB64: listing.pathB64 } : {}) };
  const bad =
    listing.status === 'missing' ||
    listing.status === 'denied' ||
    listing.status === 'not-a-directory' ||
    listing.status === 'error';
  let description: string;
  if (listing.status === 'ok' && listing.entry?.role === 'checkpoint') {
    const e = listing.entry;
    description = [
      ...(trainingStep(e) !== undefined ? [`step ${e.step}`] : []),
      sizeText(e),
      ...(e.format && e.format !== 'step' ? [e.format] : []),
    ].join(' · ');
  } else if (listing.status === 'ok' && listing.entry) {
    const runs = (listing.entry.children ?? []).filter((c) => c.kind === 'dir' && c.role !== 'checkpoint').length;
    const parts = [] as string[];
    if (runs) parts.push(plural(runs, 'run'));
    parts.push(plural(listing.counts?.checkpoints ?? countCheckpoints(listing.entry), 'checkpoint'));
    parts.push(sizeText(listing.entry));
    description = parts.join(' · ');
  } else {
    description = ROOT_STATUS_TEXT[listing.status];
  }
  const tooltip = [printableName(listing.path), listing.message || ROOT_STATUS_TEXT[listing.status]];
  if (listing.entry && listing.status !== 'empty') tooltip.push(`${formatExactBytes(listing.entry.size)} listed`);
  if (listing.entry?.mtime) tooltip.push(`modified ${formatLocalTime(listing.entry.mtime * 1000)}`);
  return {
    kind: 'root',
    id: nodeId(hostId, listing.path, ''),
    label: listing.root === listing.path ? printableName(listing.path) : `${printableName(listing.root)}`,
    description,
    tooltip: tooltip.join('\n'),
    icon: bad ? 'warning' : 'root-folder',
    contextValue: `root;${listing.status}${listing.entry?.role === 'checkpoint' ? ';checkpoint' : ''}`,
    collapsible: 'expanded',
    hostId,
    listing,
    remotePath,
    ...(remotePathB64 ? { remotePathB64 } : {}),
  };
}

function rootMessages(node: RootNode): MessageNode[] {
  const l = node.listing;
  const text = l.message || ROOT_STATUS_TEXT[l.status];
  switch (l.status) {
    case 'missing':
      return [message(node.hostId, node.id, 'missing', 'warning', capitalise(text), { action: 'addRoot' })];
    case 'denied':
      return [message(node.hostId, node.id, 'denied', 'error', capitalise(text))];
    case 'not-a-directory':
      return [message(node.hostId, node.id, 'not-dir', 'warning', capitalise(text), { action: 'addRoot' })];
    case 'error':
      return [message(node.hostId, node.id, 'error', 'error', text)];
    case 'empty':
      return [message(node.hostId, node.id, 'empty', 'info', 'Empty: no runs or checkpoints yet')];
    case 'no-checkpoints':
      return [message(node.hostId, node.id, 'no-checkpoints', 'info', capitalise(text))];
    case 'ok':
      return [];
  }
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// ---------------------------------------------------------------------------------------------------------------
// Entries

export function entryNode(
  hostId: string,
  root: RootListing,
  entry: RunEntry,
  inCheckpoint: boolean,
  options: ModelOptions = {},
): EntryNode {
  const now = options.now ?? Date.now();
  const { remotePath, remotePathB64 } = remotePathOf(root, entry);
  const base = {
    id: entryNodeId(hostId, root, entry),
    label: displayName(entry),
    hostId,
    root,
    entry,
    remotePath,
    ...(remotePathB64 ? { remotePathB64 } : {}),
    inCheckpoint,
  };
  const escaped = entry.escaped ? ';escaped' : '';
  const unlisted = entry.kind === 'dir' && entry.listed === false && !entry.error;
  const hasChildren = (entry.children?.length ?? 0) > 0 || !!entry.omitted || unlisted || !!entry.error;
  const collapsible: Collapsible = entry.kind === 'dir' && hasChildren ? 'collapsed' : 'none';
  const age = ageOf(entry, now);

  if (entry.role === 'checkpoint' && !inCheckpoint) {
    const step = trainingStep(entry);
    const parts = [
      ...(entry.epoch !== undefined ? [`epoch ${entry.epoch}`] : []),
      ...(step !== undefined ? [`step ${step}`] : []),
      sizeText(entry),
      ...(age ? [age] : []),
    ];
    const what = [
      'checkpoint',
      entry.format ? `(${entry.format})` : '',
      step !== undefined ? `· step ${step}` : '',
      entry.stepIsIndex && entry.step !== undefined ? `· save ${entry.step} of the run, not a training step` : '',
    ]
      .filter(Boolean)
      .join(' ');
    return {
      ...base,
      kind: 'checkpoint',
      description: parts.join(' · '),
      tooltip: tooltipOf(entry, base, what),
      icon: 'package',
      contextValue: `checkpoint;${entry.kind === 'dir' ? 'dir' : 'file'}${entry.format ? `;format-${entry.format}` : ''}${escaped}`,
      collapsible,
      needsListing: unlisted,
    };
  }
  if (entry.kind === 'dir') {
    // A Lightning run is one run: its lightning_logs/ and version_N/ folders (one per launch) are folders inside it.
    const version = lightningPart(entry);
    const isRun = !inCheckpoint && !version;
    let description: string;
    if (isRun || version === 'version') {
      const n = countCheckpoints(entry);
      const top = maxStep(entry);
      const versions = lightningVersions(entry);
      description = [
        ...(versions > 1 ? [`${versions} versions`] : []),
        ...(entry.children ? [plural(n, 'checkpoint')] : ['not listed yet']),
        ...(top !== undefined ? [`last step ${top}`] : []),
        sizeText(entry),
        ...(age ? [age] : []),
      ].join(' · ');
    } else {
      description = sizeText(entry);
    }
    const what = isRun ? 'run folder' : version === 'version' ? 'a launch of the Lightning run above' : 'folder';
    return {
      ...base,
      kind: isRun ? 'run' : 'folder',
      description: entry.error ? entry.error : description,
      tooltip: tooltipOf(entry, base, what),
      icon: entry.error ? 'warning' : 'folder',
      contextValue: (isRun ? 'run' : 'folder') + (version ? ';lightning-version' : '') + escaped,
      collapsible,
      needsListing: unlisted,
    };
  }
  if (entry.kind === 'special') {
    const what = SPECIAL_WORDS[entry.special ?? 'other'] ?? 'not a regular file';
    return {
      ...base,
      kind: 'file',
      description: entry.error ? entry.error : `${what}, not read`,
      tooltip: tooltipOf(entry, base, `${what} (never read)`),
      icon: 'circle-slash',
      contextValue: `file;other;special${escaped}`,
      collapsible: 'none',
      needsListing: false,
    };
  }
  const role = entry.kind === 'symlink' && entry.targetKind !== 'file' ? 'link' : entry.role;
  const linkIcon = entry.targetKind === 'dir' ? 'file-symlink-directory' : 'file-symlink-file';
  const desc =
    role === 'link'
      ? `→ ${printableName(entry.target ?? '?')}${entry.targetKind === 'missing' ? ' (missing)' : ''}`
      : [formatBytes(entry.size), ...(age ? [age] : [])].join(' · ');
  return {
    ...base,
    kind: 'file',
    description: entry.error ? entry.error : desc,
    tooltip: tooltipOf(entry, base, role === 'weights' ? 'checkpoint part' : role),
    icon: entry.kind === 'symlink' ? linkIcon : (ICON[role] ?? 'file'),
    contextValue: `file;${ROLE_TOKENS[role] ?? 'other'}${entry.kind === 'symlink' ? ';symlink' : ''}${escaped}`,
    collapsible: 'none',
    needsListing: false,
  };
}

/** Children order: step numbers compare as numbers; steps newest first (or last); ties and step-less by time. */
export function compareCheckpoints(a: RunEntry, b: RunEntry, newestFirst: boolean): number {
  const sa = a.step;
  const sb = b.step;
  if ((sa === undefined) !== (sb === undefined)) return sa === undefined ? 1 : -1;
  const dir = newestFirst ? -1 : 1;
  if (sa !== undefined && sb !== undefined && sa !== sb) return (sa - sb) * dir;
  const ta = a.mtime ?? 0;
  const tb = b.mtime ?? 0;
  if (ta !== tb) return (ta - tb) * dir;
  return naturalCompare(a.name, b.name);
}

/**
 * Sorted children of a root or run: run folders, then plain files (logs, configs: few, so a thousand checkpoints do
 * not push them out of sight), then checkpoints by step. Inside a checkpoint: folders, then files, by name.
 */
export function sortEntries(entries: readonly RunEntry[], inCheckpoint: boolean, newestFirst: boolean): RunEntry[] {
  const group = (e: RunEntry): number => {
    if (e.kind === 'dir' && (inCheckpoint || e.role !== 'checkpoint')) return 0;
    if (!inCheckpoint && e.role === 'checkpoint') return 2;
    return 1;
  };
  return [...entries].sort((a, b) => {
    const ga = group(a);
    const gb = group(b);
    if (ga !== gb) return ga - gb;
    if (ga === 2) return compareCheckpoints(a, b, newestFirst);
    return naturalCompare(a.name, b.name);
  });
}

function entryChildren(
  hostId: string,
  root: RootListing,
  parent: RunEntry,
  parentId: string,
  inCheckpoint: boolean,
  options: ModelOptions,
): RunsNode[] {
  const out: RunsNode[] = [];
  if (parent.error) out.push(message(hostId, parentId, 'error', 'error', capitalise(parent.error)));
  const kids = sortEntries(parent.children ?? [], inCheckpoint, options.newestFirst ?? true);
  for (const c of kids) out.push(entryNode(hostId, root, c, inCheckpoint, options));
  if (parent.omitted) {
    out.push(
      message(hostId, parentId, 'omitted', 'more', `${parent.omitted.toLocaleString('en-US')} more not shown`, {
        tooltip: `This folder holds ${parent.omitted.toLocaleString('en-US')} more entries than the listing keeps (knownGood max entries); the newest steps are kept.`,
      }),
    );
  }
  return out;
}

/**
 * The children of any node, from the listing already fetched. A folder with `needsListing` has none yet: the caller
 * lists its `remotePath` (one call) and grafts the result with `graftListing`.
 */
export function childrenOf(node: RunsNode, options: ModelOptions = {}): RunsNode[] {
  switch (node.kind) {
    case 'host':
      return [];
    case 'message':
      return [];
    case 'root': {
      const msgs = rootMessages(node);
      if (!node.listing.entry || node.listing.status === 'empty') return msgs;
      if (node.listing.entry.role === 'checkpoint') {
        // The root itself is one checkpoint folder: its children are its parts.
        return [...msgs, ...entryChildren(node.hostId, node.listing, node.listing.entry, node.id, true, options)];
      }
      return [...msgs, ...entryChildren(node.hostId, node.listing, node.listing.entry, node.id, false, options)];
    }
    default: {
      const root = node.root;
      const inCk = node.inCheckpoint || (node.kind === 'checkpoint' && node.entry.kind === 'dir');
      return entryChildren(node.hostId, root, node.entry, node.id, inCk, options);
    }
  }
}

/** The root nodes of one host's listing. */
export function buildRootNodes(hostId: string, listing: RunsListing): RootNode[] {
  return listing.roots.map((r) => rootNode(hostId, r));
}

// ---------------------------------------------------------------------------------------------------------------
// Lookups

/** The entry at `rel` below a root entry ('' is the root entry itself). */
export function findEntry(rootEntry: RunEntry, rel: string): RunEntry | undefined {
  if (rel === '' || rel === rootEntry.path) return rootEntry;
  let cur: RunEntry | undefined = rootEntry;
  while (cur) {
    const next: RunEntry | undefined = (cur.children ?? []).find((c) => c.path === rel || rel.startsWith(`${c.path}/`));
    if (!next || next.path === rel) return next;
    cur = next;
  }
  return undefined;
}

export interface NewestCheckpoint {
  root: RootListing;
  entry: RunEntry;
  /** Entries from the root entry down to the checkpoint's parent. */
  ancestors: RunEntry[];
  remotePath: string;
  remotePathB64?: string;
  /** Node ids from the root node down to the checkpoint's node, for TreeView.reveal. */
  ids: string[];
}

/**
 * "Reveal Newest Checkpoint": the most recently written checkpoint in any root (step numbers of different runs do
 * not compare; time does), the higher step on a tie.
 */
export function newestCheckpoint(listing: RunsListing, hostId = ''): NewestCheckpoint | undefined {
  let best: { root: RootListing; entry: RunEntry; ancestors: RunEntry[] } | undefined;
  for (const root of listing.roots) {
    if (!root.entry) continue;
    const stack: { e: RunEntry; anc: RunEntry[] }[] = [{ e: root.entry, anc: [] }];
    while (stack.length) {
      const { e, anc } = stack.pop()!;
      if (e.role === 'checkpoint') {
        if (
          !best ||
          (e.mtime ?? 0) > (best.entry.mtime ?? 0) ||
          ((e.mtime ?? 0) === (best.entry.mtime ?? 0) && (e.step ?? -1) > (best.entry.step ?? -1))
        ) {
          best = { root, entry: e, ancestors: anc };
        }
        continue;
      }
      for (const c of e.children ?? []) stack.push({ e: c, anc: [...anc, e] });
    }
  }
  if (!best) return undefined;
  const { remotePath, remotePathB64 } = remotePathOf(best.root, best.entry);
  const rootPath = best.root.path;
  const entryId = (e: RunEntry) =>
    e.pathB64 !== undefined ? idOf('entry', hostId, rootPath, entryKey(e)) : nodeId(hostId, rootPath, e.path);
  const ids = [nodeId(hostId, rootPath, ''), ...best.ancestors.filter((a) => a.path !== '').map(entryId)];
  if (best.entry.path !== '') ids.push(entryId(best.entry));
  return { ...best, remotePath, ...(remotePathB64 ? { remotePathB64 } : {}), ids };
}

/**
 * Puts the listing of a folder that was past the depth (listed as a root of its own) into the listing it came from,
 * with paths made relative to the original root again. Returns a new entry; the original is not changed.
 */
export function graftListing(folder: RunEntry, sub: RootListing): RunEntry {
  if (!sub.entry) {
    return { ...folder, listed: false, error: sub.message || sub.status };
  }
  const prefixText = folder.path;
  const prefixRaw = folder.pathB64 ? b64Bytes(folder.pathB64) : Buffer.from(folder.path, 'utf8');
  const rebase = (e: RunEntry): RunEntry => {
    const out: RunEntry = { ...e, path: prefixText === '' ? e.path : `${prefixText}/${e.path}` };
    if (e.pathB64 !== undefined || folder.pathB64 !== undefined) {
      const rel = e.pathB64 ? b64Bytes(e.pathB64) : Buffer.from(e.path, 'utf8');
      out.pathB64 = Buffer.concat([prefixRaw, Buffer.from('/'), rel]).toString('base64');
      out.escaped = true;
    }
    if (e.children) out.children = e.children.map(rebase);
    return out;
  };
  const children = (sub.entry.children ?? []).map(rebase);
  const grafted: RunEntry = { ...folder, children, size: sub.entry.size, role: sub.entry.role };
  delete grafted.listed;
  if (sub.entry.format !== undefined) grafted.format = sub.entry.format;
  if (sub.entry.omitted) grafted.omitted = sub.entry.omitted;
  if (sub.entry.sizeComplete === false) grafted.sizeComplete = false;
  else delete grafted.sizeComplete;
  return grafted;
}

/**
 * "Now" on the remote's clock, for ModelOptions.now: mtimes are the remote's, so ages must be measured on its clock
 * or a host whose clock is off shows checkpoints "in the future". `receivedAtMs` is Date.now() when the listing came.
 */
export function remoteNow(listing: Pick<RunsListing, 'now'>, receivedAtMs: number, localNowMs = Date.now()): number {
  return listing.now * 1000 + (localNowMs - receivedAtMs);
}
