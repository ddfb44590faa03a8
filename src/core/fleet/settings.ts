import { z } from 'zod';

/**
 * The `slurm` part of a `knownGood.hosts` entry: the host is a Slurm login node, and Fleet commands reach the
 * compute nodes through `srun` run there (over the same pooled SSH connection as everything else).
 */
export const slurmSettingsSchema = z.strictObject({
  /** SLURM_CONF for every Slurm command run on the login node (unset: the login node's own default). */
  conf: z.string().trim().min(1).optional(),
  /** Folder with srun, squeue and sinfo when they are not on the login shell's PATH. */
  binDir: z.string().trim().min(1).optional(),
  /**
   * Probes may also run on nodes outside any job of yours (`srun -w NODES`, a new allocation). Off by default: that
   * allocation is charged to you and waits for the nodes.
   */
  allowNodesOutsideJobs: z.boolean().default(false),
  /** Partition for allocations outside jobs (`srun -p`). */
  partition: z.string().trim().min(1).optional(),
  /** Nodes per srun step: a bigger job is covered by several steps. */
  maxNodesPerStep: z.number().int().min(1).max(4096).default(256),
  /** srun steps in flight at once (each is one SSH channel). */
  concurrency: z.number().int().min(1).max(8).default(4),
  /** Per node: the probe is stopped on that node after this many seconds, and the node reported as timed out. */
  nodeTimeoutS: z.number().positive().max(86400).default(120),
});
export type SlurmSettings = z.infer<typeof slurmSettingsSchema>;
export type SlurmSettingsInput = z.input<typeof slurmSettingsSchema>;

/** Defaults for a login node set up without a `slurm` object (the CLI's `--job`). */
export function slurmSettings(input: SlurmSettingsInput = {}): SlurmSettings {
  return slurmSettingsSchema.parse(input);
}
