import type { CompareOutcome } from '../api';
import type { EnvSnapshot } from '../core/baselines/envProbe';
import { saveBaseline } from '../core/baselines/capture';
import type { HostSpec } from '../core/hosts';
import type { BaselinesFeature } from './common';

/** What other features may ask of baselines (the container hands it to them as a capability). */
export interface BaselinesApi {
  /** Keeps `snapshot` as a baseline of `host` named `label` (locally only); resolves to its file. */
  save(host: HostSpec, snapshot: EnvSnapshot, label: string): Promise<string>;
  /**
   * Opens the usual environment diff of two snapshots held for the session (e.g. two nodes of a Slurm job: the
   * majority's and an odd one's), titled `title`.
   */
  diffSnapshots(left: SnapshotSide, right: SnapshotSide, title: string): Promise<CompareOutcome>;
}

/** A snapshot not stored as a baseline, with what to call it. */
export interface SnapshotSide {
  snapshot: EnvSnapshot;
  /** The document's name and the side's title, e.g. `n2`. */
  title: string;
  hostLabel: string;
}

export async function saveSnapshot(
  f: BaselinesFeature,
  host: HostSpec,
  snapshot: EnvSnapshot,
  label: string,
): Promise<string> {
  const { stored: saved } = await saveBaseline(f.store, f.hosts.session(host), snapshot, label, {
    copyToRemote: false,
  });
  f.log.info(`baseline "${label}" of ${host.name} saved to ${saved.file}`);
  f.refresh(f.section.groupNode(host.id));
  return saved.file;
}
