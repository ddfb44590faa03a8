import { computeDrift, type Drift } from '../baselines/drift';
import type { EnvSnapshot } from '../baselines/envProbe';
import { renderLines, type Section } from '../baselines/render';
import { naturalCompare } from '../util/format';

/**
 * Compare Nodes: the environment snapshots of every node of a job, reduced to the fields that differ. For each
 * such field, the value most nodes have (the majority) and the nodes that have something else (the outliers).
 * One node with a different NCCL variable and a different package shows as exactly those rows, that node flagged.
 */

/** A line absent on a node (the variable is unset there, the package not installed). */
export const ABSENT = null;

export interface ValueCount {
  value: string | null;
  count: number;
  /** The nodes with this value, in natural order. */
  nodes: string[];
}

export interface MatrixRow {
  key: string;
  section: Section;
  /** The most common value (null: most nodes lack the line). */
  majority: string | null;
  majorityCount: number;
  /** No single most common value: two or more values share the top count. */
  tie: boolean;
  /** The nodes whose value differs from the majority, with their values. */
  outliers: { node: string; value: string | null }[];
  /** Every distinct value, most common first. */
  values: ValueCount[];
}

export interface OutlierNode {
  node: string;
  /** The keys of the rows where this node is an outlier. */
  fields: string[];
}

export interface NodeMatrix {
  /** The nodes compared (those that answered), in natural order. */
  nodes: string[];
  /** Only the fields that differ, in the canonical snapshot order (host, python, torch, …, packages, env). */
  rows: MatrixRow[];
  /** How many distinct fields were compared. */
  comparedFields: number;
  /** Fields that differ by nature between nodes (hostname, GPU UUIDs): left out of `rows`. */
  ignoredFields: string[];
  /** The nodes that are an outlier somewhere, most outlying first. */
  outlierNodes: OutlierNode[];
}

/** Fields that name the machine itself: every node has its own, so a difference says nothing. */
export const IDENTITY_FIELDS: readonly RegExp[] = [/^host\.hostname$/, /^gpu\.\d+\.uuid$/, /^gpu\.\d+\.pci\.bus_id$/];

export interface CompareOptions {
  /** Extra fields to leave out (matched against the key). */
  ignore?: readonly RegExp[];
}

/** node → (key → value) and key → section, for the rendered lines of every snapshot. */
function lineTables(snapshots: ReadonlyMap<string, EnvSnapshot>) {
  const perNode = new Map<string, Map<string, string>>();
  const sectionOf = new Map<string, Section>();
  const order: string[] = [];
  for (const [node, s] of snapshots) {
    const m = new Map<string, string>();
    for (const l of renderLines(s).lines) {
      m.set(l.key, l.value);
      if (!sectionOf.has(l.key)) {
        sectionOf.set(l.key, l.section);
        order.push(l.key);
      }
    }
    perNode.set(node, m);
  }
  return { perNode, sectionOf, order };
}

export function compareNodes(snapshots: ReadonlyMap<string, EnvSnapshot>, options: CompareOptions = {}): NodeMatrix {
  const nodes = [...snapshots.keys()].sort(naturalCompare);
  const { perNode, sectionOf, order } = lineTables(snapshots);
  const ignore = [...IDENTITY_FIELDS, ...(options.ignore ?? [])];
  const sectionRank = new Map<Section, number>();
  for (const key of order) {
    const s = sectionOf.get(key)!;
    if (!sectionRank.has(s)) sectionRank.set(s, sectionRank.size);
  }
  const rows: MatrixRow[] = [];
  const ignored: string[] = [];
  const byNode = new Map<string, string[]>();
  for (const key of order) {
    const counts = new Map<string | null, string[]>();
    for (const node of nodes) {
      const v = perNode.get(node)!.get(key) ?? ABSENT;
      const list = counts.get(v);
      if (list) list.push(node);
      else counts.set(v, [node]);
    }
    if (counts.size <= 1) continue;
    if (ignore.some((re) => re.test(key))) {
      ignored.push(key);
      continue;
    }
    const values: ValueCount[] = [...counts.entries()]
      .map(([value, list]) => ({ value, count: list.length, nodes: list }))
      .sort((a, b) => b.count - a.count || naturalCompare(a.nodes[0]!, b.nodes[0]!));
    const top = values[0]!;
    const outliers = values.slice(1).flatMap((v) => v.nodes.map((node) => ({ node, value: v.value })));
    outliers.sort((a, b) => naturalCompare(a.node, b.node));
    for (const o of outliers) {
      const f = byNode.get(o.node);
      if (f) f.push(key);
      else byNode.set(o.node, [key]);
    }
    rows.push({
      key,
      section: sectionOf.get(key)!,
      majority: top.value,
      majorityCount: top.count,
      tie: values.length > 1 && values[1]!.count === top.count,
      outliers,
      values,
    });
  }
  // renderLines orders keys within each snapshot; keys only some nodes have come in first-seen order: re-sort.
  const rank = (r: MatrixRow) => sectionRank.get(r.section) ?? 0;
  rows.sort((a, b) => rank(a) - rank(b) || naturalCompare(a.key, b.key));
  const outlierNodes = [...byNode.entries()]
    .map(([node, fields]) => ({ node, fields: fields.sort(naturalCompare) }))
    .sort((a, b) => b.fields.length - a.fields.length || naturalCompare(a.node, b.node));
  return { nodes, rows, comparedFields: order.length, ignoredFields: ignored, outlierNodes };
}

