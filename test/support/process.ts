import { execFileSync } from 'node:child_process';

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
