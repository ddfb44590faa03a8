import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { declaredProbes, defineProbe } from '../../src/core/probes/probe';
import { importedModules, oneShotProgram, pythonDir, setProbeSource } from '../../src/core/probes/sources';
import { z } from 'zod';

/*
 * A probe's modules travel with it only if it declares them (defineProbe's `modules`): a declaration that misses an
 * import fails on the host, never by hand (where the script's folder is on sys.path). So the declarations are
 * checked against what the sources import, read by Python's own parser.
 */

/** Every file under src/ that defines a probe where it is imported (not inside a function), without vscode. */
function probeFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...probeFiles(p));
    else if (p.endsWith('.ts')) {
      const text = readFileSync(p, 'utf8');
      if (/^(?:export )?const \w+ = defineProbe\(/m.test(text) && !/from 'vscode'/.test(text)) out.push(p);
    }
  }
  return out;
}

/** For each python/ module: the python/ modules it imports, anywhere in it, and theirs (kg_common left out). */
const CLOSURE = String.raw`
import ast, glob, json, os
mods = {os.path.basename(f)[:-3] for f in glob.glob("*.py")}
direct = {}
for m in mods:
    names = set()
    for node in ast.walk(ast.parse(open(m + ".py", encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    direct[m] = names & mods
out = {}
for m in mods:
    seen, todo = set(), list(direct[m])
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(direct[n])
    out[m] = sorted(seen - {m, "kg_common"})
print(json.dumps(out))
`;

function closureIn(dir: string): Record<string, string[]> {
  return JSON.parse(execFileSync('python3', ['-c', CLOSURE], { cwd: dir, encoding: 'utf8' })) as Record<
    string,
    string[]
  >;
}

test("every probe's declared modules are exactly what its source imports, transitively", async () => {
  const files = probeFiles(resolve('src'));
  assert.ok(files.length >= 10, `found only ${files.length} files defining probes`);
  for (const f of files) await import(f);
  const closure = closureIn(pythonDir());
  const seen = new Set<string>();
  for (const { probe, modules } of declaredProbes()) {
    if (probe.startsWith('kg_t_')) continue; // this file's own
    seen.add(probe);
    assert.ok(closure[probe], `python/${probe}.py does not exist`);
    assert.deepEqual([...modules], closure[probe], `defineProbe('${probe}', …, { modules }) is not what it imports`);
    // The CLI's probes named at run time find the same by reading the sources.
    assert.deepEqual(importedModules(probe), closure[probe], `importedModules('${probe}')`);
  }
  for (const p of ['ckpt_args', 'metrics_reduce', 'list_runs', 'env_snapshot']) assert.ok(seen.has(p), p);
});

test('the scan finds imports inside functions and through other modules (the check can fail)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-closure-'));
  try {
    writeFileSync(join(dir, 'p.py'), 'import kg_common, os\ndef main(argv):\n    import a\n    return a.f()\n');
    writeFileSync(join(dir, 'a.py'), 'from b import g\ndef f():\n    return g()\n');
    writeFileSync(join(dir, 'b.py'), 'import kg_common\ndef g():\n    return 1\n');
    writeFileSync(join(dir, 'kg_common.py'), '');
    assert.deepEqual(closureIn(dir)['p'], ['a', 'b']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a one-shot program carries its modules: they import each other in any order, and a changed one is what runs', () => {
  setProbeSource('kg_t_a', 'import kg_t_b\nWHO = "a1"\ndef both():\n    return WHO + "+" + kg_t_b.WHO\n');
  setProbeSource('kg_t_b', 'import kg_t_a\nWHO = "b1"\n');
  setProbeSource(
    'kg_t_probe',
    'import kg_common\nimport kg_t_a\ndef main(argv):\n    return {"got": kg_t_a.both(), "argv": argv}\n' +
      'if __name__ == "__main__":\n    kg_common.run(main)\n',
  );
  const call = defineProbe('kg_t_probe', z.unknown(), () => ['x'], { modules: ['kg_t_a', 'kg_t_b'] })();
  const run = () => {
    // Run from an empty folder: nothing but the program can supply kg_t_a.
    const out = execFileSync('python3', ['-', ...call.args], { input: oneShotProgram(call, 'N1'), cwd: '/' });
    const m = /@@KNOWN-GOOD-BEGIN N1@@\n([\s\S]*)\n@@KNOWN-GOOD-END N1@@/.exec(out.toString('utf8'));
    assert.ok(m, out.toString('utf8'));
    return (JSON.parse(m[1]!) as { result: unknown }).result;
  };
  assert.deepEqual(run(), { got: 'a1+b1', argv: ['x'] });
  setProbeSource('kg_t_b', 'import kg_t_a\nWHO = "b2"\n');
  assert.deepEqual(run(), { got: 'a1+b2', argv: ['x'] });
});
