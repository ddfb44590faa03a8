// npm run test:vscode — the extension-host mocha suite, then the Playwright UI scenarios, in real VS Code
// (the pinned VS Code server + headless Debian Chromium). Exit code: the extension host's, then the UI tests'.
//
//   node --import tsx scripts/vscode/run-tests.ts [--no-build] [--only ext|ui] [--grep <mocha grep>] [--headed] [--bail]
//   env: KG_VSCODE_TIMEOUT_S (extension-host suite, default 1200), KG_UI_TIMEOUT_S (UI tests, default 3000),
//        KG_KEEP_VSCODE_STATE=1 keeps the server's temp state folder for debugging.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { format } from 'node:util';
import { launchBrowser, type Browser } from './browser';
import { interrupted, onInterrupt, repoRoot, startServer, type VsCodeServer } from './server';
import { buildSuite } from './suite';
import { startSshd, type TestSshd } from '../../test/support/sshd';

/** Same as test/vscode/suite/index.ts (not imported: that would load mocha here). */
const MOCHA_LINE_MARK = '\u2063';

const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
const option = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const only = option('--only');
const t0 = Date.now();
const secs = (from: number) => `${((Date.now() - from) / 1000).toFixed(1)} s`;
const say = (line: string) => process.stdout.write(`[test:vscode] ${line}\n`);

async function main(): Promise<number> {
  // Last resort if something hangs outside the per-phase timeouts (install, server start, browser launch);
  // exiting runs server.ts's exit handler, which kills the servers' process groups.
  const hardS =
    Number(process.env['KG_VSCODE_TIMEOUT_S'] ?? 1200) + Number(process.env['KG_UI_TIMEOUT_S'] ?? 3000) + 300;
  setTimeout(() => {
    process.stderr.write(`[test:vscode] gave up after ${hardS} s\n`);
    process.exit(124);
  }, hardS * 1000).unref();
  if (!flag('--no-build')) {
    const b = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'build.mjs')], {
      cwd: repoRoot,
      stdio: 'inherit',
    });
    if (b.status !== 0) return b.status ?? 1;
  }
  let code = 0;
  if (only !== 'ui') code = await runExtensionHostSuite();
  // Both tiers run even when the first fails (they test different things); --bail stops after a failure.
  if (only !== 'ext' && !(code !== 0 && flag('--bail'))) {
    const ui = await runUiTests();
    code = code || ui;
  }
  say(`${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${secs(t0)}`);
  return code;
}

