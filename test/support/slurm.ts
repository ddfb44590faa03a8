import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { requireFile } from './require';
import { freePort } from './sshd';
import { waitUntil } from './process';

/**
 * A real Slurm cluster on this machine, for the Fleet tests: Debian's munged (a throwaway key, its own socket),
 * one slurmctld and several slurmd daemons (`slurmd -N nK`: Debian builds Slurm with multiple-slurmd support),
 * each node on its own free port, every file in a temp folder. Nothing of the system's Slurm or munge is used or
 * touched. `stop()` cancels the jobs, ends the daemons and every step process still running, and removes the folder.
 */
export interface TestSlurm {
  dir: string;
  /** SLURM_CONF of this cluster: set it for every Slurm command (the host's `slurm.conf` setting). */
  conf: string;
  nodes: string[];
  /** Runs a Slurm client command against this cluster; throws with its stderr when it fails. */
  cli(tool: string, args: readonly string[]): string;
  /** `sbatch -N n --wrap "sleep …"`, waited until RUNNING: the job id. */
  submit(nodeCount: number, seconds?: number): Promise<string>;
  /** The node goes away mid-run: its slurmd and every step process on it are killed (SIGKILL). */
  killNode(node: string): void;
  /** Starts the node's slurmd again. */
  startNode(node: string): void;
  /** Replaces the per-node variables (the TaskProlog is read at every task launch: the next run sees them). */
  setNodeEnv(nodeEnv: Record<string, Record<string, string>>): void;
  /** PIDs of this cluster's task processes on a node (what srun started there). */
  taskPids(node: string): number[];
  /** slurmctld's log, or a node's slurmd log (`n2`). */
  log(name: string): string;
  stop(): Promise<void>;
}

export interface SlurmOptions {
  /** Number of nodes, n1…nN (default 3). */
  nodes?: number;
  /**
   * Variables set only in the tasks of some nodes (through the cluster's TaskProlog, as a site sets per-node
   * variables): { n2: { NCCL_SOCKET_IFNAME: 'eth9' } }.
   */
  nodeEnv?: Record<string, Record<string, string>>;
}

const DAEMONS = {
  slurmctld: ['/usr/sbin/slurmctld', 'slurmctld'],
  slurmd: ['/usr/sbin/slurmd', 'slurmd'],
  munged: ['/usr/sbin/munged', 'munge'],
  srun: ['/usr/bin/srun', 'slurm-client'],
  squeue: ['/usr/bin/squeue', 'slurm-client'],
  sbatch: ['/usr/bin/sbatch', 'slurm-client'],
} as const;

/** Fails loudly, naming the Debian packages, when Slurm or munge is not installed (.ci/run installs them). */
export function requireSlurm(): void {
  for (const [path, pkg] of Object.values(DAEMONS)) requireFile(path, pkg);
}

function sh(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Processes whose environment holds `needle` (the step daemons and tasks of this cluster). */
function pidsWithEnv(needles: readonly string[]): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, 'latin1').split('\0');
      if (needles.every((n) => env.includes(n))) out.push(Number(name));
    } catch {
      /* gone, or not ours to read */
    }
  }
  return out;
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    /* already gone */
  }
}

function pidFrom(file: string): number | undefined {
  try {
    const n = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 1 ? n : undefined;
  } catch {
    return undefined;
  }
}

