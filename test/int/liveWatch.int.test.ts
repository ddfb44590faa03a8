import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BaselineStore } from '../../src/core/baselines/store';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LocalTransport } from '../../src/core/transport/local';
import { whatChanged } from '../../src/core/whatChanged/gather';
import { launchRecordSchema } from '../../src/core/whatChanged/factsProbe';
import { LiveWatch } from '../../src/core/whatChanged/liveWatch';
import { WhatChangedStore } from '../../src/core/whatChanged/store';
import { materializeRealRuns } from '../support/realRuns';

/*
 * Issue 23: "the dashboard's follow mode and the tree's auto-refresh already poll; a new PID is a restart". The polls'
 * LiveWatch on a real corpus run (plain-launch-blocking, its launch records taken away) with real processes working
 * in it: the restart is seen and kept by the polls alone, and the next What Changed? report (which never saw the
 * process before) ranks the environment the new process started with first.
 */

function started(run: string, env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const p = spawn('sh', ['-c', 'echo ready; exec sleep 600'], { cwd: run, env, stdio: ['ignore', 'pipe', 'ignore'] });
    p.stdout.once('data', () => resolve(p));
    p.once('error', reject);
  });
}

/** The log written: its mtime moved on (what a training process appending a line does to the poll's state). */
function written(log: string, s: number): void {
  const t = statSync(log).mtime.getTime() / 1000 + s;
  utimesSync(log, t, t);
}

