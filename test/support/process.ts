import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Is a process whose command line contains `marker` running on this machine (where the test sshd runs it)? */
export function processAlive(marker: string): boolean {
  try {
    execFileSync('pgrep', ['-f', marker]);
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` until it holds or `ms` pass; returns its last answer. */
export async function waitUntil(check: () => boolean, ms: number, everyMs = 50): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return check();
}

/**
 * `p`, or a rejection naming `what` as hung if it has not settled after `guardMs`. The guard only turns a hang into a
 * failure instead of a test stuck until the runner's timeout: make it far longer than anything the machine's speed
 * could explain, and prove the behaviour with the outcome itself (which error, from which timer), never with how
 * long it took.
 */
export async function unlessHung<T>(p: Promise<T>, what: string, guardMs = 60_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: hung (not settled after ${guardMs / 1000} s)`)), guardMs);
  });
  try {
    return await Promise.race([p, hung]);
  } finally {
    clearTimeout(timer);
  }
}

/** Is process `pid` running (not a zombie) on this machine (where the test sshd runs it)? */
export function pidAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}
