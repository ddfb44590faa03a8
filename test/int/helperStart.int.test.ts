import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { isKnownGoodError } from '../../src/core/errors';
import { hostInfoProbe } from '../../src/core/probes/hostProbes';
import { ProbeRunner } from '../../src/core/probes/runner';
import { LocalTransport } from '../../src/core/transport/local';

// The resident helper's start is shared by every request on the host: one request whose own time runs out while the
// helper is still starting must fail alone, not stop the start the others wait for (seen in CI beside two CPU hogs:
// after Reload Window a short request killed the starting helper and the tree row said "the helper stopped").

const dir = mkdtempSync(join(tmpdir(), 'kg-helper-start-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a request that times out while the helper starts fails alone; the start goes on and serves the others', async () => {
  const starts = join(dir, 'starts');
  const gate = join(dir, 'gate');
  // python3 held before it starts until the test creates the gate file: the start is slow for certain.
  const python = join(dir, 'held-python');
  writeFileSync(
    python,
    `#!/bin/sh\necho start >> '${starts}'\nwhile [ ! -e '${gate}' ]; do sleep 0.05; done\nexec python3 "$@"\n`,
  );
  chmodSync(python, 0o755);
  const runner = new ProbeRunner(new LocalTransport(), { python, timeoutMs: 120_000 });
  try {
    const short = runner.run(hostInfoProbe(), { timeoutMs: 300 });
    const patient = runner.run(hostInfoProbe());
    await assert.rejects(short, (e: unknown) => isKnownGoodError(e, 'timeout'));
    writeFileSync(gate, '');
    const answer = await patient;
    assert.ok(answer.value.python.version, JSON.stringify(answer.value));
    await runner.run(hostInfoProbe());
    assert.equal(readFileSync(starts, 'utf8'), 'start\n', 'the helper was started again');
  } finally {
    runner.dispose();
  }
});
