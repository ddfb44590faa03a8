import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { captureSnapshot, type CaptureHost } from '../../src/core/baselines/capture';
import { diffDocuments } from '../../src/core/baselines/documents';
import type { EnvSnapshot } from '../../src/core/baselines/envProbe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { SshPool } from '../../src/core/transport/ssh';
import type { ProcessHandle } from '../../src/core/transport/types';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 32 item 5: Compare Environment said "No drift" after three variables and a package had been added on the
 * host; they showed only after Disconnect. The resident helper keeps the environment, interpreter and sys.path of
 * the connection's start: a compare reads the host in a new login instead, and a run's live training process's own
 * variables beside it, each set labelled with where it came from. Through a real sshd, whose sessions read the
 * BASH_ENV file (the tests change it), with the resident helper up the whole time.
 */

const noSettings = { scriptGlobs: [] as string[], extraVariables: [] as string[], cacheDirs: [] as string[] };

/** A distribution as pip leaves one: a `.dist-info` folder with its METADATA. */
function installDist(site: string, name: string, version: string): void {
  const info = join(site, `${name.replace(/-/g, '_')}-${version}.dist-info`);
  mkdirSync(info, { recursive: true });
  writeFileSync(join(info, 'METADATA'), `Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\n`);
  writeFileSync(join(info, 'INSTALLER'), 'pip\n');
}

/** The first line a process prints (its "ready"), read from its own stdout: the state, not a wait. */
function firstLine(h: ProcessHandle): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (c: Buffer) => {
      buf += c.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      h.stdout.off('data', onData);
      resolve(buf.slice(0, nl));
    };
    h.stdout.on('data', onData);
    void h.exited.then(() => reject(new Error(`exited before its first line; it said: ${buf}`)));
  });
}

