import type { SshEndpoint } from '../../src/core/hosts';
import type { SshOptions, SshPrompts } from '../../src/core/transport/ssh';
import type { TestSshd } from './sshd';

export function endpointOf(sshd: TestSshd, identityFile = sshd.identityFile): SshEndpoint {
  return { alias: '127.0.0.1', host: '127.0.0.1', port: sshd.port, user: sshd.user, identityFiles: [identityFile] };
}

/** Prompts that record what was asked and answer as told; a question nobody expected fails the test. */
export function recordingPrompts(answers: { hostKey?: boolean; passphrase?: string } = {}) {
  const asked: string[] = [];
  const prompts: SshPrompts = {
    confirmHostKey: (q) => {
      asked.push(`hostkey ${q.fingerprint}`);
      return Promise.resolve(answers.hostKey ?? false);
    },
    passphrase: (file, attempt) => {
      asked.push(`passphrase ${file} ${attempt}`);
      return Promise.resolve(attempt === 1 ? answers.passphrase : undefined);
    },
  };
  return { asked, prompts };
}

export function sshOptions(sshd: TestSshd, prompts: SshPrompts, extra: Partial<SshOptions> = {}): SshOptions {
  return {
    knownHostsFiles: [sshd.knownHostsFile],
    connectTimeoutMs: 10000,
    prompts,
    agent: '',
    defaultIdentityFiles: [],
    ...extra,
  };
}
