import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { trainLogLine, trainLogPoints } from '../../scripts/demo/trainLog';

/*
 * The `known-good` CLI as a user gets it: `npm pack` in packages/cli, the tarball installed into a fresh prefix with
 * the network refused (--offline: the package must carry everything it runs), then the installed command run from
 * outside the checkout, with its own copy of the Python probes, against a real run folder on this machine.
 */

const repo = resolve(__dirname, '..', '..');
const pkgDir = join(repo, 'packages', 'cli');

function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  return { status: r.status, stdout: String(r.stdout), stderr: String(r.stderr), error: r.error };
}

/** A run with checkpoints at 600, 690 and 780 (batch_size 32 → 64 after 690) and a log whose tok/s drops after 690. */
function writeRun(runDir: string): void {
  const base = { model: 'gpt-small', lr: 3e-4, batch_size: 32, dataset: 'openwebtext-10k' };
  const argsAt: Record<number, object> = { 600: base, 690: base, 780: { ...base, batch_size: 64 } };
  for (const step of [600, 690, 780]) {
    const dir = join(runDir, `step_${step}`);
    mkdirSync(dir, { recursive: true });
    const w = run('python3', [
      join(repo, 'scripts', 'demo', 'write_checkpoint.py'),
      join(dir, 'checkpoint.pt'),
      '--step',
      String(step),
      '--args-json',
      JSON.stringify(argsAt[step]),
    ]);
    assert.equal(w.status, 0, w.stderr);
  }
  const points = trainLogPoints({ steps: 1000, seed: 5, changedAfter: 690 });
  writeFileSync(join(runDir, 'train_log.jsonl'), points.map(trainLogLine).join('\n') + '\n');
}

void describe('the known-good npm package', () => {
  let tmp: string;
  let tarball: string;
  let prefix: string;
  /** The installed command's environment: its bin folder and this node on PATH, a HOME of its own. */
  let env: NodeJS.ProcessEnv;

  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'kg-cli-package-'));
    const npmEnv = { ...process.env, npm_config_cache: join(tmp, 'npm-cache'), npm_config_update_notifier: 'false' };
    const packed = run('npm', ['pack', '--pack-destination', tmp, '--json'], { cwd: pkgDir, env: npmEnv });
    assert.equal(packed.status, 0, packed.stderr || packed.error?.message);
    // --json: the tarball's name after whatever the prepack script printed
    const packs = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string }[];
    assert.equal(packs.length, 1, packed.stdout);
    tarball = join(tmp, packs[0]!.filename);
    prefix = join(tmp, 'prefix');
    const installed = run('npm', ['i', '-g', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', tarball], {
      cwd: tmp,
      env: npmEnv,
    });
    assert.equal(installed.status, 0, installed.stderr);
    mkdirSync(join(tmp, 'home'));
    env = {
      ...process.env,
      HOME: join(tmp, 'home'),
      PATH: [join(prefix, 'bin'), dirname(process.execPath), '/usr/bin', '/bin'].join(delimiter),
    };
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  void it('is named known-good, has no dependencies to fetch, and carries the bundle and every probe', () => {
    assert.match(tarball, /known-good-\d+\.\d+\.\d+\.tgz$/);
    const installed = join(prefix, 'lib', 'node_modules', 'known-good');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(manifest.bin, { 'known-good': 'dist/cli.js' });
    assert.equal(manifest.dependencies, undefined);
    const extension = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string };
    assert.equal(manifest.version, extension.version, 'one release, one version');
    const probes = readdirSync(join(repo, 'python')).filter((n) => n.endsWith('.py'));
    assert.deepEqual(readdirSync(join(installed, 'python')).sort(), probes.sort());
    assert.ok(!existsSync(join(installed, 'node_modules')));
  });

  void it('known-good --help runs from the installed bin, outside the checkout', () => {
    const help = run('known-good', ['--help'], { cwd: tmp, env });
    assert.equal(help.status, 0, help.stderr || help.error?.message);
    assert.match(help.stdout, /^known-good — /);
    assert.match(help.stdout, /known-good why HOST \[RUN \[BASELINE\]\]/);
  });

  void it('known-good why local RUN reads the run with the probes it ships and names the change', () => {
    const runDir = join(tmp, 'runs', 'run-a');
    writeRun(runDir);
    const why = run('known-good', ['why', 'local', runDir, '--json'], { cwd: tmp, env });
    // exit 1: a regression to explain
    assert.equal(why.status, 1, why.stderr);
    const report = JSON.parse(why.stdout) as { headline: string; suspects: { title: string }[] };
    assert.match(report.headline, /^35\.5K tok\/s now vs 41\.8K at step_690 \(0\.85×\); changed at step 690: /);
    assert.equal(report.suspects[0]?.title, 'batch_size 32 → 64');
    const md = run('known-good', ['why', `local:${runDir}`], { cwd: tmp, env });
    assert.equal(md.status, 1, md.stderr);
    assert.ok(md.stdout.startsWith(`**${report.headline}**\n`), md.stdout);
  });

  void it("the extension's VSIX does not carry the CLI: vsce lists dist/extension.js and no dist/cli.js", () => {
    const ls = run(
      process.execPath,
      [join(repo, 'node_modules', '@vscode', 'vsce', 'vsce'), 'ls', '--no-dependencies'],
      {
        cwd: repo,
      },
    );
    assert.equal(ls.status, 0, ls.stderr);
    const files = ls.stdout.split('\n');
    assert.ok(files.includes('dist/extension.js') && files.includes('python/kg_common.py'), ls.stdout);
    assert.ok(!files.includes('dist/cli.js'), ls.stdout);
  });
});
