/*
 * How the CLI stops (issue 31 item 6): SIGINT (Ctrl+C), SIGTERM and SIGHUP (the terminal closed) abort one signal
 * that every command passes to what it runs, so a remote command is asked to stop (the guard on the host then sends
 * TERM, and KILL after its grace) and the CLI waits for that before it exits. A second signal exits at once; what
 * runs under the guard still stops there, as it does when the CLI is killed outright (its channel closes).
 */

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** The exit status a shell gives a process ended by `sig`. */
export function exitCodeOf(sig: NodeJS.Signals): number {
  return 128 + (sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1);
}

export interface CliStop {
  readonly signal: AbortSignal;
  /** The signal that stopped the CLI, once one came. */
  readonly received: () => NodeJS.Signals | undefined;
  dispose(): void;
}

export function stopOnSignals(
  err: NodeJS.WritableStream,
  exit: (code: number) => void = (c) => process.exit(c),
): CliStop {
  const ac = new AbortController();
  let first: NodeJS.Signals | undefined;
  const on = (sig: NodeJS.Signals) => {
    if (first === undefined) {
      first = sig;
      err.write(`known-good: ${sig}: stopping what runs (again to quit at once)\n`);
      ac.abort();
      return;
    }
    exit(exitCodeOf(first));
  };
  for (const s of SIGNALS) process.on(s, on);
  return {
    signal: ac.signal,
    received: () => first,
    dispose: () => {
      for (const s of SIGNALS) process.removeListener(s, on);
    },
  };
}
