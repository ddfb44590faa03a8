import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { hostEntryOf, hostNameProblem, listKeyFiles, parseContainer, shortHostName } from '../../src/core/hostEntry';

void describe('Add/Edit Host wizard: names, keys and the settings entry', () => {
  it('a new host is named by its alias, else user@host (no port), made unique', () => {
    assert.equal(shortHostName('gpu-box', []), 'gpu-box');
    assert.equal(shortHostName('root@127.0.0.1:53547', []), 'root@127.0.0.1');
    assert.equal(shortHostName('127.0.0.1:53547', []), '127.0.0.1');
    assert.equal(shortHostName('root@[::1]:2222', []), 'root@::1');
    assert.equal(shortHostName('root@127.0.0.1:53547', ['root@127.0.0.1', 'root@127.0.0.1-2']), 'root@127.0.0.1-3');
  });

  it('a name must be given, unused by another host, and not This machine', () => {
    assert.equal(hostNameProblem('trainbox', ['gpu-box']), undefined);
    assert.match(hostNameProblem('  ', []) ?? '', /Give the host a name/);
    assert.match(hostNameProblem('gpu-box', ['gpu-box']) ?? '', /already named gpu-box/);
    assert.match(hostNameProblem('This machine', []) ?? '', /local host/);
  });

  it('offers the id_* private keys of a folder, not their .pub halves', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-keys-'));
    for (const f of ['id_rsa', 'id_rsa.pub', 'id_ed25519', 'id_ed25519.pub', 'config', 'known_hosts'])
      writeFileSync(join(dir, f), '');
    assert.deepEqual(listKeyFiles(dir), [join(dir, 'id_ed25519'), join(dir, 'id_rsa')]);
    assert.deepEqual(listKeyFiles(join(dir, 'missing')), []);
  });

  it('offers any private key of the folder by its first line, and the keys ~/.ssh/config names, first', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kg-keys-'));
    const elsewhere = mkdtempSync(join(tmpdir(), 'kg-keys-elsewhere-'));
    const key = (header: string) => `-----BEGIN ${header}-----\nAAAA\n-----END ${header}-----\n`;
    writeFileSync(join(dir, 'work_key'), key('OPENSSH PRIVATE KEY'));
    writeFileSync(join(dir, 'legacy.pem'), key('RSA PRIVATE KEY'));
    writeFileSync(join(dir, 'cloud.ppk'), 'PuTTY-User-Key-File-3: ssh-ed25519\n');
    writeFileSync(join(dir, 'work_key.pub'), 'ssh-ed25519 AAAA me@host\n');
    writeFileSync(join(dir, 'config'), 'Host *\n  IdentityFile ~/keys/gpu\n');
    writeFileSync(join(dir, 'known_hosts'), '[127.0.0.1]:22 ssh-ed25519 AAAA\n');
    writeFileSync(join(dir, 'notes.txt'), `see ${key('OPENSSH PRIVATE KEY')}`);
    mkdirSync(join(dir, 'sockets'));
    writeFileSync(join(elsewhere, 'gpu'), key('OPENSSH PRIVATE KEY'));
    writeFileSync(join(dir, 'huge'), key('OPENSSH PRIVATE KEY') + 'x'.repeat(100_000));
    assert.deepEqual(
      listKeyFiles(dir, [join(elsewhere, 'gpu'), join(elsewhere, 'missing'), join(dir, 'work_key'), '/x/%h.key']),
      [join(elsewhere, 'gpu'), join(dir, 'work_key'), join(dir, 'cloud.ppk'), join(dir, 'legacy.pem')],
    );
  });

  it('writes the key file, container, python and roots; the agent writes no identityFile', () => {
    const answers = { name: '127.0.0.1', target: 'root@127.0.0.1:2222', container: 'docker:trainer' };
    assert.deepEqual(
      hostEntryOf({
        ...answers,
        key: { kind: 'file', path: '/k/id_ed25519' },
        python: ' /venv/bin/python ',
        roots: 'a, ,b',
      }),
      {
        name: '127.0.0.1',
        host: 'root@127.0.0.1:2222',
        identityFile: '/k/id_ed25519',
        container: { kind: 'docker', id: 'trainer' },
        python: '/venv/bin/python',
        roots: ['a', 'b'],
      },
    );
    assert.deepEqual(hostEntryOf({ ...answers, container: '', key: { kind: 'agent' }, python: '', roots: '' }), {
      name: '127.0.0.1',
      host: 'root@127.0.0.1:2222',
    });
    assert.equal(parseContainer('pct:'), undefined);
  });

  it('editing keeps what the wizard does not ask, and drops a key the person switched to the agent', () => {
    const previous = {
      name: 'box',
      host: 'box',
      port: 2222,
      proxyJump: 'bastion',
      identityFile: '/old/key',
      slurm: { binDir: '/opt/slurm/bin' },
    } as Parameters<typeof hostEntryOf>[1] & object;
    const edited = hostEntryOf(
      { name: 'box', target: 'box', key: { kind: 'agent' }, container: '', python: '', roots: '/ckpt' },
      previous,
    );
    assert.deepEqual(edited, {
      name: 'box',
      host: 'box',
      port: 2222,
      proxyJump: 'bastion',
      slurm: previous.slurm,
      roots: ['/ckpt'],
    });
    const moved = hostEntryOf(
      {
        name: 'box',
        target: 'root@10.0.0.9',
        key: { kind: 'file', path: '/new' },
        container: '',
        python: '',
        roots: '',
      },
      previous,
    );
    assert.deepEqual(moved, { name: 'box', host: 'root@10.0.0.9', slurm: previous.slurm, identityFile: '/new' });
  });

  it('a rename changes the name only: the address, and so what is kept by it (baselines, results), stays', () => {
    const previous = { name: '127.0.0.1', host: 'root@127.0.0.1:2222', identityFile: '/k', roots: ['/ckpt'] };
    const renamed = hostEntryOf(
      {
        name: ' trainbox ',
        target: 'root@127.0.0.1:2222',
        key: { kind: 'file', path: '/k' },
        container: '',
        python: '',
        roots: '/ckpt',
      },
      previous,
    );
    assert.deepEqual(renamed, { ...previous, name: 'trainbox' });
  });
});
