import type { WhatChangedFacts } from '../facts';
import type { DataFingerprint } from '../factsProbe';
import type { ChangeTime, EvidenceLink, UnknownFact } from '../model';
import { isoOf, type Draft } from './draft';

/*
 * Cause: the data. The paths the args name, fingerprinted on the host (size, files, hash, a sample's shape), against
 * the fingerprints kept with a baseline.
 */

/** A data path's files as rows × length of a sample (the first file that says): `128 rows of 129, real 53.4 (padded)`. */
export function describeSamples(f: DataFingerprint): string | null {
  for (const s of f.samples ?? []) {
    if (typeof s.rows === 'number' && typeof s.rowLength === 'number') {
      const real =
        typeof s.meanLength === 'number' && s.meanLength < s.rowLength ? `, real ${s.meanLength} (padded)` : '';
      return `${s.file}: ${s.rows} rows of ${s.rowLength}${real}`;
    }
    // a token file's sequences (Megatron .idx): how long a sample is, which is what moves tokens a step
    if (typeof s.rows === 'number' && typeof s.meanLength === 'number')
      return `${s.file}: ${s.rows} sequences, ${s.meanLength} tokens on average${typeof s.medianLength === 'number' ? ` (median ${s.medianLength})` : ''}`;
    if (typeof s.rows === 'number')
      return `${s.file}: ${s.rows} rows${typeof s.meanLineBytes === 'number' ? ` of ${s.meanLineBytes} bytes` : ''}${columnsOf(s)}`;
    if (typeof s.tokensIfUint16 === 'number') return `${s.file}: ${s.tokensIfUint16} tokens (as uint16)`;
  }
  return null;
}

/** A parquet or Arrow file's columns, the first few with their types: ` (input_ids list<int32>, text string, …)`. */
function columnsOf(s: { columns?: string[] | undefined; types?: string[] | undefined }): string {
  if (!s.columns?.length) return '';
  const shown = s.columns.slice(0, 4).map((c, i) => (s.types?.[i] ? `${c} ${s.types[i]}` : c));
  return ` (${shown.join(', ')}${s.columns.length > 4 ? `, … ${s.columns.length} columns` : ''})`;
}

/** A fingerprint as a line: `/data/owt now: 12 files, modified 2024-05-01T10:00:00Z`. */
export function describeFingerprint(f: DataFingerprint): string {
  if (!f.exists) return `${f.path}: ${f.error ?? 'not found'}`;
  const bits = [f.kind === 'dir' ? `${f.files ?? '?'} files` : `${f.size ?? '?'} bytes`];
  const m = f.kind === 'dir' ? (f.newestMtime ?? f.mtime) : f.mtime;
  if (m !== null) bits.push(`modified ${isoOf(m)}`);
  return `${f.path} now: ${bits.join(', ')}`;
}

/**
 * The data the run reads, fingerprinted now, against the fingerprints kept at the reference (else its modification
 * time against the reference's); a path the args' change already names is left to it.
 */
export function dataDrafts(
  facts: WhatChangedFacts,
  refTime: number | null,
  changedValues: Set<string>,
  unknown: UnknownFact[],
): Draft[] {
  const out: Draft[] = [];
  const before = refTime === null ? [] : facts.dataHistory.filter((r) => r.at <= refTime).sort((a, b) => b.at - a.at);
  for (const f of facts.probe?.paths ?? []) {
    if (!f.exists || (f.truncated && f.error)) {
      // Walked in part only (a folder nested past the probe's depth bound): not comparable, and why is the fact
      unknown.push({ fact: `data ${f.path}`, why: f.error ?? 'not found' });
      continue;
    }
    if (changedValues.has(f.path)) continue; // the args change names it, with this fingerprint as evidence
    const m = f.kind === 'dir' ? (f.newestMtime ?? f.mtime) : f.mtime;
    const old = before.map((r) => r.paths.find((p) => p.path === f.path)).find((p) => p !== undefined);
    const fileLink: EvidenceLink = { kind: 'file', title: f.path, hostId: facts.host.id, path: f.path };
    const when: ChangeTime =
      m !== null ? { text: `modified ${isoOf(m)}`, time: { from: m, to: m } } : { text: 'not known' };
    if (old?.exists) {
      if (old.hash !== f.hash || old.size !== f.size || old.files !== f.files) {
        out.push({
          source: 'data',
          category: 'dataset',
          title: `data ${f.path} changed`,
          detail: `at the reference: ${old.files ?? '?'} files, ${old.size ?? '?'} bytes, hash ${old.hash ?? '?'}; now: ${f.files ?? '?'} files, ${f.size ?? '?'} bytes, hash ${f.hash ?? '?'}`,
          when,
          evidence: [fileLink],
          subject: { kind: 'data', path: f.path },
        });
      }
    } else if (m !== null && refTime !== null && m > refTime) {
      out.push({
        source: 'data',
        category: 'dataset',
        title: `data ${f.path} modified after the reference`,
        detail: `${describeFingerprint(f)} (no fingerprint kept from the reference: its modification time is the evidence)`,
        when,
        evidence: [fileLink],
        subject: { kind: 'data', path: f.path },
      });
    }
  }
  return out;
}
