import { posix } from 'node:path';
import { z } from 'zod';
import { KnownGoodError, messageOf } from '../errors';
import type { ProbeRunnerLike } from '../probes/probe';
import { listRunsProbe, type RootListing, type RunEntry } from '../runs/listRuns';
import { defineDocUri, docFileName, type UriParts } from '../util/docUri';
import { formatBytes, formatExactBytes } from '../util/format';
import { whatChangedProbe, type DataFingerprint } from './factsProbe';

/*
 * A data path as evidence (`knownGood-evidence:`): what it holds now on its host — a folder's listing (names, sizes,
 * mtimes) and the fingerprint What Changed? compares (python/what_changed.py with data_shape.py: files, size, newest
 * mtime, hash, what the data files hold). The URI names the host and the path, so the document is read again when
 * VS Code restores it after a reload.
 */

export const EVIDENCE_SCHEME = 'knownGood-evidence';

export interface DataEvidenceRef {
  /** The settings id of the host. */
  hostId: string;
  path: string;
}

const evidenceUri = defineDocUri<DataEvidenceRef>(EVIDENCE_SCHEME, {
  what: 'evidence document',
  schema: z.object({ hostId: z.string().min(1), path: z.string().min(1) }),
  // the path's last part for the tab; `.txt` so no language mode guesses at a listing
  encode: (ref) => ({
    path: `/${docFileName(posix.basename(ref.path) || ref.path, 'data')} (data).txt`,
    fields: { v: '1', host: ref.hostId, path: ref.path },
  }),
  decode: (fields) => {
    if (fields.get('v') !== '1') throw new KnownGoodError('internal', `version ${fields.get('v') ?? 'none'}`);
    return { hostId: fields.get('host'), path: fields.get('path') };
  },
});

export const toEvidenceUri = (ref: DataEvidenceRef): UriParts => evidenceUri.to(ref);
/** The evidence a URI names; undefined for another scheme or one this codec did not write (an older window's). */
export const fromEvidenceUri = (uri: Pick<UriParts, 'scheme' | 'path' | 'query'>): DataEvidenceRef | undefined =>
  evidenceUri.parse(uri);

/** Entries of a folder listed; past it list_runs keeps the first names in order and the highest steps. */
export const DATA_LISTING_MAX = 200;

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: string };

export interface DataEvidence {
  host: string;
  path: string;
  listing: Outcome<RootListing | undefined>;
  /** Epoch seconds on the host's clock when it listed (its mtimes are on that clock too); null: not listed. */
  readAt: number | null;
  fingerprint: Outcome<DataFingerprint | undefined>;
}

/** Reads a data path on a host: its listing (python/list_runs.py, one level) and its fingerprint, side by side. */
export async function readDataEvidence(
  host: { label: string; probes: ProbeRunnerLike },
  path: string,
  signal?: AbortSignal,
): Promise<DataEvidence> {
  const opts = signal ? { signal } : {};
  const settle = async <T>(p: Promise<T>): Promise<Outcome<T>> =>
    p.then(
      (value) => ({ ok: true as const, value }),
      (e: unknown) => ({ ok: false as const, error: messageOf(e) }),
    );
  const [listing, fingerprint] = await Promise.all([
    settle(
      host.probes.run(listRunsProbe([path], { depth: 1, maxEntries: DATA_LISTING_MAX }), opts).then((o) => o.value),
    ),
    settle(host.probes.run(whatChangedProbe({ paths: [path] }), opts).then((o) => o.value.paths[0])),
  ]);
  return {
    host: host.label,
    path,
    listing: listing.ok ? { ok: true, value: listing.value.roots[0] } : listing,
    readAt: listing.ok ? listing.value.now : null,
    fingerprint,
  };
}

