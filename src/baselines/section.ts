import { basename } from 'node:path';
import * as vscode from 'vscode';
import { baselineDescription, shortTime } from '../core/baselines/documents';
import type { Baseline, BaselineStore, ThroughputResult } from '../core/baselines/store';
import { formatRate } from '../core/bench/compare';
import { resultLabel, sampleOf } from '../core/bench/records';
import { timeAgo } from '../core/util/format';
import type { HostSpec } from '../core/hosts';
import type { CommandTarget } from '../core/runs/targets';
import type { SectionNode, TreeSection } from '../shared/treeSection';
import { BaselineCommands, BenchCommands } from '../constants';
import { SECTION_ID } from './ids';

/** What a node of this section stands for; kept here, keyed by node, so `data` needs no cast. */
export type BaselineItem =
  | { kind: 'group'; hostId: string }
  | { kind: 'baseline'; hostId: string; storeHost: string; baseline: Baseline; file: string }
  | { kind: 'result'; hostId: string; result: ThroughputResult; label: string; file: string }
  | { kind: 'problem'; hostId: string; file: string; message: string }
  | { kind: 'empty'; hostId: string };

/**
 * "Baselines" under each host of Remote Runs: the host's baselines newest first (label, age, torch version), then
 * the benchmark results kept with them, newest first (label, tok/s, age); a file that fails validation shows as an
 * error node naming it, and the others still list.
 */
export class BaselinesSection implements TreeSection {
  readonly id = SECTION_ID;
  private readonly groups = new Map<string, SectionNode>();
  private readonly items = new WeakMap<object, BaselineItem>();

  constructor(
    private readonly store: BaselineStore,
    /** The store's key for a host (its transport id). */
    private readonly storeHost: (hostId: string) => string | undefined,
  ) {}

  hostNodes(host: HostSpec): SectionNode[] {
    let g = this.groups.get(host.id);
    if (!g) {
      g = {
        kind: 'section',
        section: SECTION_ID,
        hostId: host.id,
        key: 'baselines',
        target: { kind: 'host', hostId: host.id },
      };
      this.groups.set(host.id, g);
      this.items.set(g, { kind: 'group', hostId: host.id });
    }
    return [g];
  }

  /** The Baselines node of a host (the object the tree knows, so a refresh of it re-lists just that host). */
  groupNode(hostId: string): SectionNode | undefined {
    return this.groups.get(hostId);
  }

  /** The Baselines nodes of the hosts whose store key is `storeKey` (a result kept for it re-lists them). */
  groupNodesOf(storeKey: string): SectionNode[] {
    return [...this.groups].filter(([hostId]) => this.storeHost(hostId) === storeKey).map(([, g]) => g);
  }

  /** The item behind a node this section made (the tree hands back the same object), else undefined. */
  item(node: unknown): BaselineItem | undefined {
    return typeof node === 'object' && node !== null ? this.items.get(node) : undefined;
  }

  async children(node: SectionNode): Promise<SectionNode[]> {
    const it = this.items.get(node);
    if (it?.kind !== 'group') return [];
    const storeHost = this.storeHost(node.hostId);
    if (!storeHost) return [];
    const [{ baselines, problems }, results] = await Promise.all([
      this.store.list(storeHost),
      this.store.listResults(storeHost),
    ]);
    const out: SectionNode[] = [];
    const add = (key: string, item: BaselineItem) => {
      const target: CommandTarget =
        item.kind === 'baseline'
          ? { kind: 'baseline', hostId: node.hostId, baselineId: item.baseline.id }
          : { kind: 'host', hostId: node.hostId };
      const n: SectionNode = { kind: 'section', section: SECTION_ID, hostId: node.hostId, key, target };
      this.items.set(n, item);
      out.push(n);
    };
    for (const b of baselines) add(`b:${b.baseline.id}`, { kind: 'baseline', hostId: node.hostId, storeHost, ...b });
    const kept = baselines.map((b) => b.baseline);
    for (const r of [...results.results].reverse())
      add(`r:${r.result.id}`, {
        kind: 'result',
        hostId: node.hostId,
        result: r.result,
        label: resultLabel(r.result, kept),
        file: r.file,
      });
    for (const p of [...problems, ...results.problems])
      add(`p:${p.file}`, { kind: 'problem', hostId: node.hostId, ...p });
    if (!out.length) add('empty', { kind: 'empty', hostId: node.hostId });
    return out;
  }

