import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { customBenchmarkOf } from '../../src/core/bench/customBenchmark';
import { KnownGoodError } from '../../src/core/errors';
import { slurmSettingsSchema } from '../../src/core/fleet/settings';
import { resolveHosts } from '../../src/core/hosts';
import {
  CODE_RUNNING_HOST_FIELDS,
  CODE_RUNNING_SETTINGS,
  DATA_HOST_FIELDS,
  DATA_SETTINGS,
  codeRunningSettingOf,
  hostSettingsSchema,
  parseSettings,
  restrictWorkspaceHosts,
} from '../../src/core/settings';
import { parseSshConfig } from '../../src/core/sshConfig';

/*
 * Workspace trust: what a folder's .vscode/settings.json may make Known Good run. The tables in core/settings.ts are
 * the one list; package.json's restrictedConfigurations and scopes must follow them, and every setting and every
 * host field must be in one of them, so a new one cannot arrive without the decision.
 */

interface Property {
  scope?: string;
  items?: { properties?: Record<string, { properties?: Record<string, unknown> }> };
}
interface Manifest {
  capabilities?: {
    untrustedWorkspaces?: { supported?: unknown; description?: unknown; restrictedConfigurations?: unknown };
    virtualWorkspaces?: boolean | { supported?: unknown; description?: unknown };
  };
  contributes: { configuration: { properties: Record<string, Property> } };
}
const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as Manifest;
const properties = manifest.contributes.configuration.properties;
const codeKeys = CODE_RUNNING_SETTINGS.map((s) => s.key);

void test('every knownGood.* setting of package.json is either code-running or data, once', () => {
  const contributed = Object.keys(properties).sort();
  const classified = [...codeKeys, ...DATA_SETTINGS];
  assert.equal(new Set(classified).size, classified.length, 'a setting is in both tables, or twice in one');
  const missing = contributed.filter((k) => !classified.includes(k));
  assert.deepEqual(
    missing,
    [],
    `classify these in src/core/settings.ts (CODE_RUNNING_SETTINGS or DATA_SETTINGS): ${missing.join(', ')}`,
  );
  assert.deepEqual([...classified].sort(), contributed, 'a classified setting is not in package.json');
});

void test('restrictedConfigurations lists exactly the code-running settings, each with the scope the table gives', () => {
  const trust = manifest.capabilities?.untrustedWorkspaces;
  assert.equal(trust?.supported, 'limited');
  assert.equal(typeof trust.description, 'string');
  assert.deepEqual([...(trust.restrictedConfigurations as string[])].sort(), [...codeKeys].sort());
  for (const s of CODE_RUNNING_SETTINGS) assert.equal(properties[s.key]?.scope ?? 'window', s.scope, s.key);
  // a data setting needs no scope of its own; if one is given, it must not be narrower than a workspace's reach
  for (const key of DATA_SETTINGS) assert.ok(!['application', 'machine'].includes(properties[key]?.scope ?? ''), key);
});

void test('virtual workspaces are declared, with the reason', () => {
  const v = manifest.capabilities?.virtualWorkspaces;
  assert.ok(typeof v === 'object' && v.supported === false && typeof v.description === 'string', JSON.stringify(v));
});

void test('every field of a host entry (schema and package.json) is either code-running or data', () => {
  const schemaFields = [
    ...Object.keys(hostSettingsSchema.shape).filter((k) => k !== 'slurm'),
    ...Object.keys(slurmSettingsSchema.shape).map((k) => `slurm.${k}`),
  ];
  const items = properties['knownGood.hosts']?.items?.properties ?? {};
  const manifestFields = [
    ...Object.keys(items).filter((k) => k !== 'slurm'),
    ...Object.keys(items['slurm']?.properties ?? {}).map((k) => `slurm.${k}`),
  ];
  const classified: string[] = [...CODE_RUNNING_HOST_FIELDS, ...DATA_HOST_FIELDS];
  assert.equal(new Set(classified).size, classified.length);
  assert.deepEqual([...schemaFields].sort(), [...classified].sort());
  assert.deepEqual([...manifestFields].sort(), [...classified].sort());
});

/** A host entry with every code-running field set to a value that names it, and every data field set. */
function hostileEntry(name: string, host: string): Record<string, unknown> {
  return {
    name,
    host,
    port: 2222,
    user: 'team',
    identityFile: '/keys/team',
    proxyJump: 'jump.example',
    roots: ['/data/ckpt'],
    python: 'EVIL-python',
    container: { kind: 'custom', command: 'EVIL-container' },
    slurm: { binDir: 'EVIL-bin', conf: 'EVIL-conf', allowNodesOutsideJobs: true, partition: 'gpu', concurrency: 2 },
  };
}

