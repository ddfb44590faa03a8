import { compileCacheChoice, envSnapshotChoice } from '../core/baselines/probeChoices';
import { ckptArgsChoice } from '../core/args/probeChoice';
import { findProbeChoice, HOST_PROBE_CHOICES, type ProbeChoice } from '../core/probes/catalogue';
import { listRunsChoice } from '../core/runs/probeChoice';

/** What Run Probe… offers, in the quick pick's order: each feature's choices, then the host probes. */
export const PROBES: readonly ProbeChoice[] = [
  listRunsChoice,
  ckptArgsChoice,
  envSnapshotChoice,
  compileCacheChoice,
  ...HOST_PROBE_CHOICES,
];

export function probeChoice(id: string): ProbeChoice {
  return findProbeChoice(PROBES, id);
}
