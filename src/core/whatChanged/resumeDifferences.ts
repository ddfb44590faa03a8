import type { OptimizerFacts, ParamValue, ResumeFacts, StateKeyFacts, TensorWhere, WeightsFacts } from './resumeFacts';

/*
 * What differs between a checkpoint written before a restart and one written after it, from their resume-path facts
 * (python/resume_facts.py). Pure: the "restart itself" suspect is built on these; nothing here ranks or words a report.
 */

export type ResumeDifferenceKind =
  | 'optimizer-state'
  | 'optimizer-params'
  | 'optimizer-flag'
  | 'optimizer-value'
  | 'optimizer-missing'
  | 'weights'
  | 'scheduler'
  | 'loader'
  | 'rng';

export interface ResumeDifference {
  kind: ResumeDifferenceKind;
  /** The optimizer's or the weights' source (`optimizer`, `optimizer_states[0]`, `model`...). */
  source: string;
  /** The state key (`step`), the param-group key (`fused`, `lr`), or '' where the whole source differs. */
  key: string;
  before: string;
  after: string;
  /** One line: "optimizer state `step`: cpu (float32, 24 tensors) → cuda:0 (float32, 24)". */
  text: string;
  /**
   * Whether it can change what a step costs: `known` (the mechanism is in `hint`), `possible`, or `no` (a value
   * that changes no step's cost, or state saved or not).
   */
  speed: 'known' | 'possible' | 'no';
  /** What it means and what to do, where that is known; null where it is not. */
  hint: string | null;
}

/** Param-group keys that choose the optimizer's implementation (its kernels), not its arithmetic. */
const IMPLEMENTATION_FLAGS = new Set(['foreach', 'fused', 'capturable', 'differentiable']);

export const STEP_ON_GPU_HINT =
  "With capturable=False and fused off, Adam and AdamW read each parameter's `step` as a Python number on every " +
  'step (torch/optim `_get_value(step)` calls `.item()`): on a GPU tensor each read copies to the host and waits ' +
  'for the GPU to finish the work queued before it, so the host can no longer run ahead of the GPU — once per ' +
  'parameter per step, twice with foreach. `Optimizer.load_state_dict` leaves `step` on the device torch.load put ' +
  'it on (it moves the other state to each parameter\'s device), so `torch.load(..., map_location="cuda")` keeps ' +
  'the counters on the GPU. Load the checkpoint with `torch.load(path, map_location="cpu")` and let ' +
  'load_state_dict move the rest, or move the counters back after loading: ' +
  '`for s in optimizer.state.values(): s["step"] = s["step"].cpu()`.';

export const STEP_BACK_ON_CPU_HINT =
  "The step counters are back on the CPU: Adam/AdamW's per-step `.item()` reads of them no longer wait for the " +
  'GPU (a speed-up, not a drop).';

/** `cpu (float32, 24 tensors)`, `cuda:0 (bfloat16, 20 tensors; float32, 4)`, `24 numbers`, `none`. */
export function describeWhere(where: readonly TensorWhere[], numbers = 0, other = 0, unit = true): string {
  const byLocation = new Map<string, TensorWhere[]>();
  for (const w of where) {
    const loc = w.location ?? 'location not saved';
    byLocation.set(loc, [...(byLocation.get(loc) ?? []), w]);
  }
  const parts = [...byLocation].map(
    ([loc, ws]) =>
      `${loc} (${ws.map((w, i) => `${w.dtype}, ${w.count}${unit && i === 0 ? (w.count === 1 ? ' tensor' : ' tensors') : ''}`).join('; ')})`,
  );
  if (numbers) parts.push(`${numbers} ${numbers === 1 ? 'number' : 'numbers'}`);
  if (other) parts.push(`${other} other`);
  return parts.length ? parts.join(', ') : 'none';
}

function whereKey(where: readonly TensorWhere[]): string {
  return where
    .map((w) => `${w.location ?? ''}|${w.dtype}|${w.count}`)
    .sort()
    .join(',');
}

function stateKey(s: StateKeyFacts | undefined): string {
  return s ? `${whereKey(s.tensors)}#${s.numbers}#${s.other}` : '';
}

function describeState(s: StateKeyFacts | undefined, unit: boolean): string {
  return s ? describeWhere(s.tensors, s.numbers, s.other, unit) : 'not saved';
}

