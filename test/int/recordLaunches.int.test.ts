import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { LocalTransport } from '../../src/core/transport/local';
import { kgRecordFiles, placeKgRecord, recordLines, recordSetupText } from '../../src/core/whatChanged/recordLaunches';

/*
 * "Record Launches of This Run…" (issue 23): kg_record.py and its modules copied to a folder of the host by the real
 * program the command runs there, then the line it shows run as a person would paste it (through sh) in front of a
 * real command: the record lands where the line says and the command runs unchanged.
 */

void describe('Record Launches of This Run', () => {
  const dir = mkdtempSync(join(tmpdir(), "kg-record-setup-it's "));
  const t = new LocalTransport();
  after(() => {
    t.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  void it('copies kg_record.py with every module it imports; the line it shows records the launch and runs the command', async () => {
    const bin = join(dir, 'bin dir');
    const before = await placeKgRecord(t, 'python3', { copy: false, dir: bin });
    assert.equal(before.present, false);
    const place = await placeKgRecord(t, 'python3', { copy: true, dir: bin });
    assert.equal(place.present, true);
    assert.deepEqual(place.copied.sort(), Object.keys(kgRecordFiles()).sort());
    assert.ok(
      place.copied.includes('launch_sources.py') && place.copied.includes('env_python.py'),
      place.copied.join(),
    );
    assert.deepEqual(readdirSync(bin).sort(), place.copied.sort()); // no temp file left
    const run = join(dir, 'run $(x)');
    const lines = recordLines({ python: 'python3', script: place.script, run, home: false });
    const out = execFileSync('sh', ['-c', `${lines.prefix} sh -c 'echo ran; exit 0'`], { encoding: 'utf8' });
    assert.equal(out, 'ran\n');
    const rec = JSON.parse(readFileSync(join(run, '.known-good', 'launches.jsonl'), 'utf8')) as { argv: string[] };
    assert.deepEqual(rec.argv, ['sh', '-c', 'echo ran; exit 0']);
    const text = recordSetupText({ host: 'local', run, place, home: true, lines });
    assert.match(text, /nothing is written in the run folder/);
    assert.ok(text.includes(lines.torchrun) && text.includes(lines.accelerate));
  });
});
