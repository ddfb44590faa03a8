// The pinned VS Code server (code-server 4.100.3 = VS Code 1.100.3) used to run the extension in real VS Code
// on machines that cannot download the desktop build. See ../../../shared/design/VSCODE_HARNESS.md for why each
// install flag is there. It lives in .cache/vscode-server/, never in the extension's own node_modules.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const CODE_SERVER_VERSION = '4.100.3';
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const installDir = join(repoRoot, '.cache', 'vscode-server', CODE_SERVER_VERSION);
const entryJs = join(installDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const marker = join(installDir, '.installed');

export type Log = (line: string) => void;
const defaultLog: Log = (line) => process.stderr.write(`[vscode-server] ${line}\n`);

/** Installs code-server into the cache folder the first time; later calls only check the marker. */
export async function ensureCodeServer(log: Log = defaultLog): Promise<string> {
  if (existsSync(marker) && existsSync(entryJs)) return entryJs;
  mkdirSync(installDir, { recursive: true });
  // Two runners starting at once must not both run npm in the same folder.
  const lock = join(installDir, '.lock');
  for (let waited = 0; ; waited += 1) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (waited > 900) throw new Error(`code-server install lock held for 15 min: remove ${lock}`);
      await sleep(1000);
      if (existsSync(marker) && existsSync(entryJs)) return entryJs;
    }
  }
  try {
    log(`installing code-server ${CODE_SERVER_VERSION} into ${installDir} (first run only, ~1 min)`);
    // Without a package.json here npm would walk up and install into the extension's own node_modules.
    writeFileSync(
      join(installDir, 'package.json'),
      JSON.stringify({ name: 'vscode-server-cache', private: true }) + '\n',
    );
    seedRipgrepCache(log);
    const started = Date.now();
    const r = spawnSync(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--no-save',
        '--yes',
        '--unsafe-perm',
        '--foreground-scripts',
        `code-server@${CODE_SERVER_VERSION}`,
      ],
      { cwd: installDir, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
    );
    writeFileSync(join(installDir, 'npm-install.log'), `${r.stdout}\n${r.stderr}`);
    if (r.status !== 0 || !existsSync(entryJs)) {
      const tail = `${r.stdout}\n${r.stderr}`.trim().split('\n').slice(-30).join('\n');
      throw new Error(
        `npm install code-server@${CODE_SERVER_VERSION} failed (exit ${r.status}); full log: ${join(installDir, 'npm-install.log')}\n${tail}\n` +
          'Needs: build-essential python3 libkrb5-dev ripgrep (apt) and the npm registry.',
      );
    }
    writeFileSync(marker, `${new Date().toISOString()}\n`);
    log(`installed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    return entryJs;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** @vscode/ripgrep downloads rg from GitHub unless its cache already holds the archive; give it Debian's rg. */
function seedRipgrepCache(log: Log): void {
  const dir = join(process.env['TMPDIR'] ?? tmpdir(), 'vscode-ripgrep-cache-1.15.11');
  const archive = join(dir, 'ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz');
  if (existsSync(archive)) return;
  if (!existsSync('/usr/bin/rg'))
    throw new Error('/usr/bin/rg is missing: apt-get install ripgrep (code-server cannot download it offline)');
  mkdirSync(dir, { recursive: true });
  const r = spawnSync('tar', ['czf', archive, '-C', '/usr/bin', 'rg'], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`could not write ${archive}`);
  log(`seeded ripgrep cache ${archive}`);
}

export interface ServerOptions {
  /** Folder the window opens; default: an empty folder in the state dir. */
  workspace?: string;
  /** User settings (settings.json) merged over the harness defaults. */
  settings?: Record<string, unknown>;
  /**
   * HOME for the server and its extension host. Default: an empty one in the state dir, so the developer's
   * ~/.ssh/config never leaks into tests. Pass `process.env.HOME` to use the real one (the demo does).
   */
  home?: string;
  /** Written to <home>/.ssh/config when given. */
  sshConfig?: string;
  env?: Record<string, string>;
  /** Fixed port (the demo's --port); default: a free one. */
  port?: number;
  /**
   * Workspace trust on, as in a VS Code as installed: the folder, never trusted in this fresh state, opens in
   * Restricted Mode (without the startup dialog; trust is granted in the Workspace Trust editor). Default: off
   * (`--disable-workspace-trust`), which every scenario but the trust one wants.
   */
  workspaceTrust?: boolean;
  /**
   * An extension folder installed as a user would have it (linked into the extensions folder and listed in its
   * extensions.json): it runs in Production mode, as from the Marketplace, where a development path runs in
   * Development mode. Open the window without `extensionDevelopmentPath` then.
   */
  installExtension?: string;
  log?: Log;
}

export interface UrlOptions {
  folder?: string;
  extensionDevelopmentPath?: string;
  extensionTestsPath?: string;
}

export interface VsCodeServer {
  port: number;
  baseUrl: string;
  stateDir: string;
  home: string;
  workspace: string;
  /** Workbench URL; the payload is how the browser workbench takes --extensionDevelopmentPath. */
  url(opts?: UrlOptions): string;
  stop(): Promise<void>;
}

const defaultSettings: Record<string, unknown> = {
  'workbench.colorTheme': 'Default Dark Modern',
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'security.workspace.trust.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'git.enabled': false,
  'window.restoreWindows': 'none',
  'chat.commandCenter.enabled': false,
  'chat.disableAIFeatures': true,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
};

const live = new Map<ChildProcess, string>();
const cleanups = new Set<() => unknown>();
let handlersInstalled = false;
let interruptedBy: NodeJS.Signals | undefined;

/** True once Ctrl+C/SIGTERM arrived: the signal handler exits after its cleanup, callers should not exit first. */
export const interrupted = (): boolean => interruptedBy !== undefined;

/**
 * Registers async cleanup (a test sshd, a browser) that runs on Ctrl+C/SIGTERM before the process exits; returns
 * the function that unregisters it. Normal exits run their own `finally` blocks instead.
 */
export function onInterrupt(cleanup: () => unknown): () => void {
  installExitHandlers();
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/** Kills every process group we started and removes their state; synchronous so it also works from 'exit'. */
export function killAllServers(): void {
  for (const [child, stateDir] of live) {
    killGroup(child, 'SIGKILL');
    if (!process.env['KG_KEEP_VSCODE_STATE'])
      rmSync(stateDir, { recursive: true, force: true, maxRetries: 3, retryDelay: 200 });
  }
  live.clear();
}

function installExitHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', killAllServers);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      interruptedBy = sig;
      process.stderr.write(`[vscode-server] ${sig}: stopping\n`);
      const all = [...cleanups].map(async (c) => {
        try {
          await c();
        } catch {
          // Best effort: we are exiting anyway.
        }
      });
      void Promise.race([Promise.all(all), sleep(10_000)]).then(() => {
        killAllServers();
        process.exit(sig === 'SIGINT' ? 130 : 143);
      });
    });
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

export async function startServer(opts: ServerOptions = {}): Promise<VsCodeServer> {
  const log = opts.log ?? defaultLog;
  const entry = await ensureCodeServer(log);
  installExitHandlers();
  const stateDir = await mkdtemp(join(tmpdir(), 'kg-vscode-'));
  const home = opts.home ?? join(stateDir, 'home');
  const workspace = opts.workspace ?? join(stateDir, 'workspace');
  for (const d of [home, workspace, join(stateDir, 'user-data', 'User'), join(stateDir, 'extensions')])
    mkdirSync(d, { recursive: true });
  if (opts.sshConfig !== undefined) {
    mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o700 });
    writeFileSync(join(home, '.ssh', 'config'), opts.sshConfig, { mode: 0o600 });
  }
  if (opts.installExtension) installExtensionFolder(opts.installExtension, join(stateDir, 'extensions'));
  const trust = opts.workspaceTrust
    ? { 'security.workspace.trust.enabled': true, 'security.workspace.trust.startupPrompt': 'never' }
    : {};
  writeFileSync(
    join(stateDir, 'user-data', 'User', 'settings.json'),
    JSON.stringify({ ...defaultSettings, ...trust, ...opts.settings }, null, 2) + '\n',
  );
  // The browser workbench takes its window settings (the color theme above all) from the server's remote settings,
  // <user-data-dir>/Machine/settings.json, not from User/settings.json: without this the window opens in the web's
  // default Light theme whatever User says (checked: .monaco-workbench has `vs`, with this `vs-dark`). Only the
  // harness defaults go there: a Machine value would override the User value the extension itself writes.
  mkdirSync(join(stateDir, 'user-data', 'Machine'), { recursive: true });
  writeFileSync(
    join(stateDir, 'user-data', 'Machine', 'settings.json'),
    JSON.stringify(
      Object.fromEntries(
        Object.entries(defaultSettings).filter(([k]) => !(k in trust) && !(opts.settings && k in opts.settings)),
      ),
      null,
      2,
    ) + '\n',
  );

  // The port can be taken between freePort() and the bind; retry a few times on that race.
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await freePort());
    writeFileSync(join(stateDir, 'config.yaml'), `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
    const logFile = join(stateDir, `server-${port}.log`);
    const out = createWriteStream(logFile);
    const child = spawn(
      process.execPath,
      [
        entry,
        '--config',
        join(stateDir, 'config.yaml'),
        '--bind-addr',
        `127.0.0.1:${port}`,
        '--auth',
        'none',
        '--user-data-dir',
        join(stateDir, 'user-data'),
        '--extensions-dir',
        join(stateDir, 'extensions'),
        '--disable-telemetry',
        '--disable-update-check',
        ...(opts.workspaceTrust ? [] : ['--disable-workspace-trust']),
        '--disable-getting-started-override',
        '--ignore-last-opened',
        workspace,
      ],
      {
        // Own process group: code-server forks a file watcher that outlives a plain kill of the main process.
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          HOME: home,
          XDG_DATA_HOME: join(stateDir, 'xdg-data'),
          XDG_CONFIG_HOME: join(stateDir, 'xdg-config'),
          XDG_CACHE_HOME: join(stateDir, 'xdg-cache'),
          ...opts.env,
        },
      },
    );
    live.set(child, stateDir);
    // A parent runner (run-tests.ts) kills these groups itself if this process dies before it can.
    const pgidFile = process.env['KG_VSCODE_PGID_FILE'];
    if (pgidFile && child.pid !== undefined) appendFileSync(pgidFile, `${child.pid}\n`);
    child.stdout?.pipe(out);
    child.stderr?.pipe(out);
    let exited: number | null | undefined;
    const exitPromise = new Promise<void>((r) =>
      child.once('exit', (code) => {
        exited = code;
        live.delete(child);
        r();
      }),
    );

    const baseUrl = `http://127.0.0.1:${port}`;
    const ready = await waitHealthy(baseUrl, () => exited !== undefined, 30_000);
    if (!ready) {
      killGroup(child, 'SIGKILL');
      await exitPromise;
      const text = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
      if (attempt < 3 && opts.port === undefined && /EADDRINUSE/.test(text)) continue;
      throw new Error(
        `code-server did not become healthy on ${baseUrl}; its log:\n${text.split('\n').slice(-40).join('\n')}`,
      );
    }
    log(`code-server ${CODE_SERVER_VERSION} on ${baseUrl} (state ${stateDir})`);

    let stopped = false;
    return {
      port,
      baseUrl,
      stateDir,
      home,
      workspace,
      url: (u: UrlOptions = {}) =>
        workbenchUrl(baseUrl, port, {
          folder: workspace,
          ...u,
          ...(u.extensionDevelopmentPath
            ? { extensionDevelopmentPath: outsideServer(u.extensionDevelopmentPath, stateDir) }
            : {}),
        }),
      stop: async () => {
        if (stopped) return;
        stopped = true;
        killGroup(child, 'SIGTERM');
        const t = setTimeout(() => killGroup(child, 'SIGKILL'), 3000);
        await Promise.race([exitPromise, sleep(5000)]);
        clearTimeout(t);
        // The watcher may still be alive even after the main process exited.
        killGroup(child, 'SIGKILL');
        live.delete(child);
        if (!process.env['KG_KEEP_VSCODE_STATE'])
          rmSync(stateDir, { recursive: true, force: true, maxRetries: 3, retryDelay: 200 });
      },
    };
  }
}

