import { formatBytes, formatExactBytes, formatLocalTime } from '../util/format';
import { redactText, redactTree } from '../redact';
import { isArgEnum, type ArgValue, type CkptArgs } from './argsProbe';
import { compareKeys, diffArgs, inlineJson, scalar } from './diff';

/** Where and when the args were read: the document's header. */
export interface ArgsDocMeta {
  /** Host name as the tree shows it ("This machine" for local). */
  host: string;
  capturedAt: Date;
  /** The checkpoint's name as the tree shows it (default: from the path). */
  label?: string;
}

/**
 * A value as stable, indented JSON: keys sorted at every level, one value per line, so that two documents diff
 * line by line. NaN and ±Infinity are written bare (as Python does); they are not JSON, but they read as what they
 * are, where null would hide a diverged loss scale.
 */
export function stableJson(value: ArgValue, indent = '  ', depth = 0): string {
  // an enum member is one setting: one line, so that a diff shows `"value": 3` → `"value": 2` beside its class
  if (isArgEnum(value)) return inlineJson(value);
  const pad = indent.repeat(depth + 1);
  const end = indent.repeat(depth);
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => pad + stableJson(v, indent, depth + 1)).join(',\n')}\n${end}]`;
  }
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort(compareKeys);
    if (keys.length === 0) return '{}';
    return `{\n${keys
      .map((k) => `${pad}${JSON.stringify(k)}: ${stableJson(value[k] as ArgValue, indent, depth + 1)}`)
      .join(',\n')}\n${end}}`;
  }
  return scalar(value);
}

/**
 * An enum member as people write it: `Sched(3)` (pickled by value: the member's name is not in the file) or
 * `Sched.COSINE` (pickled by name). The class's module is left out; inlineJson keeps it.
 */
export function enumText(value: ArgValue): string | undefined {
  if (!isArgEnum(value)) return undefined;
  const cls = value.$enum.split('.').pop() || value.$enum;
  return 'name' in value && typeof value.name === 'string'
    ? `${cls}.${value.name}`
    : `${cls}(${inlineText(value['value'])})`;
}

/** One line for a value in the changed-only document: as inlineJson, with enum members as `Sched(3)`. */
export function inlineText(value: ArgValue): string {
  const e = enumText(value);
  if (e !== undefined) return e;
  if (Array.isArray(value)) return `[${value.map(inlineText).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort(compareKeys);
    return `{${keys.map((k) => `${JSON.stringify(k)}: ${inlineText(value[k] as ArgValue)}`).join(', ')}}`;
  }
  return scalar(value);
}

/** Whether an enum member pickled by value (no name in the file) is anywhere in the args. */
function hasEnumByValue(value: ArgValue, depth = 0): boolean {
  if (value === null || typeof value !== 'object' || depth > 100) return false;
  if (isArgEnum(value)) return !('name' in value);
  const kids = Array.isArray(value) ? value : Object.values(value);
  return kids.some((v) => hasEnumByValue(v, depth + 1));
}

/** `step_600` from `/ckpt/run/step_600.pt` (the folder's name for an HF checkpoint-600/). */
export function checkpointLabel(path: string): string {
  const base = path.replace(/\/+$/, '').split('/').pop() ?? path;
  const dot = base.lastIndexOf('.');
  return dot > 0 && !base.startsWith('.') ? base.slice(0, dot) : base || path;
}

/**
 * Two checkpoints with one name (`step_600` of two runs): each is named with the nearest folder where their paths
 * differ, `run-a/…/step_600` ↔ `run-b/…/step_600`, so two compares get two titles (and two tabs).
 */
function distinctLabels(pa: string, pb: string, label: string): [string, string] {
  // a checkpoint folder's args file (step_600/checkpoint.pt labelled step_600): compare from the folder up
  const upTo = (p: string) => {
    const segs = p.replace(/\/+$/, '').split('/');
    const at = segs.map(checkpointLabel).lastIndexOf(label);
    return at > 0 ? segs.slice(0, at + 1) : segs;
  };
  const sa = upTo(pa);
  const sb = upTo(pb);
  let i = 1;
  while (i <= Math.min(sa.length, sb.length) && sa[sa.length - i] === sb[sb.length - i]) i++;
  const da = sa[sa.length - i];
  const db = sb[sb.length - i];
  if (da === undefined || db === undefined || i > Math.min(sa.length, sb.length)) return [label, label];
  // the differing folder is the label's own one (step_600 vs step_600.pt): keep the whole name
  if (i === 1) return [checkpointName(sa), checkpointName(sb)];
  const gap = i > 2 ? '/…/' : '/';
  return [`${da}${gap}${label}`, `${db}${gap}${label}`];
}

