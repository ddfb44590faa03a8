import { chmodSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { shellQuote } from '../../src/core/quote';

/*
 * Stand-ins for python, pip and uv that a restore plan's script can run for real without reaching the network:
 * each call writes its argv (NUL-separated) to a file of its own in `log`, and does the least the next step needs
 * (`-m venv DIR` and `uv venv … DIR` make DIR/bin/python, a copy of the stand-in). Nothing else happens, so what the
 * script asked of the installer is exactly what the log holds.
 */

export interface FakeInstallers {
  /** Folder to put first on PATH: python3, python3.12, uv. */
  bin: string;
  /** A base prefix whose bin/ holds the same stand-ins (a baseline's `python.basePrefix`). */
  prefix: string;
  log: string;
  /** The calls since the last `clear()`, each as `[tool, $0, ...args]`. */
  calls(): string[][];
  clear(): void;
}

function record(log: string, tool: string): string {
  return [
    'n=0',
    `while [ -e ${shellQuote(log)}/call-$$-$n ]; do n=$((n + 1)); done`,
    `printf '%s\\0' ${tool} "$0" "$@" > ${shellQuote(log)}/call-$$-$n`,
  ].join('\n');
}

export function fakeInstallers(dir: string): FakeInstallers {
  const bin = join(dir, 'bin');
  const prefix = join(dir, 'prefix');
  const log = join(dir, 'calls');
  for (const d of [bin, join(prefix, 'bin'), log]) mkdirSync(d, { recursive: true });
  const python = join(dir, 'fake-python');
  writeFileSync(
    python,
    [
      '#!/bin/sh',
      '# python stand-in (test/support/fakeInstallers.ts)',
      record(log, 'python'),
      `if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin" && cp ${shellQuote(python)} "$3/bin/python"; fi`,
      'exit 0',
      '',
    ].join('\n'),
  );
  const uv = join(dir, 'fake-uv');
  writeFileSync(
    uv,
    [
      '#!/bin/sh',
      '# uv stand-in (test/support/fakeInstallers.ts)',
      record(log, 'uv'),
      'if [ "$1" = venv ]; then',
      '  for a in "$@"; do d=$a; done',
      `  mkdir -p "$d/bin" && cp ${shellQuote(python)} "$d/bin/python"`,
      'fi',
      'exit 0',
      '',
    ].join('\n'),
  );
  chmodSync(python, 0o755);
  chmodSync(uv, 0o755);
  for (const d of [bin, join(prefix, 'bin')])
    for (const name of ['python3', 'python3.12']) writeFileSync(join(d, name), readFileSync(python), { mode: 0o755 });
  writeFileSync(join(bin, 'uv'), readFileSync(uv), { mode: 0o755 });
  return {
    bin,
    prefix,
    log,
    calls: () =>
      readdirSync(log)
        .sort()
        .map((f) => readFileSync(join(log, f), 'utf8').replace(/\0$/, '').split('\0')),
    clear: () => {
      rmSync(log, { recursive: true, force: true });
      mkdirSync(log);
    },
  };
}