/**
 * Installs an extension folder into an extensions folder as VS Code's own install leaves it: a folder named
 * `<publisher>.<name>-<version>` (here a link) and its entry in `extensions.json`, the list VS Code reads at start.
 */
function installExtensionFolder(extensionPath: string, extensionsDir: string): void {
  const ext = resolve(extensionPath);
  const manifest = JSON.parse(readFileSync(join(ext, 'package.json'), 'utf8')) as {
    publisher: string;
    name: string;
    version: string;
  };
  const id = `${manifest.publisher}.${manifest.name}`;
  const folder = `${id}-${manifest.version}`;
  const location = join(extensionsDir, folder);
  symlinkSync(ext, location);
  const entry = {
    identifier: { id },
    version: manifest.version,
    location: { $mid: 1, path: location, scheme: 'file' },
    relativeLocation: folder,
    metadata: { installedTimestamp: Date.now(), source: 'vsix', pinned: true },
  };
  writeFileSync(join(extensionsDir, 'extensions.json'), JSON.stringify([entry]) + '\n');
}

/**
 * The extension folder as the workbench should see it. The pinned server is installed inside the repository
 * (.cache/vscode-server), so its built-in theme extensions lie under the extension under development, and VS Code
 * applies a theme found under the development folder instead of workbench.colorTheme: every window opened in
 * Light+ ("Default Light+", the first light theme it found there), whatever the settings said. A link outside the
 * repository to the same folder keeps the built-in themes out of it.
 */
function outsideServer(extensionPath: string, stateDir: string): string {
  const ext = resolve(extensionPath);
  if (!installDir.startsWith(`${ext}/`)) return ext;
  const link = join(stateDir, 'extension-under-development');
  if (!existsSync(link)) symlinkSync(ext, link);
  return link;
}

export function workbenchUrl(baseUrl: string, port: number, u: UrlOptions): string {
  const remote = (p: string) => `vscode-remote://127.0.0.1:${port}${resolve(p)}`;
  const payload: [string, string][] = [['skipWelcome', 'true']];
  if (u.extensionDevelopmentPath) payload.push(['extensionDevelopmentPath', remote(u.extensionDevelopmentPath)]);
  if (u.extensionTestsPath) payload.push(['extensionTestsPath', remote(u.extensionTestsPath)]);
  const q = new URLSearchParams();
  if (u.folder) q.set('folder', resolve(u.folder));
  q.set('payload', JSON.stringify(payload));
  return `${baseUrl}/?${q.toString()}`;
}

async function waitHealthy(baseUrl: string, dead: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !dead()) {
    try {
      const res = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (res.ok) return true;
    } catch {
      // Not listening yet.
    }
    await sleep(200);
  }
  return false;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
