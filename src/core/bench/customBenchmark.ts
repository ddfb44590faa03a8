import { z } from 'zod';
import { parsePythonJson } from '../json';
import { KnownGoodError } from '../errors';
import { describeIssues } from '../util/zod';
import type { BenchmarkSettings } from '../settings';

/*
 * `knownGood.benchmark`: the user's own training command and how to read its throughput, from its output with a
 * regular expression (first capture group) or from a jsonl metrics file by key. Pure functions: the terminal owns
 * the process and hands over the text.
 */

export const customBenchmarkSchema = z
  .strictObject({
    /** Run in the host's shell (e.g. `cd /workspace && python train.py --max-steps 30`). */
    command: z.string().min(1),
    /** Over the command's output; the first capture group is the number (`12.8K`, `12,800`, `1.28e4`). */
    regex: z.string().min(1).optional(),
    /** A jsonl file the command writes, and the key of the throughput in it (`tok_per_s`, `perf.tok/s`). */
    jsonl: z.strictObject({ path: z.string().min(1), key: z.string().min(1) }).optional(),
    /** The result is the median of the last N values (warm-up and the final partial step weigh little). */
    lastN: z.number().int().positive().default(10),
  })
  .refine((c) => c.regex !== undefined || c.jsonl !== undefined, {
    message: 'set regex or jsonl to say where the throughput is',
  });
export type CustomBenchmark = z.infer<typeof customBenchmarkSchema>;

/** The user's benchmark from `knownGood.benchmark.*` (parsed by core/settings), checked when a run needs it. */
export function customBenchmarkOf(settings: BenchmarkSettings): CustomBenchmark {
  const { command, throughputRegex: regex, throughputJsonl: jsonl, throughputKey: key } = settings;
  if (!command)
    throw new KnownGoodError(
      'settings',
      'set knownGood.benchmark.command first (e.g. cd /workspace && python train.py --max-steps 30)',
      { setting: 'knownGood.benchmark.command' },
    );
  const r = customBenchmarkSchema.safeParse({
    command,
    ...(regex ? { regex } : {}),
    ...(jsonl ? { jsonl: { path: jsonl, key } } : {}),
  });
  if (!r.success) throw new KnownGoodError('settings', `knownGood.benchmark: ${describeIssues(r.error)}`);
  return r.data;
}

export interface ThroughputReading {
  /** Median of the last `lastN` values. */
  tokensPerSec: number;
  /** The values it is taken from (the last `lastN`). */
  used: number[];
  /** All values found. */
  found: number;
}

const SUFFIX: Record<string, number> = { k: 1e3, K: 1e3, m: 1e6, M: 1e6, g: 1e9, G: 1e9 };

/**
 * A number as tools print it: `12800`, `12,800`, `12 800`, `12.8K`, `1.2M`, `1.28e4`. Commas are thousands
 * separators only in groups of three (`12,8` is not a number here). Undefined when it is not one.
 */
export function parseHumanNumber(text: string): number | undefined {
  const t = text.trim();
  const m =
    /^([-+]?)(\d{1,3}(?:[, \u202f]\d{3})+|\d+)(\.\d+)?(?:[eE]([-+]?\d+))?\s*([kKmMgG])?$/.exec(t) ??
    /^([-+]?)()(\.\d+)(?:[eE]([-+]?\d+))?\s*([kKmMgG])?$/.exec(t);
  if (!m) return undefined;
  const [, sign = '', int = '', frac = '', exp, suffix] = m;
  let v = Number(`${sign}${int.replace(/[, \u202f]/g, '') || '0'}${frac}${exp !== undefined ? `e${exp}` : ''}`);
  if (suffix) v *= SUFFIX[suffix] ?? 1;
  return Number.isFinite(v) ? v : undefined;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) throw new KnownGoodError('internal', 'median of nothing');
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function reading(values: number[], lastN: number): ThroughputReading | undefined {
  if (values.length === 0) return undefined;
  const used = values.slice(-lastN);
  return { tokensPerSec: median(used), used, found: values.length };
}

/** Colours and cursor movement a terminal program prints; they would split numbers from their units. */
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)/g;

export function compileThroughputRegex(source: string): RegExp {
  let re: RegExp;
  try {
    re = new RegExp(source, 'gm');
  } catch (e) {
    throw new KnownGoodError('settings', `knownGood.benchmark.regex is not a valid regular expression: ${String(e)}`);
  }
  // A capture group is needed to say which part is the number.
  if (new RegExp(`${source}|`).exec('')!.length < 2) {
    throw new KnownGoodError(
      'settings',
      'knownGood.benchmark.regex needs a capture group around the number, e.g. ([\\d.,]+[KM]?) tok/s',
    );
  }
  return re;
}

/** Every value the regex's first capture group finds in the output, in order. */
export function throughputValuesFromOutput(output: string, regex: string | RegExp): number[] {
  const re = typeof regex === 'string' ? compileThroughputRegex(regex) : new RegExp(regex.source, 'gm');
  const text = output.replace(ANSI, '').replace(/\r(?!\n)/g, '\n');
  const values: number[] = [];
  for (const m of text.matchAll(re)) {
    const v = m[1] !== undefined ? parseHumanNumber(m[1]) : undefined;
    if (v !== undefined) values.push(v);
  }
  return values;
}

export function throughputFromOutput(
  output: string,
  regex: string | RegExp,
  lastN = 10,
): ThroughputReading | undefined {
  return reading(throughputValuesFromOutput(output, regex), lastN);
}

/** The value at `key` in a parsed line: the key as written (`tok/s`, `train/tok_per_s`), else a dotted path. */
export function valueAt(doc: unknown, key: string): unknown {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return undefined;
  const rec = doc as Record<string, unknown>;
  if (key in rec) return rec[key];
  const dot = key.indexOf('.');
  if (dot < 0) return undefined;
  // Try every split point, so keys that contain dots themselves still resolve (`perf.tok/s` in {perf: {...}}).
  for (let i = dot; i >= 0 && i < key.length; i = key.indexOf('.', i + 1)) {
    const head = key.slice(0, i);
    if (head in rec) {
      const v = valueAt(rec[head], key.slice(i + 1));
      if (v !== undefined) return v;
    }
  }
  return undefined;
}

export function throughputValuesFromJsonl(text: string, key: string): number[] {
  const values: number[] = [];
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    let doc: unknown;
    try {
      doc = parsePythonJson(t);
    } catch {
      continue; // a torn last line or a malformed one: the others still count
    }
    const v = valueAt(doc, key);
    const n = typeof v === 'number' ? v : typeof v === 'string' ? parseHumanNumber(v) : undefined;
    if (n !== undefined && Number.isFinite(n)) values.push(n);
  }
  return values;
}

export function throughputFromJsonl(text: string, key: string, lastN = 10): ThroughputReading | undefined {
  return reading(throughputValuesFromJsonl(text, key), lastN);
}
