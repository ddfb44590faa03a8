import { KnownGoodError, isKnownGoodError, messageOf } from '../errors';
import { probeErrorCode, type ProbeErrorCode } from '../probes/codes';
import type { ProbeCall, ProbeOutcome } from '../probes/probe';
import { ckptArgsProbe, type CkptArgs } from './argsProbe';
import { ArgsCache, argsCacheKey, type ArgsCacheKey } from './cache';
import { ckptArgsTorchProbe, ckptStatProbe, type CkptStat } from './moreProbes';
import { changedArgs, renderArgsDiffSide, renderArgsDocument } from './render';
import type { CheckpointRef } from './target';

/** What the reader needs of a host: a name for people and its probe runner (resident helper + one-shot). */
export interface ArgsHost {
  label: string;
  probes: {
    run<R>(call: ProbeCall<R>): Promise<ProbeOutcome<R>>;
    runOnce<R>(call: ProbeCall<R>): Promise<ProbeOutcome<R>>;
  };
}

export interface ArgsReaderOptions {
  host(hostId: string): ArgsHost;
  /** knownGood.allowTorchLoad: fall back to the host's torch.load when the safe reader cannot decode a file. */
  allowTorchLoad(): boolean;
  /** Asked before torch.load(weights_only=False), which runs code from the file; true only on an explicit yes. */
  confirmUnsafeLoad(host: string, path: string, why: string): Promise<boolean>;
  now?(): Date;
  capacity?: number;
}

export interface ArgsRead {
  result: CkptArgs;
  /** When the args were read from the file (a cached result keeps its first time). */
  capturedAt: Date;
  host: string;
  fromCache: boolean;
}

/** Failures of the safe reader that torch.load may still read; not a missing file or a permission problem. */
const DECODE_FAILURES: ReadonlySet<ProbeErrorCode> = new Set<ProbeErrorCode>([
  'corrupt',
  'not-a-checkpoint',
  'internal',
]);

/** The probe's own error code (`corrupt`, `not-found`, …) of a failed probe call, or '' when it is not one. */
export function probeCodeOf(e: unknown): ProbeErrorCode | '' {
  const code = isKnownGoodError(e) ? e.detail?.['probeCode'] : undefined;
  return typeof code === 'string' ? probeErrorCode(code) : '';
}

export function isDecodeFailure(e: unknown): boolean {
  const code = probeCodeOf(e);
  return isKnownGoodError(e, 'probe-failed') && code !== '' && DECODE_FAILURES.has(code);
}

/**
 * Reads checkpoint args on any host, cached by host + path + size + mtime. A file with nothing cached is read at once:
 * the probe's answer carries the file's stat, the cache's key (one round trip through the resident helper). A file
 * with a result cached is stat'ed first (one round trip, nothing read): an unchanged file is not read again, a
 * rewritten one is. Concurrent reads of one file share one probe call (a diff asks for both sides at once, the
 * changed-only view for the same two again).
 */
export class ArgsReader {
  private readonly cache: ArgsCache<{ result: CkptArgs; capturedAt: Date }>;
  private readonly inflight = new Map<string, Promise<{ result: CkptArgs; capturedAt: Date }>>();

  constructor(private readonly options: ArgsReaderOptions) {
    this.cache = new ArgsCache(options.capacity ?? 200);
  }

  async stat(ref: CheckpointRef): Promise<CkptStat> {
    return (await this.options.host(ref.hostId).probes.run(ckptStatProbe(ref.path))).value;
  }