async function runExtensionHostSuite(): Promise<number> {
  const started = Date.now();
  const suite = await buildSuite();
  const timeoutS = Number(process.env['KG_VSCODE_TIMEOUT_S'] ?? 1200);
  const artifacts = join(repoRoot, 'test-artifacts', 'vscode');
  mkdirSync(artifacts, { recursive: true });
  let server: VsCodeServer | undefined;
  let browser: Browser | undefined;
  let sshd: TestSshd | undefined;
  const pageLog: string[] = [];
  try {
    sshd = await startSshd();
    const ours = sshd;
    onInterrupt(() => ours.stop());
    server = await startServer({
      env: {
        KG_MOCHA_GREP: option('--grep') ?? '',
        KG_MOCHA_MARK: '1',
        KG_TEST_ARTIFACTS: artifacts,
        KG_TEST_SSHD: testSshdEnv(sshd),
      },
      // The SSH pool reads knownHostsFile once, at activation: it has to be in place before the window opens.
      settings: { 'knownGood.includeSshConfigHosts': false, 'knownGood.knownHostsFile': sshd.knownHostsFile },
    });
    browser = await launchBrowser({ headless: !flag('--headed') });
    const { page } = browser;
    let resolveExit!: (code: number) => void;
    const exit = new Promise<number>((r) => (resolveExit = r));
    // VS Code's browser test protocol: the extension host's console arrives here, then its exit code.
    await page.exposeFunction('codeAutomationLog', (type: string, logArgs: unknown[]) => {
      const text = format(...logArgs);
      pageLog.push(`[${type}] ${text}`);
      // Mocha's lines (marked by the suite's index.ts) go to stdout; the rest only to the log file.
      for (const line of text.split('\n'))
        if (line.startsWith(MOCHA_LINE_MARK)) process.stdout.write(`${line.slice(1)}\n`);
    });
    await page.exposeFunction('codeAutomationExit', (code: number) => resolveExit(code));
    page.on('console', (m) => pageLog.push(`[page ${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => pageLog.push(`[pageerror] ${e.message}`));
    const url = server.url({
      extensionDevelopmentPath: process.env['KG_EXTENSION_PATH'] ?? repoRoot,
      extensionTestsPath: suite,
    });
    say(`extension-host suite: ${url}`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<number>((r) => {
      timer = setTimeout(() => {
        process.stderr.write(`[test:vscode] extension-host suite did not finish within ${timeoutS} s\n`);
        const shot = page.screenshot({ path: join(artifacts, 'timeout.png'), timeout: 5000 }).catch(() => undefined);
        void shot.then(() => r(124));
      }, timeoutS * 1000);
    });
    const code = await Promise.race([page.goto(url).then(() => exit), timeout]);
    clearTimeout(timer);
    say(`extension-host suite exited ${code} after ${secs(started)}`);
    writeFileSync(join(artifacts, 'workbench-console.log'), pageLog.join('\n') + '\n');
    if (code !== 0) say(`workbench and extension host console: ${join(artifacts, 'workbench-console.log')}`);
    return code;
  } finally {
    await browser?.close();
    await server?.stop();
    await sshd?.stop();
  }
}

function testSshdEnv(s: TestSshd): string {
  return JSON.stringify({
    port: s.port,
    user: s.user,
    home: s.home,
    identityFile: s.identityFile,
    knownHostsFile: s.knownHostsFile,
  });
}

async function runUiTests(): Promise<number> {
  const dir = join(repoRoot, 'test', 'ui');
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.ui.ts'))
    .sort()
    .map((f) => join(dir, f));
  if (files.length === 0) return 0;
  const started = Date.now();
  const timeoutS = Number(process.env['KG_UI_TIMEOUT_S'] ?? 3000);
  // Every limit here is a hang guard, not a speed bound: a quiet 2-core machine runs a UI file in ≤ 3 min and the
  // tier in ~8, the same machine with its cores taken by other work (load 16) took 3+ min for dashboard.ui.ts alone
  // and passed every step; a guard that fires there fails a slow machine, not a broken extension.
  const nodeArgs = ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-timeout=1200000'];
  // --grep picks UI scenarios by name too (a regular expression, as for the mocha suite).
  const grep = option('--grep');
  if (grep) nodeArgs.push(`--test-name-pattern=${grep}`);
  if (flag('--headed')) process.env['KG_UI_HEADED'] = '1';
  // Its own process group, so a hung scenario dies with it; the VS Code servers it starts have groups of their
  // own, which they list in pgidFile for us to kill when the scenarios could not.
  // All their temp folders go under one TMPDIR that is removed at the end, even after a SIGKILL.
  const runTmp = mkdtempSync(join(tmpdir(), 'kg-ui-run-'));
  const pgidFile = join(runTmp, 'pgids');
  writeFileSync(pgidFile, '');
  const child = spawn(process.execPath, [...nodeArgs, ...files], {
    cwd: repoRoot,
    stdio: 'inherit',
    detached: true,
    env: { ...process.env, KG_VSCODE_PGID_FILE: pgidFile, TMPDIR: runTmp },
  });
  const signalGroup = (sig: NodeJS.Signals) => {
    const groups = [
      child.pid,
      ...(sig === 'SIGKILL' && existsSync(pgidFile) ? readFileSync(pgidFile, 'utf8').split('\n').map(Number) : []),
    ];
    for (const pgid of groups) {
      try {
        if (pgid) process.kill(-pgid, sig);
      } catch {
        // Gone.
      }
    }
  };
  const exited = new Promise<number>((r) => child.on('exit', (c, sig) => r(c ?? (sig ? 124 : 1))));
  // SIGINT first so each scenario's own handlers stop its VS Code server, sshd and browser (they live in
  // process groups of their own); SIGKILL for whatever did not listen.
  const stop = async () => {
    signalGroup('SIGINT');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 8000))]);
    signalGroup('SIGKILL');
  };
  const unregister = onInterrupt(async () => {
    await stop();
    rmSync(runTmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 300 });
  });
  process.on('exit', () => signalGroup('SIGKILL'));
  const timer = setTimeout(() => {
    process.stderr.write(`[test:vscode] UI tests did not finish within ${timeoutS} s\n`);
    void stop();
  }, timeoutS * 1000);
  const code = await exited;
  clearTimeout(timer);
  unregister();
  signalGroup('SIGKILL'); // Anything the scenarios left behind.
  if (!process.env['KG_KEEP_VSCODE_STATE'])
    rmSync(runTmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 300 });
  say(`UI tests exited ${code} after ${secs(started)}`);
  return code;
}

main().then(
  (code) => {
    if (!interrupted()) process.exit(code);
  },
  (err: unknown) => {
    if (interrupted()) return; // The signal handler exits once its cleanup is done.
    process.stderr.write(`[test:vscode] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
