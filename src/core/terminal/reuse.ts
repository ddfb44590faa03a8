/**
 * Probes and benchmarks get one terminal per host and kind (its name, `Known Good: GPU probe @ gpu-box`): a terminal
 * whose process has ended runs the next one; a running one is left alone and the new run gets a terminal of its own.
 */
export interface TerminalReuse {
  kind: 'reuse' | 'new';
  /** The terminal's name: `name`, or `name (2)`, … while the earlier ones still run. */
  name: string;
}

export interface KnownTerminal {
  /** The person closed it (or VS Code did). */
  closed: boolean;
  /** Its process has ended. */
  ended: boolean;
}

/** What to do for a run named `name`, given the open terminals by name. */
export function chooseTerminal(name: string, open: (name: string) => KnownTerminal | undefined): TerminalReuse {
  // `name`, then `name (2)`, `name (3)`, …: the first that is not running
  for (let i = 1; ; i++) {
    const n = i === 1 ? name : `${name} (${i})`;
    const t = open(n);
    if (!t || t.closed) return { kind: 'new', name: n };
    if (t.ended) return { kind: 'reuse', name: n };
  }
}
