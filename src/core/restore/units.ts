/*
 * Which installed packages must move together. A restore installs the torch family from one index in one command,
 * and the package bisect applies a set as one change: torch without its own triton or nvidia-* wheels is an
 * environment that never existed, and neither is a plugin without the framework version it pins with `==`.
 */

/** PEP 503's normalised name: `Jinja2`, `typing_extensions` → `jinja2`, `typing-extensions`. */
export function normalizeName(name: string): string {
  return name.replace(/[-_.]+/g, '-').toLowerCase();
}

const TORCH_NAMES = new Set([
  'torch',
  'torchvision',
  'torchaudio',
  'torchtext',
  'torchdata',
  'triton',
  'pytorch-triton',
  'pytorch-triton-rocm',
  'pytorch-triton-xpu',
]);
/** `nvidia-*` Python bindings that PyPI serves and PyTorch's wheel indexes do not: not CUDA runtime wheels. */
const NVIDIA_NOT_RUNTIME = new Set(['nvidia-ml-py', 'nvidia-ml-py3', 'nvidia-pyindex']);

/** torch, its companions and the CUDA runtime wheels it loads: installed from one wheel index as one unit. */
export function isTorchFamily(name: string): boolean {
  const n = normalizeName(name);
  return TORCH_NAMES.has(n) || (n.startsWith('nvidia-') && !NVIDIA_NOT_RUNTIME.has(n));
}

/**
 * Groups `names` into units: the torch family is one, and two names are in one unit when either pins the other
 * with `==` (`pins`: name → the names its metadata pins; names outside `names` are ignored). Each unit is sorted,
 * the units by their first name, the torch family first.
 */
export function packageUnits(
  names: readonly string[],
  pins: Readonly<Record<string, readonly string[]>> = {},
): string[][] {
  const set = new Set(names.map(normalizeName));
  const parent = new Map<string, string>([...set].map((n) => [n, n]));
  const find = (n: string): string => {
    let r = n;
    while (parent.get(r) !== r) r = parent.get(r)!;
    parent.set(n, r);
    return r;
  };
  const join = (a: string, b: string) => {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent.set(ra < rb ? rb : ra, ra < rb ? ra : rb);
  };
  const torch = [...set].filter(isTorchFamily);
  for (const n of torch.slice(1)) join(torch[0]!, n);
  for (const [from, tos] of Object.entries(pins)) {
    const f = normalizeName(from);
    if (!set.has(f)) continue;
    for (const t of tos) if (set.has(normalizeName(t))) join(f, normalizeName(t));
  }
  const groups = new Map<string, string[]>();
  for (const n of set) {
    const r = find(n);
    const g = groups.get(r);
    if (g) g.push(n);
    else groups.set(r, [n]);
  }
  const units = [...groups.values()].map((g) => g.sort());
  return units.sort((a, b) => {
    const ta = a.some(isTorchFamily) ? 0 : 1;
    const tb = b.some(isTorchFamily) ? 0 : 1;
    return ta - tb || (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0);
  });
}
