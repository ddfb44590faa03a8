import { readFileSync, writeFileSync } from 'node:fs';

/**
 * Loaded with `--import` into a process under test: when it exits, its peak resident set (VmHWM, kB) is written to
 * the file named by KG_PEAK_RSS_FILE. Memory is measured, never time.
 */
const file = process.env['KG_PEAK_RSS_FILE'];
if (file) {
  process.on('exit', () => {
    const m = /^VmHWM:\s*(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    writeFileSync(file, m ? m[1]! : '');
  });
}
