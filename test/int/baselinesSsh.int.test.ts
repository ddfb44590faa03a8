import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { envCommand } from '../../src/cli/commands/env';
import { parseCommandLine } from '../../src/cli/options';
import {
  archivesOf,
  backupCaches,
  cacheArchiveProbe,
  planBackup,
  restoreArchive,
} from '../../src/core/baselines/cacheArchive';
import { captureSnapshot, saveBaseline, type CaptureHost } from '../../src/core/baselines/capture';
import { diffDocuments } from '../../src/core/baselines/documents';
import { writeRemoteFileAtomic } from '../../src/core/baselines/remote';
import { readBaseline, BaselineStore } from '../../src/core/baselines/store';
import { isKnownGoodError } from '../../src/core/errors';
import type { HostSpec } from '../../src/core/hosts';
import { ProbeRunner } from '../../src/core/probes/runner';
import { HostRegistry } from '../../src/core/registry';
import { SshPool } from '../../src/core/transport/ssh';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { waitUntil } from '../support/process';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Baselines through a real OpenSSH sshd: capture, the copy next to the first root (and its failure as a warning),
 * compare, the CLI's exit codes, and the compile-cache archive round trip with cancel. The remote environment is
 * set through the sshd's BASH_ENV file, which every fresh session reads: the tests change it to make drift.
 */

const noSettings = { scriptGlobs: [] as string[], extraVariables: [] as string[], cacheDirs: [] as string[] };

function listFiles(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.set(p.slice(dir.length), readFileSync(p).toString('base64'));
    }
  };
  walk(dir);
  return out;
}

/** A folder the remote user cannot write to: chmod for a normal user; a read-only tmpfs when the tests run as root. */
function readOnlyDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  if (process.getuid?.() !== 0) {
    execFileSync('chmod', ['0555', dir]);
    return () => execFileSync('chmod', ['0755', dir]);
  }
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'kg-ro', dir]);
  return () => execFileSync('umount', [dir]);
}

/** Is process `pid` still running? */
function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function tarAlive(marker: string): boolean {
  try {
    execFileSync('pgrep', ['-f', `tar -c -z -f ${marker}`]);
    return true;
  } catch {
    return false;
  }
}

