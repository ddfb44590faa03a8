import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { parsePythonJson, asciiJson } from '../../src/core/json';
import { extractFramed } from '../../src/core/probes/runner';
import { parseHostsSetting, parseSettings } from '../../src/core/settings';
import { parseSshConfig } from '../../src/core/sshConfig';
import { parseUserHostPort, resolveEndpoint, resolveHosts } from '../../src/core/hosts';
import { appendKnownHost, checkHostKey, fingerprint, parseKnownHosts, patternsMatch } from '../../src/core/knownHosts';
import { splitWords, containerPrefix } from '../../src/core/transport/container';
import { collect, whyFailed } from '../../src/core/transport/collect';
import { execCommand } from '../../src/cli/commands/basic';
import { parseCommandLine, parseContainer } from '../../src/cli/options';

test('settings: a bad host entry gives one message naming the setting and field; the others load', () => {
  const r = parseHostsSetting([
    { name: 'gpu-box', host: 'gpu.example', port: 2222, container: { kind: 'pct', id: '200' } },
    { name: 'broken', host: 'x', port: 'twenty-two' },
    { name: 'noid', host: 'y', container: { kind: 'docker' } },
    { host: 'nameless' },
    { name: 'gpu-box', host: 'dup' },
    { name: 'ok2', host: 'z', roots: ['/data/ckpt'] },
  ]);
  assert.deepEqual(
    r.hosts.map((h) => h.name),
    ['gpu-box', 'ok2'],
  );
  assert.equal(r.problems.length, 4);
  assert.match(r.problems[0]!, /^knownGood\.hosts\[1\] \("broken"\): port: /);
  assert.match(r.problems[1]!, /knownGood\.hosts\[2\] \("noid"\): container\.id: kind "docker" needs an id/);
  assert.match(r.problems[2]!, /knownGood\.hosts\[3\]: name: /);
  assert.match(r.problems[3]!, /already called "gpu-box"/);
  assert.deepEqual(parseHostsSetting({}).problems, ['knownGood.hosts: expected an array of host entries']);
});

test('settings: numbers and defaults', () => {
  const values: Record<string, unknown> = { connectTimeoutSeconds: -1, commandTimeoutSeconds: 5, defaultRoots: ['/a'] };
  const s = parseSettings((k) => values[k]);
  assert.equal(s.connectTimeoutMs, 15000);
  assert.equal(s.commandTimeoutMs, 5000);
  assert.deepEqual(s.defaultRoots, ['/a']);
  assert.match(s.problems[0]!, /knownGood\.connectTimeoutSeconds/);
});

test('settings: one parse for every knownGood.* key, bad values reported by key', () => {
  const d = parseSettings(() => undefined);
  assert.deepEqual(d.defaultRoots, ['/workspace/checkpoints']);
  assert.equal(d.newestFirst, true);
  assert.equal(d.maxEntries, 5000);
  assert.equal(d.maxOpenBytes, 4 * 1024 * 1024);
  assert.equal(d.autoRefreshSeconds, 0);
  assert.equal(d.allowTorchLoad, false);
  assert.equal(d.localRoots, undefined);
  assert.equal(d.benchmark.command, undefined);
  assert.equal(d.benchmark.throughputKey, 'tok_per_s');
  assert.deepEqual(d.baselines, { copyToRemote: false, scriptGlobs: [], extraVariables: [], cacheDirs: [] });
  assert.deepEqual(d.problems, []);
  const values: Record<string, unknown> = {
    sortSteps: 'oldestFirst',
    maxEntries: 'many',
    autoRefreshSeconds: 30,
    localRoots: ['/x'],
    localPython: ' /opt/py/bin/python ',
    'benchmark.command': '  python train.py ',
    'env.extraVariables': 'MY_VAR',
  };
  const s = parseSettings((k) => values[k]);
  assert.equal(s.newestFirst, false);
  assert.equal(s.maxEntries, 5000);
  assert.equal(s.autoRefreshSeconds, 30);
  assert.deepEqual(s.localRoots, ['/x']);
  assert.equal(s.localPython, '/opt/py/bin/python');
  assert.equal(s.benchmark.command, 'python train.py');
  assert.equal(s.problems.length, 2);
  assert.match(s.problems[0]!, /^knownGood\.maxEntries/);
  assert.match(s.problems[1]!, /^knownGood\.env\.extraVariables/);
});