/** A param-group value as Python shows it: None, True, 0.0003, [0.9, 0.999], tensor(cuda:0, float32). */
export function pythonValue(v: ParamValue | undefined): string {
  if (v === undefined) return 'not saved';
  if (v === null) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') return Number.isNaN(v) ? 'nan' : Number.isFinite(v) ? String(v) : v > 0 ? 'inf' : '-inf';
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pythonValue).join(', ')}]`;
  return `tensor(${v.$tensor.location ?? '?'}, ${v.$tensor.dtype})`;
}

function sameValue(a: ParamValue | undefined, b: ParamValue | undefined): boolean {
  return pythonValue(a) === pythonValue(b);
}

const locations = (where: readonly TensorWhere[]): string[] => [...new Set(where.map((w) => w.location ?? '?'))];
const onCpuOnly = (s: StateKeyFacts | undefined): boolean =>
  !!s && s.tensors.every((w) => w.location === 'cpu') && s.other === 0;
const offCpu = (s: StateKeyFacts | undefined): boolean =>
  !!s && s.tensors.some((w) => w.location !== null && w.location !== 'cpu');

/** True when no param group keeps `step` on the parameters' device on purpose (capturable or fused). */
function stepKeptOnHost(o: OptimizerFacts): boolean {
  return o.paramGroups.every((g) => g.values['capturable'] !== true && g.values['fused'] !== true);
}

function stateHint(
  key: string,
  b: StateKeyFacts | undefined,
  a: StateKeyFacts | undefined,
  after: OptimizerFacts,
): Pick<ResumeDifference, 'speed' | 'hint'> {
  if (key === 'step') {
    if (onCpuOnly(b) && offCpu(a)) {
      return stepKeptOnHost(after) ? { speed: 'known', hint: STEP_ON_GPU_HINT } : { speed: 'possible', hint: null };
    }
    if (offCpu(b) && onCpuOnly(a) && stepKeptOnHost(after)) return { speed: 'known', hint: STEP_BACK_ON_CPU_HINT };
    if (b && a && b.kind !== a.kind) {
      return {
        speed: 'no',
        hint: 'The step counter changed between a number and a tensor: the checkpoints were written by different torch versions (torch 1.12 made it a tensor).',
      };
    }
    return { speed: 'possible', hint: null };
  }
  if (!a || !b) return { speed: 'possible', hint: null };
  const sameLocations =
    whereKey(b.tensors.map((w) => ({ ...w, dtype: '' }))) === whereKey(a.tensors.map((w) => ({ ...w, dtype: '' })));
  if (!sameLocations) {
    return {
      speed: 'possible',
      hint: `Optimizer.load_state_dict moves this state to its parameter's device, so it says where the parameters were when each checkpoint was written (${locations(b.tensors).join(', ')} before, ${locations(a.tensors).join(', ')} after).`,
    };
  }
  return {
    speed: 'possible',
    hint: "Optimizer.load_state_dict casts floating-point state to its parameter's dtype: the parameters' dtype changed between the checkpoints (the model was cast, e.g. .half() or .to(torch.bfloat16)).",
  };
}

