import { execFileSync } from 'node:child_process';

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
