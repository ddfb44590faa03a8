import assert from 'node:assert/strict';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { materializeRealRuns, realPath, realRunNames } from '../support/realRuns';

void describe('the real runs fixture, materialized (test/support/realRuns.ts)', () => {
  void it('puts back each run’s .git and .gitignore and every mtime of mtimes.json', () => {
    const dir = materializeRealRuns('regressions');
    const names = realRunNames('regressions');
    assert.ok(names.length >= 12);
    for (const run of names) {
      assert.ok(existsSync(join(dir, run, '.git', 'HEAD')), run);
      assert.ok(existsSync(join(dir, run, '.gitignore')), run);
      assert.ok(!existsSync(join(dir, run, 'dot-git')), run);
    }
    const manifest = JSON.parse(readFileSync(join(dir, 'mtimes.json'), 'utf8')) as Record<string, number>;
    for (const [rel, ns] of Object.entries(manifest)) {
      const st = lstatSync(join(dir, ...realPath(rel).split('/')), { bigint: true });
      // Nanoseconds pass through doubles (JSON, utimes) and Node sets microseconds: equal within two.
      assert.ok(Math.abs(Number(st.mtimeNs) - ns) < 2000, `${rel}: ${st.mtimeNs} vs ${ns}`);
    }
  });
});