void describe('LiveWatch: a new process seen by the polls is a restart', () => {
  let dir: string;
  let run: string;
  let log: string;
  let runner: ProbeRunner;
  let baselines: BaselineStore;
  const procs: ChildProcess[] = [];

  before(() => {
    dir = materializeRealRuns('regressions');
    run = join(dirname(dir), 'polled');
    cpSync(join(dir, 'plain-launch-blocking'), run, { recursive: true, preserveTimestamps: true });
    rmSync(join(run, '.known-good'), { recursive: true });
    log = join(run, 'train_log.jsonl');
    runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 120_000 });
    baselines = new BaselineStore(mkdtempSync(join(tmpdir(), 'kg-livewatch-store-')));
  });
  after(() => {
    for (const p of procs) p.kill('SIGKILL');
    runner?.dispose();
    if (dir) rmSync(dirname(dir), { recursive: true, force: true });
    if (baselines) rmSync(baselines.dir, { recursive: true, force: true });
  });

  void it('seen once per log change, kept, and the restart ranks the new environment first in the next report', async () => {
    const store = new WhatChangedStore(baselines);
    const watch = new LiveWatch(store);
    const host = { id: 'local', probes: runner };
    const env = { ...process.env };
    delete env.CUDA_LAUNCH_BLOCKING;
    const first = await started(run, env);
    procs.push(first);

    const [seen] = await watch.poll(host, [{ run, log }]);
    assert.deepEqual(
      seen?.running.map((r) => r.pid),
      [first.pid],
    );
    assert.deepEqual(seen?.restarts, []);

    // the training process replaced; the log not written yet: the poll does not look (no /proc pass), sees nothing
    first.kill('SIGKILL');
    const second = await started(run, { ...env, CUDA_LAUNCH_BLOCKING: '1' });
    procs.push(second);
    assert.deepEqual(await watch.poll(host, [{ run, log }]), []);
    assert.deepEqual(
      watch.state('local', run)?.running.map((r) => r.pid),
      [first.pid],
    );

    // the new process writes its log: the next poll looks, and a new PID after the old one ended is a restart
    written(log, 5);
    const [restarted] = await watch.poll(host, [{ run, log }]);
    assert.deepEqual(
      restarted?.running.map((r) => r.pid),
      [second.pid],
    );
    assert.equal(restarted?.restarts.length, 1);
    assert.equal(restarted?.restarts[0]?.before.pid, first.pid);
    assert.equal(restarted?.restarts[0]?.after.pid, second.pid);
    assert.equal(restarted?.restarts[0]?.after.env['CUDA_LAUNCH_BLOCKING'], '1');
    assert.deepEqual(
      (await store.liveHistory('local', run)).map((r) => r.pid),
      [first.pid, second.pid],
    );

    // a second process beside the running one (a `tail -f` of the log) is no restart
    const tail = await started(run, env);
    procs.push(tail);
    written(log, 10);
    const [beside] = await watch.poll(host, [{ run, log }]);
    assert.equal(beside?.running.length, 2);
    assert.equal(beside?.restarts.length, 1);
    tail.kill('SIGKILL');

    // no report saw the first process; the one the polls kept is compared with the new one
    const report = await whatChanged({ id: 'local', label: 'This machine', probes: runner }, run, { store: baselines });
    assert.equal(report.verdict, 'regression', report.headline);
    assert.match(
      report.suspects[0]?.title ?? '',
      /^process env: CUDA_LAUNCH_BLOCKING=1 added \(restart at step 6\d\d\)$/,
      report.suspects.map((s) => s.title).join('; '),
    );
  });

  void it("the CUDA libraries two kept processes mapped, compared by library: 'loaded libcudnn 9.1.0 → 9.8.0' ranks first", async () => {
    // the processes kept by earlier polls of a copy of the run, as python/live_process.py reads them from
    // /proc/PID/maps (no CUDA here): the same environment, libcudnn upgraded between the two launches
    const copy = join(dirname(dir), 'libs');
    cpSync(join(dir, 'plain-launch-blocking'), copy, { recursive: true, preserveTimestamps: true });
    rmSync(join(copy, '.known-good'), { recursive: true });
    const own = new BaselineStore(mkdtempSync(join(tmpdir(), 'kg-livewatch-libs-')));
    try {
      const store = new WhatChangedStore(own);
      const proc = (pid: number, time: number, cudnn: string) =>
        launchRecordSchema.parse({
          source: 'live',
          where: `/proc/${pid}`,
          pid,
          time,
          argv: ['python3', 'train.py'],
          env: { HOME: '/home/u' },
          libs: {
            [`libcudnn.so.${cudnn}`]: cudnn,
            'libnccl.so.2': '2',
            'libtorch_cuda.so': '/venv/torch/lib/libtorch_cuda.so',
          },
        });
      const a = proc(11, 1_764_600_000, '9.1.0');
      await store.saveLive('local', copy, a, []);
      await store.saveLive('local', copy, proc(12, 1_764_600_100, '9.8.0'), [a]);
      const report = await whatChanged({ id: 'local', label: 'This machine', probes: runner }, copy, { store: own });
      assert.equal(report.verdict, 'regression', report.headline);
      assert.match(
        report.suspects[0]?.title ?? '',
        /^loaded libcudnn 9\.1\.0 → 9\.8\.0 \(restart at step 6\d\d\)$/,
        report.suspects.map((s) => s.title).join('; '),
      );
      assert.ok(!report.suspects.some((s) => /libnccl|libtorch_cuda/.test(s.title)));
    } finally {
      rmSync(own.dir, { recursive: true, force: true });
    }
  });

  void it('a report keeps only the oldest process working in the run: one started beside it (a tail -f) is no launch', async () => {
    const copy = join(dirname(dir), 'beside');
    cpSync(join(dir, 'plain-launch-blocking'), copy, { recursive: true, preserveTimestamps: true });
    rmSync(join(copy, '.known-good'), { recursive: true });
    const own = new BaselineStore(mkdtempSync(join(tmpdir(), 'kg-livewatch-beside-')));
    const host = { id: 'local', label: 'This machine', probes: runner };
    const env = { ...process.env };
    delete env.CUDA_LAUNCH_BLOCKING;
    try {
      const first = await started(copy, env);
      procs.push(first);
      await whatChanged(host, copy, { store: own });
      first.kill('SIGKILL');
      procs.push(await started(copy, { ...env, CUDA_LAUNCH_BLOCKING: '1' }));
      procs.push(await started(copy, env)); // a `tail -f` of the log, started after the training process
      const report = await whatChanged(host, copy, { store: own });
      assert.equal(report.launches?.running?.length, 2);
      const titles = report.suspects.map((s) => s.title);
      assert.match(
        titles[0] ?? '',
        /^process env: CUDA_LAUNCH_BLOCKING=1 added \(restart at step 6\d\d\)$/,
        titles.join('; '),
      );
      assert.ok(!titles.some((t) => /CUDA_LAUNCH_BLOCKING=1 removed/.test(t)), titles.join('; '));
      assert.equal((await new WhatChangedStore(own).liveHistory('local', copy)).length, 2);
    } finally {
      rmSync(own.dir, { recursive: true, force: true });
    }
  });
});
