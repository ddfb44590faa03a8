import * as vscode from 'vscode';
import type { SshPrompts } from '../core/transport/ssh';
import { showInputBox, showQuickPick, showWarning } from '../window';

/** Host-key, passphrase and password questions asked in VS Code; passwords are kept only in SecretStorage. */
export function vscodePrompts(secrets: vscode.SecretStorage): SshPrompts {
  return {
    async confirmHostKey(q) {
      const where = q.port === 22 ? q.host : `[${q.host}]:${q.port}`;
      const other = q.otherTypes.length ? ` (known_hosts lists only ${q.otherTypes.join(', ')} keys for it)` : '';
      const accept = 'Accept and Remember';
      const answer = await showWarning(
        `The authenticity of host ${where} can't be established${other}.`,
        {
          modal: true,
          detail: `${q.keyType} key fingerprint is ${q.fingerprint}.\nCompare it with the server's before accepting.`,
        },
        accept,
      );
      return answer === accept;
    },
    async passphrase(keyFile, attempt) {
      return showInputBox({
        title: 'Known Good: SSH key passphrase',
        prompt: `${attempt > 1 ? 'Wrong passphrase. ' : ''}Passphrase for ${keyFile}`,
        password: true,
        ignoreFocusOut: true,
      });
    },
    async password(q) {
      const key = `knownGood.password:${q.user}@${q.host}`;
      const saved = await secrets.get(key);
      if (saved !== undefined) return saved;
      const value = await showInputBox({
        title: `Known Good: ${q.user}@${q.host}`,
        prompt: q.prompt,
        password: true,
        ignoreFocusOut: true,
      });
      if (value === undefined) return undefined;
      const remember = await showQuickPick(
        [{ label: 'Remember in VS Code secret storage' }, { label: "Don't remember" }],
        {
          title: 'Remember this password?',
          ignoreFocusOut: true,
        },
      );
      if (remember?.label.startsWith('Remember')) await secrets.store(key, value);
      return value;
    },
  };
}
