// npm run demo — try Known Good on this machine: builds, writes a demo checkpoints root (real torch-format
// checkpoints written without torch, a train_log.jsonl and a stdout log) under .cache/demo/, then opens VS Code with
// the extension and a workspace whose "This machine" points at that root.
//
//   npm run demo                 desktop `code` when on PATH, else the pinned VS Code server (prints the URL)
//   npm run demo -- --server     always the VS Code server;  --port N  fixed port (default: a free one)
//   npm run demo -- --check      headless: start, check the tree shows the demo host, screenshot, stop (for CI)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchBrowser } from '../vscode/browser';
import { trainLogLine, trainLogPoints } from './trainLog';
import { interrupted, repoRoot, startServer, type VsCodeServer } from '../vscode/server';

const args = process.argv.slice(2);
const check = args.includes('--check');
const portAt = args.indexOf('--port');
const demoDir = join(repoRoot, '.cache', 'demo');
const root = join(demoDir, 'checkpoints');
const workspace = join(demoDir, 'workspace');
/** Bump when the generated data changes, so old .cache/demo folders are rewritten. */
const DATA_VERSION = '2';

const say = (line: string) => process.stdout.write(`[demo] ${line}\n`);

interface RunSpec {
  name: string;
  steps: number[];
  /** Args per checkpoint step; later steps inherit earlier ones. */
  args: Record<number, Record<string, unknown>>;
  logSteps: number;
}

const baseArgs = {
  model: 'gpt-small',
  n_layer: 12,
  d_model: 768,
  lr: 3e-4,
  batch_size: 32,
  warmup_steps: 100,
  weight_decay: 0.1,
  grad_clip: 1.0,
  optimizer: 'adamw',
  dataset: 'openwebtext-10k',
  seed: 1234,
};

const runs: RunSpec[] = [
  // The story: step_600 is the last known good; at step 690 someone halved lr and doubled the batch.
  {
    name: 'run-a',
    steps: [600, 690, 780],
    args: { 600: baseArgs, 690: { lr: 1.5e-4, batch_size: 64 } },
    logSteps: 3000,
  },
  { name: 'run-b', steps: [100, 200], args: { 100: { ...baseArgs, seed: 7 } }, logSteps: 400 },
];

function generate(): void {
  const stamp = join(demoDir, '.version');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === DATA_VERSION && existsSync(root)) return;
  say(`writing demo checkpoints under ${root}`);
  rmSync(root, { recursive: true, force: true });
  for (const run of runs) {
    const runDir = join(root, run.name);
    mkdirSync(runDir, { recursive: true });
    let args: Record<string, unknown> = {};
    for (const [i, step] of run.steps.entries()) {
      args = { ...args, ...run.args[step], max_steps: run.logSteps };
      const dir = join(runDir, `step_${step}`);
      mkdirSync(dir, { recursive: true });
      const r = spawnSync(
        'python3',
        [
          join(repoRoot, 'scripts', 'demo', 'write_checkpoint.py'),
          join(dir, 'checkpoint.pt'),
          '--step',
          String(step),
          '--args-json',
          JSON.stringify(args),
          '--size-mb',
          String(0.25 * (1 + i)),
        ],
        { encoding: 'utf8' },
      );
      if (r.status !== 0) throw new Error(`write_checkpoint.py failed: ${r.stderr || r.error?.message}`);
      writeFileSync(join(dir, 'config.json'), JSON.stringify(args, null, 2) + '\n');
    }
    writeTrainLog(runDir, run);
  }
  mkdirSync(join(workspace, '.vscode'), { recursive: true });
  writeFileSync(
    join(workspace, '.vscode', 'settings.json'),
    JSON.stringify({ 'knownGood.localRoots': [root] }, null, 2) + '\n',
  );
  writeFileSync(
    join(workspace, 'README.md'),
    `# Known Good demo\n\nOpen the **Known Good** view in the activity bar: "This machine" lists \`${root}\`.\n` +
      'In run-a, step_600 is the last known good checkpoint; compare it with step_690.\n',
  );
  writeFileSync(stamp, DATA_VERSION);
}

/** A deterministic training curve: loss falls, the lr schedule warms up then decays, and throughput drops after 690. */
function writeTrainLog(runDir: string, run: RunSpec): void {
  const lines: string[] = [];
  const stdout: string[] = [`[${run.name}] starting: ${JSON.stringify(baseArgs)}`];
  const points = trainLogPoints({
    steps: run.logSteps,
    seed: run.name.length * 9973,
    ...(run.name === 'run-a' ? { changedAfter: 690 } : {}),
  });
  for (const p of points) {
    lines.push(trainLogLine(p));
    if (p.step % 10 === 0) {
      stdout.push(
        `step ${p.step} | loss ${p.loss.toFixed(4)} | lr ${p.lr.toExponential(2)} | ${Math.round(p.tokPerS)} tok/s`,
      );
    }
    if (run.steps.includes(p.step)) stdout.push(`saved checkpoint step_${p.step}/checkpoint.pt`);
  }
  writeFileSync(join(runDir, 'train_log.jsonl'), lines.join('\n') + '\n');
  writeFileSync(join(runDir, 'train_stdout.log'), stdout.join('\n') + '\n');
}

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

