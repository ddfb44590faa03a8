// Entry point VS Code calls inside the extension host (extensionTestsPath), for both runners: the browser one
// (scripts/vscode/run-tests.ts) and @vscode/test-electron (scripts/vscode/electron.ts). Mocha's output goes through
// console.log, which the extension host forwards to the runner.
import Mocha from 'mocha';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { format } from 'node:util';

/**
 * The browser runner receives the whole workbench console (connection chatter, gallery errors); it asks for
 * mocha's lines to be marked so it can print only those and keep the rest in a log file.
 */
export const MOCHA_LINE_MARK = '\u2063';

export async function run(): Promise<void> {
  const grep = process.env['KG_MOCHA_GREP'];
  if (process.env['KG_MOCHA_MARK'] === '1') {
    const base = Mocha.reporters.Base as unknown as { consoleLog: (...a: unknown[]) => void };
    base.consoleLog = (...a: unknown[]) =>
      console.log(
        format(...a)
          .split('\n')
          .map((line) => MOCHA_LINE_MARK + line)
          .join('\n'),
      );
  }
  const mocha = new Mocha({
    ui: 'bdd',
    reporter: 'spec',
    color: process.env['KG_MOCHA_COLOR'] === '1',
    timeout: 120_000, // a hang guard: the slowest test took 4.5 s at load 16 on 2 cores
    ...(grep ? { grep } : {}),
  });
  // Bundled next to this file by scripts/vscode/suite.ts.
  for (const f of readdirSync(__dirname)
    .filter((n) => n.endsWith('.test.js'))
    .sort())
    mocha.addFile(join(__dirname, f));
  await new Promise<void>((resolve, reject) => {
    mocha.run((failures) =>
      failures > 0 ? reject(new Error(`${failures} extension-host test(s) failed`)) : resolve(),
    );
  });
}
