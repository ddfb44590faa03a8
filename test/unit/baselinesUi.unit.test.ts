import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  archivesOf,
  cachePlanSchema,
  checkpointBytes,
  planBackup,
  safeMember,
  tarCreateArgv,
  tarExtractArgv,
  type CachePlan,
} from '../../src/core/baselines/cacheArchive';
import { defaultLabel, diffDocuments, snapshotDocument } from '../../src/core/baselines/documents';
import { timeAgo } from '../../src/core/util/format';
import { remoteWriteArgv, REMOTE_WRITE_SCRIPT } from '../../src/core/baselines/remote';
import { parseBaselineSettings } from '../../src/core/baselines/settings';
import { ENV_SCHEME, fromEnvUri, toEnvUri, type EnvDoc } from '../../src/core/baselines/uri';
import { cloneSnapshot, h200KnownGood, h200Now } from '../fixtures/env';

void describe('knownGood-env URI codec', () => {
  const nasty = 'ssh:ü ser@gpu-box:22/custom:lxc-attach -n 200 -- ?&=#%+';
  const docs: EnvDoc[] = [
    { view: 'open', ref: { kind: 'baseline', hostId: nasty, id: '20261129-113705Z-0a1b2c3d' }, name: 'known good' },
    {
      view: 'diff',
      side: 'left',
      left: { kind: 'baseline', hostId: 'local', id: 'a_b-c' },
      right: { kind: 'capture', id: 'cap-1' },
      name: 'baseline vs now',
    },
    {
      view: 'diff',
      side: 'right',
      left: { kind: 'baseline', hostId: nasty, id: 'x' },
      right: { kind: 'baseline', hostId: 'local', id: 'y' },
      name: 'two',
    },
    {
      view: 'summary',
      left: { kind: 'baseline', hostId: nasty, id: 'x' },
      right: { kind: 'capture', id: 'c9' },
      name: 'drift',
    },
  ];

  void it('round-trips every document kind, with host ids full of URI syntax', () => {
    for (const d of docs) {
      const parts = toEnvUri(d);
      assert.equal(parts.scheme, ENV_SCHEME);
      assert.deepEqual(fromEnvUri(parts), d);
      // What VS Code does to a URI between processes: the query is percent-decoded once and re-encoded.
      const reencoded = new URL(`x:/?${parts.query}`).search.slice(1);
      assert.deepEqual(fromEnvUri({ ...parts, query: reencoded }), d);
    }
  });

  void it('gives a tab name with an extension that picks the language', () => {
    assert.equal(toEnvUri(docs[0]!).path, '/known good.ini');
    assert.equal(toEnvUri(docs[3]!).path, '/drift.md');
    assert.equal(toEnvUri({ ...docs[0]!, name: 'a/b\nc' }).path, '/a b c.ini');
  });

  void it('rejects other schemes and malformed queries', () => {
    const p = toEnvUri(docs[1]!);
    assert.equal(fromEnvUri({ ...p, scheme: 'file' }), undefined);
    assert.equal(fromEnvUri({ ...p, query: 'view=diff&side=left' }), undefined);
    assert.equal(fromEnvUri({ ...p, query: p.query.replace('side=left', 'side=middle') }), undefined);
    assert.equal(fromEnvUri({ ...p, query: 'view=open&ref=%5B%22baseline%22%2C%22h%22%2C%22..%2Fx%22%5D' }), undefined);
  });
});

