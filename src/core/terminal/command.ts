import { deflateSync } from 'node:zlib';
import { KnownGoodError } from '../errors';
import { shellQuote } from '../quote';
import type { ProbeCall } from '../probes/probe';
import { oneShotProgram } from '../probes/sources';

/*
 * How a probe runs in a terminal. A one-shot run pipes the program to `<python> - args…`, but over SSH a pty's
 * stdin and stdout are the same channel, and the keyboard has to reach the process: the program travels in an argv
 * word instead, zlib-compressed and base64 (no quote in it, and a 60 KB probe fits well under Linux's 128 KB limit
 * on one argument, which is what the whole command string is for the remote login shell).
 */

/** The `-c` loader: takes the program out of argv[1], so the probe sees exactly its own arguments. */
export const TERMINAL_LOADER =
  'import sys as _kg_s,zlib as _kg_z,base64 as _kg_b;' +
  '_kg_p=_kg_s.argv.pop(1);' +
  'exec(compile(_kg_z.decompress(_kg_b.b64decode(_kg_p)),"<known-good>","exec"))';

/** Linux's MAX_ARG_STRLEN (32 pages), with room for the rest of the command. */
const MAX_WORD = 120 * 1024;

export interface TerminalCommand {
  argv: string[];
  /** The command as a person reads it: the program word replaced by what it carries. */
  display: string;
}

/** argv for `probe` in a terminal: unbuffered (`-u`) so progress lines show as they are printed. */
export function probeTerminalCommand(
  python: string,
  call: Pick<ProbeCall<unknown>, 'probe' | 'modules' | 'args'>,
  nonce: string,
): TerminalCommand {
  const { probe, args } = call;
  const program = deflateSync(Buffer.from(oneShotProgram(call, nonce), 'utf8'), { level: 9 }).toString('base64');
  if (program.length > MAX_WORD) {
    throw new KnownGoodError(
      'internal',
      `python/${probe}.py is too large to pass in one command word (${program.length} bytes)`,
    );
  }
  const argv = [python, '-u', '-c', TERMINAL_LOADER, program, ...args];
  const shown = [python, '-u', '-c', '<loader>', `<python/${probe}.py: ${formatKb(program.length)} zlib+base64>`]
    .map((w) => (w.startsWith('<') ? w : displayWord(w)))
    .join(' ');
  const display = `${shown}${args.length ? ` ${args.map(displayWord).join(' ')}` : ''}  # python/${probe}.py passed as an argv word`;
  return { argv, display };
}

/** The user's own benchmark command, run by the host's `sh` as written. */
export function shellTerminalCommand(command: string): TerminalCommand {
  return { argv: ['sh', '-c', command], display: command };
}

/** A word as a person would type it: options such as `-u` unquoted (shellQuote quotes a leading `-`). */
export function displayWord(w: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : shellQuote(w);
}

function formatKb(n: number): string {
  return n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KB`;
}