async function runCheck(server: VsCodeServer): Promise<void> {
  const browser = await launchBrowser();
  const shots = join(repoRoot, 'test-artifacts', 'demo');
  mkdirSync(shots, { recursive: true });
  try {
    const { page } = browser;
    await page.goto(server.url({ extensionDevelopmentPath: repoRoot }));
    const tab = page.getByRole('tab', { name: /^Known Good/ });
    await tab.waitFor({ timeout: 90_000 });
    await tab.click();
    const sideBar = page.locator('#workbench\\.parts\\.sidebar');
    const host = sideBar.getByRole('treeitem', { name: /^This machine/ });
    await host.waitFor({ timeout: 30_000 });
    if ((await host.getAttribute('aria-expanded')) !== 'true') await host.click();
    await sideBar
      .getByRole('treeitem', { name: new RegExp(`^${root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`) })
      .waitFor({ timeout: 30_000 });
    const shot = join(shots, 'demo.png');
    await page.screenshot({ path: shot });
    say(`check passed: "This machine" lists ${root}; screenshot ${shot}`);
  } catch (e) {
    await browser.page.screenshot({ path: join(shots, 'demo-FAILED.png') }).catch(() => undefined);
    throw e;
  } finally {
    await browser.close();
  }
}

/** The checkpoints are meant to be read by real torch; prove it where Debian's torch is installed. */
function checkWithTorch(): void {
  if (!existsSync('/usr/lib/python3/dist-packages/torch')) {
    say('torch not installed at /usr/bin/python3: skipping the torch.load check');
    return;
  }
  const code = [
    'import sys, torch',
    'a = torch.load(sys.argv[1], map_location="cpu", weights_only=False)',
    'b = torch.load(sys.argv[2], map_location="cpu", weights_only=False)',
    'assert a["args"]["lr"] == 3e-4 and b["args"]["lr"] == 1.5e-4, (a["args"], b["args"])',
    'assert a["step"] == 600 and tuple(a["model"]["encoder.weight"].shape) == (8, 4)',
    'print("torch.load ok:", a["args"]["lr"], "->", b["args"]["lr"])',
  ].join('\n');
  const r = spawnSync(
    '/usr/bin/python3',
    ['-c', code, join(root, 'run-a', 'step_600', 'checkpoint.pt'), join(root, 'run-a', 'step_690', 'checkpoint.pt')],
    {
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) throw new Error(`torch.load could not read the demo checkpoints:\n${r.stderr}`);
  say(r.stdout.trim());
}

async function main(): Promise<number> {
  const b = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'build.mjs')], { cwd: repoRoot, stdio: 'inherit' });
  if (b.status !== 0) return b.status ?? 1;
  generate();

  if (!check && !args.includes('--server') && onPath('code')) {
    say(`opening desktop VS Code: code --extensionDevelopmentPath=${repoRoot} ${workspace}`);
    const r = spawnSync('code', [`--extensionDevelopmentPath=${repoRoot}`, '--new-window', workspace], {
      stdio: 'inherit',
    });
    return r.status ?? 1;
  }

  const server = await startServer({
    workspace,
    // The real home: the demo window also lists the user's own ~/.ssh/config hosts, as the extension would.
    ...(check ? {} : { home: process.env['HOME'] ?? '/root' }),
    ...(portAt >= 0 ? { port: Number(args[portAt + 1]) } : {}),
    settings: check ? { 'knownGood.includeSshConfigHosts': false } : {},
  });
  if (check) {
    try {
      checkWithTorch();
      await runCheck(server);
      return 0;
    } finally {
      await server.stop();
    }
  }
  const url = server.url({ extensionDevelopmentPath: repoRoot });
  say('Known Good is running in VS Code (the pinned VS Code server). Open this URL in a browser on this machine:');
  process.stdout.write(`\n  ${url}\n\n`);
  say(`from another machine: ssh -L ${server.port}:127.0.0.1:${server.port} <this host>, then open the URL there.`);
  say('Ctrl+C stops it.');
  await new Promise<never>(() => undefined); // server.ts stops the server on SIGINT/SIGTERM.
  return 0;
}

main().then(
  (code) => {
    if (!interrupted()) process.exit(code);
  },
  (err: unknown) => {
    if (interrupted()) return; // The signal handler exits once its cleanup is done.
    process.stderr.write(`[demo] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
