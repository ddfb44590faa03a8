import { z } from 'zod';
import { DEFAULT_GRACE_MS, guardedCommand } from '../../core/actions/guard';
import { KnownGoodError, isKnownGoodError } from '../../core/errors';
import { defineProbe } from '../../core/probes/probe';
import { importedModules } from '../../core/probes/sources';
import { jsonOption } from '../options';
import { execRaw } from '../rawExec';
import type { CliCommand } from './types';

export const execCommand: CliCommand = {
  name: 'exec',
  usage: 'exec HOST [options] -- CMD [ARG…]',
  summary: 'run a command (no shell; each word arrives as is; bytes in, bytes out; its exit status)',
  options: [],
  async run({ session, positional, rest, options, signal, out, err }) {
    const cmd = rest.length ? rest : positional;
    if (cmd.length === 0) throw new KnownGoodError('settings', 'exec: no command given (known-good exec HOST -- CMD…)');
    // Under the guard (core/actions/guard.ts), writing straight to the channel (byte-exact): the limit is enforced on
    // the host (TERM, then KILL after the grace), and the command stops there when this CLI goes, even by SIGKILL.
    const guarded = guardedCommand(options.python, cmd, { timeoutMs: options.timeoutMs });
    const giveUpMs = options.timeoutMs + DEFAULT_GRACE_MS + 30_000;
    const r = await execRaw(session.transport, guarded.argv, {
      // the guard's own limit ends it; this one only gives up on a host that stopped answering
      timeoutMs: giveUpMs,
      signal,
      // a terminal is not input: the command gets none (and a prompt for the host key may need the terminal)
      ...(process.stdin.isTTY ? {} : { stdin: process.stdin }),
      stdout: out,
      stderr: err,
    }).catch((e: unknown) => {
      if (!isKnownGoodError(e, 'timeout')) throw e;
      // Only a host that stopped answering gets here: the guard there had already ended the command at its limit.
      const group = /process group (\d+)/.exec(e.message)?.[1];
      throw new KnownGoodError(
        'timeout',
        `exec: ${session.transport.label} did not answer for ${Math.round(giveUpMs / 1000)} s; the guard there ends ` +
          `the command at its own limit (TERM after ${Math.round(options.timeoutMs / 1000)} s, KILL ` +
          `${Math.round(DEFAULT_GRACE_MS / 1000)} s later) and when this connection closes, whether or not the host ` +
          `answers` +
          (group ? ` (its process group there: ${group}; to check: ps -o pid,args -g ${group})` : ''),
      );
    });
    return r.exitCode ?? 255;
  },
};

export const probeCommand: CliCommand = {
  name: 'probe',
  usage: 'probe HOST [options] NAME [ARG…] [-- ARG…]',
  summary: 'run python/NAME.py there and print its JSON result',
  options: [jsonOption('print { result, python }: the result and the interpreter that gave it')],
  async run({ session, positional, rest, options, out }) {
    const [name, ...args] = positional;
    if (!name) throw new KnownGoodError('settings', 'probe: NAME is missing');
    const call = defineProbe(name, z.unknown(), () => [...args, ...rest], { modules: importedModules(name) })();
    const r = await session.probes.runOnce(call, { timeoutMs: options.timeoutMs });
    out.write(JSON.stringify(options.json ? { result: r.value, python: r.python } : r.value, null, 2) + '\n');
    return 0;
  },
};