void test('Restricted Mode: a workspace host entry keeps its data fields and loses every code-running field', () => {
  const { hosts, restricted } = restrictWorkspaceHosts([hostileEntry('gpu', 'gpu.example')], undefined);
  const [entry] = hosts as Record<string, unknown>[];
  assert.ok(entry);
  assert.doesNotMatch(JSON.stringify(entry), /EVIL|allowNodesOutsideJobs/);
  assert.deepEqual(restricted, [{ name: 'gpu', ignored: [...CODE_RUNNING_HOST_FIELDS] }]);
  assert.deepEqual(entry, {
    name: 'gpu',
    host: 'gpu.example',
    port: 2222,
    user: 'team',
    identityFile: '/keys/team',
    proxyJump: 'jump.example',
    roots: ['/data/ckpt'],
    slurm: { partition: 'gpu', concurrency: 2 },
  });
});

void test("Restricted Mode: the user's own entry of the same name and host gives the code-running fields", () => {
  const mine = { name: 'gpu', host: 'gpu.example', python: '/opt/venv/bin/python', slurm: { conf: 'EVIL-conf' } };
  const elsewhere = { name: 'other', host: 'other.example', python: '/opt/mine' };
  const sameNameOtherHost = { ...hostileEntry('other', 'attacker.example') };
  const { hosts, restricted } = restrictWorkspaceHosts(
    [hostileEntry('gpu', 'gpu.example'), sameNameOtherHost],
    [mine, elsewhere],
  );
  const [gpu, other] = hosts as Record<string, unknown>[];
  assert.equal(gpu?.['python'], '/opt/venv/bin/python');
  assert.equal(gpu?.['container'], undefined);
  // the same value as the user's own is the user's choice: kept, and not reported as ignored
  assert.deepEqual(gpu?.['slurm'], { conf: 'EVIL-conf', partition: 'gpu', concurrency: 2 });
  assert.deepEqual(restricted[0]?.ignored, ['python', 'container', 'slurm.binDir', 'slurm.allowNodesOutsideJobs']);
  // "other" in the user's settings is another machine: nothing of it is lent to the workspace's entry
  assert.equal(other?.['python'], undefined);
});

void test('parseSettings: only an untrusted workspace that provides the host list loses the fields', () => {
  const values: Record<string, unknown> = { hosts: [hostileEntry('gpu', 'gpu.example')] };
  const get = (k: string) => values[k];
  const ssh = parseSshConfig('');
  const specOf = (trust?: Parameters<typeof parseSettings>[1]) => {
    const s = parseSettings(get, trust);
    return { s, spec: resolveHosts(s, ssh).find((h) => h.name === 'gpu')! };
  };

  const untrusted = specOf({ trusted: false, hostsFromWorkspace: true, userHosts: undefined });
  assert.equal(untrusted.s.restrictedMode, true);
  assert.equal(untrusted.spec.python, 'python3');
  assert.equal(untrusted.spec.container, undefined);
  assert.equal(untrusted.spec.slurm?.binDir, undefined);
  assert.equal(untrusted.spec.slurm?.conf, undefined);
  assert.equal(untrusted.spec.slurm?.allowNodesOutsideJobs, false);
  assert.deepEqual(untrusted.spec.restricted, [...CODE_RUNNING_HOST_FIELDS]);
  assert.deepEqual(untrusted.spec.roots, ['/data/ckpt']);
  assert.equal(untrusted.spec.ssh?.port, 2222);
  assert.deepEqual(untrusted.s.problems, []);

  for (const trust of [
    undefined,
    { trusted: true, hostsFromWorkspace: true, userHosts: undefined },
    // untrusted, but the list is the user's own
    { trusted: false, hostsFromWorkspace: false, userHosts: values['hosts'] },
  ]) {
    const { spec } = specOf(trust);
    assert.equal(spec.python, 'EVIL-python', JSON.stringify(trust));
    assert.deepEqual(spec.container, { kind: 'custom', command: 'EVIL-container' });
    assert.equal(spec.slurm?.binDir, 'EVIL-bin');
    assert.equal(spec.restricted, undefined);
  }
});

void test('a missing benchmark command names its code-running setting (Restricted Mode offers trust for it)', () => {
  const e = (() => {
    try {
      customBenchmarkOf({ command: undefined, throughputRegex: 'x', throughputJsonl: undefined, throughputKey: 'k' });
    } catch (err) {
      return err;
    }
    return undefined;
  })();
  assert.ok(e instanceof KnownGoodError && e.code === 'settings');
  assert.equal(codeRunningSettingOf(e.detail), 'knownGood.benchmark.command');
  assert.equal(codeRunningSettingOf({ setting: 'knownGood.maxEntries' }), undefined);
  assert.equal(codeRunningSettingOf(undefined), undefined);
});
