import type { ArgValue } from '../../args/argsProbe';
import { diffFlat, flattenArgs, inlineJson, sameArg } from '../../args/diff';
import { argCategory, inertArgWhy, isBookkeepingArg } from '../categories';
import type { Changepoint } from '../changepoints';
import type { ArgsFact, CheckpointFact, WhatChangedFacts } from '../facts';
import type { DataFingerprint } from '../factsProbe';
import type { ChangeTime, EvidenceLink, UnknownFact } from '../model';
import { atShift } from '../scoring';
import { describeFingerprint, describeSamples } from './data';
import { link, type Draft } from './draft';

/*
 * Cause: the training args saved in the checkpoints. The reference's and now's compared key by key (the diff Compare
 * Args shows); each key that differs is dated by the checkpoints between which it changed.
 */

export function showValue(v: ArgValue | undefined): string {
  if (v === undefined) return '(absent)';
  if (typeof v === 'string') return v.length > 80 ? `${v.slice(0, 77)}…` : v;
  // as Compare Args writes it: NaN as NaN (JSON.stringify would say null)
  const s = inlineJson(v);
  return s.length > 80 ? `${s.slice(0, 77)}…` : s;
}

/** `a/b/openwebtext-10k` → `openwebtext-10k` when both sides are paths that differ in their last part. */
function showPair(a: ArgValue | undefined, b: ArgValue | undefined): [string, string] {
  if (typeof a === 'string' && typeof b === 'string' && a.includes('/') && b.includes('/')) {
    const ba = a.split('/').filter(Boolean).pop() ?? a;
    const bb = b.split('/').filter(Boolean).pop() ?? b;
    if (ba !== bb) return [ba, bb];
  }
  return [showValue(a), showValue(b)];
}

const PATHISH_KEY = /data|dataset|corpus|tokeni[sz]er|vocab|shard|train_file|val_file|eval_file|path|dir|root/i;
const DIR_KEY = /^(data_?(dir|root|path)|dataset_?(dir|root)|root)$/i;

/** Remote paths the args name (absolute, or a name inside data_dir), for fingerprints. */
export function dataPathsOf(args: ArgValue | null): Map<string, string> {
  const flat = args === null ? new Map<string, ArgValue>() : flattenArgs(args);
  const base = [...flat].find(([k, v]) => DIR_KEY.test(k.split('.').pop() ?? k) && typeof v === 'string');
  const out = new Map<string, string>();
  for (const [k, v] of flat) {
    if (typeof v !== 'string' || !PATHISH_KEY.test(k.split('.').pop() ?? k)) continue;
    if (argCategory(k, null, null) === 'cosmetic') continue; // by its key: data in /tmp is still data
    if (v.startsWith('/')) out.set(k, v);
    else if (base && /^[\w.-]+(\/[\w.-]+)*$/.test(v) && !v.includes('..') && typeof base[1] === 'string') {
      out.set(k, `${base[1].replace(/\/+$/, '')}/${v}`);
    }
  }
  return out;
}

/** The data paths whose value in the args differs between two checkpoints: the args' change names them. */
export function changedDataPaths(
  facts: WhatChangedFacts,
  refCk: CheckpointFact | undefined,
  nowCk: CheckpointFact | undefined,
): Set<string> {
  const changedValues = new Set<string>();
  if (refCk && nowCk) {
    const ra = facts.args.find((a) => a.label === refCk.label)?.args ?? null;
    const na = facts.args.find((a) => a.label === nowCk.label)?.args ?? null;
    const pa = dataPathsOf(ra);
    const pb = dataPathsOf(na);
    for (const [k, p] of pb) if (pa.get(k) !== p) changedValues.add(p);
    for (const [k, p] of pa) if (pb.get(k) !== p) changedValues.add(p);
  }
  return changedValues;
}

/** What the drafts of one key need: the checkpoints compared, every checkpoint's args, and the data they name. */
interface ArgsContext {
  facts: WhatChangedFacts;
  ref: CheckpointFact;
  now: CheckpointFact;
  main: { key: string; cp: Changepoint } | undefined;
  fingerprints: Map<string, DataFingerprint>;
  flats: { fact: ArgsFact; flat: Map<string, ArgValue> }[];
  ckByLabel: Map<string, CheckpointFact>;
  refPaths: Map<string, string>;
  nowPaths: Map<string, string>;
  /** Steps between two points of the speed series the shift is in (its median spacing), when known. */
  window: number | undefined;
}

/** The median steps between two points of the shift's series: one speed window (a bucket, for a reduced log). */
function speedWindow(facts: WhatChangedFacts, main: { key: string } | undefined): number | undefined {
  const x = facts.log?.reduction.series.find((s) => s.key === main?.key)?.x;
  if (!x || x.length < 3) return undefined;
  const d = x
    .slice(1)
    .map((v, i) => v - x[i]!)
    .filter((v) => v > 0)
    .sort((a, b) => a - b);
  return d.length ? d[d.length >> 1] : undefined;
}

