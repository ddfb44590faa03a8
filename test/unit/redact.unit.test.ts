import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { h200KnownGood } from '../fixtures/env';
import { ckptArgsSchema } from '../../src/core/args/argsProbe';
import { diffArgs } from '../../src/core/args/diff';
import { changedArgs, renderArgsDocument } from '../../src/core/args/render';
import { parseEnvSnapshot } from '../../src/core/baselines/envProbe';
import { BaselineStore } from '../../src/core/baselines/store';
import { isSecretName, redactArgv, redactText, redactTree, redactValue } from '../../src/core/redact';

interface Cases {
  secretNames: string[];
  harmlessNames: string[];
  values: { name: string; value: string; expect: string }[];
  texts: { text: string; expect: string }[];
  argvs: { argv: string[]; expect: string[] }[];
  trees: { tree: unknown; expect: unknown }[];
}

/** The vectors python/kg_redact.py is tested against too (test/python/test_redaction.py). */
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

void describe('redaction (the vectors shared with kg_redact.py)', () => {
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

  void it('redacts a command line given as words: secret flags, -p unless a port, -pVALUE', () => {
    for (const c of CASES.argvs) {
      const got = redactArgv(expand(c.argv) as string[]);
      assert.deepEqual(got, expand(c.expect), c.argv.join(' '));
      assert.deepEqual(redactArgv(got), got, `twice: ${c.argv.join(' ')}`);
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

  void it('leaves a metrics-sized result of numbers alone (not copied)', () => {
    const values = Array.from({ length: 200_000 }, (_v, i) => i / 7);
    const doc = {
      series: [{ name: 'train/loss', values }],
      records: Array.from({ length: 50_000 }, (_v, i) => ({ step: i, phase: 'train' })),
    };
    const out = redactTree(doc);
    assert.equal(out.series[0]!.values, values);
    assert.deepEqual(out.records[7], doc.records[7]);
  });
});

void describe('baselines never keep a secret in clear', () => {
  void it('a snapshot from an older probe is redacted when parsed and when saved', async () => {
    const pat = 'github_pat_11AAAAAAA0abcdefghijklmnopqrstuvwxyz';
    const urlToken = 'ghp_UrlUserToken0123456789abcdefghijkl';
    const raw = JSON.parse(JSON.stringify(h200KnownGood)) as { env: { vars: Record<string, string> } };
    raw.env.vars['GITHUB_PAT'] = pat;
    raw.env.vars['HF_ENDPOINT'] = `https://${urlToken}@hf.internal.example/`;
    raw.env.vars['PIP_INDEX_URL'] = 'https://ci:p/ss@w0rd@pypi.internal.example/simple/';
    const snap = parseEnvSnapshot(raw);
    assert.equal(snap.env.vars['GITHUB_PAT'], redactValue('GITHUB_PAT', pat));
    assert.match(snap.env.vars['HF_ENDPOINT']!, /^https:\/\/<redacted sha256:[0-9a-f]{12}>@hf\.internal\.example\/$/);
    const dir = await mkdtemp(join(tmpdir(), 'kg-redact-'));
    try {
      // saved as an object that skipped the parser: the store's own schema still redacts
      const unparsed = { ...snap, env: { ...snap.env, vars: { ...snap.env.vars, GITHUB_PAT: pat } } };
      const saved = await new BaselineStore(dir).save({ label: 'x', host: 'h', snapshot: unparsed });
      const text = await readFile(saved.file, 'utf8');
      for (const s of [pat, urlToken, 'p/ss@w0rd']) assert.ok(!text.includes(s), s);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

void describe('args never show a secret in clear', () => {
  void it('an args result from an older probe is redacted when parsed, rendered and diffed', () => {
    const result = (token: string) => ({
      format: 'hf-training-args',
      path: '/ckpt/checkpoint-500/training_args.bin',
      bytes: 700,
      key: null,
      args: { hub_token: token, learning_rate: 5e-5, report: { url: 'https://u:p/w@x@h.example/' } },
      argsType: 'transformers.TrainingArguments',
      step: 500,
      epoch: null,
      tensors: { count: 0, bytes: 0 },
      topLevelKeys: [],
      unsafeGlobals: [],
      warnings: [],
      bytesRead: 600,
      mtime: 1,
    });
    const a = ckptArgsSchema.parse(result('hf_clear_one'));
    const b = ckptArgsSchema.parse(result('hf_clear_two'));
    assert.equal((a.args as Record<string, unknown>)['hub_token'], redactValue('hub_token', 'hf_clear_one'));
    const raw = result('hf_clear_one');
    const texts = [
      JSON.stringify(a),
      renderArgsDocument({ ...a, args: raw.args }, { host: 'h', capturedAt: new Date(0) }),
      changedArgs(raw.args, result('hf_clear_two').args),
    ];
    for (const t of texts) for (const clear of ['hf_clear', 'p/w@x']) assert.ok(!t.includes(clear), `${clear} in ${t}`);
    assert.deepEqual(
      diffArgs(a.args, b.args).changed.map((c) => c.key),
      ['hub_token'],
    );
  });
});
