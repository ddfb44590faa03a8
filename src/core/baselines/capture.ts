import { messageOf } from '../errors';
import type { HostSpec } from '../hosts';
import type { ProbeRunnerLike } from '../probes/probe';
import type { Transport } from '../transport/types';
import { envSnapshotProbe, type EnvSnapshot } from './envProbe';
import { copyBaselineToRemote } from './remote';
import type { BaselineSettings } from './settings';
import type { BaselineStore, StoredBaseline } from './store';

/** What capturing needs of a host: its definition, its transport and its probe runner (a HostSession fits). */
export interface CaptureHost {
  spec: Pick<HostSpec, 'name' | 'roots' | 'container'>;
  transport: Transport;
  probes: ProbeRunnerLike;
}

export type CaptureOptions = Pick<BaselineSettings, 'scriptGlobs' | 'extraVariables' | 'cacheDirs'> & {
  deep?: boolean;
  signal?: AbortSignal;
  timeoutMs?: number;
};

export function containerText(c: HostSpec['container']): string | null {
  if (!c) return null;
  return c.kind === 'custom' ? `custom:${c.command ?? ''}` : `${c.kind}:${c.id ?? ''}`;
}

export async function captureSnapshot(host: CaptureHost, opts: CaptureOptions): Promise<EnvSnapshot> {
  const call = envSnapshotProbe({
    scripts: opts.scriptGlobs,
    cacheDirs: opts.cacheDirs,
    extraVars: opts.extraVariables,
    roots: host.spec.roots,
    ...(opts.deep ? { deep: true } : {}),
  });
  const r = await host.probes.run(call, {
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  });
  return r.value;
}

export interface SavedBaseline {
  stored: StoredBaseline;
  /** Where the copy went on the remote. */
  remotePath?: string;
  /** Why there is no remote copy when one was asked for: a warning, never a failure. */
  remoteWarning?: string;
}

/** Saves locally (the part that must work), then copies to the host's `~/.known-good/baselines/` when asked. */
export async function saveBaseline(
  store: BaselineStore,
  host: CaptureHost,
  snapshot: EnvSnapshot,
  label: string,
  opts: { copyToRemote: boolean; signal?: AbortSignal },
): Promise<SavedBaseline> {
  const stored = await store.save({
    label,
    host: host.transport.id,
    hostLabel: host.spec.name,
    container: containerText(host.spec.container),
    snapshot,
  });
  if (!opts.copyToRemote) return { stored };
  try {
    const remotePath = await copyBaselineToRemote(
      host.transport,
      stored.baseline,
      opts.signal ? { signal: opts.signal } : {},
    );
    return { stored, remotePath };
  } catch (e) {
    return { stored, remoteWarning: `saved locally, but the copy on ${host.spec.name} failed: ${messageOf(e)}` };
  }
}
