import { envChangeId, PYTHON_CHANGE_ID } from '../../bisect/env';
import { buildChange, type Drift } from '../../baselines/drift';
import type { Baseline } from '../../baselines/store';
import { restoredEnvProbePath } from '../../restore/plan';
import { envCategory, packageCategory } from '../categories';
import type { WhatChangedFacts } from '../facts';
import type { ChangeTime, EvidenceLink, UnknownFact, SuspectSubject } from '../model';
import { epochOf, isoOf, type Draft } from './draft';

/*
 * Cause: the environment. The host's snapshot now against the baseline of the reference (baselines/drift.ts): torch
 * and the CUDA toolkit, packages, driver and GPUs, environment variables, the training scripts' hashes, compile
 * caches, the interpreter and the host.
 */

/** A package suspect's bisect change id: `package:<name>` (the package bisect, against the restored env). */
const PACKAGE_CHANGE = 'package:';

/** What every environment draft shares: the baseline compared with, the time since it, the evidence that shows it. */
interface EnvContext {
  facts: WhatChangedFacts;
  now: NonNullable<WhatChangedFacts['env']['now']>;
  bTime: number | null;
  sinceBaseline: ChangeTime;
  envLink: EvidenceLink;
  /** The baseline's env was restored (Restore Known Good… → Run): its packages can be bisected. */
  restored: boolean;
  out: Draft[];
  add: (
    category: Draft['category'],
    t: string,
    detail: string,
    when?: ChangeTime,
    cosmeticWhy?: string,
    bisectChange?: string,
    subject?: SuspectSubject,
  ) => void;
}

export function envDrafts(
  facts: WhatChangedFacts,
  base: { baseline: Baseline; why: string },
  drift: Drift,
  unknown: UnknownFact[],
): Draft[] {
  const ctx = envContext(facts, base.baseline);
  torchDrafts(ctx, drift);
  packageDrafts(ctx, drift);
  hardwareDrafts(ctx, drift);
  variableDrafts(ctx, drift);
  scriptDrafts(ctx, drift);
  cacheDrafts(ctx, drift, unknown);
  pythonAndHostDrafts(ctx, drift);
  return ctx.out;
}

function envContext(facts: WhatChangedFacts, b: Baseline): EnvContext {
  const now = facts.env.now!;
  const bTime = epochOf(b.capturedAt);
  const nTime = epochOf(now.capturedAt);
  const title = `baseline ${JSON.stringify(b.label)}`;
  const sinceBaseline: ChangeTime = {
    text: `between ${title} (${b.capturedAt}) and now`,
    ...(bTime !== null && nTime !== null ? { time: { from: bTime, to: nTime } } : {}),
  };
  const envLink: EvidenceLink = {
    kind: 'env-diff',
    title: `environment now vs ${title}`,
    hostId: facts.host.id,
    baselineId: b.id,
  };
  const restored = facts.probe?.stats.some((s) => s.exists && s.path === restoredEnvProbePath(b.label)) ?? false;
  const out: Draft[] = [];
  const add: EnvContext['add'] = (category, t, detail, when = sinceBaseline, cosmeticWhy, bisectChange, subject) =>
    out.push({
      source: 'env',
      category,
      title: t,
      detail,
      when,
      // an env variable or the interpreter can be put back one at a time: the bisect measures whether it matters
      evidence: bisectChange
        ? [
            envLink,
            {
              kind: 'bisect',
              title: 'Confirm by bisect',
              hostId: facts.host.id,
              baselineId: b.id,
              change: bisectChange,
              ...(bisectChange.startsWith(PACKAGE_CHANGE) ? { packages: true } : {}),
            },
          ]
        : [envLink],
      ...(cosmeticWhy ? { cosmeticWhy } : {}),
      ...(subject ? { subject } : {}),
    });
  return { facts, now, bTime, sinceBaseline, envLink, restored, out, add };
}

/** torch's version, CUDA and git version; dated by its version.py when it was installed after the baseline. */
function torchDrafts({ facts, now, bTime, sinceBaseline, add }: EnvContext, drift: Drift): void {
  const tv = drift.torch.version;
  if (tv || drift.torch.cuda || drift.torch.gitVersion) {
    const build = tv ? buildChange(tv.from, tv.to) : undefined;
    const text = tv
      ? `torch ${tv.from ?? 'none'} → ${tv.to ?? 'none'}${build ? ` (build ${build})` : ''}`
      : 'torch build';
    const bits = Object.entries(drift.torch).map(([k, c]) => `${k} ${c.from ?? 'none'} → ${c.to ?? 'none'}`);
    const stat = facts.probe?.stats.find((s) => now.torch.location && s.path === `${now.torch.location}/version.py`);
    const when: ChangeTime =
      stat?.mtime != null && (bTime === null || stat.mtime > bTime)
        ? { text: `torch installed ${isoOf(stat.mtime)}`, time: { from: stat.mtime, to: stat.mtime } }
        : sinceBaseline;
    add('torch-build', text, bits.join('; '), when);
  }
}

/** Packages other than torch: a kind known to move speed each on its own, the others counted together. */
function packageDrafts({ sinceBaseline, restored, add }: EnvContext, drift: Drift): void {
  for (const list of [drift.packages.changed, drift.packages.added, drift.packages.removed]) {
    const others: string[] = [];
    for (const p of list) {
      if (p.name === 'torch') continue;
      const cat = packageCategory(p.name);
      const t = `${p.name} ${p.from ?? '(absent)'} → ${p.to ?? '(absent)'}`;
      if (cat === 'other') others.push(t);
      // a package can be bisected once the baseline's env was restored (Restore Known Good… → Run)
      else add(cat, t, `package ${t}`, sinceBaseline, undefined, restored ? `${PACKAGE_CHANGE}${p.name}` : undefined);
    }
    if (others.length)
      add(
        'other',
        `${others.length} other package${others.length === 1 ? '' : 's'} changed`,
        others.slice(0, 12).join(', '),
      );
  }
}