  async read(ref: CheckpointRef, keys: readonly string[] = []): Promise<ArgsRead> {
    const host = this.options.host(ref.hostId);
    const view = keys.join('\n');
    const keyOf = (st: { bytes: number; mtime: number }): ArgsCacheKey => ({
      host: ref.hostId,
      path: ref.path,
      size: st.bytes,
      mtime: st.mtime,
      view,
    });
    if (!this.cache.holds(ref.hostId, ref.path, view)) {
      // Nothing to check against: read now, and key the result by the stat the probe took before reading.
      const first = JSON.stringify(['first', ref.hostId, ref.path, view]);
      let p = this.inflight.get(first);
      if (!p) {
        p = this.load(ref, host, keys).finally(() => this.inflight.delete(first));
        this.inflight.set(first, p);
      }
      const got = await p;
      // the torch fallback reports no stat: one more round trip keys its result
      const st = got.result.stat ?? (await this.stat(ref));
      this.cache.set(keyOf(st), got);
      return { ...got, host: host.label, fromCache: false };
    }
    const key = keyOf(await this.stat(ref));
    const hit = this.cache.get(key);
    if (hit) return { ...hit, host: host.label, fromCache: true };
    const k = argsCacheKey(key);
    let p = this.inflight.get(k);
    if (!p) {
      p = this.load(ref, host, keys).finally(() => this.inflight.delete(k));
      this.inflight.set(k, p);
    }
    const got = await p;
    this.cache.set(key, got);
    return { ...got, host: host.label, fromCache: false };
  }

  private async load(
    ref: CheckpointRef,
    host: ArgsHost,
    keys: readonly string[],
  ): Promise<{ result: CkptArgs; capturedAt: Date }> {
    const capturedAt = this.options.now?.() ?? new Date();
    try {
      return { result: (await host.probes.run(ckptArgsProbe(ref.path, { keys }))).value, capturedAt };
    } catch (e) {
      if (!isDecodeFailure(e) || !this.options.allowTorchLoad()) throw e;
      return { result: await this.torchLoad(ref, host, keys, e), capturedAt };
    }
  }

  /** The knownGood.allowTorchLoad fallback: weights_only=True first; weights_only=False only after a yes. */
  private async torchLoad(
    ref: CheckpointRef,
    host: ArgsHost,
    keys: readonly string[],
    safeError: unknown,
  ): Promise<CkptArgs> {
    try {
      return (await host.probes.runOnce(ckptArgsTorchProbe(ref.path, { keys }))).value;
    } catch (e) {
      if (probeCodeOf(e) === 'needs-unsafe') {
        if (await this.options.confirmUnsafeLoad(host.label, ref.path, messageOf(e))) {
          return (await host.probes.runOnce(ckptArgsTorchProbe(ref.path, { keys, unsafe: true }))).value;
        }
        throw new KnownGoodError(
          'cancelled',
          `${messageOf(safeError)}; torch.load(weights_only=True) refused it too, and loading it with weights_only=False was declined`,
        );
      }
      throw new KnownGoodError(
        'probe-failed',
        `${messageOf(safeError)}; the torch.load fallback failed too: ${messageOf(e)}`,
      );
    }
  }

  /** The read-only args document of one checkpoint. */
  async document(ref: CheckpointRef): Promise<string> {
    const r = await this.read(ref);
    return renderArgsDocument(r.result, { host: r.host, capturedAt: r.capturedAt, label: ref.label });
  }

  /**
   * One side of the args diff of `a` (left) and `b` (right): both sides share one header, so only args differ.
   * Both reads share the cache and in-flight calls, so the two sides cost one read each.
   */
  async diffSide(a: CheckpointRef, b: CheckpointRef, side: 'a' | 'b'): Promise<string> {
    const [ra, rb] = await Promise.all([this.read(a), this.read(b)]);
    return renderArgsDiffSide(
      { result: ra.result, meta: { host: ra.host, capturedAt: ra.capturedAt, label: a.label } },
      { result: rb.result, meta: { host: rb.host, capturedAt: rb.capturedAt, label: b.label } },
      side,
    );
  }

  /** "Show Changed Args Only": what changed from `a` to `b`. */
  async changed(a: CheckpointRef, b: CheckpointRef): Promise<string> {
    const [ra, rb] = await Promise.all([this.read(a), this.read(b)]);
    const labels =
      ra.host === rb.host ? { a: a.label, b: b.label } : { a: `${a.label} (${ra.host})`, b: `${b.label} (${rb.host})` };
    const [head, ...rest] = changedArgs(ra.result.args, rb.result.args, labels).split('\n');
    return [head, `// A: ${a.path} (${ra.host})`, `// B: ${b.path} (${rb.host})`, ...rest].join('\n');
  }

  /** Forget one checkpoint's results (a document reopened by hand after a failure reads again anyway). */
  forget(ref: CheckpointRef): void {
    this.cache.forget(ref.hostId, ref.path);
  }
}
