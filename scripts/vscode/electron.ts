// npm run test:electron — the same extension-host suite as `npm run test:vscode`, run in DESKTOP VS Code through
// @vscode/test-electron. For developer machines: it downloads VS Code (needs internet) unless VSCODE_EXECUTABLE
// points at an installed one. CI uses test:vscode instead (no download; see README "Tests in real VS Code").
//
//   node --import tsx scripts/vscode/electron.ts [--no-build] [--grep <mocha grep>]
//   env: VSCODE_EXECUTABLE (e.g. /usr/share/code/code), VSCODE_VERSION (default 1.100.3, as CI), headless Linux:
//        prefix with `xvfb-run -a`.
import { runTests } from '@vscode/test-electron';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSshd, type TestSshd } from '../../test/support/sshd';
import { repoRoot } from './server';
import { buildSuite } from './suite';

const args = process.argv.slice(2);
const grepAt = args.indexOf('--grep');

async function main(): Promise<number> {
  if (!args.includes('--no-build')) {
    const b = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'build.mjs')], {
      cwd: repoRoot,
      stdio: 'inherit',
    });
    if (b.status !== 0) return b.status ?? 1;
  }
  const suite = await buildSuite();
  const state = mkdtempSync(join(tmpdir(), 'kg-electron-'));
  let sshd: TestSshd | undefined;
  try {
    sshd = await startSshd();
    const userDir = join(state, 'user-data');
    mkdirSync(join(userDir, 'User'), { recursive: true });
    mkdirSync(join(state, 'workspace'));
    // Same settings as the browser runner: the SSH pool reads knownHostsFile once, at activation.
    writeFileSync(
      join(userDir, 'User', 'settings.json'),
      JSON.stringify({
        'security.workspace.trust.enabled': false,
        'telemetry.telemetryLevel': 'off',
        'update.mode': 'none',
        'knownGood.includeSshConfigHosts': false,
        'knownGood.knownHostsFile': sshd.knownHostsFile,
      }),
    );
    const executable = process.env['VSCODE_EXECUTABLE'];
    return await runTests({
      ...(executable ? { vscodeExecutablePath: executable } : { version: process.env['VSCODE_VERSION'] ?? '1.100.3' }),
      extensionDevelopmentPath: repoRoot,
      extensionTestsPath: suite,
      extensionTestsEnv: {
        KG_TEST_SSHD: JSON.stringify({
          port: sshd.port,
          user: sshd.user,
          home: sshd.home,
          identityFile: sshd.identityFile,
          knownHostsFile: sshd.knownHostsFile,
        }),
        KG_MOCHA_GREP: grepAt >= 0 ? args[grepAt + 1] : undefined,
        KG_MOCHA_COLOR: process.stdout.isTTY ? '1' : undefined,
      },
      launchArgs: [
        join(state, 'workspace'),
        '--user-data-dir',
        userDir,
        '--extensions-dir',
        join(state, 'extensions'),
        '--disable-extensions',
        '--disable-workspace-trust',
        '--skip-welcome',
        '--skip-release-notes',
        '--disable-gpu',
      ],
    });
  } finally {
    await sshd?.stop();
    rmSync(state, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    // runTests rejects with TestRunFailedError when the suite fails; the exit code is what CI needs.
    const code =
      typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'number'
        ? (err as { code: number }).code
        : 1;
    process.stderr.write(`[test:electron] ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(code || 1);
  },
);