/**
 * The node that best stands for the majority: the one that is an outlier in the fewest rows (ties: the first in
 * natural order), leaving out `except`. Its snapshot is the "majority" side of a node's drift.
 */
export function majorityNode(matrix: NodeMatrix, except?: string): string | undefined {
  const outlying = new Map(matrix.outlierNodes.map((o) => [o.node, o.fields.length]));
  let best: string | undefined;
  let bestCount = Infinity;
  for (const node of matrix.nodes) {
    if (node === except) continue;
    const c = outlying.get(node) ?? 0;
    if (c < bestCount) {
      best = node;
      bestCount = c;
    }
  }
  return best;
}

export interface NodeDrift {
  node: string;
  /** The node whose snapshot stood for the majority. */
  majorityNode: string;
  drift: Drift;
}

/** "Compare node X with the majority": the usual drift, from the most typical other node to X. */
export function compareWithMajority(
  snapshots: ReadonlyMap<string, EnvSnapshot>,
  node: string,
  matrix: NodeMatrix = compareNodes(snapshots),
): NodeDrift | undefined {
  const mine = snapshots.get(node);
  const rep = majorityNode(matrix, node);
  if (!mine || rep === undefined) return undefined;
  return { node, majorityNode: rep, drift: computeDrift(snapshots.get(rep)!, mine) };
}

// ------------------------------------------------------------------------------------------------ rendering

export interface MatrixTitle {
  /** e.g. `job 4242 on login1` */
  what: string;
  /** Nodes asked that did not answer, with why. */
  failed?: readonly { node: string; message: string }[];
}

const MAX_NODES_LISTED = 8;

function nodeList(nodes: readonly string[]): string {
  if (nodes.length <= MAX_NODES_LISTED) return nodes.join(', ');
  return `${nodes.slice(0, MAX_NODES_LISTED).join(', ')}, … and ${nodes.length - MAX_NODES_LISTED} more`;
}

function shown(v: string | null): string {
  return v === null ? '(absent)' : v;
}

/**
 * The matrix as a diff-like text document: a header that names the odd ones out, then one hunk per differing
 * field, the majority value on a `-` line and every other value on a `+` line, each with its count and nodes.
 */
export function renderMatrixText(matrix: NodeMatrix, title: MatrixTitle): string {
  const n = matrix.nodes.length;
  const out: string[] = [];
  out.push(`# Compare Nodes: ${title.what}, ${n} node${n === 1 ? '' : 's'} answered`);
  if (matrix.rows.length === 0) {
    out.push(`# All ${matrix.comparedFields} fields agree on every node.`);
  } else {
    out.push(`# ${matrix.rows.length} of ${matrix.comparedFields} fields differ.`);
    for (const o of matrix.outlierNodes.slice(0, MAX_NODES_LISTED)) {
      out.push(
        `# odd one out: ${o.node} (${o.fields.length} field${o.fields.length === 1 ? '' : 's'}: ${nodeList(o.fields)})`,
      );
    }
    if (matrix.outlierNodes.length > MAX_NODES_LISTED) {
      out.push(`# … and ${matrix.outlierNodes.length - MAX_NODES_LISTED} more nodes that differ somewhere`);
    }
  }
  if (matrix.ignoredFields.length) out.push(`# not compared (differ by nature): ${nodeList(matrix.ignoredFields)}`);
  for (const f of title.failed ?? []) out.push(`# no answer from ${f.node}: ${f.message}`);
  const width = Math.min(60, Math.max(8, ...matrix.rows.flatMap((r) => r.values.map((v) => shown(v.value).length))));
  let section: Section | undefined;
  for (const r of matrix.rows) {
    if (r.section !== section) {
      out.push('', `[${r.section}]`);
      section = r.section;
    }
    out.push(`@@ ${r.key} @@${r.tie ? ' (no majority)' : ''}`);
    r.values.forEach((v, i) => {
      const value = shown(v.value);
      const cell = value.length > width ? value : value.padEnd(width);
      const who = i === 0 && v.count > MAX_NODES_LISTED ? `${v.count} nodes` : nodeList(v.nodes);
      out.push(`${i === 0 ? '-' : '+'} ${cell}  ${v.count}/${n}  ${who}`);
    });
  }
  return out.join('\n') + '\n';
}