const checkpointName = (segments: string[]) => segments[segments.length - 1] ?? '';

/** The folder a checkpoint sits in (its run): `run-a` for `/c/run-a/step_600/checkpoint.pt` labelled `step_600`. */
function runOf(path: string, label: string): string | undefined {
  const segs = path.replace(/\/+$/, '').split('/');
  const at = segs.map(checkpointLabel).lastIndexOf(label);
  return (at > 0 ? segs[at - 1] : segs[segs.length - 2]) || undefined;
}

/**
 * The diff editor's title, which is also its tab's: host, run and checkpoint, each said once, so compares of two runs
 * (or two hosts) never share a title: `args: step_600 ↔ step_690 (gpu-box/run-a)`, `args: run-a/step_600 ↔
 * run-b/step_690 (gpu-box)`, `args: gpu-box/run-a/step_600 ↔ spare/run-a/step_600`.
 */
export function argsDiffTitle(
  a: { host: string; path: string; label?: string },
  b: { host: string; path: string; label?: string },
): string {
  let la = a.label ?? checkpointLabel(a.path);
  let lb = b.label ?? checkpointLabel(b.path);
  if (la === lb && a.host === b.host) {
    // one name twice: the nearest folders where the paths differ already tell the sides apart
    [la, lb] = distinctLabels(a.path, b.path, la);
    return `args: ${la} ↔ ${lb} (${a.host})`;
  }
  const ra = runOf(a.path, la);
  const rb = runOf(b.path, lb);
  const side = (...parts: (string | undefined)[]) => parts.filter((p) => p !== undefined).join('/');
  if (a.host !== b.host) return `args: ${side(a.host, ra, la)} ↔ ${side(b.host, rb, lb)}`;
  if (ra !== rb) return `args: ${side(ra, la)} ↔ ${side(rb, lb)} (${a.host})`;
  return `args: ${la} ↔ ${lb} (${side(a.host, ra)})`;
}

/** The read-only args document: a short `//` header, then the args as stable JSON. */
export function renderArgsDocument(r: CkptArgs, meta: ArgsDocMeta): string {
  const lines: string[] = [];
  // A hostile file's warning comes first: it must be seen before anyone copies a load command from below.
  for (const w of r.warnings) if (w.startsWith('UNSAFE')) lines.push(`// ⚠ ${w}`);
  lines.push(`// Known Good: args of ${meta.label ?? checkpointLabel(r.path)}`);
  lines.push(`// host:     ${meta.host}`);
  lines.push(`// path:     ${r.path}`);
  // a folder's size is not one file's (an accelerate folder's is its custom_checkpoint's)
  if (r.format !== 'hf-folder' && r.format !== 'peft') {
    lines.push(`// size:     ${formatBytes(r.bytes)} (${formatExactBytes(r.bytes)})`);
  }
  const what =
    r.format === 'accelerate'
      ? 'the state_dict() accelerate saved'
      : r.key === null
        ? 'no args key: top-level values'
        : `key "${r.key}"`;
  lines.push(`// format:   ${r.format}, ${what}${r.argsType ? ` (${r.argsType})` : ''}`);
  const step = r.step !== null ? String(r.step) : '?';
  lines.push(`// step:     ${step}${r.epoch !== null ? `, epoch ${r.epoch}` : ''}`);
  if (r.baseModel !== null || r.format === 'peft') {
    lines.push(`// base:     ${r.baseModel !== null ? redactText(r.baseModel) : '(the adapter names no base model)'}`);
  }
  if (r.tensors.count > 0) {
    lines.push(`// tensors:  ${r.tensors.count} (${formatBytes(r.tensors.bytes)}), not read`);
  }
  lines.push(`// captured: ${formatLocalTime(meta.capturedAt.getTime())}`);
  for (const w of r.warnings) if (!w.startsWith('UNSAFE')) lines.push(`// note: ${redactText(w)}`);
  if (hasEnumByValue(r.args)) {
    lines.push('// note: {"$enum": CLASS, "value": V} is an enum member pickled by value: its name is not in the file');
  }
  // The probe redacts on the host; again here for args that came another way (an older probe, a cache).
  lines.push(stableJson(redactTree(r.args)));
  return lines.join('\n') + '\n';
}

