import { KnownGoodError } from './errors';
/**
 * The one quoting function. Every word that reaches a remote shell (the login shell that sshd runs a command with,
 * or `sh -c` inside a container) goes through `shellQuote`. POSIX single quotes keep every byte literal except the
 * single quote itself, which is closed, escaped and reopened: `it's` -> `'it'\''s'`.
 */
export function shellQuote(word: string): string {
  if (word.includes('\0')) {
    throw new KnownGoodError('internal', 'a command word cannot contain a NUL byte');
  }
  if (word !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) && !word.startsWith('-') && !word.startsWith('=')) {
    // Plain words stay readable in the terminal and logs; nothing in this set is special to sh.
    return word;
  }
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** A command line for a POSIX shell that runs exactly `argv`, word for word. */
export function shellJoin(argv: readonly string[]): string {
  if (argv.length === 0) throw new KnownGoodError('internal', 'empty command');
  return argv.map(shellQuote).join(' ');
}
