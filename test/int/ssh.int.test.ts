import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isKnownGoodError, KnownGoodError } from '../../src/core/errors';
import { defineProbe } from '../../src/core/probes/probe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { ContainerTransport } from '../../src/core/transport/container';
import { SshPool } from '../../src/core/transport/ssh';
import { z } from 'zod';
import { startSshd, type TestSshd } from '../support/sshd';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { processAlive, unlessHung, waitUntil } from '../support/process';

const NASTY = [
  'with space',
  "it's",
  '"dq"',
  '$(touch /tmp/kg-should-not-exist)',
  '`id`',
  'new\nline',
  'ünï 🚀',
  '-n',
  '',
  '*',
];

const remoteProcessAlive = processAlive;

/** Is process `pid` (on this machine, where the test sshd runs it) alive, a zombie not counted? */
function pidAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Does the ssh-agent at `sock` answer (with or without identities)? */
function agentAnswers(sock: string): boolean {
  const r = spawnSync('ssh-add', ['-l'], { env: { ...process.env, SSH_AUTH_SOCK: sock }, stdio: 'ignore' });
  return r.status === 0 || r.status === 1; // 1 = agent up, no identities
}

describe('SSH transport against a real OpenSSH sshd', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  before(async () => {
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
  });

  test('key login, argv with nasty strings arrives intact, stdin is piped', async () => {
    const t = pool.transport(endpointOf(sshd), 'test-sshd');
    const r = await t.exec(['printf', '%s\\0', ...NASTY]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.deepEqual(r.stdout.split('\0').slice(0, -1), NASTY);
    const piped = await t.exec(['sh', '-c', 'cat; echo " <- $#"', 'sh'], { stdin: 'hello\nfrom stdin ünï' });
    assert.equal(piped.stdout, 'hello\nfrom stdin ünï <- 0\n');
    const code = await t.exec(['sh', '-c', 'echo err >&2; exit 7']);
    assert.equal(code.exitCode, 7);
    assert.equal(code.stderr, 'err\n');
  });

  test('20 operations use one TCP connection (counted by sshd)', async () => {
    const local = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    // Logins, not connections: sshd logs a connection when its own child gets to it, so the start-up check's
    // connection (never logged in) may be logged at any time; a login is logged before it serves any operation.
    const logins = () => new Set(sshd.log().match(/Accepted publickey for \S+ from 127\.0\.0\.1 port \d+/g) ?? []);
    const before = logins();
    const t = local.transport(endpointOf(sshd), 'test-sshd');
    const runner = new ProbeRunner(t, { python: 'python3', timeoutMs: 30000 });
    const ping = defineProbe('find_pythons', z.unknown(), () => ['/nonexistent'])();
    for (let i = 0; i < 10; i++) await t.exec(['true']);
    for (let i = 0; i < 10; i++) await runner.run(ping);
    assert.equal([...logins()].filter((l) => !before.has(l)).length, 1, sshd.log().slice(-2000));
    runner.dispose();
    local.dispose();
  });

  test('30 parallel operations succeed through the channel queue', async () => {
    const t = pool.transport(endpointOf(sshd), 'test-sshd');
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => t.exec(['echo', `op ${i}`])));
    assert.deepEqual(
      results.map((r) => r.stdout),
      Array.from({ length: 30 }, (_, i) => `op ${i}\n`),
    );
  });

  test('a timeout ends the remote process', async () => {
    const t = pool.transport(endpointOf(sshd), 'test-sshd');
    // A sleep of more than an hour: an exec that waited for it instead of stopping it hangs (the guard says so).
    const marker = `sleep 4100.${process.pid}1`;
    await assert.rejects(
      unlessHung(t.exec(['sleep', marker.split(' ')[1]!], { timeoutMs: 1500 }), 'the timed-out exec'),
      (e: unknown) => isKnownGoodError(e, 'timeout') && /timed out after 1\.5 s/.test(e.message),
    );
    assert.ok(await waitUntil(() => !remoteProcessAlive(marker), 30_000), 'remote sleep still running after timeout');
  });

  test('cancellation ends the remote process', async () => {
    const t = pool.transport(endpointOf(sshd), 'test-sshd');
    const marker = `sleep 4200.${process.pid}2`;
    const ac = new AbortController();
    const p = t.exec(['sleep', marker.split(' ')[1]!], { signal: ac.signal });
    assert.ok(await waitUntil(() => remoteProcessAlive(marker), 30_000), 'remote sleep never started');
    ac.abort();
    // More than an hour of sleep: waited for instead of stopped, the exec would hang.
    await assert.rejects(unlessHung(p, 'the cancelled exec'), (e: unknown) => isKnownGoodError(e, 'cancelled'));
    assert.ok(await waitUntil(() => !remoteProcessAlive(marker), 30_000), 'remote sleep still running after cancel');
  });

  test('encrypted key: the passphrase is asked through the callback', async () => {
    const { asked, prompts } = recordingPrompts({ passphrase: sshd.passphrase });
    const p = new SshPool(sshOptions(sshd, prompts));
    const r = await p.transport(endpointOf(sshd, sshd.encryptedIdentityFile), 'enc').exec(['echo', 'ok']);
    assert.equal(r.stdout, 'ok\n');
    assert.deepEqual(asked, [`passphrase ${sshd.encryptedIdentityFile} 1`]);
    p.dispose();
  });

  test('key not given its passphrase: auth-failed naming the key and what to do', async () => {
    const { prompts } = recordingPrompts({});
    const p = new SshPool(sshOptions(sshd, prompts));
    await assert.rejects(
      p.transport(endpointOf(sshd, sshd.encryptedIdentityFile), 'enc').exec(['true']),
      (e: unknown) => {
        assert.ok(isKnownGoodError(e, 'auth-failed'), String(e));
        assert.match(e.message, new RegExp(`^no key offered to ${sshd.user}@127\\.0\\.0\\.1:${sshd.port}: `));
        assert.match(
          e.message,
          /is encrypted and its passphrase was not given — connect again and give its passphrase/,
        );
        return true;
      },
    );
    p.dispose();
  });

  test('no key at all (an empty ssh-agent, no key files): "no key offered", the agent named, Edit Host…', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-agent-empty-'));
    const sock = join(dir, 'agent.sock');
    const agent = spawn('ssh-agent', ['-D', '-a', sock], { stdio: 'ignore' });
    try {
      assert.ok(await waitUntil(() => agentAnswers(sock), 30_000), 'ssh-agent never answered');
      const missing = join(dir, 'id_ed25519');
      const p = new SshPool(
        sshOptions(sshd, recordingPrompts().prompts, { agent: sock, defaultIdentityFiles: [missing] }),
      );
      await assert.rejects(
        p.transport({ ...endpointOf(sshd), identityFiles: [] }, 'nokey').exec(['true']),
        (e: unknown) => {
          assert.ok(isKnownGoodError(e, 'auth-failed'), String(e));
          assert.equal(
            e.message,
            `no key offered to ${sshd.user}@127.0.0.1:${sshd.port}: the agent has no identities and ${dir} has no ` +
              'id_ed25519 — Edit Host… to choose a key. Tried: ssh-agent (no identities).',
          );
          return true;
        },
      );
      p.dispose();
    } finally {
      agent.kill();
    }
  });

  test('wrong key (one the server does not know): refused, named, with what to do', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-wrong-key-'));
    const other = join(dir, 'id_other');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', other]);
    const p = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    await assert.rejects(p.transport(endpointOf(sshd, other), 'wrong').exec(['true']), (e: unknown) => {
      assert.ok(isKnownGoodError(e, 'auth-failed'), String(e));
      assert.match(
        e.message,
        new RegExp(
          `^${sshd.user}@127\\.0\\.0\\.1:${sshd.port} refused the key offered \\(${other}\\): the host does not know it`,
        ),
      );
      assert.match(e.message, /Edit Host… to choose another key or user.*Tried: key \S+id_other \(refused\)\.$/);
      return true;
    });
    p.dispose();
  });

  test('ssh-agent login', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-agent-'));
    const sock = join(dir, 'agent.sock');
    const agent = spawn('ssh-agent', ['-D', '-a', sock], { stdio: 'ignore' });
    try {
      const up = await waitUntil(() => {
        try {
          execFileSync('ssh-add', ['-l'], { env: { ...process.env, SSH_AUTH_SOCK: sock }, stdio: 'ignore' });
          return true;
        } catch (e) {
          return (e as { status?: number }).status === 1; // 1 = agent up, no identities
        }
      }, 30_000);
      assert.ok(up, 'ssh-agent never answered');
      execFileSync('ssh-add', [sshd.identityFile], { env: { ...process.env, SSH_AUTH_SOCK: sock }, stdio: 'ignore' });
      const p = new SshPool(sshOptions(sshd, recordingPrompts().prompts, { agent: sock }));
      // No identity file: only the agent can log in.
      const r = await p.transport({ ...endpointOf(sshd), identityFiles: [] }, 'agent').exec(['echo', 'via agent']);
      assert.equal(r.stdout, 'via agent\n');
      p.dispose();
    } finally {
      agent.kill();
    }
  });

  test('unknown host key: asked with the SHA256 fingerprint; accepted keys are appended, refused ones fail', async () => {
    const kh = join(sshd.dir, 'kh-empty');
    writeFileSync(kh, '');
    const refuse = recordingPrompts({ hostKey: false });
    const p1 = new SshPool(sshOptions(sshd, refuse.prompts, { knownHostsFiles: [kh] }));
    await assert.rejects(p1.transport(endpointOf(sshd), 'x').exec(['true']), (e: unknown) =>
      isKnownGoodError(e, 'host-key-rejected'),
    );
    assert.deepEqual(refuse.asked, [`hostkey ${sshd.hostKeyFingerprint}`]);
    assert.equal(readFileSync(kh, 'utf8'), '');
    p1.dispose();

    const accept = recordingPrompts({ hostKey: true });
    const p2 = new SshPool(sshOptions(sshd, accept.prompts, { knownHostsFiles: [kh] }));
    assert.equal((await p2.transport(endpointOf(sshd), 'x').exec(['echo', 'in'])).stdout, 'in\n');
    assert.match(readFileSync(kh, 'utf8'), new RegExp(`^\\[127\\.0\\.0\\.1\\]:${sshd.port} ssh-ed25519 `));
    p2.dispose();
    // Next time it is known: no question.
    const again = recordingPrompts({ hostKey: false });
    const p3 = new SshPool(sshOptions(sshd, again.prompts, { knownHostsFiles: [kh] }));
    await p3.transport(endpointOf(sshd), 'x').exec(['true']);
    assert.deepEqual(again.asked, []);
    p3.dispose();
  });

  test('changed host key: refused, naming the host and both fingerprints, nothing runs', async () => {
    const asked = recordingPrompts({ hostKey: true });
    const p = new SshPool(sshOptions(sshd, asked.prompts, { knownHostsFiles: [sshd.wrongKnownHostsFile] }));
    const marker = join(sshd.dir, 'ran-anyway');
    await assert.rejects(p.transport(endpointOf(sshd), 'x').exec(['touch', marker]), (e: unknown) => {
      assert.ok(isKnownGoodError(e, 'host-key-changed'));
      assert.match(e.message, new RegExp(`\\[127\\.0\\.0\\.1\\]:${sshd.port}`));
      assert.ok(e.message.includes(sshd.hostKeyFingerprint), 'names the offered key');
      const expected = execFileSync('ssh-keygen', ['-lf', join(sshd.dir, 'other_host_ed25519.pub')], {
        encoding: 'utf8',
      }).split(' ')[1]!;
      assert.ok(e.message.includes(expected), 'names the known key');
      assert.match(e.message, /ssh-keygen -R '\[127\.0\.0\.1\]:\d+'/);
      return true;
    });
    assert.deepEqual(asked.asked, [], 'a changed key is never offered for acceptance');
    assert.throws(() => readFileSync(marker));
    p.dispose();
  });

  test('unreachable port: a clear message', async () => {
    const p = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    await assert.rejects(p.transport({ ...endpointOf(sshd), port: 1 }, 'x').exec(['true']), (e: unknown) => {
      assert.ok(isKnownGoodError(e, 'unreachable'));
      assert.match(e.message, /^127\.0\.0\.1:1 refused the connection: nothing listens on port 1 there/);
      assert.match(e.message, /Edit Host… to change the port$/);
      return true;
    });
    p.dispose();
  });

  test('ProxyJump: one hop through forwardOut', async () => {
    const p = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    // The test sshd is its own jump host: the target is reached through a forwarded channel.
    const e = { ...endpointOf(sshd), proxyJump: endpointOf(sshd) };
    const r = await p.transport(e, 'jumped').exec(['sh', '-c', 'echo "$SSH_CONNECTION"']);
    assert.match(r.stdout, /^127\.0\.0\.1 \d+ 127\.0\.0\.1 \d+/);
    p.dispose();
  });

  test('container wrapper: argv reaches a pct stand-in intact; a stopped container is reported', async () => {
    const pct = join(sshd.binDir, 'pct');
    // Stand-in for Proxmox's pct: checks its own arguments, then runs the command as pct exec would.
    writeFileSync(
      pct,
      [
        '#!/bin/sh',
        '[ "$1" = exec ] || { echo "pct: expected exec" >&2; exit 64; }',
        'if [ "$2" = 999 ]; then echo "CT 999 not running" >&2; exit 255; fi',
        '[ "$3" = -- ] || { echo "pct: expected --" >&2; exit 64; }',
        'ct=$2; shift 3',
        'export KG_CT=$ct',
        'exec "$@"',
        '',
      ].join('\n'),
    );
    chmodSync(pct, 0o755);
    const inner = pool.transport(endpointOf(sshd), 'gpu-box');
    const ct = new ContainerTransport(inner, { kind: 'pct', id: '200' }, 'gpu-box');
    assert.equal(ct.label, 'gpu-box (container 200)');
    const r = await ct.exec(['sh', '-c', 'printf "%s\\0" "$KG_CT" "$@"', 'sh', ...NASTY]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.deepEqual(r.stdout.split('\0').slice(0, -1), ['200', ...NASTY]);
    const stopped = new ContainerTransport(inner, { kind: 'pct', id: '999' }, 'gpu-box');
    await assert.rejects(stopped.exec(['true']), (e: unknown) => {
      assert.ok(isKnownGoodError(e, 'container-not-running'));
      assert.match(e.message, /CT 999 not running — start it, or Edit Host… to choose another container$/);
      return true;
    });
    // Probes run through the wrapper too, and python missing there is named with the container.
    const missing = new ProbeRunner(ct, { python: 'python-missing-3', timeoutMs: 20000, resident: false });
    await assert.rejects(missing.run(defineProbe('find_pythons', z.unknown(), () => [])()), (e: unknown) => {
      assert.ok(isKnownGoodError(e, 'python-not-found'), String(e));
      assert.match(
        e.message,
        /python-missing-3 not found on gpu-box \(container 200\): set knownGood\.hosts\[\]\.python/,
      );
      return true;
    });
  });

  test('container: a timeout or a cancel stops the process inside the container, not only the exec client', async () => {
    // Like docker exec / pct exec: the command runs in a session of its own (setsid), so signalling the client's
    // process group over ssh leaves it running. Only a signal sent from inside (by its PID there) stops it.
    const run = join(sshd.binDir, 'kg-ct-run');
    writeFileSync(run, '#!/bin/sh\nexec setsid -w "$@"\n');
    chmodSync(run, 0o755);
    const ct = new ContainerTransport(
      pool.transport(endpointOf(sshd), 'gpu-box'),
      { kind: 'custom', command: 'kg-ct-run' },
      'gpu-box',
    );
    const timedOut = `sleep 43.${process.pid}3`;
    await assert.rejects(
      ct.exec(['sh', '-c', `echo to-stderr >&2; exec ${timedOut}`], { timeoutMs: 2000 }),
      (e: unknown) => isKnownGoodError(e, 'timeout'),
    );
    assert.ok(
      await waitUntil(() => !remoteProcessAlive(timedOut), 30_000),
      'the process in the container outlived the timeout',
    );
    const cancelled = `sleep 44.${process.pid}4`;
    const ac = new AbortController();
    const p = ct.exec(['sleep', cancelled.split(' ')[1]!], { signal: ac.signal });
    assert.ok(await waitUntil(() => remoteProcessAlive(cancelled), 30_000), 'never started');
    ac.abort();
    await assert.rejects(p, (e: unknown) => isKnownGoodError(e, 'cancelled'));
    assert.ok(
      await waitUntil(() => !remoteProcessAlive(cancelled), 30_000),
      'the process in the container outlived the cancel',
    );
    // The PID report never shows in what the command printed.
    const r = await ct.exec(['sh', '-c', 'echo out; echo err >&2; exit 3']);
    assert.deepEqual([r.stdout, r.stderr, r.exitCode], ['out\n', 'err\n', 3]);
  });

  test('resident helper: restarts after it dies; a timed-out request does not wedge the others', async () => {
    const t = pool.transport(endpointOf(sshd), 'test-sshd');
    const runner = new ProbeRunner(t, { python: 'python3', timeoutMs: 30000 });
    const slowDir = join(sshd.dir, 'slowpy');
    // find_pythons runs each extra path: a script that sleeps makes this one request slow.
    writeFileSync(join(sshd.dir, 'slow-python'), '#!/bin/sh\nsleep 20\n');
    chmodSync(join(sshd.dir, 'slow-python'), 0o755);
    const slow = defineProbe('find_pythons', z.unknown(), () => [join(sshd.dir, 'slow-python')])();
    const quick = defineProbe(
      'find_pythons',
      z.object({ current: z.object({ executable: z.string() }) }).passthrough(),
      () => [],
    )();
    const first = await runner.run(quick);
    assert.ok(first.python.executable.length > 0);
    const slowP = runner.run(slow, { timeoutMs: 1500 });
    const quickP = runner.run(quick);
    await assert.rejects(slowP, (e: unknown) => isKnownGoodError(e, 'timeout'));
    assert.ok((await quickP).value.current.executable);
    // Kill the helper from outside (this one, by its pid: the host may run others): the next request starts a new one.
    const { pid } = await runner.helperStatus();
    process.kill(pid, 'SIGTERM');
    assert.ok(await waitUntil(() => !pidAlive(pid), 30_000), 'the helper outlived SIGTERM');
    const after = await runner.run(quick).catch(async (e: unknown) => {
      // The request in flight when it died may fail with connection-lost; the one after must work.
      assert.ok(e instanceof KnownGoodError);
      return runner.run(quick);
    });
    assert.ok(after.value.current.executable);
    void slowDir;
    runner.dispose();
  });

  test('the pool reconnects after sshd restarts', async () => {
    const p = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const t = p.transport(endpointOf(sshd), 'x');
    assert.equal((await t.exec(['echo', 'one'])).stdout, 'one\n');
    await sshd.restart();
    // The old connection is gone (sshd closed it); the next operation opens a new one.
    await waitUntil(() => !p.connection(endpointOf(sshd)).connected, 5000);
    const r = await t.exec(['echo', 'two']).catch(() => t.exec(['echo', 'two']));
    assert.equal(r.stdout, 'two\n');
    assert.ok(p.connection(endpointOf(sshd)).connects >= 2);
    p.dispose();
  });

  test('CLI: runs a command on the test sshd; a changed host key exits non-zero without running anything', () => {
    const target = `${sshd.user}@127.0.0.1:${sshd.port}`;
    const cliExec = (knownHosts: string, ...argv: string[]) =>
      spawnSync(
        process.execPath,
        [
          ...['--import', 'tsx', 'src/cli/main.ts', 'exec', target],
          ...['--identity', sshd.identityFile, '--known-hosts', knownHosts, '--', ...argv],
        ],
        { encoding: 'utf8' },
      );
    const ok = cliExec(sshd.knownHostsFile, 'printf', '%s|', ...NASTY);
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stdout, NASTY.join('|') + '|');
    const marker = join(sshd.dir, 'cli-ran');
    const refused = cliExec(sshd.wrongKnownHostsFile, 'touch', marker);
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /HOST KEY CHANGED/);
    assert.throws(() => readFileSync(marker));
  });
});