/** The GPU driver, the CUDA toolkit, and the GPUs themselves. */
function hardwareDrafts({ add }: EnvContext, drift: Drift): void {
  if (drift.cuda.driver)
    add(
      'driver',
      `driver ${drift.cuda.driver.from ?? 'none'} → ${drift.cuda.driver.to ?? 'none'}`,
      'GPU driver version',
    );
  if (drift.cuda.nvcc)
    add('torch-build', `nvcc ${drift.cuda.nvcc.from ?? 'none'} → ${drift.cuda.nvcc.to ?? 'none'}`, 'CUDA toolkit');
  if (drift.gpus.count || drift.gpus.changed.length) {
    const bits = drift.gpus.changed
      .filter((g) => g.field !== 'driver_version')
      .map((g) => `GPU ${g.index} ${g.field} ${g.from ?? 'none'} → ${g.to ?? 'none'}`);
    if (drift.gpus.count) bits.unshift(`${drift.gpus.count.from} → ${drift.gpus.count.to} GPUs`);
    if (bits.length) add('hardware', bits[0]!, bits.join('; '));
  }
}

/** Environment variables: one that moves speed can be bisected; the others are listed, never ranked. */
function variableDrafts({ sinceBaseline, add }: EnvContext, drift: Drift): void {
  for (const e of drift.env) {
    const cat = envCategory(e.name);
    const t = e.redacted
      ? `${e.name} ${e.kind} (secret)`
      : e.kind === 'added'
        ? `${e.name}=${e.to ?? ''} added`
        : e.kind === 'removed'
          ? `${e.name} removed (was ${e.from ?? ''})`
          : `${e.name} ${e.from ?? ''} → ${e.to ?? ''}`;
    add(
      cat,
      t,
      `environment variable ${t}`,
      sinceBaseline,
      cat === 'cosmetic' ? 'a variable that does not change speed' : undefined,
      cat === 'cosmetic' ? undefined : envChangeId(e.name),
      { kind: 'env', name: e.name },
    );
  }
}

/** The training scripts the baseline hashed: edited, new or gone, dated by their mtime. */
function scriptDrafts({ facts, now, sinceBaseline, envLink, out }: EnvContext, drift: Drift): void {
  const scripts = new Map(now.scripts.files.map((f) => [f.path, f]));
  for (const [kind, list] of [
    ['edited', drift.scripts.changed],
    ['new', drift.scripts.added],
    ['gone', drift.scripts.removed],
  ] as const) {
    for (const p of list) {
      const m = scripts.get(p)?.mtime ?? null;
      const when: ChangeTime =
        m !== null && kind !== 'gone' ? { text: `file modified ${isoOf(m)}`, time: { from: m, to: m } } : sinceBaseline;
      out.push({
        source: 'code',
        category: 'code',
        title: `${p} ${kind}`,
        detail: `training script ${p} ${kind === 'edited' ? 'has another hash than at the baseline' : kind}`,
        when,
        evidence: [envLink, { kind: 'file', title: p, hostId: facts.host.id, path: p }],
        subject: { kind: 'code', repo: null, files: [p] },
      });
    }
  }
}

/** Compile caches: one emptied, gone or moved is a suspect; one that grew is in use. */
function cacheDrafts({ now, sinceBaseline, envLink, out }: EnvContext, drift: Drift, unknown: UnknownFact[]): void {
  const measured = new Set(now.caches.map((c) => c.name));
  for (const c of drift.caches) {
    // a cache the baseline had and this snapshot did not look at is not known to be lost
    if (!measured.has(c.name)) {
      unknown.push({
        fact: `compile cache ${c.name} (${c.path})`,
        why: 'not measured now (not among the cache folders given)',
      });
      continue;
    }
    const lost = c.change === 'emptied' || c.change === 'disappeared' || c.change === 'moved';
    out.push({
      source: 'caches',
      category: lost ? 'compile-cache' : 'cosmetic',
      title: `${c.name} compile cache ${c.change} (${c.files.from ?? 'none'} → ${c.files.to ?? 'none'} files)`,
      detail: `${c.path}: ${c.change}`,
      when: sinceBaseline,
      evidence: [envLink],
      ...(lost ? {} : { cosmeticWhy: 'a cache that grew is in use' }),
    });
  }
}

/** The interpreter (its executable can be put back by bisect) and the host. */
function pythonAndHostDrafts({ sinceBaseline, add }: EnvContext, drift: Drift): void {
  if (drift.python.version || drift.python.executable)
    add(
      'python',
      `python ${drift.python.version?.from ?? ''} → ${drift.python.version?.to ?? ''}`.trim(),
      Object.entries(drift.python)
        .map(([k, c]) => `${k} ${c.from ?? ''} → ${c.to ?? ''}`)
        .join('; '),
      sinceBaseline,
      undefined,
      drift.python.executable ? PYTHON_CHANGE_ID : undefined,
    );
  const hostBits = Object.entries(drift.host).map(([k, c]) => `${k} ${c.from ?? 'none'} → ${c.to ?? 'none'}`);
  if (hostBits.length) add('host', hostBits[0]!, hostBits.join('; '));
}
