import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';

/*
 * Pure-Python wheels written at test time (stdlib zipfile, no build tool): `name` imports as `name_with_underscores`
 * and has one function, `work()`, whose loop runs `loops` times — a version with 10x the loops is 10x slower on any
 * machine. Used by the restore int test and `npm run bench -- --only restore`.
 */
const WHEEL_WRITER = String.raw`
import base64, hashlib, os, sys, zipfile
out, name, version, loops = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
mod = name.replace("-", "_")
dist = "%s-%s.dist-info" % (mod, version)
files = {
    mod + "/__init__.py": "def work():\n    s = 0\n    for i in range(%d):\n        s += i * i\n    return s\n" % loops,
    dist + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
    dist + "/WHEEL": "Wheel-Version: 1.0\nGenerator: known-good-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
record.append(dist + "/RECORD,,")
files[dist + "/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile(os.path.join(out, "%s-%s-py3-none-any.whl" % (mod, version)), "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
`;

/** Writes `<name>-<version>-py3-none-any.whl` into `folder`. */
export function writeWheel(folder: string, name: string, version: string, loops: number): void {
  execFileSync('python3', ['-c', WHEEL_WRITER, folder, name, version, String(loops)], { stdio: 'ignore' });
}

/** The wheels of the interpreter's own pip and setuptools (ensurepip's, or Debian's /usr/share/python-wheels). */
export function bundledWheels(python = 'python3'): string[] {
  return execFileSync(
    python,
    [
      '-c',
      'import ensurepip, glob, os; d = os.path.dirname(ensurepip.__file__); ' +
        'print("\\n".join(glob.glob(os.path.join(d, "_bundled", "*.whl")) + glob.glob("/usr/share/python-wheels/*.whl")))',
    ],
    { encoding: 'utf8' },
  )
    .split('\n')
    .filter(Boolean);
}

/**
 * A benchmark of the wheels' `work()` (the modules named), printing `speed: X x the reference loop`: a fixed loop of
 * its own timed beside the packages' work in the same process, 15 adjacent pairs in alternating order, the median
 * ratio. Both sides are timed in CPU time of the process (time.process_time), not wall time: a neighbour's load
 * preempts the process without adding to its CPU time, so the ratio holds on a shared machine (measured here at load 9:
 * six runs of one state spread 2.3 % in CPU time, 22 % in wall time), and a version with 10x the loops reads 10x
 * slower on any machine.
 */
export function ratioBench(modules: readonly string[]): string {
  const mods = modules.map((m) => m.replace(/-/g, '_'));
  return String.raw`
import time
import ${mods.join(', ')}
mods = [${mods.join(', ')}]
def reference():
    s = 0
    for i in range(100000):
        s += i * i
    return s
def timed(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t
def work():
    for m in mods:
        m.work()
ratios = []
for i in range(15):
    # adjacent pairs, the order alternated: a drift (frequency, cache) hits one pair, and the median drops it
    if i % 2:
        w = timed(work)
        r = timed(reference)
    else:
        r = timed(reference)
        w = timed(work)
    ratios.append(r / w)
ratios.sort()
print("speed: %.6f x the reference loop" % ratios[len(ratios) // 2])
`;
}

/**
 * The restore tests' two real environments: `wheels/` holds every `names` package at 1.0 and 2.0 (`kg-slow` 2.0 is 10×
 * slower than 1.0), `extra` packages at 1.0, and the interpreter's own pip and setuptools, so that the folder holds
 * every package a venv has; `good/` has the 1.0s, `bad/` the 2.0s, each installed with the folder as the only index.
 */
export function goodAndBadVenvs(
  dir: string,
  names: readonly string[],
  opts: { basePython: string; extra?: readonly string[] },
): { wheels: string } {
  const wheels = join(dir, 'wheels');
  mkdirSync(wheels, { recursive: true });
  for (const name of names)
    for (const version of ['1.0', '2.0'])
      writeWheel(wheels, name, version, name === 'kg-slow' ? (version === '2.0' ? 1_000_000 : 100_000) : 2_000);
  for (const name of opts.extra ?? []) writeWheel(wheels, name, '1.0', 10);
  for (const w of bundledWheels(opts.basePython)) copyFileSync(w, join(wheels, basename(w)));
  for (const [env, version] of [
    ['good', '1.0'],
    ['bad', '2.0'],
  ] as const) {
    execFileSync(opts.basePython, ['-m', 'venv', join(dir, env)]);
    execFileSync(
      join(dir, env, 'bin/python'),
      [
        ...['-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--no-index', '--find-links', wheels],
        ...names.map((n) => `${n}==${version}`),
        ...(opts.extra ?? []).map((n) => `${n}==1.0`),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
  }
  return { wheels };
}
