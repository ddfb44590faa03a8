import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { SFTPWrapper } from 'ssh2';
import { shellJoin } from '../../src/core/quote';
import { listRunsProbe } from '../../src/core/runs/listRuns';
import { median, timeIt, type BenchContext, type BenchResult } from '../context';

const run = promisify(execFile);
const FOLDERS = 1000;

function readdir(sftp: SFTPWrapper, path: string): Promise<{ filename: string; longname: string }[]> {
  return new Promise((resolve, reject) => sftp.readdir(path, (err, list) => (err ? reject(err) : resolve(list))));
}

/**
 * Issue 4's target: a root of 1,000 checkpoint folders listed through the resident helper on a warm connection,
 * versus a fresh `ssh HOST find ROOT -maxdepth 2 -printf …` and versus per-folder SFTP readdir on the same warm
 * connection (what a remote file-system extension does). Target ≥ 10× faster than either.
 */
export async function benchListing(ctx: BenchContext): Promise<BenchResult[]> {
  const root = mkdtempSync(join(tmpdir(), 'kg-bench-ls-'));
  try {
    for (let i = 1; i <= FOLDERS; i++) {
      const d = join(root, 'run-a', `step_${i * 10}`);
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, 'checkpoint.pt'), 'x');
    }
    writeFileSync(join(root, 'run-a', 'train_log.jsonl'), '{"step": 1}\n');
    const runner = await ctx.probes();
    const call = listRunsProbe([root], { depth: 3 });
    const first = await runner.run(call); // the helper has the probe now: "warm"
    if (first.value.roots[0]?.counts?.checkpoints !== FOLDERS) throw new Error('listing did not find every checkpoint');
    const ours: number[] = [];
    for (let i = 0; i < 5; i++) ours.push(await timeIt(() => runner.run(call)));

    const findArgv = await ctx.sshArgv(shellJoin(['find', root, '-maxdepth', '3', '-printf', '%y %s %T@ %P\\n']));
    const finds: number[] = [];
    for (let i = 0; i < 3; i++)
      finds.push(await timeIt(() => run(findArgv[0]!, findArgv.slice(1), { maxBuffer: 64 << 20 })));

    const client = await ctx.sshClient();
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((e, s) => (e ? reject(e) : resolve(s))),
    );
    const sftpMs = await timeIt(async () => {
      const runs = await readdir(sftp, root);
      for (const r of runs) {
        const steps = await readdir(sftp, `${root}/${r.filename}`);
        for (const s of steps)
          if (s.longname.startsWith('d')) await readdir(sftp, `${root}/${r.filename}/${s.filename}`);
      }
    });
    sftp.end();
    const oursMs = median(ours);
    return [
      {
        case: `list a root of ${FOLDERS} checkpoint folders: resident helper vs fresh ssh find -printf`,
        ours_ms: oursMs,
        usual_ms: median(finds),
      },
      {
        case: `list a root of ${FOLDERS} checkpoint folders: resident helper vs per-folder SFTP readdir (warm)`,
        ours_ms: oursMs,
        usual_ms: sftpMs,
      },
    ];
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
