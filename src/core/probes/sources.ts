import { KnownGoodError } from '../errors';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The folder with the Python probes. The bundle (dist/), the sources run by tsx (src/core/probes/) and the
 * packaged extension all sit below the project root that holds python/, so walk up until it is found.
 */
export function pythonDir(): string {
  let dir = __dirname;
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'python', 'kg_common.py'))) return join(dir, 'python');
    dir = dirname(dir);
  }
  throw new KnownGoodError('internal', `python/ probes folder not found above ${__dirname}`);
}

export interface ProbeSource {
  name: string;
  source: string;
  hash: string;
}

const cache = new Map<string, ProbeSource>();

export function probeSource(name: string): ProbeSource {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new KnownGoodError('internal', `bad probe name ${JSON.stringify(name)}`);
  let s = cache.get(name);
  if (!s) {
    const source = readFileSync(join(pythonDir(), `${name}.py`), 'utf8');
    s = { name, source, hash: createHash('sha256').update(source).digest('hex').slice(0, 16) };
    cache.set(name, s);
  }
  return s;
}

/** A Python string literal for `text` (JSON string syntax is valid Python; non-ASCII escaped for any locale). */
export function pyLiteral(text: string): string {
  return JSON.stringify(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * The program piped to `<python> - args…` for a one-shot run: registers kg_common (with the frame nonce set so
 * the document is printed between marker lines), then the probe's own source runs as __main__.
 */
export function oneShotProgram(probe: string, nonce: string): string {
  const common = probeSource('kg_common');
  const own = probeSource(probe);
  return [
    'import sys as _kg_sys, types as _kg_types',
    'def _kg_register(name, src):',
    '    m = _kg_types.ModuleType(name)',
    '    m.__file__ = name + ".py"',
    '    exec(compile(src, name + ".py", "exec"), m.__dict__)',
    '    _kg_sys.modules[name] = m',
    '    return m',
    `_kg_register("kg_common", ${pyLiteral(common.source)}).FRAME = ${pyLiteral(nonce)}`,
    `_kg_sys.argv[0] = ${pyLiteral(`${probe}.py`)}`,
    own.source,
  ].join('\n');
}

/** The `-c` loader of the resident helper: it reads its modules as the first stdin line, then serves requests. */
export const HELPER_LOADER =
  'import sys,json,types\n' +
  'd=json.loads(sys.stdin.readline())\n' +
  'for n,s in d["modules"]:\n' +
  ' m=types.ModuleType(n);m.__file__=n+".py";sys.modules[n]=m;exec(compile(s,n+".py","exec"),m.__dict__)\n' +
  'sys.modules["kg_helper"].serve(d["nonce"])\n';
