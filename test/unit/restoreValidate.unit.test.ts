import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseEnvSnapshot } from '../../src/core/baselines/envProbe';
import { planDocument, planScript, restorePlan } from '../../src/core/restore/plan';
import {
  checkAbsolutePath,
  checkFindLinks,
  checkIndexUrl,
  checkPackageName,
  checkPythonVersion,
  checkVersion,
  commentLine,
  requirementLine,
  shownValue,
} from '../../src/core/restore/validate';
import { cloneSnapshot, h200KnownGood } from '../fixtures/env';

/** The GPU box's environment as our probe captured it: 197 real names and versions, every one must pass. */
const gpuBox = parseEnvSnapshot(JSON.parse(readFileSync('test/fixtures/real/env/gpu-box-env.json', 'utf8')));

void describe('what a restore accepts from a baseline (issue 31)', () => {
  void it('every name and version of a real pip freeze passes; names per PEP 508, versions per PEP 440', () => {
    const pkgs = Object.entries(gpuBox.packages.packages);
    assert.ok(pkgs.length > 150);
    for (const [name, version] of pkgs) {
      assert.equal(checkPackageName(name), null, name);
      if (version !== null) assert.equal(checkVersion(version), null, `${name} ${version}`);
    }
    for (const ok of ['A', 'zope.interface', 'typing_extensions', 'nvidia-cudnn-cu13', 'Jinja2'])
      assert.equal(checkPackageName(ok), null, ok);
    for (const v of [
      '2.11.0+cu130',
      '1.0.post1',
      '1.0-1',
      'v2.0rc1',
      '1!2.0.dev3',
      '2025.9.1',
      '0.1.0.dev0+g1a2b.d2025',
    ])
      assert.equal(checkVersion(v), null, v);
    const refused: [string, RegExp][] = [
      ['--index-url=http://127.0.0.1:9/', /starts with '-'/],
      ['-e git+file:///x#egg=y', /starts with '-'/],
      ['numpy\ntouch x', /line break or a control character/],
      ['a b', /not a package name/],
      ['x-', /not a package name/],
      ['$(touch x)', /not a package name/],
      ['', /not a package name/],
    ];
    for (const [v, why] of refused) assert.match(checkPackageName(v) ?? '', why, JSON.stringify(v));
    for (const v of ['2.3.3 --index-url=http://x/', '-1', '1.0;x', '1.0\n', 'latest', '1.0 ', '${V}', '1.0#x', ''])
      assert.notEqual(checkVersion(v), null, JSON.stringify(v));
  });

  void it('index URLs are http(s)/file and one word; find-links may be an absolute folder; paths are one word', () => {
    for (const u of ['https://download.pytorch.org/whl/cu130', 'http://127.0.0.1:9/simple', 'file:///w/wheels'])
      assert.equal(checkIndexUrl(u), null, u);
    for (const u of ['--index-url=http://x', 'ftp://x', 'https://x y', 'https://x\n', '/w/wheels', 'x'])
      assert.notEqual(checkIndexUrl(u), null, u);
    assert.equal(checkFindLinks('/w/wheels'), null);
    assert.notEqual(checkFindLinks('/w/my wheels'), null);
    assert.notEqual(checkFindLinks('-f/w'), null);
    assert.equal(checkAbsolutePath('/usr'), null);
    for (const p of ['usr', '/usr\n', '/usr; x', '-/usr']) assert.notEqual(checkAbsolutePath(p), null, p);
    for (const v of ['3.12.3', '3.13.0rc1', '3.12.0+', '3.8']) assert.equal(checkPythonVersion(v), null, v);
    for (const v of ['3', '3.12.3\nx', 'x3.12', '3.12.3 ']) assert.notEqual(checkPythonVersion(v), null, v);
  });

  void it('shown values and comment lines are one line whatever they hold; requirement lines are name==version', () => {
    assert.equal(shownValue('a\nb\x1b[31m\u202e'), 'a\\nb\\x1b[31m\\u202e');
    assert.match(shownValue('x'.repeat(500)), /^x{120}… \(500 characters\)$/);
    const c = commentLine('one\ntwo\r\u2028three');
    assert.equal(c.split(/[\n\r\u2028]/).length, 1);
    assert.ok(c.startsWith('# '));
    assert.equal(requirementLine('torch', '2.11.0+cu130'), 'torch==2.11.0+cu130');
    assert.equal(requirementLine('--index-url=http://x/', '1.0'), null);
    assert.equal(requirementLine('numpy', '1.0 --hash=sha256:0'), null);
  });
});

void describe('a plan with refused values', () => {
  void it('lists each refusal with its field and why; the rest of the packages are still pinned', () => {
    const s = cloneSnapshot(h200KnownGood);
    s.packages.packages['--index-url=http://127.0.0.1:9/'] = '1.0';
    s.packages.packages['numpy'] = '2.3.3\ntouch /tmp/x';
    s.python.version = '3.12.3\ntouch /tmp/x';
    s.packages.indexes = {
      error: null,
      indexUrl: 'https://mirror.internal/simple\ntouch /tmp/x',
      extraIndexUrls: ['https://ok.internal/simple', '-e git+file:///x'],
      findLinks: [],
      noIndex: false,
      sources: ['/etc/pip.conf\ntouch /tmp/x'],
      uv: {},
    };
    const plan = restorePlan(s, { label: 'x' });
    const refused = plan.notes.filter((n) => n.kind === 'refused');
    assert.deepEqual(
      refused.map((n) => [n.field, n.value]),
      [
        ['packages.packages["numpy"]', '2.3.3\\ntouch /tmp/x'],
        ['packages.packages', '--index-url=http://127.0.0.1:9/'],
        ['python.version', '3.12.3\\ntouch /tmp/x'],
        ['packages.indexes.indexUrl', 'https://mirror.internal/simple\\ntouch /tmp/x'],
        ['packages.indexes.extraIndexUrls[1]', '-e git+file:///x'],
      ],
    );
    assert.ok(refused.every((n) => n.severity === 'blocker' && / is refused: it /.test(n.message)));
    // the rest proceeds: every other package pinned, from the extra index that passed
    assert.equal(plan.pins.length, Object.keys(h200KnownGood.packages.packages).length - 2);
    assert.ok(!plan.pins.some((p) => p.name === 'numpy'));
    assert.equal(plan.python.command, '/usr/bin/python3', 'no version to choose an interpreter by');
    assert.ok(!plan.steps.some((st) => /the interpreter is Python/.test(st.title)));
    const other = plan.steps.find((st) => /pinned as recorded/.test(st.title))!;
    assert.match(other.command, / --extra-index-url https:\/\/ok\.internal\/simple -r /);
    assert.doesNotMatch(other.command, /--index-url /);
    const doc = planDocument(plan, 'baseline "x\ntouch /tmp/x"');
    assert.match(doc, /Refused: 5 value\(s\) in the baseline/);
    assert.match(doc, /packages\.packages "--index-url=http:\/\/127\.0\.0\.1:9\/" is refused: it starts with '-'/);
    // No line of the script but ours: every comment one line, no baseline text outside quotes or checked lines.
    const script = planScript(plan, 'baseline "x\ntouch /tmp/x"');
    assert.ok(!script.split('\n').some((l) => l.startsWith('touch')));
    assert.match(script, /^# REFUSED: python\.version "3\.12\.3\\ntouch \/tmp\/x" is refused/m);
  });
});
