import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pythonPickOrder, type PythonCandidate } from '../../src/core/probes/hostProbes';

const py = (path: string, extra: Partial<PythonCandidate> = {}): PythonCandidate => ({
  path,
  executable: path,
  version: '3.11.2',
  prefix: null,
  venv: false,
  torch: null,
  error: null,
  ...extra,
});

void test('Select Remote Python: interpreters with torch first, broken ones last, venvs before system ones', () => {
  const order = pythonPickOrder([
    py('/usr/bin/python3'),
    py('/broken/python', { version: null, error: 'exec format error' }),
    py('/usr/local/bin/python3.12', { torch: '2.4.0' }),
    py('/work/.venv/bin/python', { venv: true, torch: '2.5.1' }),
    py('/opt/venv/bin/python', { venv: true }),
    py('/usr/bin/python3.11', { torch: '2.3.0' }),
  ]).map((c) => c.path);
  assert.deepEqual(order, [
    '/work/.venv/bin/python',
    '/usr/local/bin/python3.12',
    '/usr/bin/python3.11',
    '/opt/venv/bin/python',
    '/usr/bin/python3',
    '/broken/python',
  ]);
});