test('ssh config: Host entries without wildcards, first match wins, ProxyJump resolved', () => {
  const cfg = parseSshConfig(
    [
      'Host gpu',
      '  HostName 10.1.2.3',
      '  User trainer',
      '  Port 2200',
      '  IdentityFile ~/.ssh/gpu_key',
      '  ProxyJump bastion',
      'Host bastion',
      '  HostName bastion.example',
      '  User jump',
      'Host *.internal !evil.internal',
      '  User nobody',
      'Host *',
      '  User fallback',
      '  IdentityFile ~/.ssh/id_default',
    ].join('\n'),
  );
  assert.deepEqual(
    cfg.hosts.map((h) => h.alias),
    ['gpu', 'bastion'],
  );
  const gpu = resolveEndpoint('gpu', cfg);
  assert.equal(gpu.host, '10.1.2.3');
  assert.equal(gpu.user, 'trainer');
  assert.equal(gpu.port, 2200);
  assert.ok(gpu.identityFiles[0]!.endsWith('/.ssh/gpu_key'));
  assert.equal(gpu.proxyJump?.host, 'bastion.example');
  assert.equal(gpu.proxyJump?.user, 'jump');
  const explicit = resolveEndpoint('me@gpu:2300', cfg);
  assert.equal(explicit.user, 'me');
  assert.equal(explicit.port, 2300);
  assert.equal(resolveEndpoint('other', cfg).user, 'fallback');
});

test('hosts: This machine first, settings hosts, then ssh-config hosts not already named', () => {
  const cfg = parseSshConfig('Host gpu\n  HostName 10.1.2.3\nHost spare\n  HostName 10.9.9.9\n');
  const settings = parseSettings((k) =>
    k === 'hosts' ? [{ name: 'Training box', host: 'gpu', container: { kind: 'pct', id: '200' } }] : undefined,
  );
  const hosts = resolveHosts(settings, cfg);
  assert.deepEqual(
    hosts.map((h) => [h.id, h.name]),
    [
      ['local', 'This machine'],
      ['settings:Training box', 'Training box'],
      ['ssh-config:spare', 'spare'],
    ],
  );
  assert.equal(hosts[1]!.ssh?.host, '10.1.2.3');
  assert.deepEqual(hosts[1]!.roots, ['/workspace/checkpoints']);
});

test('user@host[:port] parsing', () => {
  assert.deepEqual(parseUserHostPort('root@10.0.0.1:2222'), { user: 'root', host: '10.0.0.1', port: 2222 });
  assert.deepEqual(parseUserHostPort('box'), { host: 'box' });
  assert.deepEqual(parseUserHostPort('me@[::1]:22'), { user: 'me', host: '::1', port: 22 });
  assert.equal(parseUserHostPort('a b'), undefined);
  assert.equal(parseUserHostPort('h:99999'), undefined);
});

test('known_hosts: plain, [host]:port, hashed, changed and unknown keys (keys made by ssh-keygen)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kg-kh-'));
  const key = (n: string) => {
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, n)]);
    return readFileSync(join(dir, `${n}.pub`), 'utf8').split(' ');
  };
  const [type, b64] = key('a');
  const [, otherB64] = key('b');
  const blob = Buffer.from(b64!, 'base64');
  const other = Buffer.from(otherB64!, 'base64');
  const file = join(dir, 'known_hosts');
  writeFileSync(file, `gpu.example,10.0.0.5 ${type} ${b64}\n[127.0.0.1]:2222 ${type} ${otherB64}\n# comment\n`);
  execFileSync('ssh-keygen', ['-H', '-f', file], { stdio: 'ignore' }); // hash every name, as HashKnownHosts does
  const entries = parseKnownHosts(readFileSync(file, 'utf8'));
  assert.ok(
    entries.every((e) => e.patterns.startsWith('|1|')),
    'ssh-keygen -H hashed the names',
  );
  assert.deepEqual(checkHostKey(entries, ['gpu.example'], blob), { status: 'known' });
  assert.deepEqual(checkHostKey(entries, ['10.0.0.5'], blob), { status: 'known' });
  const changed = checkHostKey(entries, ['[127.0.0.1]:2222'], blob);
  assert.equal(changed.status, 'changed');
  assert.deepEqual(changed.status === 'changed' && changed.expected, [fingerprint(other)]);
  assert.equal(checkHostKey(entries, ['unknown.example'], blob).status, 'unknown');
  // ssh-keygen's own fingerprint matches ours
  const sk = execFileSync('ssh-keygen', ['-lf', join(dir, 'a.pub')], { encoding: 'utf8' }).split(' ')[1];
  assert.equal(fingerprint(blob), sk);
  assert.ok(patternsMatch('*.example,!bad.example', 'ok.example'));
  assert.ok(!patternsMatch('*.example,!bad.example', 'bad.example'));
  // accept-new appends a line OpenSSH reads back
  await appendKnownHost(file, 'new.example', 2200, blob);
  const found = execFileSync('ssh-keygen', ['-F', '[new.example]:2200', '-f', file], { encoding: 'utf8' });
  assert.match(found, /\[new\.example\]:2200 ssh-ed25519/);
});

