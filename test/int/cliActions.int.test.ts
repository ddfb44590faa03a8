import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { shellQuote } from '../../src/core/quote';
import { pidAlive, unlessHung, waitUntil } from '../support/process';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 31 items 5 and 6 as a user meets them: `known-good bisect` with the user's own benchmark, whose runs were
 * unbounded (`--timeout 10` ignored, still running after 90 s), went on after the CLI was killed, and left the
 * remote command running with parent pid 1 after Ctrl+C. Each case on This machine and over a real sshd. The
 * benchmark ignores TERM and starts a background sleep that ignores it too; it writes both PIDs to a FIFO the test
 * reads before it acts, so the state is certain. "Gone" is polled under a generous bound (a hang guard).
 */

const CLI = ['--import', 'tsx', 'src/cli/main.ts'];

function releaseFifo(fifo: string): void {
  try {
    closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
  } catch {
    /* nobody reads it */
  }
}
const PATIENCE_MS = 120_000;

const alive = pidAlive;

for (const where of ['local', 'ssh'] as const) {
  void describe(`CLI actions stop with the CLI (${where === 'local' ? 'This machine' : 'a real sshd'})`, () => {
    let dir: string;
    let sshd: TestSshd | undefined;
    let hostWords: string[];
    let n = 0;
    const env = (value: string) => ({ ...process.env, HOME: dir, NCCL_DEBUG: value });
    /** The variable that differs between the baseline and now: for ssh, in the sessions' BASH_ENV. */
    let setNow: (value: string) => void;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'kg-cli-actions-'));
      if (where === 'ssh') {
        sshd = await startSshd();
        const bashEnv = join(sshd.dir, 'bash_env');
        const base = readFileSync(bashEnv, 'utf8');
        setNow = (v) => writeFileSync(bashEnv, `${base}\nexport NCCL_DEBUG=${v}\n`);
        hostWords = [
          `${sshd.user}@127.0.0.1:${sshd.port}`,
          '--identity',
          sshd.identityFile,
          '--known-hosts',
          sshd.knownHostsFile,
        ];
      } else {
        setNow = () => undefined;
        hostWords = ['local'];
      }
      setNow('good');
      const saved = spawnSync(process.execPath, [...CLI, 'env', ...hostWords, '--save', 'good'], {
        encoding: 'utf8',
        env: env('good'),
      });
      assert.equal(saved.status, 0, saved.stderr);
      setNow('bad');
    });
    after(async () => {
      await sshd?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    /** Starts a bisect whose benchmark says its PIDs on a FIFO, ignores TERM and waits; resolves with them. */
    async function startBisect(timeoutS: number) {
      return startCli(
        (script) => ['bisect', ...hostWords, 'good', '--bench', script, '--regex', 'speed (\\d+)'],
        timeoutS,
      );
    }

    /** `known-good exec HOST -- sh -c SCRIPT`, the script the same stubborn one. */
    async function startExec(timeoutS: number) {
      return startCli((script) => ['exec', ...hostWords, '--', 'sh', '-c', script], timeoutS);
    }

    async function startCli(words: (script: string) => string[], timeoutS: number) {
      const fifo = join(dir, `ready-${n++}`);
      execFileSync('mkfifo', [fifo]);
      const script = `trap "" TERM; sleep 1000 & echo $$ $! > ${shellQuote(fifo)}; wait; echo speed 1`;
      // --timeout before the command's words: after `--` it would be the command's own
      const [first, ...more] = words(script);
      const child = spawn(process.execPath, [...CLI, first!, '--timeout', `${timeoutS}`, ...more], {
        env: env('bad'),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.stdout.resume();
      const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
      // A CLI that ends before the benchmark ran fails the test at once (its stderr says why); the FIFO's pending
      // open is then released by opening its other end here (non-blocking: nobody may be reading any more).
      let read = false;
      const reading = readFile(fifo, 'utf8').then((t) => {
        read = true;
        return t;
      });
      const early = exited.then((code) => {
        if (!read) releaseFifo(fifo);
        throw new Error(`the CLI exited (${code}) before the benchmark said it was ready: ${stderr}`);
      });
      early.catch(() => undefined);
      const text = await unlessHung(Promise.race([reading, early]), 'the benchmark saying it is ready', PATIENCE_MS);
      const pids = text.split(/\s+/).filter(Boolean).map(Number);
      assert.equal(pids.length, 2);
      return { child, pids, exited, stderr: () => stderr };
    }

    const gone = (pids: number[]) => waitUntil(() => pids.every((p) => !alive(p)), PATIENCE_MS);

    void it('--timeout bounds each run: the run is stopped at its limit and the message says how', async () => {
      const b = await startBisect(10);
      const code = await unlessHung(b.exited, 'the CLI', PATIENCE_MS);
      assert.notEqual(code, 0);
      assert.match(b.stderr(), /stopped at its 10 s limit: SIGTERM/);
      assert.ok(await gone(b.pids), `left running: ${b.pids.filter(alive).join(', ')}`);
    });

    void it('Ctrl+C: the run gets TERM, then KILL after the grace; nothing is left, exit 130', async () => {
      const b = await startBisect(600);
      b.child.kill('SIGINT');
      const code = await unlessHung(b.exited, 'the CLI after SIGINT', PATIENCE_MS);
      assert.equal(code, 130, b.stderr());
      assert.match(b.stderr(), /SIGTERM, then SIGKILL 5 s later/);
      assert.ok(await gone(b.pids), `left running: ${b.pids.filter(alive).join(', ')}`);
    });

    void it('the CLI killed with SIGKILL: the run and what it started stop on the host', async () => {
      const b = await startBisect(600);
      b.child.kill('SIGKILL');
      await b.exited;
      assert.ok(await gone(b.pids), `left running after the CLI died: ${b.pids.filter(alive).join(', ')}`);
    });

    void it('exec: a command that ignores TERM gets KILL after the grace when the CLI is stopped (it was alive 17 s after "KILL follows")', async () => {
      const b = await startExec(600);
      b.child.kill('SIGINT');
      const code = await unlessHung(b.exited, 'the CLI after SIGINT', PATIENCE_MS);
      assert.equal(code, 130, b.stderr());
      assert.ok(await gone(b.pids), `left running: ${b.pids.filter(alive).join(', ')}`);
    });

    void it('exec: --timeout is enforced on the host', async () => {
      const b = await startExec(5);
      await unlessHung(b.exited, 'the CLI', PATIENCE_MS);
      assert.match(b.stderr(), /stopped at its 5 s limit: SIGTERM/);
      assert.ok(await gone(b.pids), `left running: ${b.pids.filter(alive).join(', ')}`);
    });

    void it('exec: the CLI killed with SIGKILL: the command stops on the host', async () => {
      const b = await startExec(600);
      b.child.kill('SIGKILL');
      await b.exited;
      assert.ok(await gone(b.pids), `left running after the CLI died: ${b.pids.filter(alive).join(', ')}`);
    });
  });
}
