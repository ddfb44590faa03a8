import { KnownGoodError } from '../errors';
import { EDIT_HOST } from './sshErrors';
import type { ContainerSettings } from '../settings';
import { abortableStart, collect } from './collect';
import { newPidMarker, reportPidThenExec, signalCommand, stripPidMarker } from './pidMarker';
import type { ExecOptions, ExecResult, ProcessHandle, SpawnOptions, Transport } from './types';

/** Splits a custom prefix like `lxc-attach -n 200 --` into words (single/double quotes, backslash escapes). */
export function splitWords(text: string): string[] {
  const words: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) cur += text[++i];
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < text.length) {
      cur += text[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (quote) throw new KnownGoodError('settings', `unterminated ${quote} in container command: ${text}`);
  if (inWord) words.push(cur);
  return words;
}

/** The words put before a command to run it inside the container. */
export function containerPrefix(c: ContainerSettings, interactive: boolean): string[] {
  switch (c.kind) {
    case 'pct':
      return ['pct', 'exec', c.id!, '--'];
    case 'docker':
      return ['docker', 'exec', interactive ? '-it' : '-i', c.id!];
    case 'kubectl':
      return ['kubectl', 'exec', interactive ? '-it' : '-i', c.id!, '--'];
    case 'custom':
      return splitWords(c.command!);
  }
}

const NOT_RUNNING =
  /(CT \d+ not running|is not running|No such container|container not found|Error from server \(NotFound\)|cannot exec in a stopped)/i;

/** Runs every command inside a container on another transport (`pct exec`, `docker exec -i`, …). */
export class ContainerTransport implements Transport {
  readonly id: string;
  readonly label: string;

  constructor(
    private readonly inner: Transport,
    private readonly container: ContainerSettings,
    hostName: string,
  ) {
    const tag = container.kind === 'custom' ? 'custom' : `${container.kind}:${container.id}`;
    this.id = `${inner.id}/${tag}`;
    this.label = `${hostName} (${container.kind === 'custom' ? 'container' : `container ${container.id}`})`;
  }

  wrap(argv: readonly string[], interactive = false): string[] {
    return [...containerPrefix(this.container, interactive), ...argv];
  }

  async exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    // Through spawn, so that a timeout or a cancel stops the process inside the container (see spawn).
    const res = await collect(
      (signal) => this.spawn(argv, { signal }),
      options,
      () => `${argv[0]} on ${this.label}`,
    );
    if (res.exitCode !== 0 && res.stdout === '' && NOT_RUNNING.test(res.stderr)) {
      throw new KnownGoodError(
        'container-not-running',
        `container ${this.container.id ?? ''} on ${this.label} is not running: ${res.stderr.trim().split('\n')[0]} — ` +
          `start it, or ${EDIT_HOST} to choose another container`,
        { action: EDIT_HOST },
      );
    }
    if (res.exitCode === 127 && res.stdout === '' && /not found|No such file/.test(res.stderr)) {
      throw new KnownGoodError(
        'command-not-found',
        `${argv[0]} not found on ${this.label}: ${res.stderr.trim().split('\n').pop()}`,
      );
    }
    return res;
  }

  /**
   * With a terminal, Ctrl+C and closing travel through the container's tty. Without one, killing `docker exec`
   * or `pct exec` leaves the process inside running: so the command starts through the container's `sh`, which
   * reports its PID (in the container's PID namespace) and becomes the command; kill() signals that PID from a
   * second exec into the same container, then stops the client as before.
   */
  async spawn(argv: readonly string[], options?: SpawnOptions): Promise<ProcessHandle> {
    if (options?.pty) return this.inner.spawn(this.wrap(argv, true), options);
    // The abort is handled here, not by the inner transport: a process that starts late must be stopped inside
    // the container, which only this wrapper's kill() does.
    return abortableStart(this.spawnWithPid(argv), options?.signal);
  }

  private async spawnWithPid(argv: readonly string[]): Promise<ProcessHandle> {
    const marker = newPidMarker();
    const h = await this.inner.spawn(this.wrap(['sh', '-c', reportPidThenExec(marker, argv)]));
    let pid: number | undefined;
    let pending: 'INT' | 'TERM' | 'KILL' | 'HUP' | undefined;
    const signalInside = (signal: string, p: number) => {
      this.inner.exec(this.wrap(['sh', '-c', signalCommand(signal, p)]), { timeoutMs: 15_000 }).catch(() => undefined);
    };
    const stderr = stripPidMarker(h.stderr, marker, (p) => {
      pid = p;
      if (pending) signalInside(pending, p);
    });
    return {
      stdin: h.stdin,
      stdout: h.stdout,
      stderr,
      exited: h.exited,
      resize: (size) => h.resize(size),
      kill: (signal = 'TERM', killOptions) => {
        if (pid === undefined) pending = signal;
        else signalInside(signal, pid);
        h.kill(signal, killOptions);
      },
    };
  }

  dispose(): void {
    /* the inner transport is pooled and owned by the pool */
  }
}