void describe('environment baselines through a real sshd', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let dir: string;
  let root: string;
  /** The sessions' HOME on the test host (sshd sets it): where `~/.known-good/` is. */
  let remoteHome: string;
  let bashEnv: string;
  let baseEnv: string;
  let host: CaptureHost;

  const setRemoteEnv = (extra: string) => writeFileSync(bashEnv, `${baseEnv}\n${extra}\n`);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-baselines-ssh-'));
    root = join(dir, 'checkpoints');
    mkdirSync(root);
    mkdirSync(join(dir, 'scripts'));
    writeFileSync(join(dir, 'scripts', 'train.py'), 'print("train")\n');
    writeFileSync(join(dir, 'scripts', "it's eval.py"), 'print("eval")\n');
    sshd = await startSshd({
      bashrc: [
        `export TORCHINDUCTOR_CACHE_DIR=${join(dir, 'inductor')}`,
        `export TRITON_CACHE_DIR=${join(dir, 'triton')}`,
        'export OMP_NUM_THREADS=8',
        'export WANDB_API_KEY=wandb-secret-value-1234',
      ].join('\n'),
    });
    bashEnv = join(sshd.dir, 'bash_env');
    remoteHome = join(sshd.dir, 'home');
    baseEnv = readFileSync(bashEnv, 'utf8');
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const transport = pool.transport(endpointOf(sshd), 'test-sshd');
    // One-shot probes: every capture is a fresh login that reads BASH_ENV again.
    const probes = new ProbeRunner(transport, { python: 'python3', timeoutMs: 60000, resident: false });
    host = { spec: { name: 'test-sshd', roots: [root] }, transport, probes };
  });
  after(async () => {
    pool?.dispose();
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  void it('captures, saves locally and on the host under ~/.known-good (atomically), and an unchanged machine compares clean', async () => {
    const store = new BaselineStore(join(dir, 'store'));
    const opts = { ...noSettings, scriptGlobs: [join(dir, 'scripts', '*.py')] };
    const t0 = Date.now();
    const snap = await captureSnapshot(host, opts);
    const captureMs = Date.now() - t0;
    assert.equal(snap.scripts.files.length, 2);
    assert.equal(snap.env.vars['OMP_NUM_THREADS'], '8');
    assert.match(snap.env.vars['WANDB_API_KEY'] ?? '', /^<redacted sha256:[0-9a-f]{12}>$/);

    const rootBefore = readdirSync(root).sort();
    const saved = await saveBaseline(store, host, snap, 'known good', { copyToRemote: true });
    assert.equal(saved.remoteWarning, undefined);
    assert.ok(saved.remotePath, 'a remote path is reported');
    assert.match(saved.remotePath, /^~\/\.known-good\/baselines\/env-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ\.json$/);
    // Under the host's home (the sessions' HOME), its folders made; the checkpoint root is left as it was.
    const copies = join(remoteHome, '.known-good', 'baselines');
    const copy = join(remoteHome, saved.remotePath.slice(2));
    assert.deepEqual(readdirSync(root).sort(), rootBefore);
    const remote = await readBaseline(copy);
    assert.ok(remote.ok, 'the remote copy is a valid baseline');
    assert.equal(remote.baseline.id, saved.stored.baseline.id);
    assert.equal(remote.baseline.host, host.transport.id);
    // No temp file left beside it; the secret's value is nowhere in either copy.
    assert.deepEqual(readdirSync(copies), [saved.remotePath.split('/').pop()]);
    for (const f of [copy, saved.stored.file]) assert.doesNotMatch(readFileSync(f, 'utf8'), /wandb-secret-value/);
    // Never overwritten: a second copy with the same time fails (as a warning) and the first stays.
    const again = await saveBaseline(store, host, snap, 'same second', { copyToRemote: true });
    assert.match(again.remoteWarning ?? '', /already exists: not overwritten/);
    const still = await readBaseline(copy);
    assert.equal(still.ok && still.baseline.label, 'known good');

    const now = await captureSnapshot(host, opts);
    const docs = diffDocuments(
      { snapshot: saved.stored.baseline.snapshot, title: 'baseline' },
      { snapshot: now, title: 'now' },
    );
    const differing = [...docs.left.split('\n')].filter((l, i) => l !== docs.right.split('\n')[i]);
    assert.equal(docs.drift.unchanged, true, `unchanged machine drifted: ${differing.join(' | ')}`);
    assert.equal(docs.left, docs.right);
    console.log(`capture through sshd (one-shot python): ${captureMs} ms; probe's own time ${snap.tookMs} ms`);
  });

  void it('names what drifted: an edited script, a new and a changed variable, a rotated secret', async () => {
    const opts = { ...noSettings, scriptGlobs: [join(dir, 'scripts', '*.py')] };
    const before = await captureSnapshot(host, opts);
    writeFileSync(join(dir, 'scripts', "it's eval.py"), 'print("eval, edited")\n');
    setRemoteEnv('export NCCL_P2P_DISABLE=1\nexport OMP_NUM_THREADS=16\nexport WANDB_API_KEY=rotated-secret-5678');
    try {
      const after = await captureSnapshot(host, opts);
      const docs = diffDocuments({ snapshot: before, title: 'baseline' }, { snapshot: after, title: 'now' });
      assert.equal(docs.drift.unchanged, false);
      assert.deepEqual(docs.drift.scripts.changed, [join(dir, 'scripts', "it's eval.py")]);
      assert.deepEqual(
        docs.drift.env.map((e) => `${e.name} ${e.kind}${e.redacted ? ' (secret)' : ` ${e.from ?? ''}→${e.to ?? ''}`}`),
        ['NCCL_P2P_DISABLE added →1', 'OMP_NUM_THREADS changed 8→16', 'WANDB_API_KEY changed (secret)'],
      );
      assert.match(
        docs.summaryText,
        /env of a new login on test-sshd: NCCL_P2P_DISABLE=1 added, OMP_NUM_THREADS 8 → 16, WANDB_API_KEY changed \(secret\)/,
      );
      assert.doesNotMatch(docs.right + docs.summaryText, /rotated-secret|wandb-secret/);
    } finally {
      writeFileSync(join(dir, 'scripts', "it's eval.py"), 'print("eval")\n');
      setRemoteEnv('');
    }
  });

  void it('a remote copy that cannot be written (read-only ~/.known-good) is a warning; the local baseline is kept', async () => {
    const ro = join(remoteHome, '.known-good');
    rmSync(ro, { recursive: true, force: true });
    const undo = readOnlyDir(ro);
    try {
      const store = new BaselineStore(join(dir, 'store-ro'));
      const snap = await captureSnapshot(host, noSettings);
      const saved = await saveBaseline(store, host, snap, 'ro', { copyToRemote: true });
      assert.match(
        saved.remoteWarning ?? '',
        /saved locally, but the copy on test-sshd failed: .*(Read-only|Permission denied)/,
      );
      assert.equal(saved.remotePath, undefined);
      assert.ok(existsSync(saved.stored.file));
      assert.equal((await store.list(host.transport.id)).baselines.length, 1);
      // And with copyToRemote off nothing is attempted.
      const off = await saveBaseline(store, host, snap, 'off', { copyToRemote: false });
      assert.equal(off.remoteWarning, undefined);
      assert.equal(off.remotePath, undefined);
    } finally {
      undo();
    }
  });

  void it('a connection killed mid-write leaves nothing under the final name and no temp file', async () => {
    // Its own pool: the connection is killed here.
    const p = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    const folder = join(dir, 'midwrite');
    const target = join(folder, 'env-big.json');
    const tempOf = () => {
      try {
        return readdirSync(folder).find((n) => n.startsWith('env-big.json.tmp.'));
      } catch {
        return undefined;
      }
    };
    try {
      const writing = writeRemoteFileAtomic(
        p.transport(endpointOf(sshd), 'test-sshd'),
        target,
        Buffer.alloc(64 * 1024 * 1024, 'x'),
        { timeoutMs: 120000 },
      );
      writing.catch(() => undefined);
      assert.ok(
        await waitUntil(() => {
          const t = tempOf();
          return t !== undefined && statSync(join(folder, t)).size > 1024 * 1024;
        }, 30000),
        'the temp file never grew',
      );
      // The temp file is named after the writing shell's PID; its parent is the connection's sshd process.
      const shell = Number(tempOf()!.split('.').pop());
      // Stopped at once (its process group: the shell and what it runs), the write cannot finish before the kill
      // however fast this machine is; resumed after the kill, it finds the connection gone.
      const group = Number(
        readFileSync(`/proc/${shell}/stat`, 'utf8')
          .replace(/^.*\) /s, '')
          .split(' ')[2],
      );
      assert.equal(group, shell, 'the writing shell leads a process group of its own (sshd made it a session)');
      process.kill(-group, 'SIGSTOP');
      try {
        const server = Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(shell)], { encoding: 'utf8' }).trim());
        assert.match(execFileSync('ps', ['-o', 'args=', '-p', String(server)], { encoding: 'utf8' }), /^sshd: /);
        process.kill(server, 'SIGKILL');
        await assert.rejects(writing);
      } finally {
        process.kill(-group, 'SIGCONT');
      }
      assert.ok(await waitUntil(() => !pidAlive(shell), 30_000), 'the writing shell never ended');
      assert.equal(
        existsSync(target),
        false,
        `${target} exists (${existsSync(target) ? statSync(target).size : 0} bytes)`,
      );
      assert.deepEqual(readdirSync(folder), [], 'the temp file is removed');
    } finally {
      p.dispose();
    }
  });

  void it('CLI env: --save, then --diff exits 0 when unchanged and 1 when drifted', async () => {
    const home = join(dir, 'home');
    mkdirSync(home);
    const oldHome = process.env['HOME'];
    process.env['HOME'] = home;
    const registry = new HostRegistry({ commandTimeoutMs: 60000, ssh: sshOptions(sshd, recordingPrompts().prompts) });
    const spec: HostSpec = {
      id: 'cli:test',
      name: 'test-sshd',
      source: 'cli',
      ssh: endpointOf(sshd),
      python: 'python3',
      roots: [],
    };
    registry.setHosts([spec]);
    const run = async (words: string[]) => {
      const { options } = parseCommandLine(envCommand, ['host', ...words]);
      const out = new PassThrough();
      const err = new PassThrough();
      let text = '';
      out.on('data', (c: Buffer) => (text += c.toString()));
      err.resume();
      const session = registry.session(spec);
      const code = await envCommand.run({
        session,
        open: () => ({ session }),
        registry,
        positional: [],
        rest: [],
        signal: new AbortController().signal,
        options,
        out,
        err,
      });
      return { code, text };
    };
    try {
      const saved = await run(['--save', 'cli known good']);
      assert.equal(saved.code, 0);
      assert.match(saved.text, /^saved baseline \S+ "cli known good" to .*\.known-good\/baselines\//);
      const same = await run(['--diff', 'cli known good']);
      assert.equal(same.code, 0, same.text);
      assert.match(same.text, /^No drift/);
      setRemoteEnv('export NCCL_DEBUG=INFO');
      // A fresh session: the resident helper of the first one still has the old environment.
      registry.disconnect(spec.id);
      const drifted = await run(['--diff', 'CLI KNOWN GOOD']);
      assert.equal(drifted.code, 1);
      assert.match(drifted.text, /env of a new login on test-sshd: NCCL_DEBUG=INFO added/);
      await assert.rejects(run(['--diff', 'no such baseline']), /no baseline "no such baseline"/);
    } finally {
      setRemoteEnv('');
      registry.dispose();
      process.env['HOME'] = oldHome;
    }
  });

  void it('compile cache: backup checks space, archives, restores the same files; cancel kills tar and leaves nothing', async () => {
    const inductor = join(dir, 'inductor');
    const triton = join(dir, 'triton');
    mkdirSync(join(inductor, 'ab', 'c d'), { recursive: true });
    mkdirSync(join(triton, '-odd'), { recursive: true });
    writeFileSync(join(inductor, 'ab', 'c d', "kernel 'x'.py"), 'def k(): pass\n');
    writeFileSync(join(inductor, 'fx.bin'), randomBytes(3000));
    writeFileSync(join(triton, '-odd', 'k.cubin'), randomBytes(5000));
    const before = { inductor: listFiles(inductor), triton: listFiles(triton) };

    const rootBefore = listFiles(root);
    const plan = (await host.probes.run(cacheArchiveProbe(root))).value;
    assert.deepEqual(
      plan.caches.map((c) => [c.name, c.exists, c.files]),
      [
        ['inductor', true, 2],
        ['triton', true, 1],
      ],
    );
    assert.ok(plan.dest.freeBytes! > 0);
    const backup = planBackup(plan, new Date());
    assert.equal(backup.lowSpace, undefined);
    const fractions: number[] = [];
    const result = await backupCaches(host.transport, plan, backup, { progress: (f) => fractions.push(f ?? -1) });
    assert.ok(existsSync(result.archive));
    assert.ok(statSync(result.archive).size > 0);
    assert.deepEqual(
      result.manifest.caches.map((c) => c.name),
      ['inductor', 'triton'],
    );
    // under the host user's home, never in the checkpoint root (a data folder shared with jobs)
    assert.equal(dirname(result.archive), join(remoteHome, '.known-good', 'cache-archives'));
    assert.deepEqual(listFiles(root), rootBefore);
    assert.ok(!readdirSync(dirname(result.archive)).some((n) => n.endsWith('.partial')));

    // The caches get cleared (by the user) and then restored from the archive.
    rmSync(inductor, { recursive: true });
    rmSync(join(triton, '-odd', 'k.cubin'));
    const plan2 = (await host.probes.run(cacheArchiveProbe(root))).value;
    const choice = archivesOf(plan2).find((a) => a.path === result.archive);
    assert.ok(choice?.manifest, `archive listed with its manifest: ${JSON.stringify(archivesOf(plan2))}`);
    await restoreArchive(host.transport, { ...choice, manifest: choice.manifest }, plan2.tar.gnu);
    assert.deepEqual({ inductor: listFiles(inductor), triton: listFiles(triton) }, before);

    // Cancel: a cache big enough that tar is still running at the first progress report.
    writeFileSync(join(inductor, 'big.bin'), randomBytes(24 * 1024 * 1024));
    const plan3 = (await host.probes.run(cacheArchiveProbe(root))).value;
    const big = planBackup(plan3, new Date(Date.now() + 2000));
    const ac = new AbortController();
    let reports = 0;
    await assert.rejects(
      backupCaches(host.transport, plan3, big, {
        signal: ac.signal,
        progress: () => {
          reports++;
          ac.abort();
        },
      }),
      (e: unknown) => isKnownGoodError(e, 'cancelled'),
    );
    assert.ok(reports >= 1, 'tar reported progress before the cancel');
    const gone = await waitUntil(() => !tarAlive(big.temp), 30_000);
    assert.ok(gone, 'the remote tar was killed');
    assert.equal(existsSync(big.temp), false, 'partial archive removed');
    assert.equal(existsSync(big.archive), false);
  });
});
