import { envNameProblem, envValueProblem } from '../actions/envMap';
import { KnownGoodError } from '../errors';

/*
 * A command the person confirms for a replay (`known-good replay HOST RUN --launch 'CMD …'`), split into argv words
 * here and never given to a shell: the replay runs it word for word under the guard. The splitter reads the part of
 * POSIX shell syntax that a typed training command uses — words split at blanks, '…' kept literally, "…" with \" \\
 * \$ \` escapes, a backslash outside quotes keeping the next character, leading NAME=value words as variables of
 * the launch — and refuses what only a shell could do (pipes, redirections, `;`, `&`, `$VAR`, `$(…)`, backticks,
 * globs, `~`), saying which, so that nothing the person meant is silently taken literally.
 */

export interface LaunchCommand {
  readonly argv: string[];
  readonly env: Record<string, string>;
}

const MAX_COMMAND = 64 * 1024;
const SHELL_ONLY: Readonly<Record<string, string>> = {
  '|': 'a pipe',
  '&': 'a background job or &&',
  ';': 'a command list',
  '<': 'a redirection',
  '>': 'a redirection',
  '(': 'a subshell',
  ')': 'a subshell',
  $: 'a variable or command substitution',
  '`': 'a command substitution',
  '*': 'a glob',
  '?': 'a glob',
};

function refuse(text: string, why: string): never {
  throw new KnownGoodError(
    'settings',
    `--launch is run word by word, never by a shell: ${why}. Quote it to mean it literally ('…'), or give the ` +
      `command it stands for: ${text.length > 200 ? `${text.slice(0, 199)}…` : text}`,
  );
}

/** Splits `text` into the launch's variables and argv (see the module comment); a usage error says what is refused. */
export function launchWords(text: string): LaunchCommand {
  if (text.length > MAX_COMMAND) refuse(text.slice(0, 200), `the command is over ${MAX_COMMAND} characters`);
  if (/[\0\r\n]/.test(text)) refuse(text, 'it holds a line break or a NUL (one command on one line)');
  // each word with whether its `=` (if any) came before any quoting: only an unquoted NAME= is a variable
  const words: { word: string; bareName: boolean }[] = [];
  let cur = '';
  let inWord = false;
  let quotedAt = -1;
  const end = () => {
    if (!inWord) return;
    const eq = cur.indexOf('=');
    words.push({ word: cur, bareName: eq > 0 && (quotedAt < 0 || quotedAt > eq) });
    cur = '';
    inWord = false;
    quotedAt = -1;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'") {
      const close = text.indexOf("'", i + 1);
      if (close < 0) refuse(text, "a ' is not closed");
      if (quotedAt < 0) quotedAt = cur.length;
      cur += text.slice(i + 1, close);
      inWord = true;
      i = close;
    } else if (c === '"') {
      if (quotedAt < 0) quotedAt = cur.length;
      inWord = true;
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        const d = text[j]!;
        if (d === '\\' && j + 1 < text.length && '"\\$`'.includes(text[j + 1]!)) cur += text[++j];
        else if (d === '$' || d === '`') refuse(text, `"…" holds ${SHELL_ONLY[d]} (${d})`);
        else cur += d;
      }
      if (j >= text.length) refuse(text, 'a " is not closed');
      i = j;
    } else if (c === '\\') {
      if (i + 1 >= text.length) refuse(text, 'it ends in a lone backslash');
      if (quotedAt < 0) quotedAt = cur.length;
      cur += text[++i];
      inWord = true;
    } else if (c === ' ' || c === '\t') end();
    else if (SHELL_ONLY[c] !== undefined) refuse(text, `${SHELL_ONLY[c]} (${c}) needs a shell`);
    else if (c === '~' && !inWord) refuse(text, '~ is expanded only by a shell: write the home folder out');
    else if (c === '#' && !inWord)
      break; // a comment, as in a shell
    else {
      cur += c;
      inWord = true;
    }
  }
  end();
  const env: Record<string, string> = {};
  let i = 0;
  for (; i < words.length; i++) {
    const { word, bareName } = words[i]!;
    const eq = word.indexOf('=');
    if (!bareName || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(word.slice(0, eq))) break;
    const [name, value] = [word.slice(0, eq), word.slice(eq + 1)];
    const bad = envNameProblem(name) ?? envValueProblem(value);
    if (bad) throw new KnownGoodError('settings', `--launch: the variable ${name}: ${bad}`);
    env[name] = value;
  }
  const argv = words.slice(i).map((w) => w.word);
  if (argv.length === 0) throw new KnownGoodError('settings', '--launch: no command (only variables, or nothing)');
  return { argv, env };
}

/**
 * A word as `launchWords` reads it back: bare when nothing in it is special to the splitter, else in '…'. Not the
 * shell's quoting (core/quote.ts, for what a shell runs): a leading `-` is a plain word here, so flags stay readable.
 */
function launchWord(w: string): string {
  return w !== '' && /^[A-Za-z0-9_@%+=:,./[\]{}^-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

/** The launch as one line that `launchWords` reads back to the same variables and argv (for "repeat with"). */
export function launchText(l: { readonly argv: readonly string[]; readonly env: Readonly<Record<string, string>> }) {
  return [
    ...Object.entries(l.env).map(([k, v]) => `${k}=${launchWord(v)}`),
    ...l.argv.map((w, i) =>
      // a first word that reads as NAME=value would come back a variable
      i === 0 && /^[A-Za-z_]\w*=/.test(w) ? `'${w.replace(/'/g, `'\\''`)}'` : launchWord(w),
    ),
  ].join(' ');
}