/** One side of an args diff: what was read and where. */
export interface ArgsDiffSide {
  result: CkptArgs;
  meta: ArgsDocMeta;
}

/** One line of facts about one side: `A: step_600 (gpu-box) /ckpt/step_600.pt, 1.2 GiB, 120 tensors, read …`. */
function sideFacts(letter: 'A' | 'B', s: ArgsDiffSide): string {
  const r = s.result;
  const facts = [`${s.meta.label ?? checkpointLabel(r.path)} (${s.meta.host}) ${r.path}`];
  if (r.format !== 'hf-folder' && r.format !== 'peft') facts.push(formatBytes(r.bytes));
  if (r.tensors.count > 0) facts.push(`${r.tensors.count} tensors`);
  if (r.step !== null) facts.push(`step ${r.step}`);
  facts.push(`read ${formatLocalTime(s.meta.capturedAt.getTime())}`);
  return `// ${letter}: ${facts.join(', ')}`;
}

/**
 * One side of the args diff editor. Both sides get the SAME header, naming both checkpoints and what differs, so the
 * diff shows only args: per-side facts (path, size, tensors, read time) would otherwise be changes of their own and
 * Next Change would stop on them. Identical args say so in one line.
 */
export function renderArgsDiffSide(a: ArgsDiffSide, b: ArgsDiffSide, side: 'a' | 'b'): string {
  const d = diffArgs(a.result.args, b.result.args);
  const n = d.changed.length + d.added.length + d.removed.length;
  const lines: string[] = [];
  for (const [letter, s] of [
    ['A', a],
    ['B', b],
  ] as const) {
    for (const w of s.result.warnings) if (w.startsWith('UNSAFE')) lines.push(`// ⚠ ${letter}: ${w}`);
  }
  // what the diff amounts to first (it is read before the long paths below it)
  lines.push(
    n === 0
      ? `// args identical (${d.same} ${d.same === 1 ? 'key' : 'keys'})`
      : `// args: ${d.changed.length} changed, ${d.added.length} added, ${d.removed.length} removed (${d.same} the same)`,
  );
  lines.push(sideFacts('A', a), sideFacts('B', b));
  for (const [letter, s] of [
    ['A', a],
    ['B', b],
  ] as const) {
    for (const w of s.result.warnings) if (!w.startsWith('UNSAFE')) lines.push(`// note ${letter}: ${redactText(w)}`);
  }
  if (hasEnumByValue(a.result.args) || hasEnumByValue(b.result.args)) {
    lines.push('// note: {"$enum": CLASS, "value": V} is an enum member pickled by value: its name is not in the file');
  }
  const own = side === 'a' ? a : b;
  lines.push(stableJson(redactTree(own.result.args)));
  return lines.join('\n') + '\n';
}

/** `from → to`, enum members as `Sched(3)`, unless both read the same that way (same name, other module). */
function changedText(from: ArgValue, to: ArgValue): string {
  const a = inlineText(from);
  const b = inlineText(to);
  return a === b ? `${inlineJson(from)} → ${inlineJson(to)}` : `${a} → ${b}`;
}

/**
 * "Show Changed Args Only": the keys that differ, were added or were removed, one per line. `labels` name the two
 * sides in the header (default A and B).
 */
export function changedArgs(a: ArgValue, b: ArgValue, labels: { a: string; b: string } = { a: 'A', b: 'B' }): string {
  const d = diffArgs(a, b);
  const lines = [`// Known Good: changed args, ${labels.a} ↔ ${labels.b}`];
  const n = d.changed.length + d.added.length + d.removed.length;
  lines.push(
    n === 0
      ? `// no differences (${d.same} the same)`
      : `// ${d.changed.length} changed, ${d.added.length} added, ${d.removed.length} removed (${d.same} the same)`,
  );
  if (d.changed.length) {
    lines.push('changed:');
    for (const c of d.changed) lines.push(`  ${c.key}: ${changedText(c.from, c.to)}`);
  }
  if (d.added.length) {
    lines.push(`added in ${labels.b}:`);
    for (const c of d.added) lines.push(`  ${c.key}: ${inlineText(c.value)}`);
  }
  if (d.removed.length) {
    lines.push(`removed in ${labels.b}:`);
    for (const c of d.removed) lines.push(`  ${c.key}: ${inlineText(c.value)}`);
  }
  return lines.join('\n') + '\n';
}
