import { createInterface } from 'node:readline';
import type { SshPrompts } from '../core/transport/ssh';

function ask(question: string, hidden: boolean): Promise<string | undefined> {
  if (!process.stdin.isTTY) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
    if (hidden) {
      const out = rl as unknown as { _writeToOutput: (s: string) => void };
      let shown = false;
      out._writeToOutput = (s: string) => {
        if (!shown) {
          process.stderr.write(question);
          shown = true;
        } else if (s.includes('\n')) process.stderr.write('\n');
      };
    }
    rl.question(question, (answer) => {
      rl.close();
      resolve(answer);
    });
    rl.on('SIGINT', () => {
      rl.close();
      resolve(undefined);
    });
  });
}

/** Terminal prompts for the CLI; without a TTY nothing is asked and unknown host keys are refused. */
export function terminalPrompts(acceptNew: boolean): SshPrompts {
  return {
    async confirmHostKey(q) {
      const where = q.port === 22 ? q.host : `[${q.host}]:${q.port}`;
      if (acceptNew) {
        process.stderr.write(`Warning: accepting new ${q.keyType} host key for ${where}: ${q.fingerprint}\n`);
        return true;
      }
      if (!process.stdin.isTTY) {
        process.stderr.write(
          `The host key of ${where} is not known (${q.keyType} ${q.fingerprint}). ` +
            `Run interactively to accept it, or pass --accept-new.\n`,
        );
        return false;
      }
      const a = await ask(
        `The authenticity of host '${where}' can't be established.\n${q.keyType} key fingerprint is ${q.fingerprint}.\n` +
          `Are you sure you want to continue connecting (yes/no)? `,
        false,
      );
      return a?.trim().toLowerCase() === 'yes';
    },
    passphrase: (file, attempt) =>
      ask(`${attempt > 1 ? 'Wrong passphrase. ' : ''}Enter passphrase for key '${file}': `, true),
    password: (q) => ask(`${q.prompt.replace(/:?\s*$/, '')}: `, true),
  };
}
