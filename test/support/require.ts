import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/*
 * What the tests need from the system. Missing, a test fails with what to install (.ci/run installs all of it); it
 * never skips.
 */

export const TORCH_PYTHON = '/usr/bin/python3';

export function requireFile(path: string, debianPackage: string): void {
  if (!existsSync(path)) {
    throw new Error(`${path} not found: install Debian's ${debianPackage} (apt-get install -y ${debianPackage})`);
  }
}

/** Debian's python3 with torch (python3-torch): it writes the real checkpoints the tests read. */
export function requireTorch(): void {
  requireFile(TORCH_PYTHON, 'python3');
  const r = spawnSync(TORCH_PYTHON, ['-c', 'import torch'], { encoding: 'utf8' });
  if (r.status !== 0) {
    throw new Error(
      `${TORCH_PYTHON} cannot import torch: install Debian's python3-torch (apt-get install -y python3-torch)\n${r.stderr}`,
    );
  }
}
