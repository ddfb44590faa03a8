import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isSecretName, redactText, redactTree, redactValue } from '../../src/core/redact';

interface Cases {
  secretNames: string[];
  harmlessNames: string[];
  values: { name: string; value: string; expect: string }[];
  texts: { text: string; expect: string }[];
  trees: { tree: unknown; expect: unknown }[];
}

/** The vectors python/kg_common.py is tested against too (test/python/test_redaction.py). */
const CASES = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'redaction', 'cases.json'), 'utf8')) as Cases;

/** {{h:VALUE}} -> <redacted sha256:…> of VALUE, through strings, arrays and objects. */
function expand(x: unknown): unknown {
  if (typeof x === 'string') {
    return x.replace(
      /\{\{h:(.*?)\}\}/g,
      (_m, v: string) => `<redacted sha256:${createHash('sha256').update(v).digest('hex').slice(0, 12)}>`,
    );
  }
  if (Array.isArray(x)) return x.map(expand);
  if (x !== null && typeof x === 'object') {
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, expand(v)]));
  }
  return x;
}

void describe('redaction (the vectors shared with kg_common.py)', () => {
  void it('tells secret names from harmless ones', () => {
    for (const n of CASES.secretNames) assert.equal(isSecretName(n), true, n);
    for (const n of CASES.harmlessNames) assert.equal(isSecretName(n), false, n);
  });

  void it('redacts values by name and by text', () => {
    for (const c of CASES.values) assert.equal(redactValue(c.name, c.value), expand(c.expect), c.name);
  });

  void it('redacts URLs, query tokens, assignments and token shapes inside text, idempotently', () => {
    for (const c of CASES.texts) {
      const got = redactText(expand(c.text) as string);
      assert.equal(got, expand(c.expect), c.text);
      assert.equal(redactText(got), got, `twice: ${c.text}`);
    }
  });

  void it('walks trees by key name', () => {
    for (const c of CASES.trees) {
      const got = redactTree(c.tree);
      assert.deepEqual(got, expand(c.expect));
      assert.deepEqual(redactTree(got), got);
    }
  });

  void it('gives different secrets different hashes', () => {
    assert.notEqual(redactValue('hub_token', 'hf_one'), redactValue('hub_token', 'hf_two'));
  });

  void it('leaves a metrics-sized result of numbers alone, quickly', () => {
    const values = Array.from({ length: 200_000 }, (_v, i) => i / 7);
    const doc = {
      series: [{ name: 'train/loss', values }],
      records: Array.from({ length: 50_000 }, (_v, i) => ({ step: i, phase: 'train' })),
    };
    const t = performance.now();
    const out = redactTree(doc);
    const took = performance.now() - t;
    assert.equal(out.series[0]!.values, values);
    assert.ok(took < 1000, `${took} ms`);
  });
});
