import type { RunsListing } from './listRuns';
import { buildRootNodes, childrenOf, type ModelOptions, type RunsNode } from './model';

export interface TextTreeOptions extends ModelOptions {
  /** Printed before each root path: `gpu-box:/workspace/checkpoints`. */
  hostLabel?: string;
  /** Also list the files inside each checkpoint (default: checkpoints are one line each). */
  checkpointFiles?: boolean;
}

const MARK: Record<string, string> = { info: '', warning: '! ', error: '✗ ', loading: '… ', more: '… ' };

function line(node: RunsNode): string {
  let label = node.label;
  if (node.kind === 'message') label = `${MARK[node.severity] ?? ''}${label}`;
  else if ((node.kind === 'run' || node.kind === 'folder' || node.kind === 'checkpoint') && node.entry.kind === 'dir') {
    label += '/';
  }
  return node.description ? `${label}  ${node.description}` : label;
}

function descend(node: RunsNode, options: TextTreeOptions): boolean {
  if (node.kind === 'checkpoint' || node.kind === 'folder') return !!options.checkpointFiles;
  return node.kind === 'run' || node.kind === 'root';
}

/**
 * The listing as `known-good ls` prints it: the same nodes, labels and descriptions as the Remote Runs tree, drawn
 * with box characters. Names are printable (newlines and bytes that are not UTF-8 escaped), one entry per line.
 */
export function renderTextTree(listing: RunsListing, options: TextTreeOptions = {}): string {
  const opts: TextTreeOptions = { now: listing.now * 1000, ...options };
  const out: string[] = [];
  const walk = (node: RunsNode, prefix: string) => {
    const kids = descend(node, opts) ? childrenOf(node, opts) : [];
    kids.forEach((k, i) => {
      const last = i === kids.length - 1;
      out.push(`${prefix}${last ? '└── ' : '├── '}${line(k)}`);
      walk(k, prefix + (last ? '    ' : '│   '));
    });
  };
  for (const root of buildRootNodes(options.hostLabel ?? '', listing)) {
    const head = `${options.hostLabel ? `${options.hostLabel}:` : ''}${root.label}`;
    out.push(root.description ? `${head}  ${root.description}` : head);
    walk(root, '');
  }
  return out.join('\n') + '\n';
}
