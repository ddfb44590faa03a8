import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { PROBE_ERROR_CODES, probeErrorCode } from '../../src/core/probes/codes';
import { probeOutcome } from '../../src/core/probes/runner';
import { isKnownGoodError } from '../../src/core/errors';
import type { ProbeCall } from '../../src/core/probes/probe';

/** python/kg_common.py ERROR_CODES, read by Python itself. */
function pythonList(): string[] {
  return JSON.parse(
    execFileSync('python3', ['-c', 'import json, kg_common; print(json.dumps(list(kg_common.ERROR_CODES)))'], {
      cwd: 'python',
      encoding: 'utf8',
    }),
  ) as string[];
}

/**
 * Every code python/ answers with, found by Python's own parser: ProbeError(msg, code), envelope_error(msg, code),
 * the helper's _error(rid, msg, code) and end(job, code, msg), LimitError(name) ("limit-" + name), the helper's
 * _SIGNALS codes, and ProbeError's default.
 */
const SCAN = String.raw`
import ast, glob, json
found = {}
def add(code, where):
    found.setdefault(code, set()).add(where)
for f in sorted(glob.glob("*.py")):
    tree = ast.parse(open(f).read())
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            fn = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
            pos = {"ProbeError": 1, "envelope_error": 1, "_error": 2, "end": 1}.get(fn)
            if pos is not None and len(n.args) > pos and isinstance(n.args[pos], ast.Constant):
                add(n.args[pos].value, f)
            for k in n.keywords:
                if fn in ("ProbeError", "envelope_error") and k.arg == "code" and isinstance(k.value, ast.Constant):
                    add(k.value.value, f)
            if fn == "LimitError" and n.args and isinstance(n.args[0], ast.Constant):
                add("limit-" + n.args[0].value, f)
        if isinstance(n, ast.FunctionDef) and n.name in ("__init__", "envelope_error"):
            for d in n.args.defaults:
                if isinstance(d, ast.Constant) and isinstance(d.value, str) and d.value.endswith("error"):
                    add(d.value, f)
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "_SIGNALS" for t in n.targets):
            for v in n.value.values:
                add(v.elts[0].value, f)
print(json.dumps({k: sorted(v) for k, v in found.items()}))
`;

void describe('probe error codes: one list in python/kg_common.py, mirrored in TS', () => {
  void it('the TS list is the Python list, in the same order', () => {
    assert.deepEqual([...PROBE_ERROR_CODES], pythonList());
  });

  void it('python/ answers with no code outside the list', () => {
    const found = JSON.parse(execFileSync('python3', ['-c', SCAN], { cwd: 'python', encoding: 'utf8' })) as Record<
      string,
      string[]
    >;
    const known = new Set<string>(PROBE_ERROR_CODES);
    const unknown = Object.entries(found).filter(([code]) => !known.has(code));
    assert.deepEqual(unknown, []);
    // the scan sees the codes of every part: a probe, kg_common, the helper
    for (const c of ['bad-args', 'not-regular', 'limit-read', 'need-source', 'crashed', 'probe-error'])
      assert.ok(c in found, c);
  });

  void it('an envelope code is typed: old synonyms map, unknown ones become probe-error', () => {
    assert.equal(probeErrorCode('corrupt'), 'corrupt');
    assert.equal(probeErrorCode('denied'), 'permission-denied');
    assert.equal(probeErrorCode('from-a-newer-probe'), 'probe-error');
    const call: ProbeCall<unknown> = { probe: 'read_file', modules: [], args: [], parse: (x) => x };
    assert.throws(
      () => probeOutcome(call, { ok: false, error: { message: 'no', code: 'denied' }, python: undefined }, 'gpu'),
      (e: unknown) => isKnownGoodError(e, 'probe-failed') && e.detail?.['probeCode'] === 'permission-denied',
    );
  });
});
