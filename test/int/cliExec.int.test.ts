import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startSshd, type TestSshd } from '../support/sshd';

/** The CLI as a user runs it, from source, its peak RSS written on exit (test/support/peakRss.ts). */
const CLI = ['--import', 'tsx', '--import', './test/support/peakRss.ts', 'src/cli/main.ts'];

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

void describe('known-good exec: bytes in, bytes out (locally and over a real sshd)', () => {
  let sshd: TestSshd;
  let dir: string;
  let input: Buffer;
  let env: NodeJS.ProcessEnv;
  before(async () => {
    sshd = await startSshd();
    dir = mkdtempSync(join(tmpdir(), 'kg-cli-exec-'));
    // Random bytes, opening with what UTF-8 decoding would change for certain: NULs, bytes that are never UTF-8,
    // a lone lead byte, a truncated sequence, an encoded surrogate, an overlong NUL.
    const nasty = Buffer.from([0x00, 0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82, 0xed, 0xa0, 0x80, 0xc0, 0x80, 0x00, 0x0a]);
    input = Buffer.concat([nasty, randomBytes(1_000_000 - nasty.length)]);
    assert.notDeepEqual(Buffer.from(input.toString('utf8'), 'utf8'), input, 'the input is not valid UTF-8');
    writeFileSync(join(dir, 'input.bin'), input);
    const home = join(dir, 'home');
    env = { ...process.env, HOME: home, SSH_AUTH_SOCK: '' };
  });
  after(async () => {
    await sshd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const targets = () => ({
    local: ['local'],
    sshd: [
      `${sshd.user}@127.0.0.1:${sshd.port}`,
      ...['--identity', sshd.identityFile, '--known-hosts', sshd.knownHostsFile],
    ],
  });

  /** `known-good exec TARGET -- …` fed `stdin` through a pipe, its stdout collected as bytes from a pipe. */
  function throughPipes(target: string[], argv: string[], stdin: Buffer) {
    return new Promise<{ code: number | null; stdout: Buffer; stderr: Buffer }>((resolve, reject) => {
      const child = spawn(process.execPath, [...CLI, 'exec', ...target, '--', ...argv], { env });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.stderr.on('data', (c: Buffer) => err.push(c));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }));
      child.stdin.end(stdin);
    });
  }

  /** The peak RSS (kB) of one CLI run, with stdout through `| wc -c`: the bytes counted and the exit status. */
  function countedByWc(target: string[], argv: string[]) {
    const peakFile = join(dir, `peak-${Math.random().toString(36).slice(2)}`);
    const r = spawnSync(
      'bash',
      ['-c', '"$0" "$@" | wc -c; exit ${PIPESTATUS[0]}', process.execPath, ...CLI, 'exec', ...target, '--', ...argv],
      { env: { ...env, KG_PEAK_RSS_FILE: peakFile }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const peakKb = Number(readFileSync(peakFile, 'utf8'));
    assert.ok(peakKb > 0, `no peak RSS recorded: ${r.stderr}`);
    return { status: r.status, bytes: Number(r.stdout.trim()), peakKb, stderr: r.stderr };
  }

  for (const name of ['local', 'sshd'] as const) {
    void it(`${name}: 1,000,000 random bytes (NULs, invalid UTF-8) through exec -- cat come back identical, through a pipe and into a file`, async () => {
      const target = targets()[name];
      const piped = await throughPipes(target, ['cat'], input);
      assert.equal(piped.code, 0, piped.stderr.toString());
      assert.equal(piped.stdout.length, input.length);
      assert.equal(sha256(piped.stdout), sha256(input));

      // stdin read from a file, stdout written to a file (node writes those synchronously, not through a pipe)
      const inFd = openSync(join(dir, 'input.bin'), 'r');
      const outFile = join(dir, `${name}-out.bin`);
      const outFd = openSync(outFile, 'w');
      try {
        const r = spawnSync(process.execPath, [...CLI, 'exec', ...target, '--', 'cat'], {
          env,
          stdio: [inFd, outFd, 'pipe'],
          encoding: 'utf8',
        });
        assert.equal(r.status, 0, r.stderr);
      } finally {
        closeSync(inFd);
        closeSync(outFd);
      }
      assert.equal(sha256(readFileSync(outFile)), sha256(input));

      // stderr is bytes too, and the command's exit status is the CLI's
      const err = await throughPipes(target, ['sh', '-c', 'cat >&2; exit 3'], input);
      assert.equal(err.code, 3);
      assert.equal(err.stdout.length, 0);
      assert.equal(sha256(err.stderr), sha256(input));
    });

    void it(`${name}: exec -- head -c 50000000 /dev/zero | wc -c counts all of them; 200 MB pass with the CLI's memory bounded`, () => {
      const target = targets()[name];
      const exact = countedByWc(target, ['head', '-c', '50000000', '/dev/zero']);
      assert.equal(exact.status, 0, exact.stderr);
      assert.equal(exact.bytes, 50_000_000);
      // The memory is measured, not the time: the CLI with nothing to pass on, then with 200 MB. Holding the output
      // (as exec did: the bytes, then a string of them) takes more than the output's size; passing it on takes
      // what the pipes hold and the garbage between two collections.
      const idle = countedByWc(target, ['true']);
      assert.equal(idle.status, 0, idle.stderr);
      const big = countedByWc(target, ['head', '-c', '200000000', '/dev/zero']);
      assert.equal(big.status, 0, big.stderr);
      assert.equal(big.bytes, 200_000_000);
      const grewMb = (big.peakKb - idle.peakKb) / 1024;
      assert.ok(grewMb < 100, `the CLI's peak RSS grew by ${grewMb.toFixed(0)} MB passing 200 MB on`);
    });
  }
});
