import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runAction } from '../../src/core/actions/runner';
import { shellQuote } from '../../src/core/quote';
import { LocalTransport } from '../../src/core/transport/local';
import { SshPool } from '../../src/core/transport/ssh';
import type { Transport } from '../../src/core/transport/types';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { pidAlive, unlessHung, waitUntil } from '../support/process';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 31, items 5 and 6: every action runs under python/kg_guard.py, bounded and owned on the host. Each case runs on
 * This machine and over a real sshd. A command says it is ready (its TERM trap set, its PIDs known) by writing to a
 * FIFO the test reads, so the test acts on a certain state; "gone" is polled under a generous bound (a hang guard,
 * not a speed), never asserted after a sleep.
 */

const PATIENCE_MS = 120_000;

const alive = pidAlive;

async function allGone(pids: number[]): Promise<boolean> {
  return waitUntil(() => pids.every((p) => !alive(p)), PATIENCE_MS);
}

/** Reads the FIFO once (blocks until the command wrote it): the PIDs it wrote. */
async function ready(fifo: string): Promise<number[]> {
  const { readFile } = await import('node:fs/promises');
  const text = await unlessHung(readFile(fifo, 'utf8'), `reading ${fifo}`, PATIENCE_MS);
  return text.split(/\s+/).filter(Boolean).map(Number);
}

/** A command that ignores TERM, starts a background sleep that ignores it too, says its PIDs, and waits. */
const stubborn = (fifo: string) => ['sh', '-c', `trap "" TERM; sleep 1000 & echo $$ $! > ${shellQuote(fifo)}; wait`];

const PY = 'python3';

for (const where of ['This machine', 'a real sshd'] as const) {
  void describe(`guarded actions on ${where}`, () => {
    let sshd: TestSshd | undefined;
    let pool: SshPool | undefined;
    let transport: Transport;
    let dir: string;
    let n = 0;
    const fifo = () => {
      const f = join(dir, `ready-${n++}`);
      execFileSync('mkfifo', [f]);
      return f;
    };

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'kg-actions-'));
      if (where === 'a real sshd') {
        sshd = await startSshd();
        pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
        transport = pool.transport(endpointOf(sshd), 'test-sshd');
      } else transport = new LocalTransport();
    });
    after(async () => {
      pool?.dispose();
      await sshd?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    void it('a run past its limit is stopped there, and the message says how', async () => {
      const r = await runAction(transport, { argv: ['sleep', '1000'], timeoutMs: 500 }, { python: PY });
      assert.equal(r.ended, 'timeout');
      assert.equal(r.exitSignal, 'TERM');
      assert.match(r.message, /^stopped at its 0\.5 s limit: SIGTERM; it ended within the 5 s grace/);
    });

    void it('a cancelled command that ignores TERM gets KILL after the grace, with what it started', async () => {
      const f = fifo();
      const ac = new AbortController();
      const run = runAction(
        transport,
        { argv: stubborn(f), timeoutMs: 600_000, graceMs: 300 },
        {
          python: PY,
          signal: ac.signal,
        },
      );
      const pids = await ready(f);
      ac.abort();
      const r = await unlessHung(run, 'the cancelled action', PATIENCE_MS);
      assert.equal(r.ended, 'cancelled');
      assert.deepEqual(r.report?.stops.map((s) => s.signal).slice(0, 2), ['TERM', 'KILL']);
      assert.match(r.message, /SIGTERM, then SIGKILL 0\.3 s later/);
      assert.ok(await allGone(pids), `left running: ${pids.filter(alive).join(', ')}`);
    });

    void it('100 MB of output: the caller keeps its tail, the report counts every byte', async () => {
      const before = process.memoryUsage().rss;
      const r = await runAction(
        transport,
        { argv: ['sh', '-c', 'head -c 100000000 /dev/zero; echo; echo speed 42'], timeoutMs: 600_000 },
        { python: PY },
      );
      assert.equal(r.ended, 'exited');
      assert.equal(r.exitCode, 0);
      assert.equal(r.report?.bytes?.stdout, 100_000_000 + 1 + 9);
      assert.equal(r.report?.leftOut?.stdout, 100_000_010 - 8 * 1024 * 1024);
      assert.ok(r.stdout.length <= 64 * 1024, `kept ${r.stdout.length} characters`);
      assert.match(r.stdout, /speed 42\n$/);
      // what this process holds grew by far less than what passed (the cap and the tail, not 100 MB)
      assert.ok(process.memoryUsage().rss - before < 90_000_000);
    });

    void it('a value is data: the environment map reaches the command, never a shell', async () => {
      const marker = join(dir, 'ran');
      const value = `$(touch ${marker}); \`touch ${marker}\`\n; touch ${marker}`;
      const r = await runAction(
        transport,
        {
          argv: ['sh', '-c', 'printf %s "$KG_VALUE"'],
          env: { set: { KG_VALUE: value }, unset: [] },
          timeoutMs: 60_000,
        },
        { python: PY },
      );
      assert.equal(r.stdout, value);
      assert.equal(existsSync(marker), false);
      await assert.rejects(
        runAction(
          transport,
          { argv: ['touch', marker], env: { set: { 'PATH=/evil:/usr/bin': 'x' }, unset: [] }, timeoutMs: 60_000 },
          { python: PY },
        ),
        /not a variable name/,
      );
      assert.equal(existsSync(marker), false);
    });

    void it('the caller killed with SIGKILL: the command and what it started stop there', async () => {
      const f = fifo();
      const spec = {
        argv: stubborn(f),
        timeoutMs: 600_000,
        python: PY,
        ...(sshd
          ? {
              sshd: {
                port: sshd.port,
                user: sshd.user,
                identityFile: sshd.identityFile,
                knownHostsFile: sshd.knownHostsFile,
              },
            }
          : {}),
      };
      const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/actionChild.ts', JSON.stringify(spec)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const pids = await ready(f);
      child.kill('SIGKILL');
      assert.ok(await allGone(pids), `left running after the caller died: ${pids.filter(alive).join(', ')}`);
    });
  });
}
