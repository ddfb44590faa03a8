import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/*
 * A stand-in `nvidia-smi` on a test host's PATH (test/fixtures/nvidia-smi/fake_nvidia_smi.py), answering from the
 * fixtures there: nvidia-smi's output WRITTEN in the format NVIDIA documents, not recorded (no GPU here; the GPU
 * box's real outputs are to be recorded beside them, docs/hardware.md). What it shows is rewritten between calls.
 */

export const FAKE_SMI_DIR = join(__dirname, '..', 'fixtures', 'nvidia-smi');

export interface FakeSmiState {
  driver: 'r580' | 'r470';
  /** A `*.gpu.csv` of the fixtures. */
  gpu: string;
  /** A `*.apps.csv` of the fixtures, or rows in its format (`GPU-uuid, PID, MiB, process name`). */
  apps?: string | { rows: string[] };
  /** A file that gets one line per call (its arguments). */
  calls?: string;
}

export interface FakeSmi {
  /** Where the wrapper is (remove or rename it to take nvidia-smi away). */
  path: string;
  set(state: FakeSmiState): void;
}

/** Puts `nvidia-smi` in `binDir`, its state file in `stateDir`. */
export function installFakeSmi(binDir: string, stateDir: string, state: FakeSmiState): FakeSmi {
  const stateFile = join(stateDir, 'fake-smi-state.json');
  const set = (s: FakeSmiState) => {
    // written whole then renamed: a call never reads half a state
    writeFileSync(`${stateFile}.tmp`, JSON.stringify(s));
    renameSync(`${stateFile}.tmp`, stateFile);
  };
  set(state);
  const path = join(binDir, 'nvidia-smi');
  writeFileSync(
    path,
    `#!/bin/sh\nexec python3 '${join(FAKE_SMI_DIR, 'fake_nvidia_smi.py')}' --kg-state '${stateFile}' "$@"\n`,
  );
  chmodSync(path, 0o755);
  return { path, set };
}

/** The whole lines of a gpu-timeline.jsonl the sampler has written so far (none before the file exists). */
export function timelineLines<T>(file: string): T[] {
  return existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.endsWith('}'))
        .map((l) => JSON.parse(l) as T)
    : [];
}
