import { spawn as spawnChild } from 'node:child_process';
import { KnownGoodError } from '../errors';
import { abortableStart, collect } from './collect';
import type { ExecOptions, ExecResult, ProcessHandle, SpawnOptions, Transport } from './types';

/** "This machine": child processes without a shell. */
export class LocalTransport implements Transport {
  readonly id = 'local';
  constructor(readonly label = 'This machine') {}

  async exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    return collect(
      (signal) => this.spawn(argv, { signal }),
      options,
      () => `${argv[0]} on ${this.label}`,
    );
  }

  spawn(argv: readonly string[], options: SpawnOptions = {}): Promise<ProcessHandle> {
    const [file, ...args] = argv;
    if (!file) return Promise.reject(new KnownGoodError('internal', 'empty command'));
    return abortableStart(this.start(file, args), options.signal);
  }

  private start(file: string, args: string[]): Promise<ProcessHandle> {
    return new Promise((resolve, reject) => {
      // detached: the child leads its own process group, so kill() reaches what it started too.
      const child = spawnChild(file, args, { stdio: 'pipe', detached: process.platform !== 'win32' });
      let settled = false;
      child.once('error', (e: NodeJS.ErrnoException) => {
        if (settled) return;
        settled = true;
        reject(
          e.code === 'ENOENT'
            ? new KnownGoodError('command-not-found', `${file} not found on ${this.label}`)
            : new KnownGoodError('internal', `could not start ${file} on ${this.label}: ${e.message}`),
        );
      });
      child.once('spawn', () => {
        settled = true;
        const exited = new Promise<{ exitCode: number | null; exitSignal?: string }>((res) =>
          child.once('close', (code, sig) =>
            res({ exitCode: code, ...(sig ? { exitSignal: sig.replace(/^SIG/, '') } : {}) }),
          ),
        );
        resolve({
          stdin: child.stdin,
          stdout: child.stdout,
          stderr: child.stderr,
          exited,
          resize: () => {
            /* no pty for local processes */
          },
          kill: (signal = 'TERM') => {
            if (child.exitCode !== null || child.signalCode !== null) return;
            try {
              if (child.pid && process.platform !== 'win32') process.kill(-child.pid, `SIG${signal}`);
              else child.kill(`SIG${signal}`);
            } catch {
              /* already gone */
            }
          },
        });
      });
    });
  }

  dispose(): void {
    /* nothing pooled */
  }
}
