import { KnownGoodError } from './errors';
import { hostLabel, type HostSpec } from './hosts';
import { ProbeRunner } from './probes/runner';
import { ContainerTransport } from './transport/container';
import { LocalTransport } from './transport/local';
import { SshPool, type SshOptions } from './transport/ssh';
import type { Transport } from './transport/types';

/** A host ready to use: its transport (container-wrapped where configured) and its probe runner. */
export interface HostSession {
  readonly spec: HostSpec;
  readonly transport: Transport;
  readonly probes: ProbeRunner;
  readonly label: string;
  /** True once an SSH connection is up (always true for This machine). */
  readonly connected: boolean;
}

export interface RegistryOptions {
  ssh: SshOptions;
  commandTimeoutMs: number;
  /** `knownGood.helper.spares` (undefined: the runner's default). */
  helperSpares?: number;
}

/**
 * Builds one session per host, lazily, on one shared SSH pool: every operation on a host reuses its connection and
 * its resident helper. Changing the host list keeps sessions whose definition did not change.
 */
export class HostRegistry {
  private readonly pool: SshPool;
  private readonly sessions = new Map<string, { key: string; session: HostSession }>();
  private specs: HostSpec[] = [];

  constructor(private readonly options: RegistryOptions) {
    this.pool = new SshPool(options.ssh);
  }

  setHosts(specs: HostSpec[]): void {
    this.specs = specs;
    for (const [id, s] of this.sessions) {
      const spec = specs.find((h) => h.id === id);
      if (!spec || JSON.stringify(spec) !== s.key) {
        s.session.probes.dispose();
        this.sessions.delete(id);
        // Its connection was made with the old options (a wrong key, user or port): close it unless still used.
        const old = s.session.spec.ssh;
        if (old && !specs.some((h) => h.ssh && JSON.stringify(h.ssh) === JSON.stringify(old))) this.pool.release(old);
      }
    }
  }

  /** `knownGood.commandTimeoutSeconds` changed: the sessions already built use it from their next request. */
  setCommandTimeout(ms: number): void {
    this.options.commandTimeoutMs = ms;
    for (const s of this.sessions.values()) s.session.probes.timeoutMs = ms;
  }

  /** `knownGood.helper.spares` changed: each host's helper keeps that many from its next start (a reconnect). */
  setHelperSpares(n: number): void {
    this.options.helperSpares = n;
    for (const s of this.sessions.values()) s.session.probes.spares = n;
  }

  hosts(): readonly HostSpec[] {
    return this.specs;
  }

  find(id: string): HostSpec | undefined {
    return this.specs.find((h) => h.id === id);
  }

  session(hostOrId: HostSpec | string): HostSession {
    const spec = typeof hostOrId === 'string' ? this.find(hostOrId) : hostOrId;
    if (!spec)
      throw new KnownGoodError('not-found', `unknown host ${typeof hostOrId === 'string' ? hostOrId : hostOrId.id}`);
    const key = JSON.stringify(spec);
    const cur = this.sessions.get(spec.id);
    if (cur && cur.key === key) return cur.session;
    cur?.session.probes.dispose();
    const session = this.build(spec);
    this.sessions.set(spec.id, { key, session });
    return session;
  }

  private build(spec: HostSpec): HostSession {
    let transport: Transport;
    const pool = this.pool;
    if (spec.ssh) transport = pool.transport(spec.ssh, spec.name);
    else transport = new LocalTransport(spec.name);
    if (spec.container) transport = new ContainerTransport(transport, spec.container, spec.name);
    const probes = new ProbeRunner(transport, {
      python: spec.python,
      timeoutMs: this.options.commandTimeoutMs,
      ...(this.options.helperSpares !== undefined ? { spares: this.options.helperSpares } : {}),
    });
    const endpoint = spec.ssh;
    return {
      spec,
      transport,
      probes,
      label: hostLabel(spec),
      get connected() {
        return endpoint ? pool.connection(endpoint).connected : true;
      },
    };
  }

  disconnect(id: string): void {
    const spec = this.find(id);
    const s = this.sessions.get(id);
    s?.session.probes.dispose();
    this.sessions.delete(id);
    if (spec?.ssh) this.pool.disconnect(spec.ssh);
  }

  dispose(): void {
    for (const s of this.sessions.values()) s.session.probes.dispose();
    this.sessions.clear();
    this.pool.dispose();
  }
}