void describe('baseline documents', () => {
  void it('an unchanged machine diffs clean: both sides are the same text', () => {
    const d = diffDocuments(
      { snapshot: h200KnownGood, title: 'baseline "a"' },
      { snapshot: cloneSnapshot(h200KnownGood), title: 'now' },
    );
    assert.equal(d.drift.unchanged, true);
    assert.equal(d.left, d.right);
    assert.match(d.headline, /^No drift/);
  });

  void it('volatile values alone still diff clean', () => {
    const now = cloneSnapshot(h200KnownGood);
    now.host.memory!.availableBytes = 1;
    now.capturedAt = '2030-01-01T00:00:00Z';
    const d = diffDocuments({ snapshot: h200KnownGood, title: 'b' }, { snapshot: now, title: 'now' });
    assert.equal(d.left, d.right);
  });

  void it('a drifted machine: the summary heads both sides and names torch first', () => {
    const d = diffDocuments(
      { snapshot: h200KnownGood, title: 'baseline "known good"' },
      { snapshot: h200Now, title: 'now' },
    );
    assert.equal(d.drift.unchanged, false);
    assert.notEqual(d.left, d.right);
    const block = (t: string) => t.slice(0, t.indexOf('\n\n'));
    assert.equal(block(d.left), block(d.right));
    const lines = block(d.right).split('\n');
    assert.ok(
      lines.every((l) => l.startsWith('#')),
      'summary block is comment lines only',
    );
    assert.match(lines[1]!, /^# {3}torch: 2\.10\.0\+cu130 → 2\.11\.0\+cu130/);
    assert.match(d.right, /^packages\.torch: 2\.11\.0\+cu130$/m);
    assert.match(d.headline, /differences.*— torch, triton/);
    assert.match(d.summaryMarkdown, /\*\*torch\*\*/);
    assert.doesNotMatch(d.right + d.summaryMarkdown, /host\.memory\.available/);
  });

  void it('a single snapshot shows volatile values apart, commented', () => {
    const text = snapshotDocument({ snapshot: h200KnownGood, title: 'baseline "x"' }, ['host gpu-box']);
    assert.match(text, /^# baseline "x"\n# host gpu-box\n\n\[snapshot\]/);
    const vol = text.slice(text.indexOf('# Volatile values'));
    assert.match(vol, /^# host\.memory\.available: /m);
    assert.doesNotMatch(text.slice(0, text.indexOf('# Volatile values')), /host\.memory\.available/);
  });

  void it('labels and ages', () => {
    assert.equal(defaultLabel(new Date(2026, 10, 29, 12, 0)), 'baseline 2026-11-29 12:00');
    const now = Date.parse('2026-11-29T12:00:00Z');
    assert.equal(timeAgo('2026-11-29T11:59:30Z', now), 'just now');
    assert.equal(timeAgo('2026-11-29T09:00:00Z', now), '3 h ago');
    assert.equal(timeAgo('2026-11-28T11:00:00Z', now), '1 day ago');
    assert.equal(timeAgo('2026-11-29T13:00:00Z', now), 'in the future');
  });
});

void describe('baselines settings', () => {
  void it('defaults, values and problems named by key', () => {
    const s = parseBaselineSettings(() => undefined);
    assert.deepEqual(s, { copyToRemote: false, scriptGlobs: [], extraVariables: [], cacheDirs: [], problems: [] });
    const vals: Record<string, unknown> = {
      'baselines.copyToRemote': true,
      'env.scriptGlobs': ['/workspace/*.py'],
      'env.extraVariables': 'MY_VAR',
      'env.cacheDirs': ['~/.cache/x', ''],
    };
    const t = parseBaselineSettings((k) => vals[k]);
    assert.equal(t.copyToRemote, true);
    assert.deepEqual(t.scriptGlobs, ['/workspace/*.py']);
    assert.deepEqual(t.extraVariables, []);
    assert.deepEqual(t.cacheDirs, []);
    assert.equal(t.problems.length, 2);
    assert.match(t.problems[0]!, /^knownGood\.env\.extraVariables/);
  });
});

void describe('remote writes and cache archives (argv)', () => {
  void it('paths travel as positional parameters, never inside the script', () => {
    const file = "/data/it's $(rm -rf ~)/.known-good/env-1.json";
    const argv = remoteWriteArgv(file, 12);
    assert.deepEqual(argv.slice(0, 4), ['sh', '-c', REMOTE_WRITE_SCRIPT, 'sh']);
    assert.deepEqual(argv.slice(4), ["/data/it's $(rm -rf ~)/.known-good", file, '12']);
    assert.doesNotMatch(REMOTE_WRITE_SCRIPT, /rm -rf ~/);
    assert.throws(() => remoteWriteArgv('relative/x.json', 1));
    assert.throws(() => remoteWriteArgv('~other/x.json', 1));
    // `~/…` travels as given: the script resolves it against the host's $HOME.
    assert.deepEqual(remoteWriteArgv('~/.known-good/baselines/e.json', 3).slice(4), [
      '~/.known-good/baselines',
      '~/.known-good/baselines/e.json',
      '3',
    ]);
  });

  void it('tar argv: short options, -C /, members after --', () => {
    assert.deepEqual(tarCreateArgv('/r/.known-good/.c.partial', ['tmp/-odd'], false), [
      'tar',
      '-c',
      '-z',
      '-f',
      '/r/.known-good/.c.partial',
      '-C',
      '/',
      '--',
      'tmp/-odd',
    ]);
    const gnu = tarExtractArgv('/r/a.tar.gz', ['tmp/x'], true);
    assert.equal(gnu[gnu.length - 2], '--');
    assert.ok(gnu.includes('--checkpoint=100'));
    assert.equal(checkpointBytes('tar: kg-checkpoint 100\ntar: kg-checkpoint 200\n'), 200 * 10240);
    assert.equal(checkpointBytes('nothing'), undefined);
  });

  void it('members that could escape / or read as options are refused', () => {
    for (const bad of ['', '.', '/etc', '-rf', 'a/../../etc', '..']) assert.equal(safeMember(bad), false, bad);
    for (const ok of ['tmp/torchinductor_root', 'root/.triton/cache', 'a/b-c']) assert.equal(safeMember(ok), true, ok);
  });

  const plan = (over: Partial<CachePlan> = {}): CachePlan =>
    cachePlanSchema.parse({
      schema: 1,
      root: '/ckpt',
      rootExists: true,
      dest: { dir: '/ckpt/.known-good', exists: false, freeBytes: 10_000, freeAt: '/ckpt' },
      caches: [
        { name: 'inductor', path: '/tmp/ti', member: 'tmp/ti', exists: true, files: 3, bytes: 4000 },
        { name: 'triton', path: '/root/.triton/cache', member: 'root/.triton/cache', exists: false },
        { name: 'custom1', path: '/x', member: 'x', exists: true, files: 0, bytes: 0 },
      ],
      archives: [
        {
          name: 'cache-1.tar.gz',
          path: '/ckpt/.known-good/cache-1.tar.gz',
          bytes: 10,
          mtime: 1,
          manifestPath: 'm',
          manifest: null,
          manifestError: 'no manifest',
        },
        {
          name: 'cache-2.tar.gz',
          path: '/ckpt/.known-good/cache-2.tar.gz',
          bytes: 10,
          mtime: 2,
          manifestPath: 'm2',
          manifest: {
            schema: 1,
            archive: 'cache-2.tar.gz',
            createdAt: 'x',
            caches: [{ name: 'i', path: '/etc', member: '../etc' }],
          },
        },
      ],
      tar: { path: '/usr/bin/tar', gnu: true, version: 'tar (GNU tar) 1.34' },
      ...over,
    });

  void it('plans a backup of the caches that have files, and warns on low space', () => {
    const b = planBackup(plan(), new Date('2026-11-29T12:00:00Z'));
    assert.deepEqual(
      b.caches.map((c) => c.name),
      ['inductor'],
    );
    assert.equal(b.archive, '/ckpt/.known-good/cache-2026-11-29T12-00-00Z.tar.gz');
    assert.equal(b.manifestPath, '/ckpt/.known-good/cache-2026-11-29T12-00-00Z.json');
    assert.equal(b.lowSpace, undefined);
    const low = planBackup(
      plan({ dest: { dir: '/ckpt/.known-good', exists: true, freeBytes: 100, freeAt: '/ckpt', error: null } }),
      new Date(),
    );
    assert.match(low.lowSpace!, /100 B free/);
    assert.throws(() => planBackup(plan({ caches: [] }), new Date()), /no compile cache/);
  });

  void it('lists archives newest first, each unusable one with its reason', () => {
    const a = archivesOf(plan());
    assert.deepEqual(
      a.map((x) => [x.name, x.problem]),
      [
        ['cache-2.tar.gz', 'manifest names an unsafe path "../etc"'],
        ['cache-1.tar.gz', 'no manifest'],
      ],
    );
  });
});