export async function startSlurm(options: SlurmOptions = {}): Promise<TestSlurm> {
  requireSlurm();
  const count = options.nodes ?? 3;
  const nodes = Array.from({ length: count }, (_, i) => `n${i + 1}`);
  const dir = mkdtempSync(join(tmpdir(), 'kg-slurm-'));
  chmodSync(dir, 0o755);
  const mungeDir = join(dir, 'munge');
  mkdirSync(mungeDir, { mode: 0o700 });
  const key = join(mungeDir, 'munge.key');
  writeFileSync(key, execFileSync('head', ['-c', '1024', '/dev/urandom']), { mode: 0o400 });
  const socket = join(mungeDir, 'munge.socket');
  const mungePid = join(mungeDir, 'munged.pid');
  execFileSync(DAEMONS.munged[0], [
    '--force',
    `--key-file=${key}`,
    `--socket=${socket}`,
    `--pid-file=${mungePid}`,
    `--log-file=${join(mungeDir, 'munged.log')}`,
    `--seed-file=${join(mungeDir, 'munged.seed')}`,
  ]);
  for (const n of nodes) mkdirSync(join(dir, `spool.${n}`));
  mkdirSync(join(dir, 'state'));

  const prolog = join(dir, 'task_prolog');
  const setNodeEnv = (nodeEnv: Record<string, Record<string, string>>) => {
    const lines = ['#!/bin/sh', 'case "$SLURMD_NODENAME" in'];
    for (const [node, vars] of Object.entries(nodeEnv)) {
      lines.push(`  ${node})`);
      for (const [k, v] of Object.entries(vars)) lines.push(`    echo ${sh(`export ${k}=${v}`)}`);
      lines.push('    ;;');
    }
    lines.push('esac', '');
    // Written whole, then renamed: a task launching meanwhile reads the old or the new script, never half.
    writeFileSync(`${prolog}.tmp`, lines.join('\n'), { mode: 0o755 });
    renameSync(`${prolog}.tmp`, prolog);
  };
  setNodeEnv(options.nodeEnv ?? {});

  const host = hostname();
  const ctldPort = await freePort();
  const ports = new Map<string, number>();
  for (const n of nodes) ports.set(n, await freePort());
  const user = userInfo().username;
  const conf = join(dir, 'slurm.conf');
  writeFileSync(
    conf,
    [
      'ClusterName=kgtest',
      `SlurmctldHost=${host}(127.0.0.1)`,
      `SlurmctldPort=${ctldPort}`,
      `SlurmUser=${user}`,
      `SlurmdUser=${user}`,
      'AuthType=auth/munge',
      `AuthInfo=socket=${socket}`,
      'CredType=cred/munge',
      `StateSaveLocation=${join(dir, 'state')}`,
      `SlurmdSpoolDir=${join(dir, 'spool.%n')}`,
      `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
      `SlurmdPidFile=${join(dir, 'slurmd.%n.pid')}`,
      `SlurmctldLogFile=${join(dir, 'slurmctld.log')}`,
      `SlurmdLogFile=${join(dir, 'slurmd.%n.log')}`,
      // No cgroups here: track processes by parentage, bind nothing.
      'ProctrackType=proctrack/linuxproc',
      'TaskPlugin=task/none',
      'SelectType=select/cons_tres',
      'SelectTypeParameters=CR_CPU',
      'JobAcctGatherType=jobacct_gather/none',
      'AccountingStorageType=accounting_storage/none',
      'JobCompType=jobcomp/none',
      'MpiDefault=none',
      'ReturnToService=2',
      // Every slurmd sees the same hardware; the node lines below are what counts.
      'SlurmdParameters=config_overrides',
      'SlurmdTimeout=300',
      'MinJobAge=2',
      `TaskProlog=${prolog}`,
      ...nodes.map(
        (n) => `NodeName=${n} NodeHostname=${host} NodeAddr=127.0.0.1 Port=${ports.get(n)} CPUs=2 RealMemory=1000`,
      ),
      `PartitionName=debug Nodes=${nodes.join(',')} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES`,
      '',
    ].join('\n'),
  );
  const env = { ...process.env, SLURM_CONF: conf };
  const daemon = (path: string, args: string[]) => {
    const r = spawnSync(path, args, { env, cwd: dir, encoding: 'utf8', timeout: 30000 });
    if (r.status !== 0) throw new Error(`${path} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  };
  const startNode = (n: string) => daemon(DAEMONS.slurmd[0], ['-f', conf, '-N', n]);
  const cli = (tool: string, args: readonly string[]) => {
    const r = spawnSync(tool, args, { env, cwd: dir, encoding: 'utf8', timeout: 30000 });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
    return r.stdout;
  };
  const log = (name: string) => {
    const f = join(dir, name === 'slurmctld' ? 'slurmctld.log' : `slurmd.${name}.log`);
    return existsSync(f) ? readFileSync(f, 'utf8') : '';
  };

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    try {
      cli('scancel', ['--user', user]);
      await waitUntil(() => cli('squeue', ['--noheader']).trim() === '', 5000, 100);
    } catch {
      /* the controller may be gone already */
    }
    for (const n of nodes) {
      const pid = pidFrom(join(dir, `slurmd.${n}.pid`));
      if (pid) kill(pid, 'SIGTERM');
    }
    const ctld = pidFrom(join(dir, 'slurmctld.pid'));
    if (ctld) kill(ctld, 'SIGTERM');
    // Step daemons and tasks still running carry this cluster's SLURM_CONF in their environment.
    for (const pid of pidsWithEnv([`SLURM_CONF=${conf}`])) kill(pid, 'SIGKILL');
    const munge = pidFrom(mungePid);
    if (munge) kill(munge, 'SIGTERM');
    await waitUntil(
      () => [ctld, munge, ...nodes.map((n) => pidFrom(join(dir, `slurmd.${n}.pid`)))].every((p) => !p || !alive(p)),
      5000,
      50,
    );
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    daemon(DAEMONS.slurmctld[0], ['-f', conf, '-i']);
    for (const n of nodes) startNode(n);
    const ready = await waitUntil(
      () => {
        try {
          const states = cli('sinfo', ['--Node', '--noheader', '--format=%N %T']).trim().split('\n');
          return states.length === count && states.every((l) => / idle$/.test(l));
        } catch {
          return false;
        }
      },
      // Deadlines here only end a wait for what never comes: a loaded machine just gets there later.
      60_000,
      200,
    );
    if (!ready) throw new Error(`the test cluster did not come up: ${log('slurmctld').slice(-2000)}`);
  } catch (e) {
    await stop();
    throw e;
  }

  return {
    dir,
    conf,
    nodes,
    cli,
    async submit(nodeCount, seconds = 3600) {
      const out = cli('sbatch', [
        '--parsable',
        `--nodes=${nodeCount}`,
        '--output=/dev/null',
        `--wrap=sleep ${seconds}`,
      ]);
      const id = out.trim().split(';')[0]!;
      const running = await waitUntil(
        () => cli('squeue', ['--noheader', `--jobs=${id}`, '--format=%T']).trim() === 'RUNNING',
        60_000,
        100,
      );
      if (!running) throw new Error(`job ${id} did not start: ${cli('squeue', [])}`);
      return id;
    },
    killNode(node) {
      const pid = pidFrom(join(dir, `slurmd.${node}.pid`));
      if (pid) kill(pid, 'SIGKILL');
      for (const task of pidsWithEnv([`SLURM_CONF=${conf}`, `SLURMD_NODENAME=${node}`])) {
        const parent = Number(/PPid:\s*(\d+)/.exec(readFileSync(`/proc/${task}/status`, 'utf8'))?.[1]);
        kill(task, 'SIGKILL');
        // Its slurmstepd: the node's side of the step goes too.
        if (parent > 1 && /slurmstepd/.test(readFileSync(`/proc/${parent}/cmdline`, 'latin1'))) kill(parent, 'SIGKILL');
      }
    },
    startNode,
    setNodeEnv,
    taskPids: (node) => pidsWithEnv([`SLURM_CONF=${conf}`, `SLURMD_NODENAME=${node}`]),
    log,
    stop,
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
