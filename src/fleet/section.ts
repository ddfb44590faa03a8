import * as vscode from 'vscode';
import { messageOf } from '../core/errors';
import type { HostSpec } from '../core/hosts';
import type { SlurmJob, SlurmNode } from '../core/fleet/slurm';
import type { CommandTarget } from '../core/runs/targets';
import type { SectionNode, TreeSection } from '../shared/treeSection';
import { FleetCommands } from '../constants';

export const SECTION_ID = 'fleet';

/** Where a node of a job stands in the job's latest Compare Nodes. */
export interface NodeStanding {
  /** Fields where it differs from the majority (empty: it agrees). */
  fields?: string[];
  /** It did not answer, and why. */
  failed?: string;
  /** When that capture ran. */
  at: Date;
}

/** What the section needs to know beyond Slurm: the latest capture of each job. */
export interface FleetState {
  standing(hostId: string, jobId: string, node: string): NodeStanding | undefined;
}

/** What a node of this section stands for; kept here, keyed by node, so `data` needs no cast. */
export type FleetItem =
  | { kind: 'slurm'; hostId: string }
  | { kind: 'job'; hostId: string; job: SlurmJob }
  | { kind: 'job-node'; hostId: string; jobId: string; node: string }
  | { kind: 'nodes'; hostId: string }
  | { kind: 'node'; hostId: string; node: SlurmNode }
  | { kind: 'error'; hostId: string; what: string; message: string }
  | { kind: 'empty'; hostId: string; text: string; description: string };

export interface SlurmQueries {
  jobs(hostId: string): Promise<SlurmJob[]>;
  nodes(hostId: string): Promise<SlurmNode[]>;
}

/**
 * "Slurm" under each host whose entry has `slurm`: the user's jobs (state, nodes, elapsed; each job's nodes below
 * it, marked by the job's latest Compare Nodes) and the partitions' nodes. Listed when expanded; a failure is a row
 * that says why, never an empty list.
 */
export class FleetSection implements TreeSection {
  readonly id = SECTION_ID;
  private readonly groups = new Map<string, SectionNode>();
  private readonly jobNodes = new Map<string, SectionNode>();
  private readonly items = new WeakMap<object, FleetItem>();

  constructor(
    private readonly slurm: SlurmQueries,
    private readonly state: FleetState,
  ) {}

  hostNodes(host: HostSpec): SectionNode[] {
    if (!host.slurm) return [];
    let g = this.groups.get(host.id);
    if (!g) {
      g = this.node(host.id, 'slurm', { kind: 'host', hostId: host.id }, { kind: 'slurm', hostId: host.id });
      this.groups.set(host.id, g);
    }
    return [g];
  }

  /** The Slurm node of a host, to re-list it. */
  groupNode(hostId: string): SectionNode | undefined {
    return this.groups.get(hostId);
  }

  /** The row of a job as last listed (to re-render its nodes after a capture). */
  jobNode(hostId: string, jobId: string): SectionNode | undefined {
    return this.jobNodes.get(`${hostId}\n${jobId}`);
  }

  /** The job a row of this section stands for (a job row, or a node row under it), as last listed. */
  job(hostId: string, jobId: string): SlurmJob | undefined {
    const n = this.jobNode(hostId, jobId);
    const it = n && this.items.get(n);
    return it?.kind === 'job' ? it.job : undefined;
  }

  private node(hostId: string, key: string, target: CommandTarget, item: FleetItem): SectionNode {
    const n: SectionNode = { kind: 'section', section: SECTION_ID, hostId, key, target };
    this.items.set(n, item);
    return n;
  }

  async children(node: SectionNode): Promise<SectionNode[]> {
    const it = this.items.get(node);
    const hostId = node.hostId;
    const host: CommandTarget = { kind: 'host', hostId };
    const error = (what: string, e: unknown) =>
      this.node(hostId, `err:${what}`, host, { kind: 'error', hostId, what, message: messageOf(e) });
    switch (it?.kind) {
      case 'slurm': {
        const out: SectionNode[] = [];
        try {
          const jobs = await this.slurm.jobs(hostId);
          for (const job of jobs) {
            const n = this.node(
              hostId,
              `job:${job.id}`,
              { kind: 'slurm-job', hostId, jobId: job.id },
              { kind: 'job', hostId, job },
            );
            this.jobNodes.set(`${hostId}\n${job.id}`, n);
            out.push(n);
          }
          if (!jobs.length) {
            out.push(
              this.node(hostId, 'no-jobs', host, {
                kind: 'empty',
                hostId,
                text: 'No jobs of yours',
                description: 'squeue --me lists none',
              }),
            );
          }
        } catch (e) {
          out.push(error('jobs', e));
        }
        out.push(this.node(hostId, 'nodes', host, { kind: 'nodes', hostId }));
        return out;
      }
      case 'job':
        return it.job.nodes.map((name) =>
          this.node(
            hostId,
            `job:${it.job.id}:node:${name}`,
            { kind: 'slurm-node', hostId, jobId: it.job.id, node: name },
            { kind: 'job-node', hostId, jobId: it.job.id, node: name },
          ),
        );
      case 'nodes':
        try {
          const nodes = await this.slurm.nodes(hostId);
          if (!nodes.length)
            return [
              this.node(hostId, 'no-nodes', host, {
                kind: 'empty',
                hostId,
                text: 'No nodes',
                description: 'sinfo lists none',
              }),
            ];
          return nodes.map((n) => this.node(hostId, `node:${n.name}`, host, { kind: 'node', hostId, node: n }));
        } catch (e) {
          return [error('nodes', e)];
        }
      default:
        return [];
    }
  }

