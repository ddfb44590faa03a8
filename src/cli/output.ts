import { KnownGoodError } from '../core/errors';

/**
 * The one helper for text the CLI prints: names and paths come from remote hosts and checkpoints, and a root named
 * `a\n…` or `\x1b[31m` must not forge a status line or drive the terminal. C0 and C1 controls, DEL and the bidi
 * overrides (which reorder what a reader sees) are shown escaped: `\n`, `\t`, `\r`, `\x1b`, `\u202e`.
 * JSON output needs none of this (JSON.stringify escapes C0; C1 and bidi are left for the consumer).
 */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(CONTROL, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\t') return '\\t';
    if (c === '\r') return '\\r';
    const n = c.charCodeAt(0);
    return n <= 0xff ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

/**
 * An error message: its first paragraph (which may name a remote path) escaped whole, so a name cannot start a line of
 * its own; what follows a blank line (the usage text the CLI appends) keeps its line breaks.
 */
export function printableLines(text: string): string {
  const cut = text.indexOf('\n\n');
  if (cut < 0) return printable(text);
  return (
    printable(text.slice(0, cut)) +
    '\n\n' +
    text
      .slice(cut + 2)
      .split('\n')
      .map(printable)
      .join('\n')
  );
}

/** A copy of a JSON-like value with every string (and key) passed through `printable`, for text renderers. */
export function printableTree<T>(value: T): T {
  return walk(value) as T;
}

function walk(value: unknown): unknown {
  if (typeof value === 'string') return printable(value);
  if (Array.isArray(value)) return value.map(walk);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[printable(k)] = walk(v);
    return out;
  }
  return value;
}

/** The longest `--timeout`: a day. */
export const MAX_TIMEOUT_S = 24 * 60 * 60;

/** `--timeout SECONDS`: a positive number of seconds up to a day, else a usage error (exit 2). */
export function parseTimeout(text: string): number {
  const s = /^\s*[0-9]*\.?[0-9]+\s*$/.test(text) ? Number(text) : NaN;
  if (!Number.isFinite(s) || s <= 0 || s > MAX_TIMEOUT_S) {
    throw new KnownGoodError(
      'settings',
      `--timeout ${printable(text)}: expected a number of seconds above 0 and at most ${MAX_TIMEOUT_S} (24 h)`,
    );
  }
  return Math.round(s * 1000);
}

/**
 * Node decodes argv as UTF-8 and puts U+FFFD where a byte sequence was not valid: acting on that word would act on
 * another path than the one typed. Refused instead, naming the word.
 */
export function checkArgvUtf8(argv: readonly string[]): void {
  argv.forEach((word, i) => {
    if (word.includes('\ufffd')) {
      throw new KnownGoodError(
        'settings',
        `argument ${i + 1} (${printable(word)}) is not valid UTF-8 (\ufffd marks the bytes that could not be read): ` +
          'refusing to act on a different path or word than the one given',
      );
    }
  });
}

const gone = new WeakSet<NodeJS.WriteStream>();

/**
 * Called first: a reader that goes away (`| head`) makes writes fail with EPIPE; that ends the output, it is not
 * an error of ours, and it must not throw from an 'error' event nobody listens to.
 */
export function guardOutput(): void {
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => gone.add(stream));
}

/**
 * Exit once everything written to stdout and stderr has reached the pipe. `process.exit()` right after a write
 * drops whatever a pipe has not taken yet (64 KiB or so on Linux; a slow reader gets even less), with status 0.
 */
export function exitAfterFlush(code: number): void {
  let pending = 2;
  for (const stream of [process.stdout, process.stderr]) {
    let once = false;
    const done = () => {
      if (once) return;
      once = true;
      if (--pending === 0) process.exit(code);
    };
    stream.once('error', done);
    if (gone.has(stream) || stream.destroyed) done();
    else stream.write('', done);
  }
}
