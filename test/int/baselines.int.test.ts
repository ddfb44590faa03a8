import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { computeDrift } from '../../src/core/baselines/drift';
import { envSnapshotProbe } from '../../src/core/baselines/envProbe';
import { renderSnapshot } from '../../src/core/baselines/render';
import { BaselineStore, hostFolder } from '../../src/core/baselines/store';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { cloneSnapshot, h200KnownGood } from '../fixtures/env';

const STORE_TS = resolve(__dirname, '../../src/core/baselines/store.ts');
// 8 MB of JSON: written in many chunks then fsynced, so most of a save's time is the write a kill must not tear.
const BIG_TEXT = 8 * 1024 * 1024;

void describe('baseline store under SIGKILL', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kg-baselines-kill-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  void it('lists only complete baselines after writers are killed at random points', async (t) => {
    const big = cloneSnapshot(h200KnownGood);
    big.gpus.topology!.raw = 'GPU0\tX\tNV18\n'.repeat(BIG_TEXT / 12);
    const snapFile = join(dir, 'snapshot.json');
    await writeFile(snapFile, JSON.stringify(big));
    const child = join(dir, 'writer.ts');
    await writeFile(
      child,
      `import { readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { BaselineStore } from ${JSON.stringify(STORE_TS)};
const snapshot = JSON.parse(readFileSync(process.argv[2]!, 'utf8'));
const store = new BaselineStore(process.argv[3]!);
// Save number holdAt stops at its first fsync, its temp file written, and says so: the parent kills it there.
const holdAt = Number(process.argv[4]);
let current = -1;
void (async () => {
  const probe = await open(process.argv[2]!, 'r');
  const proto = Object.getPrototypeOf(probe);
  await probe.close();
  const sync = proto.sync;
  proto.sync = function (this: unknown) {
    if (current !== holdAt) return sync.call(this);
    process.stdout.write('in-write\\n');
    return new Promise(() => undefined);
  };
  for (let i = 0; ; i++) {
    current = i;
    process.stdout.write('saving ' + i + '\\n');
    await store.save({ label: 'big ' + i, host: 'local', snapshot });
  }
})();
`,
    );
    const storeDir = join(dir, 'baselines');
    // Until a kill has torn a write at least once (a temp file left behind), so the test proves what it claims.
    let kills = 0;
    const hostDir = join(storeDir, hostFolder('local'));
    await mkdir(hostDir, { recursive: true });
    const tempFiles = async () => (await readdir(hostDir)).filter((n) => n.startsWith('.tmp-'));
    while (kills < 4 || ((await tempFiles()).length === 0 && kills < 12)) {
      kills++;
      const saves = 2 + Math.floor(Math.random() * 2); // the first save completes, a later one is killed
      // Every other writer is held inside the write of its last save (its temp file written, before the fsync) and
      // killed there: a torn write is certain, whatever this machine's speed. The others die at any point.
      const inWrite = kills % 2 === 0;
      const proc = spawn(
        process.execPath,
        ['--import', 'tsx', child, snapFile, storeDir, String(inWrite ? saves - 1 : -1)],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      await new Promise<void>((res, rej) => {
        let out = '';
        let armed = false;
        const kill = (delayMs: number) => {
          if (armed) return;
          armed = true;
          setTimeout(() => {
            proc.kill('SIGKILL');
            res();
          }, delayMs);
        };
        proc.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          if (inWrite && out.includes('in-write\n')) kill(0);
          if (!inWrite && (out.match(/saving/g) ?? []).length >= saves) kill(Math.random() * 60);
        });
        proc.once('exit', (code, sig) => {
          if (sig !== 'SIGKILL') rej(new Error(`writer exited early (${code}): ${stderr}`));
        });
      });
      await new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r(null) : proc.once('exit', r)));
    }

    const store = new BaselineStore(storeDir);
    const { baselines, problems } = await store.list();
    assert.deepEqual(problems, [], 'no partial file is ever listed');
    assert.ok(baselines.length >= 1, 'some saves completed');
    for (const b of baselines) assert.equal(b.baseline.snapshot.gpus.topology?.raw, big.gpus.topology!.raw);
    assert.equal(store.hostDir('local'), hostDir);
    const names = await readdir(hostDir);
    const temps = names.filter((n) => n.startsWith('.tmp-'));
    assert.ok(temps.length >= 1, `no kill landed inside a write in ${kills} tries`);
    t.diagnostic(
      `${baselines.length} complete baselines, ${temps.length} interrupted temp files left by ${kills} kills`,
    );
    assert.equal(names.length - temps.length, baselines.length, 'every non-temp file is a complete baseline');
  });
});

void describe('env_snapshot through the probe runner', () => {
  const runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 60_000 });
  after(() => runner.dispose());

  void it('captures this machine, and an unchanged machine renders identical text twice', async () => {
    const t0 = Date.now();
    const a = await runner.run(envSnapshotProbe({ roots: [tmpdir()], scripts: [join(__dirname, '*.ts')] }));
    const t1 = Date.now();
    const b = await runner.run(envSnapshotProbe({ roots: [tmpdir()], scripts: [join(__dirname, '*.ts')] }));
    const t2 = Date.now();
    assert.equal(a.value.schema, 1);
    assert.ok((a.value.packages.count ?? 0) > 0);
    assert.equal(a.value.python.executable, a.python.executable);
    assert.ok(
      a.value.scripts.files.some(
        (f) => f.path.endsWith('baselines.int.test.ts') && /^[0-9a-f]{64}$/.test(f.sha256 ?? ''),
      ),
    );
    assert.equal(renderSnapshot(b.value).text, renderSnapshot(a.value).text);
    const drift = computeDrift(a.value, b.value);
    assert.equal(drift.unchanged, true, JSON.stringify(drift));
    console.log(
      `env_snapshot: first ${t1 - t0} ms (helper start), second ${t2 - t1} ms; probe says ${b.value.tookMs} ms`,
    );
  });

  void it('reads Debian torch files without importing torch (one-shot, /usr/bin/python3)', async () => {
    // Never skipped: .ci/run installs python3-torch; without it this fails and says so.
    assert.ok(existsSync('/usr/lib/python3/dist-packages/torch/version.py'), 'install python3-torch (Debian)');
    const deb = new ProbeRunner(new LocalTransport(), { python: '/usr/bin/python3', timeoutMs: 60_000 });
    try {
      const r = await deb.runOnce(envSnapshotProbe({}));
      // torch's own string (torch/version.py, what torch.__version__ says) and pip's distribution version beside it
      const own = execFileSync('/usr/bin/python3', ['-c', 'import torch; print(torch.__version__)'], {
        encoding: 'utf8',
      });
      assert.equal(r.value.torch.version, own.trim());
      assert.match(r.value.torch.version ?? '', /^1\.13/);
      assert.equal(r.value.torch.location, '/usr/lib/python3/dist-packages/torch');
      assert.equal(r.value.packages.packages['torch'], r.value.torch.distVersion);
      // Not imported: its peak RSS says so whatever the machine's speed (23 MB here; `import torch` alone: 240 MB).
      assert.ok(r.footprint, 'the one-shot run reports its footprint');
      assert.ok(r.footprint.maxRssKb < 120 << 10, `peak RSS ${r.footprint.maxRssKb} KB: was torch imported?`);
    } finally {
      deb.dispose();
    }
  });
});
