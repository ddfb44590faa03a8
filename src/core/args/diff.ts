import { redactTree } from '../redact';
import { isArgEnum, isArgRef, type ArgValue } from './argsProbe';

/*
 * The one flattening and comparison of checkpoint args: Compare Args, Show Changed Args Only, the args diff header,
 * the CLI's `args --diff` and What Changed?'s args suspects all read the same keys and the same "changed", so the
 * report and the diff it links to never disagree.
 */

/** Plain code-unit order: the same on every machine and locale (localeCompare is not). */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** NaN and ±Infinity written bare, as Python writes them: JSON.stringify would make them null, equal to a None. */
export function scalar(v: null | boolean | number | string): string {
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return 'NaN';
    if (v === Infinity) return 'Infinity';
    if (v === -Infinity) return '-Infinity';
    return JSON.stringify(v);
  }
  return JSON.stringify(v);
}

/** One line for a value: scalars as themselves, containers compact, keys sorted (what two values are compared by). */
export function inlineJson(value: ArgValue): string {
  if (Array.isArray(value)) return `[${value.map(inlineJson).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort(compareKeys);
    return `{${keys.map((k) => `${JSON.stringify(k)}: ${inlineJson(value[k] as ArgValue)}`).join(', ')}}`;
  }
  return scalar(value);
}

/**
 * Nested objects flattened to `a.b.c` keys. Arrays, scalars, `{"$ref": …}` and `{"$enum": …}` are leaves, and so is
 * an empty object below the top (`{"sched": {}}` is a setting: it can become absent or gain keys). Args that are
 * not an object at all are one leaf, `(args)`.
 */
export function flattenArgs(value: ArgValue, prefix = '', out = new Map<string, ArgValue>()): Map<string, ArgValue> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && !isArgRef(value) && !isArgEnum(value)) {
    const keys = Object.keys(value);
    if (keys.length === 0 && prefix) out.set(prefix, value);
    for (const k of keys) flattenArgs(value[k] as ArgValue, prefix ? `${prefix}.${k}` : k, out);
    return out;
  }
  out.set(prefix || '(args)', value);
  return out;
}

/**
 * Whether two flattened values are the same setting (undefined: the key is absent). NaN equals NaN (a loss scale that
 * stayed NaN did not change) and differs from null; key order inside a leaf does not count.
 */
export function sameArg(a: ArgValue | undefined, b: ArgValue | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return inlineJson(a) === inlineJson(b);
}

export interface ArgsDiff {
  changed: { key: string; from: ArgValue; to: ArgValue }[];
  added: { key: string; value: ArgValue }[];
  removed: { key: string; value: ArgValue }[];
  same: number;
}

/** Which keys of two flattened args differ (sameArg), each list in key order. */
export function diffFlat(fa: ReadonlyMap<string, ArgValue>, fb: ReadonlyMap<string, ArgValue>): ArgsDiff {
  const d: ArgsDiff = { changed: [], added: [], removed: [], same: 0 };
  for (const [k, va] of fa) {
    const vb = fb.get(k);
    if (vb === undefined) d.removed.push({ key: k, value: va });
    else if (!sameArg(va, vb)) d.changed.push({ key: k, from: va, to: vb });
    else d.same++;
  }
  for (const [k, vb] of fb) if (!fa.has(k)) d.added.push({ key: k, value: vb });
  const byKey = (x: { key: string }, y: { key: string }) => compareKeys(x.key, y.key);
  d.changed.sort(byKey);
  d.added.sort(byKey);
  d.removed.sort(byKey);
  return d;
}

/** The args diff people see: redacted before comparing (a rotated secret still differs, by its hash, never in clear). */
export function diffArgs(a: ArgValue, b: ArgValue): ArgsDiff {
  return diffFlat(flattenArgs(redactTree(a)), flattenArgs(redactTree(b)));
}
