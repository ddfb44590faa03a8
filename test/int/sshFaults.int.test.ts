// Fault injection with ssh2's own Server: replies a real OpenSSH server gives only by chance (timing) are sent on
// purpose here.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Server, utils, type Connection, type ServerChannel } from 'ssh2';
import { SshPool } from '../../src/core/transport/ssh';
import { recordingPrompts } from '../support/hosts';

/** ssh2's Server keeps the socket of each connection here. */
interface WithSocket {
  _sock: { cork(): void; uncork(): void };
}

describe('SSH transport: replies that arrive all at once', () => {
  let server: Server;
  let port: number;
  let dir: string;
  let pool: SshPool;
  /** What the fake server answers to an exec: called with the channel just accepted. */
  let answer: (ch: ServerChannel, command: string) => void = () => undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-sshfault-'));
    const hostKey = utils.generateKeyPairSync('ed25519');
    const userKey = utils.generateKeyPairSync('ed25519');
    writeFileSync(join(dir, 'id'), userKey.private, { mode: 0o600 });
    writeFileSync(join(dir, 'known_hosts'), '');
    server = new Server({ hostKeys: [hostKey.private] }, (conn: Connection) => {
      conn.on('authentication', (ctx) => ctx.accept());
      conn.on('ready', () =>
        conn.on('session', (acceptSession) => {
          const session = acceptSession();
          session.on('exec', (accept, _reject, info) => {
            // The exec reply, the output, the exit status, EOF and close leave in one write, as a busy or very fast
            // sshd can send them for a command that ends at once.
            const sock = (conn as unknown as WithSocket)._sock;
            sock.cork();
            const ch = accept();
            answer(ch, info.command);
            process.nextTick(() => sock.uncork());
          });
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
    pool = new SshPool({
      knownHostsFiles: [join(dir, 'known_hosts')],
      connectTimeoutMs: 10000,
      prompts: recordingPrompts({ hostKey: true }).prompts,
      agent: '',
      defaultIdentityFiles: [],
    });
  });
  after(() => {
    pool?.dispose();
    server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const transport = () =>
    pool.transport(
      { alias: 'fault', host: '127.0.0.1', port, user: 'kg', identityFiles: [join(dir, 'id')] },
      'fault-server',
    );

  test('the exit status of a command whose whole reply arrives with the exec reply is kept', async () => {
    answer = (ch) => {
      ch.write('the file\n');
      ch.exit(0);
      ch.end();
    };
    for (let i = 0; i < 20; i++) {
      const r = await transport().exec(['tail', '-c', '10', '/some/file']);
      assert.deepEqual([r.exitCode, r.stdout], [0, 'the file\n'], `attempt ${i}`);
    }
  });

  test('an exit status of 3 with stderr, and a signal, arrive whole the same way', async () => {
    answer = (ch) => {
      ch.stderr.write('tail: cannot open x\n');
      ch.exit(3);
      ch.end();
    };
    const r = await transport().exec(['tail', 'x']);
    assert.deepEqual([r.exitCode, r.stderr], [3, 'tail: cannot open x\n']);
    answer = (ch) => {
      ch.exit('KILL', false, '');
      ch.end();
    };
    const k = await transport().exec(['sleep', '9']);
    assert.deepEqual([k.exitCode, k.exitSignal], [null, 'KILL']);
  });
});
