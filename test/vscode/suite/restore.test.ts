import * as assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as vscode from 'vscode';
import type { BenchRunOutcome, CaptureOutcome, RestoreOutcome } from '../../../src/api';
import type { PackageBisectRunOutcome } from '../../../src/bisect/register';
import { goodAndBadVenvs, ratioBench } from '../../support/wheels';
import { activated, setSetting, testSshHost, waitFor } from './helpers';

/*
 * Issue 26 in VS Code over the real sshd: a baseline captured while the host's python was a venv of wheels written
 * here (PIP_NO_INDEX + PIP_FIND_LINKS a folder of them, as the snapshot records), the user's benchmark kept beside
 * it; then the host's PATH moves to another venv where kg-slow is 2.0 (10x the work). Restore Known Good… → Run
 * rebuilds the baseline's env, runs the benchmark there and now, and its report reads "restored: … vs … at baseline,
 * … now"; Bisect Packages against the Restored Env… then names kg-slow, confirmed. The benchmark's speed is a
 * CPU-time ratio (test/support/wheels.ts): kg-slow 2.0 is 10x slower on any machine, at any load.
 */

const NAMES = ['kg-alpha', 'kg-bravo', 'kg-charlie', 'kg-slow'];
const BASE_PYTHON = '/usr/bin/python3';

describe('Restore Known Good and the package bisect (extension host, real SSH, real venvs)', function () {
  this.timeout(900_000);
  let dir: string;
  let hostId: string;
  let baselineId: string;
  let bashEnv: string;
  let savedBashEnv: string;
  const label = `restore-suite-${process.pid}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-vscode-restore-'));
    const { wheels } = goodAndBadVenvs(dir, NAMES, { basePython: BASE_PYTHON });
    writeFileSync(join(dir, 'bench.py'), ratioBench(NAMES));
    bashEnv = join(dirname(testSshHost().home), 'bash_env');
    savedBashEnv = readFileSync(bashEnv, 'utf8');
    // the known-good state: `python` is the good venv's; pip's only source is the wheel folder
    writeFileSync(
      bashEnv,
      `${savedBashEnv}\nexport PATH=${join(dir, 'good/bin')}:$PATH\nexport PIP_NO_INDEX=1\nexport PIP_FIND_LINKS=${wheels}\n`,
    );
    const api = await activated();
    const sshd = testSshHost();
    await setSetting('hosts', [
      {
        name: 'restore-sshd',
        host: '127.0.0.1',
        port: sshd.port,
        user: sshd.user,
        identityFile: sshd.identityFile,
        // resolved on the host through PATH, as a plain `python` is: the good venv at capture, the bad one after
        python: 'python',
        roots: [],
      },
    ]);
    await setSetting('benchmark.command', `python ${join(dir, 'bench.py')}`);
    await setSetting('benchmark.throughputRegex', 'speed: ([\\d.]+)');
    hostId = (await waitFor('the SSH host', () => api.registry.hosts().find((h) => h.name === 'restore-sshd'))).id;
  });
  after(async () => {
    writeFileSync(bashEnv, savedBashEnv);
    await setSetting('hosts', undefined);
    await setSetting('benchmark.command', undefined);
    await setSetting('benchmark.throughputRegex', undefined);
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(testSshHost().home, '.known-good/envs', label), { recursive: true, force: true });
    rmSync(join(testSshHost().home, '.known-good/envs', `${label}-bisect`), { recursive: true, force: true });
  });

  it('Restore → Run: pip freeze identical, then the benchmark restored vs at baseline vs now, in the report', async () => {
    const captured = await vscode.commands.executeCommand<CaptureOutcome>(
      'knownGood.baselines.capture',
      { hostId },
      { label },
    );
    baselineId = captured.id;
    const kept = await vscode.commands.executeCommand<BenchRunOutcome>(
      'knownGood.bench.runCustom',
      { hostId },
      {
        label: 'good state',
      },
    );
    assert.ok(kept?.tokensPerSec, kept?.error ?? kept?.screen);
    // now: the host's python is the venv with kg-slow 2.0
    writeFileSync(bashEnv, readFileSync(bashEnv, 'utf8').replace(join(dir, 'good/bin'), join(dir, 'bad/bin')));

    const out = await vscode.commands.executeCommand<RestoreOutcome>(
      'knownGood.baselines.restoreEnv',
      { hostId, baselineId },
      { run: true, benchmark: 'custom' },
    );
    assert.equal(out.exitCode, 0, out.freeze);
    assert.match(out.freeze ?? '', /identical to the baseline/);
    const s = out.speeds;
    assert.ok(s, 'the benchmark ran');
    assert.deepEqual(s.errors, []);
    console.log(`restore in VS Code: ${s.line}`);
    // kg-slow 1.0 restored against 2.0 now: 10x the work, whatever the machine
    assert.ok(s.restored! > 3 * s.now!, s.line);
    assert.equal(s.baseline, kept.tokensPerSec, 'the baseline figure is the result kept in the good state');
    assert.match(out.reportText ?? '', /\*\*restored: [\d.]+ per s vs [\d.]+ at baseline, [\d.]+ now\*\*/);
    assert.match(out.reportText ?? '', /measured \d+ min from the baseline's capture/);
  });

  it('Bisect Packages against the Restored Env… names kg-slow, confirmed, with the live terminal and the report', async () => {
    assert.ok(baselineId, 'the restore test ran first');
    const r = await vscode.commands.executeCommand<PackageBisectRunOutcome>('knownGood.bisect.packages', {
      hostId,
      baselineId,
    });
    console.log(`package bisect in VS Code: ${r.result.headline}`);
    assert.equal(r.result.changes.length, NAMES.length);
    assert.deepEqual(r.result.report.verdict.ids, ['kg-slow'], r.markdown);
    assert.equal(r.result.report.confirmation?.confirmed, true, r.markdown);
    assert.match(r.screen, /Round 1 \(reproduce\)/);
    assert.match(r.screen, /Culprit: kg-slow 1\.0 → 2\.0 — confirmed/);
    assert.ok(
      vscode.window.visibleTextEditors.some((e) => e.document.uri.toString() === r.uri),
      'the report is open',
    );
    assert.match(r.markdown, /Good: the restored env .*restore-suite-/);
  });
});