test('framing: the document between markers is found among banners', () => {
  const out =
    'Welcome to Ubuntu\nconda activated\n@@KNOWN-GOOD-BEGIN abc@@\n{"ok":true}\n@@KNOWN-GOOD-END abc@@\nbye\n';
  assert.equal(extractFramed(out, 'abc'), '{"ok":true}');
  assert.equal(extractFramed(out, 'other'), undefined);
  assert.equal(extractFramed('@@KNOWN-GOOD-BEGIN abc@@\n{"ok"', 'abc'), undefined);
});

test('Python JSON: NaN and Infinity parsed on purpose, not inside strings', () => {
  const v = parsePythonJson('{"a": NaN, "b": [Infinity, -Infinity, 1.5], "s": "NaN Infinity"}') as Record<
    string,
    unknown
  >;
  assert.ok(Number.isNaN(v['a']));
  assert.deepEqual(v['b'], [Infinity, -Infinity, 1.5]);
  assert.equal(v['s'], 'NaN Infinity');
  assert.throws(() => parsePythonJson('{"a": nope}'));
  assert.equal(asciiJson({ s: 'é🚀' }), '{"s":"\\u00e9\\ud83d\\ude80"}');
  assert.deepEqual(JSON.parse(asciiJson({ s: 'é🚀' })), { s: 'é🚀' });
});

test('container prefixes and custom command words', () => {
  assert.deepEqual(containerPrefix({ kind: 'pct', id: '200' }, false), ['pct', 'exec', '200', '--']);
  assert.deepEqual(containerPrefix({ kind: 'docker', id: 'trainer' }, false), ['docker', 'exec', '-i', 'trainer']);
  assert.deepEqual(containerPrefix({ kind: 'docker', id: 'trainer' }, true), ['docker', 'exec', '-it', 'trainer']);
  assert.deepEqual(containerPrefix({ kind: 'kubectl', id: 'pod-1' }, false), ['kubectl', 'exec', '-i', 'pod-1', '--']);
  assert.deepEqual(splitWords(`lxc-attach -n "my ct" --`), ['lxc-attach', '-n', 'my ct', '--']);
  assert.throws(() => splitWords(`bad "quote`), /unterminated/);
});

test('CLI argument parsing', () => {
  const r = parseCommandLine(execCommand, [
    'gpu',
    '--container',
    'pct:200',
    '--identity',
    '/k',
    '--',
    'echo',
    '--container',
    'x',
  ]);
  assert.deepEqual(r.positional, ['gpu']);
  assert.deepEqual(r.rest, ['echo', '--container', 'x']);
  assert.deepEqual(r.options.container, { kind: 'pct', id: '200' });
  assert.equal(r.options.identity, '/k');
  assert.deepEqual(parseContainer('custom:lxc-attach -n 1 --'), { kind: 'custom', command: 'lxc-attach -n 1 --' });
  assert.throws(() => parseContainer('podman:x'), /expected pct/);
});

test('whyFailed: last stderr lines with how it ended; exit code, signal or no status alone', () => {
  const base = { stdout: '' };
  assert.equal(whyFailed({ ...base, stderr: 'a\n\nb\nc\nd\n', exitCode: 2 }), 'b | c | d (exit code 2)');
  assert.equal(whyFailed({ ...base, stderr: 'one\ntwo\n', exitCode: 1 }, 1), 'two (exit code 1)');
  assert.equal(whyFailed({ ...base, stderr: '  \n', exitCode: 1 }), 'exit code 1');
  assert.equal(whyFailed({ ...base, stderr: '', exitCode: null, exitSignal: 'TERM' }), 'killed by SIGTERM');
  assert.equal(whyFailed({ ...base, stderr: '', exitCode: null }), 'ended without an exit status');
});

test('collect keeps output that passes through a wrapping stream after the exit is seen', async () => {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const stdin = new PassThrough();
  let exit!: (v: { exitCode: number | null }) => void;
  const handle = {
    stdin,
    stdout,
    stderr,
    exited: new Promise<{ exitCode: number | null }>((r) => (exit = r)),
    resize: () => undefined,
    kill: () => undefined,
  };
  const res = collect(handle, {}, () => 'x');
  stdout.end('out');
  exit({ exitCode: 1 });
  // The last stderr chunk arrives only after the exit was reported (as through the PID-line filter).
  await new Promise((r) => setTimeout(r, 50));
  stderr.end('tail: cannot open x\n');
  const r = await res;
  assert.equal(r.stdout, 'out');
  assert.equal(r.stderr, 'tail: cannot open x\n');
  assert.equal(whyFailed(r), 'tail: cannot open x (exit code 1)');
});
