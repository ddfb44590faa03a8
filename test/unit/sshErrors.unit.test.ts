import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  authFailure,
  connectTimeout,
  hostKeyChanged,
  isHostSettingsFailure,
  socketFailure,
  tildePath,
  type AuthFacts,
} from '../../src/core/transport/sshErrors';
import { homedir } from 'node:os';

const home = homedir();
const facts = (f: Partial<AuthFacts>): AuthFacts => ({
  user: 'root',
  where: '127.0.0.1:2222',
  attempts: [],
  agentSocket: '/run/agent.sock',
  agentSocketExists: true,
  defaultKeysMissing: [],
  serverMethods: ['publickey'],
  ...f,
});

void describe('SSH failures say what was tried and what to do', () => {
  void it('no key offered: an empty agent and no ~/.ssh/id_*', () => {
    const e = authFailure(
      facts({
        attempts: [{ kind: 'agent', socket: '/run/agent.sock', keys: 0, refused: true }],
        defaultKeysMissing: ['id_ed25519', 'id_ecdsa', 'id_rsa'].map((n) => `${home}/.ssh/${n}`),
      }),
    );
    assert.equal(e.code, 'auth-failed');
    assert.equal(
      e.message,
      'no key offered to root@127.0.0.1:2222: the agent has no identities and ~/.ssh has no id_ed25519, id_ecdsa or ' +
        'id_rsa — Edit Host… to choose a key. Tried: ssh-agent (no identities).',
    );
    assert.equal(e.detail?.['action'], 'Edit Host…');
  });

  void it('no key offered: no agent at all, or its socket gone', () => {
    const none = authFailure(facts({ agentSocket: undefined, agentSocketExists: false }));
    assert.match(none.message, /^no key offered to root@127\.0\.0\.1:2222: no ssh-agent is running \(SSH_AUTH_SOCK/);
    assert.match(none.message, /no key file is set — Edit Host… to choose a key\. Tried: nothing\.$/);
    const gone = authFailure(facts({ agentSocketExists: false }));
    assert.match(gone.message, /the ssh-agent socket \/run\/agent\.sock does not exist/);
  });

  void it('wrong key: the one key offered was refused', () => {
    const e = authFailure(
      facts({
        agentSocket: undefined,
        attempts: [{ kind: 'key', file: `${home}/.ssh/id_other`, own: true, refused: true }],
      }),
    );
    assert.match(
      e.message,
      /^root@127\.0\.0\.1:2222 refused the key offered \(~\/\.ssh\/id_other\): the host does not know it for root — Edit Host… to choose another key or user/,
    );
    assert.match(e.message, /ssh-copy-id\)\. Tried: key ~\/\.ssh\/id_other \(refused\)\.$/);
  });

  void it('several keys refused (the agent and a file)', () => {
    const e = authFailure(
      facts({
        attempts: [
          { kind: 'agent', socket: '/a', keys: 2, refused: true },
          { kind: 'key', file: '/keys/k', own: true, refused: true },
        ],
      }),
    );
    assert.match(e.message, /refused every key offered \(the agent's 2 keys, \/keys\/k\): the host does not know them/);
    assert.match(e.message, /Tried: ssh-agent \(2 keys, refused\); key \/keys\/k \(refused\)\.$/);
  });

  void it('a key that could not be offered: its passphrase not given, or unreadable', () => {
    const enc = authFailure(
      facts({
        agentSocket: undefined,
        attempts: [{ kind: 'key-unusable', file: '/k/enc', why: 'is encrypted and its passphrase was not given' }],
      }),
    );
    assert.match(enc.message, /^no key offered to root@127\.0\.0\.1:2222: \/k\/enc is encrypted and its passphrase/);
    assert.match(enc.message, /give its passphrase, or load it into ssh-agent \(ssh-add\), or Edit Host…/);
    const unreadable = authFailure(
      facts({ attempts: [{ kind: 'key-unusable', file: '/k/x', why: 'cannot be read (permission denied)' }] }),
    );
    assert.match(unreadable.message, /\/k\/x cannot be read \(permission denied\) — Edit Host… to choose a key/);
  });

  void it('a server that takes no keys, and a refused password', () => {
    const e = authFailure(
      facts({
        serverMethods: ['password'],
        attempts: [{ kind: 'password', refused: true }],
      }),
    );
    assert.match(
      e.message,
      /^root@127\.0\.0\.1:2222 does not take keys \(it offers: password\) and the password was not/,
    );
    assert.match(e.message, /Tried: password \(refused\)\.$/);
  });

  void it('refused port, DNS, unreachable, timeout: the address, the cause, the action', () => {
    const refused = socketFailure('10.0.0.5', 2222, 'ECONNREFUSED', 'x');
    assert.equal(refused.code, 'unreachable');
    assert.match(
      refused.message,
      /^10\.0\.0\.5:2222 refused the connection: nothing listens on port 2222 there — is sshd/,
    );
    assert.match(refused.message, /Edit Host… to change the port$/);
    assert.match(
      socketFailure('gpu-bxo', 22, 'ENOTFOUND', 'x').message,
      /^host name gpu-bxo not found \(DNS\) — check the spelling, the VPN or ~\/\.ssh\/config; Edit Host… to fix/,
    );
    assert.match(socketFailure('gpu', 22, 'EAI_AGAIN', 'x').message, /\(DNS did not answer\)/);
    assert.match(
      socketFailure('10.9.9.9', 22, 'EHOSTUNREACH', 'x').message,
      /10\.9\.9\.9:22 is unreachable \(EHOSTUNREACH\)/,
    );
    assert.match(socketFailure('h', 22, 'EPIPE', 'broken pipe').message, /^could not connect to h:22: broken pipe$/);
    const t = connectTimeout('10.1.1.1', 22, 20);
    assert.equal(t.code, 'timeout');
    assert.match(t.message, /^no answer from 10\.1\.1\.1:22 within 20 s .* Edit Host… to check them$/);
  });

  void it('host key changed: both fingerprints, the line, the ssh-keygen -R that fixes a reinstall', () => {
    const e = hostKeyChanged('[h]:22', ['SHA256:old'], 3, `${home}/.ssh/known_hosts`, 'SHA256:new');
    assert.equal(e.code, 'host-key-changed');
    assert.match(
      e.message,
      /known_hosts has SHA256:old \(line 3 of ~\/\.ssh\/known_hosts\), the server now offers SHA256:new/,
    );
    assert.match(e.message, /ssh-keygen -R '\[h\]:22'/);
  });

  void it('which failures open Edit Host… from the failed row', () => {
    for (const c of ['auth-failed', 'unreachable', 'timeout', 'host-key-changed', 'container-not-running'])
      assert.equal(isHostSettingsFailure(c), true, c);
    for (const c of ['probe-failed', 'python-not-found', 'connection-lost', undefined])
      assert.equal(isHostSettingsFailure(c), false, String(c));
  });

  void it('tildePath shortens only paths inside the home folder', () => {
    assert.equal(tildePath('/home/u/.ssh/id_rsa', '/home/u'), '~/.ssh/id_rsa');
    assert.equal(tildePath('/home/user2/k', '/home/u'), '/home/user2/k');
  });
});
