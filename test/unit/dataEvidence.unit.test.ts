import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RootListing } from '../../src/core/runs/listRuns';
import { renderDataEvidence, sampleLine, type DataEvidence } from '../../src/core/whatChanged/dataEvidence';
import { dataFingerprintSchema } from '../../src/core/whatChanged/factsProbe';

/*
 * The data evidence document from probe answers (test/int/dataEvidence.int.test.ts reads real ones over sshd): what
 * it says when a part could not be read, and the entries a listing can hold besides files.
 */

const fingerprint = dataFingerprintSchema.parse({
  path: '/data/shards',
  exists: true,
  kind: 'dir',
  size: 3 * 1024 * 1024,
  mtime: 1_764_000_000,
  files: 12,
  newestMtime: 1_764_100_000,
  hash: '0123456789abcdef',
  truncated: true,
  error: 'folders nested deeper than 256 levels were not walked',
});

const listing: RootListing = {
  root: '/data/shards',
  path: '/data/shards',
  status: 'no-checkpoints',
  message: 'no checkpoints found',
  signature: null,
  entry: {
    name: 'shards',
    path: '',
    kind: 'dir',
    size: 0,
    mtime: 1_764_000_000,
    role: 'dir',
    omitted: 7,
    scanStopped: true,
    children: [
      {
        name: 'latest',
        path: 'latest',
        kind: 'symlink',
        size: 0,
        mtime: 1_764_000_000,
        role: 'link',
        target: 'v2',
        targetKind: 'dir',
      },
      { name: 'feed', path: 'feed', kind: 'special', size: 0, mtime: 1_764_000_000, role: 'other', special: 'fifo' },
      {
        name: 'secret',
        path: 'secret',
        kind: 'dir',
        size: 0,
        mtime: null,
        role: 'dir',
        listed: false,
        error: 'permission denied',
      },
    ],
  },
};

const evidence = (over: Partial<DataEvidence>): DataEvidence => ({
  host: 'gpu-box',
  path: '/data/shards',
  listing: { ok: true, value: listing },
  readAt: 1_764_200_000,
  fingerprint: { ok: true, value: fingerprint },
  ...over,
});

void describe('the data evidence document', () => {
  it('says a fingerprint walked in part is so, and why', () => {
    const text = renderDataEvidence(evidence({}));
    assert.match(text, /^ {2}files {8}12 \(walked in part\)$/m);
    assert.match(text, /^ {2}note {9}folders nested deeper than 256 levels were not walked$/m);
    assert.match(text, /^ {2}newest mtime 2025-11-25T19:46:40Z$/m);
    assert.match(text, /^a data folder on gpu-box, as it is now \(read 2025-11-26T23:33:20Z by the host's clock\)$/m);
  });

  it('lists links, FIFOs and unreadable folders as what they are; a listing stopped early says "or more"', () => {
    const text = renderDataEvidence(evidence({}));
    assert.match(text, /^ {2}at least 10 entries, 3 listed /m);
    assert.match(text, / link {2}latest → v2$/m);
    assert.match(text, / fifo {2}feed$/m);
    assert.match(text, /^ {2}unknown time +folder {2}secret\/ {2}\(permission denied\)$/m);
    assert.match(text, /^ {2}… and at least 7 more not listed/m);
  });

  it('a part the host did not answer says why, and the other part still shows', () => {
    const text = renderDataEvidence(
      evidence({ listing: { ok: false, error: 'host gpu-box is unreachable' }, readAt: null }),
    );
    assert.match(text, /^Listing\n {2}not read: host gpu-box is unreachable$/m);
    assert.match(text, /^ {2}hash {9}0123456789abcdef /m);
    assert.match(text, /^a data folder on gpu-box, as it is now$/m);
    const both = renderDataEvidence(
      evidence({ fingerprint: { ok: false, error: 'timed out after 30 s' }, listing: { ok: false, error: 'x' } }),
    );
    assert.match(both, /^a data path on gpu-box/m);
    assert.match(both, /^ {2}not read: timed out after 30 s$/m);
  });

  it('a data file read by data_shape: rows, lengths, padding, columns', () => {
    const [s] = dataFingerprintSchema.parse({
      path: '/d/train.parquet',
      exists: true,
      samples: [
        {
          file: 'train.parquet',
          format: 'parquet',
          rows: 1000,
          rowLength: 128,
          meanLength: 53.4,
          padded: true,
          columns: ['input_ids', 'text'],
          types: ['list<int32>', 'string'],
        },
      ],
    }).samples!;
    assert.equal(
      sampleLine(s!),
      'train.parquet (parquet): 1,000 rows of 128, mean length 53.4, padded, columns input_ids list<int32>, text string',
    );
  });
});
