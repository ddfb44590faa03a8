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
  /** A run folder of the host: its training process's variables, if one runs now, come with the snapshot. */
  run?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
};

export function containerText(c: HostSpec['container']): string | null {
  if (!c) return null;
  return c.kind === 'custom' ? `custom:${c.command ?? ''}` : `${c.kind}:${c.id ?? ''}`;
}

/**
 * Where a fresh probe's variables come from, in words: what sshd gives a new session (its shell's start-up files
 * read), a new `docker exec`/`pct exec` of the container, or a new process of this program on this machine.
 */
export function freshEnvSource(host: Pick<CaptureHost, 'spec' | 'transport'>): string {
  if (host.spec.container) return `a new command in ${host.transport.label}`;
  if (host.transport.id === 'local') return `a new process on ${host.transport.label}`;
  return `a new login on ${host.spec.name}`;
}

/**
 * The host as it is now: the probe runs in a new login (`fresh`), never in the resident helper, whose variables and
 * sys.path are those of the connection's start (issue 32: three variables and a package added on the host showed
 * only after Disconnect). With `run`, the run's training process's own variables come too.
 */
export async function captureSnapshot(host: CaptureHost, opts: CaptureOptions): Promise<EnvSnapshot> {
  const call = envSnapshotProbe({
    scripts: opts.scriptGlobs,
    cacheDirs: opts.cacheDirs,
    extraVars: opts.extraVariables,
    roots: host.spec.roots,
    ...(opts.deep ? { deep: true } : {}),
    ...(opts.run !== undefined ? { run: opts.run } : {}),
  });
  const r = await host.probes.run(call, {
    fresh: true,
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  });
  return { ...r.value, env: { ...r.value.env, source: freshEnvSource(host) } };
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
