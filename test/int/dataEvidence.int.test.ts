import assert from 'node:assert/strict';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { SshPool } from '../../src/core/transport/ssh';
import { formatBytes } from '../../src/core/util/format';
import { whatChangedProbe } from '../../src/core/whatChanged/factsProbe';
import { DATA_LISTING_MAX, readDataEvidence, renderDataEvidence } from '../../src/core/whatChanged/dataEvidence';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { REAL_RUNS } from '../support/realRuns';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 32 item 7: a data folder as What Changed?'s evidence opens as what it holds now — its listing with sizes and
 * mtimes, and the fingerprint the report compares — read over a real sshd through the resident helper. The data is
 * the regressions corpus's own padded set (the samples python/data_shape.py reads in it are real).
 */

let sshd: TestSshd;
let pool: SshPool;
let runner: ProbeRunner;
let dir = '';
const host = () => ({ label: 'gpu-box', probes: runner });
const iso = (path: string) =>
  statSync(path)
    .mtime.toISOString()
    .replace(/\.\d{3}Z$/, 'Z');

void describe('data evidence: a folder opens as its listing and fingerprint', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "kg-data evidence 'q' #"));
    chmodSync(dir, 0o755);
    const padded = join(dir, 'owt-128-padded');
    cpSync(join(REAL_RUNS, 'regressions', 'data', 'owt-128-padded'), padded, { recursive: true });
    mkdirSync(join(padded, 'cache', 'x'), { recursive: true });
    writeFileSync(join(padded, 'cache', 'x', 'index.bin'), 'abc');
    // times of its own, so a line shows the file's time and no other
    utimesSync(join(padded, 'train.npy'), 1_764_000_000, 1_764_000_000);
    utimesSync(join(padded, 'val.npy'), 1_764_100_000, 1_764_100_000);
    const shards = join(dir, 'shards');
    mkdirSync(shards);
    for (let i = 0; i < DATA_LISTING_MAX + 50; i++)
      writeFileSync(join(shards, `part-${String(i).padStart(5, '0')}.bin`), 'x'.repeat(i % 7));
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    runner = new ProbeRunner(pool.transport(endpointOf(sshd), 'test-sshd'), { python: 'python3', timeoutMs: 60_000 });
  });

  after(async () => {
    runner?.dispose();
    pool?.dispose();
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('names, sizes and mtimes of what is in it, and the fingerprint What Changed? computes for it', async () => {
    const path = join(dir, 'owt-128-padded');
    const text = renderDataEvidence(await readDataEvidence(host(), path));
    const lines = text.split('\n');
    assert.equal(lines[0], path);
    assert.match(
      lines[1]!,
      /^a data folder on gpu-box, as it is now \(read \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ by the host's clock\)$/,
    );
    for (const name of ['train.npy', 'val.npy']) {
      const file = join(path, name);
      const line = lines.find((l) => l.endsWith(`  ${name}`));
      assert.ok(line, `${name} listed:\n${text}`);
      assert.ok(line.includes(iso(file)), line);
      assert.ok(line.includes(formatBytes(statSync(file).size)), line);
    }
    assert.ok(
      lines.some((l) => /^\s+\S+Z\s+folder {2}cache\/$/.test(l)),
      text,
    );
    assert.match(text, /^ {2}3 entries /m);
    // the same fingerprint a report takes of the path: its hash, its file count (below sub-folders too), its samples
    const fp = (await runner.run(whatChangedProbe({ paths: [path] }))).value.paths[0]!;
    assert.equal(fp.files, 3);
    assert.ok(fp.hash && text.includes(`hash         ${fp.hash} `), text);
    assert.match(text, /^ {2}files {8}3, every one below$/m);
    assert.match(text, /^ {2}holds {8}train\.npy \(npy\): 128 rows of 129, mean length [\d.]+ .*padded/m);
  });

  it('a folder of more entries than it lists says how many more', async () => {
    const text = renderDataEvidence(await readDataEvidence(host(), join(dir, 'shards')));
    assert.match(text, new RegExp(`^ {2}${DATA_LISTING_MAX + 50} entries, ${DATA_LISTING_MAX} listed `, 'm'));
    assert.equal(text.split('\n').filter((l) => / {2}part-\d{5}\.bin$/.test(l)).length, DATA_LISTING_MAX);
    assert.match(text, new RegExp(`^ {2}… and 50 more not listed \\(the listing keeps ${DATA_LISTING_MAX}`, 'm'));
    assert.match(text, new RegExp(`^ {2}files {8}${DATA_LISTING_MAX + 50}, every one below$`, 'm'));
  });

  it('a file has its fingerprint and no listing; a path that is not there says so once', async () => {
    const file = join(dir, 'owt-128-padded', 'val.npy');
    const text = renderDataEvidence(await readDataEvidence(host(), file));
    assert.match(text.split('\n')[1]!, /^a data file on gpu-box/);
    assert.match(text, new RegExp(`^ {2}mtime {8}${iso(file)}$`, 'm'));
    assert.doesNotMatch(text, /Listing/);
    const gone = renderDataEvidence(await readDataEvidence(host(), join(dir, 'gone')));
    assert.match(gone, /^ {2}not found$/m);
    assert.doesNotMatch(gone, /Listing/);
  });
});