  treeItem(node: SectionNode): vscode.TreeItem {
    const it = this.items.get(node);
    const None = vscode.TreeItemCollapsibleState.None;
    switch (it?.kind) {
      case 'group': {
        const t = new vscode.TreeItem('Baselines', vscode.TreeItemCollapsibleState.Collapsed);
        t.iconPath = new vscode.ThemeIcon('history');
        t.contextValue = 'baselines';
        // A string tooltip would become the row's accessible name; keep the name the label.
        t.tooltip = new vscode.MarkdownString(
          'Environment baselines of this host: capture one when training works, compare with it when it does not.',
        );
        t.accessibilityInformation = { label: 'Baselines' };
        return t;
      }
      case 'baseline': {
        const b = it.baseline;
        const t = new vscode.TreeItem(b.label, None);
        t.description = baselineDescription(b);
        t.iconPath = new vscode.ThemeIcon('bookmark');
        t.contextValue = 'baseline';
        const s = b.snapshot;
        const gpus = s.gpus.gpus;
        t.tooltip = new vscode.MarkdownString(
          [
            `**${md(b.label)}**`,
            `- captured ${shortTime(b.capturedAt)} on ${md(b.hostLabel ?? b.host)}${b.container ? ` (${md(b.container)})` : ''}`,
            `- torch ${md(s.torch.version ?? 'not found')}${s.torch.gitVersion ? ` (git ${s.torch.gitVersion.slice(0, 10)})` : ''}`,
            `- python ${md(s.python.version ?? '?')}, ${s.packages.count ?? '?'} packages`,
            `- ${gpus.length ? `${gpus.length} × ${md(gpus[0]?.name ?? 'GPU')}, driver ${md(gpus[0]?.driver_version ?? '?')}` : `GPUs: ${md(s.gpus.status)}`}`,
            `- \`${md(it.file)}\``,
          ].join('\n'),
        );
        t.command = { command: BaselineCommands.open, title: 'Open Baseline', arguments: [node] };
        return t;
      }
      case 'result': {
        const sample = sampleOf(it.result);
        const t = new vscode.TreeItem(it.label, None);
        t.description = `${sample ? `${formatRate(sample.tokensPerSec)} tok/s · ` : ''}${timeAgo(it.result.at)}`;
        t.iconPath = new vscode.ThemeIcon('pulse');
        // the tooltip is Markdown: name the row by what it shows
        t.accessibilityInformation = { label: `${it.label}, ${String(t.description)}` };
        t.contextValue = 'benchResult';
        t.tooltip = new vscode.MarkdownString(
          [
            `**${md(it.label)}**: benchmark result`,
            `- ${sample ? `${formatRate(sample.tokensPerSec)} tok/s` : 'no tokens/s'}, kept ${shortTime(it.result.at)}`,
            `- \`${md(it.file)}\``,
            'Click: compare the newest result with this one.',
          ].join('\n'),
        );
        t.command = {
          command: BenchCommands.compare,
          title: 'Compare Throughput',
          arguments: [{ hostId: it.hostId }, { reference: it.result.id }],
        };
        return t;
      }
      case 'problem': {
        const t = new vscode.TreeItem(basename(it.file), None);
        t.description = it.message;
        t.tooltip = `${it.file}\n${it.message}`;
        t.accessibilityInformation = { label: `${basename(it.file)}, ${it.message}` };
        t.iconPath = new vscode.ThemeIcon('error', new vscode.ThemeColor('errorForeground'));
        t.contextValue = 'baselineProblem';
        return t;
      }
      case 'empty': {
        const t = new vscode.TreeItem('No baselines yet', None);
        t.description = 'capture one';
        t.iconPath = new vscode.ThemeIcon('info');
        t.contextValue = 'message';
        t.command = { command: BaselineCommands.capture, title: 'Capture Environment Baseline', arguments: [node] };
        return t;
      }
      default:
        return new vscode.TreeItem('(unknown baseline node)', None);
    }
  }
}

function md(s: string): string {
  return s.replace(/([\\`*_[\]<>#|])/g, '\\$1');
}
