/*
 * A caller that runs one guarded action and can be killed by a test (test/int/actions.int.test.ts): argv[2] is a JSON
 * {local?: true, sshd?: {port, user, identityFile, knownHostsFile}, argv: string[], timeoutMs}. It prints "started"
 * once the process is spawned, then waits for it; the test kills this process with whatever signal it is testing.
 */
import { runAction } from '../../src/core/actions/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { SshPool } from '../../src/core/transport/ssh';
import type { Transport } from '../../src/core/transport/types';

interface Spec {
  sshd?: { port: number; user: string; identityFile: string; knownHostsFile: string };
  argv: string[];
  timeoutMs: number;
  python: string;
}

const spec = JSON.parse(process.argv[2]!) as Spec;
let transport: Transport;
if (spec.sshd) {
  const pool = new SshPool({
    knownHostsFiles: [spec.sshd.knownHostsFile],
    connectTimeoutMs: 10000,
    prompts: { confirmHostKey: () => Promise.resolve(false), passphrase: () => Promise.resolve(undefined) },
    agent: '',
    defaultIdentityFiles: [],
  });
  transport = pool.transport(
    {
      alias: '127.0.0.1',
      host: '127.0.0.1',
      port: spec.sshd.port,
      user: spec.sshd.user,
      identityFiles: [spec.sshd.identityFile],
    },
    'test-sshd',
  );
} else transport = new LocalTransport();
process.stdout.write('started\n');
void runAction(transport, { argv: spec.argv, timeoutMs: spec.timeoutMs }, { python: spec.python }).then((r) => {
  process.stdout.write(`${r.ended}\n`);
  process.exit(0);
});