function optimizerDifferences(b: OptimizerFacts, a: OptimizerFacts, bothScheduled: boolean): ResumeDifference[] {
  const out: ResumeDifference[] = [];
  const src = a.source === b.source ? a.source : `${b.source} → ${a.source}`;
  // the usual source goes unsaid: `optimizer state `step` (optimizer_states[0]): …` names the others
  const label = (what: string): string => (src === 'optimizer' ? what : `${what} (${src})`);
  const keys = [...new Set([...Object.keys(b.state), ...Object.keys(a.state)])];
  for (const key of keys) {
    const bs = b.state[key];
    const as = a.state[key];
    if (stateKey(bs) === stateKey(as)) continue;
    const before = describeState(bs, true);
    const after = describeState(as, !bs || bs.tensors.length === 0);
    out.push({
      kind: 'optimizer-state',
      source: src,
      key,
      before,
      after,
      text: `${label(`optimizer state \`${key}\``)}: ${before} → ${after}`,
      ...stateHint(key, bs, as, a),
    });
  }
  if (a.paramsWithState !== b.paramsWithState) {
    out.push({
      kind: 'optimizer-params',
      source: src,
      key: '',
      before: String(b.paramsWithState),
      after: String(a.paramsWithState),
      text: `${label('parameters with optimizer state')}: ${b.paramsWithState} → ${a.paramsWithState}`,
      speed: 'possible',
      hint: 'A different number of parameters has optimizer state: parameters were frozen or unfrozen, or fewer of them had gradients before the checkpoint.',
    });
  }
  const groups = Math.max(b.paramGroups.length, a.paramGroups.length);
  for (let i = 0; i < groups; i++) {
    const bv = b.paramGroups[i]?.values ?? {};
    const av = a.paramGroups[i]?.values ?? {};
    const where = groups > 1 ? `param group ${i} ` : 'param group ';
    for (const key of [...new Set([...Object.keys(bv), ...Object.keys(av)])]) {
      if (sameValue(bv[key], av[key])) continue;
      // a scheduler moves lr between any two checkpoints: it says nothing about the restart
      if (key === 'lr' && bothScheduled) continue;
      const flag = IMPLEMENTATION_FLAGS.has(key);
      const before = pythonValue(bv[key]);
      const after = pythonValue(av[key]);
      out.push({
        kind: flag ? 'optimizer-flag' : 'optimizer-value',
        source: src,
        key,
        before,
        after,
        text: `${label(`${where}\`${key}\``)}: ${before} → ${after}`,
        speed: flag ? 'possible' : 'no',
        hint: flag
          ? 'These flags choose how the optimizer runs (a fused kernel, foreach, or a loop over parameters), and Optimizer.load_state_dict takes every param-group value from the checkpoint it loads: the optimizer ran another implementation after the restart.'
          : null,
      });
    }
  }
  return out;
}

/** Pairs by source; a lone optimizer on each side is the same one whatever its source is called. */
function pair<T extends { source: string }>(
  before: readonly T[],
  after: readonly T[],
): [T | undefined, T | undefined][] {
  if (before.length === 1 && after.length === 1) return [[before[0], after[0]]];
  const out: [T | undefined, T | undefined][] = [];
  const left = [...after];
  for (const b of before) {
    const i = left.findIndex((a) => a.source === b.source);
    out.push([b, i >= 0 ? left.splice(i, 1)[0] : undefined]);
  }
  for (const a of left) out.push([undefined, a]);
  return out;
}

function weightsDifference(b: WeightsFacts, a: WeightsFacts): ResumeDifference | null {
  if (whereKey(b.where) === whereKey(a.where)) return null;
  const before = describeWhere(b.where);
  const after = describeWhere(a.where, 0, 0, false);
  const bLoc = locations(b.where).join(',');
  const aLoc = locations(a.where).join(',');
  const src = a.source === b.source ? a.source : `${b.source} → ${a.source}`;
  return {
    kind: 'weights',
    source: src,
    key: '',
    before,
    after,
    text: `weights (${src}): ${before} → ${after}`,
    speed: 'possible',
    hint:
      bLoc !== aLoc
        ? `The weights were saved from ${aLoc} after the restart and from ${bLoc} before it: the model was on another device when it was saved.`
        : 'The weights were saved in another dtype after the restart: the model was cast (it runs at another precision, or was converted before saving).',
  };
}

function presence(
  kind: 'scheduler' | 'loader' | 'rng',
  b: readonly string[],
  a: readonly string[],
): ResumeDifference | null {
  if (b.length > 0 === a.length > 0) return null;
  const name = { scheduler: 'scheduler state', loader: 'data-loader state', rng: 'RNG state' }[kind];
  const before = b.length ? b.join(', ') : 'not saved';
  const after = a.length ? a.join(', ') : 'not saved';
  return { kind, source: '', key: '', before, after, text: `${name}: ${before} → ${after}`, speed: 'no', hint: null };
}

/**
 * What differs between the resume-path facts of a checkpoint written before a restart and one written after it,
 * the ones that can change a step's cost first. Empty when nothing the checkpoints say about the resume differs.
 */
export function resumeDifferences(before: ResumeFacts, after: ResumeFacts): ResumeDifference[] {
  const out: ResumeDifference[] = [];
  const bothScheduled = before.scheduler.length > 0 && after.scheduler.length > 0;
  for (const [b, a] of pair(before.optimizers, after.optimizers)) {
    if (b && a) {
      out.push(...optimizerDifferences(b, a, bothScheduled));
      continue;
    }
    const source = (b ?? a)?.source ?? '';
    out.push({
      kind: 'optimizer-missing',
      source,
      key: '',
      before: b ? 'saved' : 'not saved',
      after: a ? 'saved' : 'not saved',
      text: `optimizer state ${source}: ${b ? 'saved before the restart, not after' : 'saved after the restart, not before'}`,
      speed: 'no',
      hint: null,
    });
  }
  for (const [b, a] of pair(before.weights.slice(0, 1), after.weights.slice(0, 1))) {
    const d = b && a ? weightsDifference(b, a) : null;
    if (d) out.push(d);
  }
  for (const kind of ['scheduler', 'loader', 'rng'] as const) {
    const d = presence(kind, before[kind], after[kind]);
    if (d) out.push(d);
  }
  const rank = { known: 0, possible: 1, no: 2 };
  return out
    .map((d, i) => ({ d, i }))
    .sort((x, y) => rank[x.d.speed] - rank[y.d.speed] || x.i - y.i)
    .map((x) => x.d);
}
