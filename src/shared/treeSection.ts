import type * as vscode from 'vscode';
import type { HostSpec } from '../core/hosts';
import type { RunsNode } from '../core/runs/model';
import type { CommandTarget } from '../core/runs/targets';

/**
 * A feature's own nodes in Remote Runs (e.g. "Baselines" under each host). The feature owns its nodes; the
 * provider only places them after the host's roots and asks the section for items and children.
 */
export interface SectionNode {
  kind: 'section';
  /** The TreeSection.id that owns this node. */
  section: string;
  hostId: string;
  /** Unique within the section and host; becomes part of TreeItem.id. */
  key: string;
  /** What a command invoked on this node acts on (decoded by src/core/runs/targets.ts). */
  target: CommandTarget;
  data?: unknown;
}

/** A row of Remote Runs: the core model's nodes, the features' sections, and a settings problem. */
export type TreeNode = RunsNode | SectionNode | SettingsProblemNode;

/** A problem with the knownGood.* settings, shown as a row above the hosts. */
export interface SettingsProblemNode {
  kind: 'settings-problem';
  id: string;
  label: string;
}

export interface TreeSection {
  readonly id: string;
  /** Nodes placed under each host, after its roots. */
  hostNodes(host: HostSpec): SectionNode[];
  children(node: SectionNode): SectionNode[] | Promise<SectionNode[]>;
  treeItem(node: SectionNode): vscode.TreeItem;
}
