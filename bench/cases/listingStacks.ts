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
/** Folders per stack: 4 stacks × 2,500 = 10,000 checkpoint folders (plus Lightning's `checkpoints/` folders). */
const PER_STACK = 2500;

function readdir(sftp: SFTPWrapper, path: string): Promise<{ filename: string; longname: string }[]> {
  return new Promise((resolve, reject) => sftp.readdir(path, (err, list) => (err ? reject(err) : resolve(list))));
}

/** What a remote file explorer does: one readdir per folder, down to the depth the listing reads. */
async function sftpWalk(sftp: SFTPWrapper, path: string, depth: number): Promise<number> {
  let n = 0;
  for (const e of await readdir(sftp, path)) {
    n++;
    if (depth > 1 && e.longname.startsWith('d')) n += await sftpWalk(sftp, `${path}/${e.filename}`, depth - 1);
  }
  return n;
}

function touch(path: string, body = 'x'): void {
  writeFileSync(path, body);
}

/** One root holding the layouts of issue 13, each at the depth its library writes it. */
function buildRoot(root: string): void {
  for (let i = 1; i <= PER_STACK; i++) {
    const hf = join(root, 'hf-run', `checkpoint-${i * 10}`);
    mkdirSync(hf, { recursive: true });
    touch(join(hf, 'model.safetensors'));
    touch(join(hf, 'trainer_state.json'), '{"log_history": []}');
    touch(join(hf, 'training_args.bin'));
    const acc = join(root, 'acc-run', 'checkpoints', `checkpoint_${i - 1}`);
    mkdirSync(acc, { recursive: true });
    touch(join(acc, 'model.safetensors'));
    touch(join(acc, 'custom_checkpoint_0.pkl'));
    const ds = join(root, 'ds-run', `global_step${i * 10}`);
    mkdirSync(ds, { recursive: true });
    touch(join(ds, 'mp_rank_00_model_states.pt'));
    const pl = join(root, 'pl-run', 'lightning_logs', `version_${i - 1}`, 'checkpoints');
    mkdirSync(pl, { recursive: true });
    touch(join(pl, `epoch=0-step=${i * 10}.ckpt`));
    touch(join(pl, '..', 'metrics.csv'), 'step,train_loss\n1,2.0\n');
  }
}

/**
 * Issue 13: a root of 10,000 checkpoint folders of four stacks (HF `checkpoint-N`, accelerate
 * `checkpoints/checkpoint_N`, DeepSpeed `global_stepN`, Lightning `lightning_logs/version_N/checkpoints/*.ckpt`),
 * listed at the default depth in one round trip through the resident helper, versus a fresh
 * per-folder SFTP readdir on the same warm connection (what a remote file explorer does) and a fresh
 * `ssh HOST find ROOT -maxdepth 5 -printf …` (what a user types; it leaves the recognising to them).
 * The listing is bounded by --max-entries per folder and kg_common.LIMITS["items"] per root.
 */
export async function benchListingStacks(ctx: BenchContext): Promise<BenchResult[]> {
  const root = mkdtempSync(join(tmpdir(), 'kg-bench-stacks-'));
  try {
    buildRoot(root);
    const runner = await ctx.probes();
    const call = listRunsProbe([root], {});
    const first = await runner.run(call);
    const listed = first.value.roots[0];
    const bytes = JSON.stringify(first.value).length;
    const ours: number[] = [];
    for (let i = 0; i < 3; i++) ours.push(await timeIt(() => runner.run(call)));
    const findArgv = await ctx.sshArgv(shellJoin(['find', root, '-maxdepth', '5', '-printf', '%y %s %T@ %P\\n']));
    const finds: number[] = [];
    for (let i = 0; i < 3; i++)
      finds.push(await timeIt(() => run(findArgv[0]!, findArgv.slice(1), { maxBuffer: 256 << 20 })));
    const client = await ctx.sshClient();
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((e, s) => (e ? reject(e) : resolve(s))),
    );
    const sftpMs = await timeIt(() => sftpWalk(sftp, root, 5));
    sftp.end();
    const note = `${listed?.counts?.checkpoints ?? '?'} checkpoints recognised, answer ${(bytes / 1e6).toFixed(1)} MB, status ${listed?.status}`;
    const what =
      'list 10,000 checkpoint folders of HF, accelerate, DeepSpeed and Lightning runs (default depth, one round trip)';
    return [
      { case: `${what} vs per-folder SFTP readdir (warm)`, ours_ms: median(ours), usual_ms: sftpMs, note },
      {
        case: `${what} vs fresh ssh find -printf (names only, nothing recognised)`,
        ours_ms: median(ours),
        usual_ms: median(finds),
      },
    ];
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
