import { KnownGoodError } from '../errors';
import type { ProbeProgram } from './probe';
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

function checkName(name: string): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new KnownGoodError('internal', `bad probe name ${JSON.stringify(name)}`);
}

function sourceOf(name: string, source: string): ProbeSource {
  return { name, source, hash: createHash('sha256').update(source).digest('hex').slice(0, 16) };
}

/** python/<name>.py, read once. */
export function probeSource(name: string): ProbeSource {
  checkName(name);
  let s = cache.get(name);
  if (!s) {
    s = sourceOf(name, readFileSync(join(pythonDir(), `${name}.py`), 'utf8'));
    cache.set(name, s);
  }
  return s;
}

/**
 * Replaces what `probeSource(name)` gives (a new hash with it): for tests that change a module under a running
 * helper, and probes that do not live in python/.
 */
export function setProbeSource(name: string, source: string): ProbeSource {
  checkName(name);
  const s = sourceOf(name, source);
  cache.set(name, s);
  return s;
}

/** The modules that travel with a probe, kg_common first, then the ones it declared. */
export function programModules(program: ProbeProgram): ProbeSource[] {
  return ['kg_common', ...program.modules.filter((m) => m !== 'kg_common')].map(probeSource);
}

/**
 * The python/ modules `name` imports, and theirs, found by reading the sources: for probes named at run time (the
 * CLI's `probe NAME`), which no `defineProbe` declared.
 */
export function importedModules(name: string): string[] {
  const found = new Set<string>();
  const todo = [name];
  for (let n = todo.pop(); n !== undefined; n = todo.pop()) {
    for (const m of probeSource(n).source.matchAll(/^[ \t]*(?:import|from)[ \t]+([A-Za-z_][A-Za-z0-9_]*)/gm)) {
      const mod = m[1]!;
      if (mod === name || found.has(mod) || !existsSync(join(pythonDir(), `${mod}.py`))) continue;
      found.add(mod);
      todo.push(mod);
    }
  }
  found.delete('kg_common');
  return [...found].sort();
}

/** A Python string literal for `text` (JSON string syntax is valid Python; non-ASCII escaped for any locale). */
export function pyLiteral(text: string): string {
  return JSON.stringify(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * The program piped to `<python> - args…` for a one-shot run: python/kg_modules.py makes the probe's modules
 * importable from the text that travelled (kg_common, with the frame nonce set so the document is printed between
 * marker lines, and the ones it declared), then the probe's own source runs as __main__.
 */
export function oneShotProgram(program: ProbeProgram, nonce: string): string {
  const own = probeSource(program.probe);
  const modules = programModules(program)
    .map((m) => `${pyLiteral(m.name)}: ${pyLiteral(m.source)}`)
    .join(', ');
  return [
    'import sys as _kg_sys, types as _kg_types',
    '_kg_m = _kg_types.ModuleType("kg_modules")',
    '_kg_m.__file__ = "kg_modules.py"',
    `exec(compile(${pyLiteral(probeSource('kg_modules').source)}, "kg_modules.py", "exec"), _kg_m.__dict__)`,
    '_kg_sys.modules["kg_modules"] = _kg_m',
    `_kg_m.install({${modules}})`,
    `__import__("kg_common").FRAME = ${pyLiteral(nonce)}`,
    `_kg_sys.argv[0] = ${pyLiteral(`${program.probe}.py`)}`,
    'del _kg_m',
    own.source,
  ].join('\n');
}

/**
 * The resident helper's modules, in the order the loader executes them: each one's imports before it
 * (python/kg_helper.py imports the three before it).
 */
export const HELPER_MODULES = [
  'kg_modules',
  'kg_common',
  'kg_frame',
  'kg_spare',
  'kg_zygote',
  'kg_pool',
  'kg_helper',
] as const;

/**
 * The `-c` loader of the resident helper: it reads its modules as the first stdin line, then serves requests. The
 * line is read from the file descriptor, not sys.stdin (whose buffer would keep what came behind it): requests the
 * client wrote right behind the modules, without waiting for the ready line, are handed to the helper.
 */
export const HELPER_LOADER =
  'import os,sys,json,types\n' +
  "b=b''\n" +
  "while b'\\n' not in b:\n" +
  ' c=os.read(0,1<<20)\n' +
  ' if not c:raise SystemExit(1)\n' +
  ' b+=c\n' +
  "l,_,r=b.partition(b'\\n')\n" +
  'd=json.loads(l)\n' +
  'for n,s in d["modules"]:\n' +
  ' m=types.ModuleType(n);m.__file__=n+".py";sys.modules[n]=m;exec(compile(s,n+".py","exec"),m.__dict__)\n' +
  'sys.modules["kg_helper"].serve(d["nonce"],r)\n';