void describe('Compare Environment reads the host as it is now (real sshd, resident helper up)', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let dir: string;
  let bashEnv: string;
  let baseEnv: string;
  let python: string;
  let site: string;
  let probes: ProbeRunner;
  let host: CaptureHost;
  let baseline: EnvSnapshot;

  const setRemoteEnv = (lines: string[]) => writeFileSync(bashEnv, `${baseEnv}\n${lines.join('\n')}\n`);
  const compare = (now: EnvSnapshot) =>
    diffDocuments({ snapshot: baseline, title: 'baseline "before"' }, { snapshot: now, title: 'now' });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-env-now-'));
    // A venv that sees the system's site-packages keeps the user site folder on (a venv without them turns it off):
    // `pip install --user` on a shared GPU box creates that folder, which an interpreter started before never lists.
    execFileSync('python3', ['-m', 'venv', '--without-pip', '--system-site-packages', join(dir, 'venv')]);
    python = join(dir, 'venv', 'bin', 'python');
    site = execFileSync(python, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], {
      encoding: 'utf8',
    }).trim();
    sshd = await startSshd({ bashrc: 'export OMP_NUM_THREADS=8' });
    bashEnv = join(sshd.dir, 'bash_env');
    baseEnv = readFileSync(bashEnv, 'utf8');
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const transport = pool.transport(endpointOf(sshd), 'test-sshd');
    // The resident helper, as a session of the extension has one (never `resident: false` here).
    probes = new ProbeRunner(transport, { python, timeoutMs: 60_000 });
    host = { spec: { name: 'test-sshd', roots: [] }, transport, probes };
  });
  after(async () => {
    probes?.dispose();
    pool?.dispose();
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  void it('three variables and packages added after the helper started show in the next compare, labelled a new login', async () => {
    const helper = (await probes.helperStatus()).pid;
    baseline = await captureSnapshot(host, noSettings);
    assert.equal(baseline.env.vars['OMP_NUM_THREADS'], '8');
    const userSite = (
      await host.transport.exec([python, '-c', 'import site; print(site.getusersitepackages())'])
    ).stdout.trim();
    assert.ok(userSite.startsWith(join(sshd.dir, 'home')), userSite);

    setRemoteEnv([
      'export NCCL_P2P_DISABLE=1',
      'export TORCH_NCCL_BLOCKING_WAIT=1',
      'export CUDA_DEVICE_MAX_CONNECTIONS=1',
    ]);
    installDist(site, 'kg-site-pkg', '1.0');
    installDist(userSite, 'kg-user-pkg', '2.0');
    try {
      const docs = compare(await captureSnapshot(host, noSettings));
      assert.equal(docs.drift.unchanged, false);
      assert.deepEqual(
        {
          env: docs.drift.env.map((e) => `${e.name} ${e.kind} ${e.to ?? ''}`),
          packages: docs.drift.packages.added.map((p) => `${p.name} ${p.to}`),
        },
        {
          env: ['CUDA_DEVICE_MAX_CONNECTIONS added 1', 'NCCL_P2P_DISABLE added 1', 'TORCH_NCCL_BLOCKING_WAIT added 1'],
          // the user site folder did not exist when the helper started: only a new interpreter lists it
          packages: ['kg-site-pkg 1.0', 'kg-user-pkg 2.0'],
        },
      );
      // Said with where the variables came from, in the summary and atop both sides of the diff.
      assert.match(
        docs.summaryText,
        /\n {2}env of a new login on test-sshd: CUDA_DEVICE_MAX_CONNECTIONS=1 added, NCCL_P2P_DISABLE=1 added, TORCH_NCCL_BLOCKING_WAIT=1 added\n/,
      );
      assert.match(docs.summaryText, /\n {2}packages: added kg-site-pkg 1\.0, kg-user-pkg 2\.0\n/);
      const sources = 'Variables: baseline — a new login on test-sshd; now — a new login on test-sshd';
      assert.ok(docs.left.includes(`# ${sources}\n`) && docs.right.includes(`# ${sources}\n`), docs.left);
      assert.match(docs.headline, /^2 differences between baseline "before" and now — packages, env of a new login/);
      assert.equal(baseline.env.source, 'a new login on test-sshd');
      // Without a disconnect: the same helper serves the host all along.
      assert.equal((await probes.helperStatus()).pid, helper);
    } finally {
      setRemoteEnv([]);
      rmSync(join(site, 'kg_site_pkg-1.0.dist-info'), { recursive: true, force: true });
      rmSync(join(userSite, 'kg_user_pkg-2.0.dist-info'), { recursive: true, force: true });
    }
  });

  void it("a run's live training process is compared too, with its own variables, labelled with its id and command", async () => {
    const run = join(dir, 'runs', 'a');
    mkdirSync(run, { recursive: true });
    const train = join(run, 'train.py');
    // It holds its log open (how the run's process is found) and runs until the test closes its stdin.
    writeFileSync(
      train,
      'import os, sys\nlog = open(os.path.join(os.path.dirname(__file__), "train.log"), "a")\n' +
        'print(os.getpid(), flush=True)\nsys.stdin.read()\n',
    );
    // Launched on the host (as a person would, with one variable of its own), in the login's environment.
    const trainer = await host.transport.spawn(['env', 'NCCL_ALGO=Tree', python, train, '--steps', '100']);
    try {
      const pid = Number(await firstLine(trainer));
      const docs = compare(await captureSnapshot(host, { ...noSettings, run }));
      const proc = docs.drift.liveRun?.process;
      assert.equal(proc?.pid, pid);
      assert.deepEqual(
        proc?.changes.map((e) => `${e.name} ${e.kind} ${e.to ?? ''}`),
        ['NCCL_ALGO added Tree'],
      );
      assert.deepEqual(docs.drift.env, [], 'the new login has no NCCL_ALGO: nothing else differs');
      const label = `the training process ${pid} (python train.py --steps 100)`;
      assert.ok(docs.summaryText.includes(`\n  env of ${label}`), docs.summaryText);
      assert.match(docs.summaryText, /: NCCL_ALGO=Tree added\n/);
      assert.match(
        docs.summaryText,
        new RegExp(
          `now — a new login on test-sshd and ${label.replace(/[()]/g, '\\$&')} of ${run} \\(1 differing, \\d+ as the baseline's\\)`,
        ),
      );
      assert.match(docs.headline, /^1 difference between baseline "before" and now — env of the training process/);
      assert.ok(docs.left.includes(`#   env of ${label}`), docs.left);
    } finally {
      trainer.stdin.end();
      await trainer.exited;
    }
    // Nothing runs in the run any more: the compare says so, and nothing differs.
    const docs = compare(await captureSnapshot(host, { ...noSettings, run }));
    assert.equal(docs.drift.unchanged, true, docs.summaryText);
    assert.match(docs.summaryText, new RegExp(`; no training process of ${run} runs now\\n`));
  });
});