  treeItem(node: SectionNode): vscode.TreeItem {
    const t = this.item(node);
    // The accessible name is `label, description` as on Remote Runs' own rows (a Markdown tooltip would drop the comma).
    if (!t.accessibilityInformation && typeof t.label === 'string') {
      const d = typeof t.description === 'string' && t.description ? `, ${t.description}` : '';
      t.accessibilityInformation = { label: `${t.label}${d}` };
    }
    return t;
  }

  private item(node: SectionNode): vscode.TreeItem {
    const it = this.items.get(node);
    const None = vscode.TreeItemCollapsibleState.None;
    const Collapsed = vscode.TreeItemCollapsibleState.Collapsed;
    switch (it?.kind) {
      case 'slurm': {
        const t = new vscode.TreeItem('Slurm', Collapsed);
        t.iconPath = new vscode.ThemeIcon('server-environment');
        t.contextValue = 'slurm';
        t.tooltip = new vscode.MarkdownString(
          'Your Slurm jobs on this login node and the partitions’ nodes. Right-click a job to compare its nodes.',
        );
        t.accessibilityInformation = { label: 'Slurm' };
        return t;
      }
      case 'job': {
        const j = it.job;
        const t = new vscode.TreeItem(`${j.id} ${j.name}`, j.nodes.length ? Collapsed : None);
        const nodes = `${j.nodeCount} node${j.nodeCount === 1 ? '' : 's'}`;
        t.description = [j.state, nodes, j.elapsed].filter(Boolean).join(' · ');
        t.iconPath = new vscode.ThemeIcon(j.state === 'RUNNING' ? 'play-circle' : 'clock');
        t.contextValue = `slurmJob;${j.state === 'RUNNING' ? 'running' : 'notRunning'}`;
        t.tooltip = new vscode.MarkdownString(
          [
            `**job ${j.id}** ${j.name}`,
            `- ${j.state}${j.reason && j.reason !== 'None' ? ` (${j.reason})` : ''}, elapsed ${j.elapsed}`,
            `- ${nodes}: \`${j.nodelist || '—'}\``,
          ].join('\n'),
        );
        return t;
      }
      case 'job-node': {
        const s = this.state.standing(it.hostId, it.jobId, it.node);
        const t = new vscode.TreeItem(it.node, None);
        t.contextValue = 'slurmJobNode';
        if (!s) {
          t.description = 'not compared yet';
          t.iconPath = new vscode.ThemeIcon('vm');
        } else if (s.failed) {
          t.description = `no answer: ${s.failed}`;
          t.iconPath = new vscode.ThemeIcon('error', new vscode.ThemeColor('errorForeground'));
        } else if (s.fields?.length) {
          t.description = `differs: ${s.fields.join(', ')}`;
          t.iconPath = new vscode.ThemeIcon('warning', new vscode.ThemeColor('list.warningForeground'));
          t.command = { command: FleetCommands.compareNode, title: 'Compare Node with Majority', arguments: [node] };
        } else {
          t.description = 'agrees with the majority';
          t.iconPath = new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
        }
        return t;
      }
      case 'nodes': {
        const t = new vscode.TreeItem('Nodes', Collapsed);
        t.iconPath = new vscode.ThemeIcon('server');
        t.contextValue = 'slurmNodes';
        t.description = 'sinfo';
        return t;
      }
      case 'node': {
        const n = it.node;
        const t = new vscode.TreeItem(n.name, None);
        t.description = [
          n.state,
          n.partitions.join(','),
          `${n.cpus} CPUs`,
          n.gres && n.gres !== '(null)' ? n.gres : '',
          n.reason && n.reason !== 'none' ? n.reason : '',
        ]
          .filter(Boolean)
          .join(' · ');
        t.iconPath = new vscode.ThemeIcon('vm');
        t.contextValue = 'slurmNode';
        return t;
      }
      case 'error': {
        const t = new vscode.TreeItem(`Could not list ${it.what}`, None);
        t.description = it.message;
        t.tooltip = it.message;
        t.accessibilityInformation = { label: `Could not list ${it.what}, ${it.message}` };
        t.iconPath = new vscode.ThemeIcon('error', new vscode.ThemeColor('errorForeground'));
        t.contextValue = 'message;error';
        return t;
      }
      case 'empty': {
        const t = new vscode.TreeItem(it.text, None);
        t.description = it.description;
        t.iconPath = new vscode.ThemeIcon('info');
        t.contextValue = 'message';
        return t;
      }
      default:
        return new vscode.TreeItem('(unknown Slurm node)', None);
    }
  }
}