export function argsDrafts(
  facts: WhatChangedFacts,
  ref: CheckpointFact | undefined,
  now: CheckpointFact | undefined,
  main: { key: string; cp: Changepoint } | undefined,
  fingerprints: Map<string, DataFingerprint>,
  unknown: UnknownFact[],
): Draft[] {
  if (!ref || !now || ref === now) return [];
  const byLabel = new Map(facts.args.map((a) => [a.label, a]));
  const ra = byLabel.get(ref.label);
  const na = byLabel.get(now.label);
  if (!ra?.args || !na?.args) {
    const missing = [ra, na].find((a) => !a?.args);
    unknown.push({
      fact: `args of ${missing?.label ?? (ra ? now.label : ref.label)}`,
      why: missing?.error ?? 'not read',
    });
    return [];
  }
  const fa = flattenArgs(ra.args);
  const fb = flattenArgs(na.args);
  const readable = facts.args.filter((a): a is ArgsFact & { args: ArgValue } => a.args !== null);
  const ctx: ArgsContext = {
    facts,
    ref,
    now,
    main,
    fingerprints,
    flats: readable.map((a) => ({ fact: a, flat: flattenArgs(a.args) })),
    ckByLabel: new Map(facts.checkpoints.map((c) => [c.label, c])),
    nowPaths: dataPathsOf(na.args),
    refPaths: dataPathsOf(ra.args),
    window: speedWindow(facts, main),
  };
  // the diff Compare Args shows (the evidence link opens it), on the values as read: data paths are looked up by them
  const d = diffFlat(fa, fb);
  const keys = [...d.changed, ...d.added, ...d.removed].map((c) => c.key).sort();
  return keys.map((key) => argDraft(ctx, key, fa.get(key), fb.get(key)));
}

/** Every step where a key's value changed between two checkpoints read. */
function transitionsOf(ctx: ArgsContext, key: string): { from: ArgsFact; to: ArgsFact }[] {
  const { flats } = ctx;
  const transitions: { from: ArgsFact; to: ArgsFact }[] = [];
  for (let i = 1; i < flats.length; i++) {
    if (!sameArg(flats[i - 1]!.flat.get(key), flats[i]!.flat.get(key)))
      transitions.push({ from: flats[i - 1]!.fact, to: flats[i]!.fact });
  }
  return transitions;
}

function argDraft(ctx: ArgsContext, key: string, va: ArgValue | undefined, vb: ArgValue | undefined): Draft {
  const { facts, ref, now, main } = ctx;
  // every step where the value changed between two checkpoints read; the one at the shift, else the last
  const transitions = transitionsOf(ctx, key);
  const at =
    (main && transitions.find((t) => atShift(t.from.step, t.to.step, main.cp))) ?? transitions[transitions.length - 1];
  const [sa, sb] = showPair(va, vb);
  const title = `${key} ${sa} → ${sb}`;
  const ca = at ? ctx.ckByLabel.get(at.from.label) : ref;
  const cb = at ? ctx.ckByLabel.get(at.to.label) : now;
  const when: ChangeTime = at
    ? {
        text: `${at.from.label} → ${at.to.label}`,
        steps: { from: at.from.step, to: at.to.step },
        ...(ca?.mtime != null && cb?.mtime != null ? { time: { from: ca.mtime, to: cb.mtime } } : {}),
      }
    : { text: `${ref.label} → ${now.label}`, steps: { from: ref.step, to: now.step } };
  const evidence: EvidenceLink[] = [
    {
      kind: 'args-diff',
      title: `args ${ca?.label ?? ref.label} → ${cb?.label ?? now.label}`,
      hostId: facts.host.id,
      a: link(ca ?? ref),
      b: link(cb ?? now),
    },
  ];
  const detailBits = [`${key} was ${showValue(va)} at ${ref.label} and is ${showValue(vb)} at ${now.label}`];
  if (transitions.length > 1) detailBits.push(`it changed ${transitions.length} times between the checkpoints read`);
  const data = dataOfKey(ctx, key);
  evidence.push(...data.evidence);
  detailBits.push(...data.bits);
  const category = argCategory(key, va, vb, ctx.window);
  const inert = category === 'cosmetic' && !isBookkeepingArg(key) ? inertArgWhy(key, va, vb, ctx.window) : null;
  return {
    source: 'args',
    category,
    title,
    detail: detailBits.join('; '),
    when,
    evidence,
    ...(category === 'cosmetic'
      ? {
          cosmeticWhy: isBookkeepingArg(key)
            ? 'resume bookkeeping: where a launch starts, ends, resumes from and writes'
            : (inert ?? 'names, places or times of the run itself'),
        }
      : {}),
    ...(inert !== null ? { inert: true } : {}),
  };
}

/** The data a key names: its fingerprint now, and what it holds on both sides (rows, the length of a sample). */
function dataOfKey(ctx: ArgsContext, key: string): { evidence: EvidenceLink[]; bits: string[] } {
  const { facts, fingerprints, nowPaths, refPaths } = ctx;
  const evidence: EvidenceLink[] = [];
  const bits: string[] = [];
  const p = nowPaths.get(key);
  const path = p !== undefined ? fingerprints.get(p) : undefined;
  if (path) {
    evidence.push({ kind: 'file', title: path.path, hostId: facts.host.id, path: path.path });
    bits.push(describeFingerprint(path));
  }
  // padding shows as a shorter real length
  const before = refPaths.get(key);
  const fpBefore = before !== undefined ? fingerprints.get(before) : undefined;
  const fpNow = nowPaths.get(key) !== undefined ? fingerprints.get(nowPaths.get(key)!) : undefined;
  const shapes = [fpBefore, fpNow].map((f) => (f ? describeSamples(f) : null));
  if (shapes[0] || shapes[1]) bits.push(`samples: ${shapes[0] ?? 'not read'} → ${shapes[1] ?? 'not read'}`);
  return { evidence, bits };
}
