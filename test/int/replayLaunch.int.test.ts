import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TORCH_PYTHON, requireTorch } from '../support/require';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Replay from a command the person confirms (issue 33 item 2), through the CLI over a real sshd: a run launched
 * twice with no launch record (no kg_record.py, no tool's record) — the second resumed with --work 8 — is replayed
 * with `--launch 'CMD …' --cwd DIR`. The known-good side is that command with the checkpoint args of the reference
 * taken back (--work 2); --dry-run shows both sides, where each came from and the flags to repeat; one short real
 * replay of that one change names and confirms it. The speed is the loop's own tokens per CPU-second (beside other
 * work, the CPU clock keeps a state's speed its own); --work 8 costs ~4x, far above that noise.
 */

const LOOP = join(__dirname, '..', 'support', 'replay');
const CLI = ['--import', 'tsx', 'src/cli/main.ts'];

function runCli(argv: string[], home: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...argv], { env: { ...process.env, HOME: home } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

void describe('replay with a confirmed --launch, no launch records (CLI, real sshd)', () => {
  let sshd: TestSshd;
  let root: string;
  let run: string;
  let hostWords: string[];
  const command = [TORCH_PYTHON, 'train.py', '--data', 'data/a.txt', '--log_every', '3', '--save_every', '24'];
  // what the person types: the current launch as they ran it (a quoted word with a blank, to be split as a shell would)
  const launch = `${command.join(' ')} --steps 72 --resume ckpt/step_48.pt --work 8 --lr '0.0003'`;

  before(async () => {
    requireTorch();
    root = mkdtempSync(join(tmpdir(), 'kg-replay-launch-'));
    run = join(root, 'my run');
    mkdirSync(join(run, 'data'), { recursive: true });
    for (const f of readdirSync(LOOP)) cpSync(join(LOOP, f), join(run, f));
    writeFileSync(join(run, 'data', 'a.txt'), 'seq=32\n');
    const go = (extra: string[]) =>
      execFileSync(command[0]!, [...command.slice(1), ...extra], { cwd: run, stdio: 'pipe' });
    go(['--steps', '48']);
    go(['--steps', '72', '--resume', 'ckpt/step_48.pt', '--work', '8']);
    sshd = await startSshd();
    hostWords = [
      `${sshd.user}@127.0.0.1:${sshd.port}`,
      run,
      '--identity',
      sshd.identityFile,
      '--known-hosts',
      sshd.knownHostsFile,
      '--python',
      TORCH_PYTHON,
    ];
  });
  after(async () => {
    await sshd?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  void it('without a record or --launch it says what it found and asks for the command', async () => {
    const r = await runCli(['replay', ...hostWords, '--dry-run'], root);
    assert.notEqual(r.status, 0, r.stderr);
    assert.match(r.stderr, /has no launch records\. Give the command with --launch 'CMD …' \[--cwd DIR\]/);
  });

  void it('--dry-run shows both sides, where each came from, the one change and the flags to repeat', async () => {
    const r = await runCli(
      ['replay', ...hostWords, '--launch', launch, '--cwd', run, '--steps', '12', '--dry-run'],
      root,
    );
    assert.equal(r.status, 0, r.stderr);
    const out = r.stdout;
    assert.match(
      out,
      /Known-good launch: the current command with the args of step_48\.pt taken back \(checkpoint args\): --work 2/,
    );
    assert.match(out, /Current launch: the command confirmed with --launch/);
    assert.match(out, /train\.py --data data\/a\.txt .*--work 2 --lr 0\.0003\n/);
    assert.match(out, /train\.py --data data\/a\.txt .*--work 8 --lr 0\.0003\n/);
    assert.ok(out.includes(`  in ${run}\n`), out);
    assert.ok(out.includes(`--launch '${launch.replace("'0.0003'", '0.0003')}' --cwd '${run}'`), out);
    assert.match(out, /Replay of .* from step_48\.pt \(step 48\), 12 steps a run/);
    assert.match(out, /Changes \(1\):\n {2}arg:--work {2}--work: 2 → 8\n/);
  });

  void it('one short real replay of that change: named and confirmed', async () => {
    const r = await runCli(
      ['replay', ...hostWords, '--launch', launch, '--cwd', run, '--steps', '12', '--threshold', '0.25', '--json'],
      root,
    );
    assert.equal(r.status, 0, `${r.stderr}\n${r.stdout}`);
    assert.match(r.stderr, /Current launch: the command confirmed with --launch/);
    const o = JSON.parse(r.stdout) as {
      report: { verdict: { kind: string; ids: string[] }; confirmation: { confirmed: boolean } };
      runs: unknown[];
    };
    assert.equal(o.report.verdict.kind, 'culprit');
    assert.deepEqual(o.report.verdict.ids, ['arg:--work']);
    assert.equal(o.report.confirmation.confirmed, true);
  });
});