/** Epoch seconds (the host's clock) as the report writes them. */
const iso = (epoch: number | null | undefined) =>
  typeof epoch === 'number' && Number.isFinite(epoch)
    ? new Date(epoch * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')
    : 'unknown time';

const num = (n: number) => n.toLocaleString('en-US');

type Sample = NonNullable<DataFingerprint['samples']>[number];

/** One data file as data_shape.py read it: `train.npy (npy): 128 rows of 128, mean length 52.4 (padded)`. */
export function sampleLine(s: Sample): string {
  const bits: string[] = [];
  if (s.rows !== null) bits.push(`${num(s.rows)} rows${s.rowLength !== null ? ` of ${num(s.rowLength)}` : ''}`);
  if (s.meanLength !== null)
    bits.push(`mean length ${s.meanLength}${s.medianLength !== null ? ` (median ${s.medianLength})` : ''}`);
  if (s.padded === true) bits.push('padded');
  if (s.meanLineBytes !== null) bits.push(`${s.meanLineBytes} bytes a line`);
  if (typeof s.tokensIfUint16 === 'number') bits.push(`${num(s.tokensIfUint16)} tokens as uint16`);
  if (s.columns?.length) {
    const shown = s.columns.slice(0, 8).map((c, i) => (s.types?.[i] ? `${c} ${s.types[i]}` : c));
    bits.push(`columns ${shown.join(', ')}${s.columns.length > 8 ? `, … ${s.columns.length} in all` : ''}`);
  }
  return `${s.file} (${s.format}): ${bits.join(', ') || 'nothing read'}`;
}

function fingerprintLines(f: DataFingerprint): string[] {
  if (!f.exists) return [`  ${f.error ?? 'not found'}`];
  const out: string[] = [];
  const row = (k: string, v: string) => out.push(`  ${k.padEnd(13)}${v}`);
  if (f.kind === 'dir') {
    row('files', `${f.files !== null ? num(f.files) : '?'}${f.truncated ? ' (walked in part)' : ', every one below'}`);
    row('size', f.size !== null ? `${formatBytes(f.size)} (${formatExactBytes(f.size)})` : '?');
    row('newest mtime', iso(f.newestMtime ?? f.mtime));
    row(
      'hash',
      `${f.hash ?? '?'} (sha256 of every file's path, size and mtime: a file added, gone or rewritten moves it)`,
    );
  } else if (f.kind === 'file') {
    row('size', f.size !== null ? `${formatBytes(f.size)} (${formatExactBytes(f.size)})` : '?');
    row('mtime', iso(f.mtime));
    row('hash', `${f.hash ?? '?'} (sha256 of its first and last MiB)`);
  } else {
    row('kind', 'neither a file nor a folder (not read)');
  }
  if (f.error) row('note', f.error);
  const samples = f.samples ?? [];
  samples.forEach((s, i) => row(i === 0 ? 'holds' : '', sampleLine(s)));
  return out;
}

function entryLine(e: RunEntry): string {
  const name = e.kind === 'dir' ? `${e.name}/` : e.name;
  let size: string;
  if (e.kind === 'dir')
    size = e.listed === false ? 'folder' : `${formatBytes(e.size)}${e.sizeComplete === false ? '+' : ''}`;
  else if (e.kind === 'symlink') size = e.targetKind === 'dir' ? 'link' : formatBytes(e.size);
  else if (e.kind === 'special') size = e.special ?? 'special';
  else size = formatBytes(e.size);
  const target = e.kind === 'symlink' && e.target !== undefined ? ` → ${e.target}` : '';
  return `  ${iso(e.mtime).padEnd(22)}${size.padStart(10)}  ${name}${target}${e.error ? `  (${e.error})` : ''}`;
}

function listingLines(l: RootListing): string[] {
  const e = l.entry;
  if (l.status === 'not-a-directory') return ['  a file: nothing to list'];
  if (!e || l.status === 'missing' || l.status === 'denied' || l.status === 'error') return [`  ${l.message}`];
  const children = e.children ?? [];
  const more = e.omitted ?? 0;
  const total = children.length + more;
  // reading a folder stops at the probe's item limit: there may be more than it counted
  const atLeast = e.scanStopped ? 'at least ' : '';
  const out = [
    `  ${total === 0 ? 'empty' : `${atLeast}${num(total)} entries${more ? `, ${num(children.length)} listed` : ''}`}` +
      ' (folders are not walked here: the fingerprint counts what is below them)',
    '',
    `  ${'modified'.padEnd(22)}${'size'.padStart(10)}  name`,
    ...children.map(entryLine),
  ];
  if (more)
    out.push(
      '',
      `  … and ${atLeast}${num(more)} more not listed (the listing keeps ${DATA_LISTING_MAX}: the first names in order, and the highest steps of names that carry one)`,
    );
  return out;
}

/** The document: what the path is, its fingerprint, a folder's listing; a part that could not be read says why. */
export function renderDataEvidence(d: DataEvidence): string {
  const fp = d.fingerprint.ok ? d.fingerprint.value : undefined;
  const what = fp?.kind === 'dir' ? 'a data folder' : fp?.kind === 'file' ? 'a data file' : 'a data path';
  const out = [
    d.path,
    `${what} on ${d.host}, as it is now${d.readAt !== null ? ` (read ${iso(d.readAt)} by the host's clock)` : ''}`,
    '',
    'Fingerprint (what What Changed? compares with the one kept at the reference)',
    ...(!d.fingerprint.ok
      ? [`  not read: ${d.fingerprint.error}`]
      : fp
        ? fingerprintLines(fp)
        : ['  the probe named no such path']),
  ];
  // a file has nothing to list, and a path that is not there says so once
  if (fp?.kind !== 'file' && fp?.exists !== false) {
    out.push(
      '',
      'Listing',
      ...(!d.listing.ok
        ? [`  not read: ${d.listing.error}`]
        : d.listing.value
          ? listingLines(d.listing.value)
          : ['  the probe listed nothing']),
      '',
      'Folders whose name starts with a dot, and __pycache__, are not listed (the fingerprint counts their files).',
    );
  }
  return `${out.join('\n')}\n`;
}
