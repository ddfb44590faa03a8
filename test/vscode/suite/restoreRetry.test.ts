import * as assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as vscode from 'vscode';
import type { CaptureOutcome, RestoreOutcome } from '../../../src/api';
import type { BisectRunOutcome } from '../../../src/bisect/register';
import { goodAndBadVenvs } from '../../support/wheels';
import { activated, setSetting, testSshHost, waitFor } from './helpers';

/*
 * Restore and Bisect as a new user met them (issue 33, "Restore and Bisect in VS Code today"), over the real sshd with
 * real venvs and real pip: a package the source lists but pip cannot install (its wheel is no zip) no longer leaves a
 * half-built env that every retry refuses — the others go in, the one that failed is named in the outcome and the
 * report; Restore again resumes the folder (kg-bravo mended) instead of "exists: remove it"; the plan document's Run
 * (its editor title) runs the same restore again; a plan made again takes the tab of the one before. A bisect on a
 * baseline whose own interpreter has no torch says that interpreter is the problem, never "Select Remote Python".
 */

const NAMES = ['kg-alpha', 'kg-bravo', 'kg-charlie'];
const BASE_PYTHON = '/usr/bin/python3';

const tabsNamed = (name: string) =>
  vscode.window.tabGroups.all
    .flatMap((g) => g.tabs)
    .filter(
      (t) => t.input instanceof vscode.TabInputText && t.input.uri.scheme === 'knownGood-doc' && t.label === name,
    );

describe('Restore again after a failed pin, Run on the plan, Bisect on a baseline without torch (extension host)', function () {
  this.timeout(900_000);
  let dir: string;
  let broken: string;
  let wheels: string;
  let hostId: string;
  let bashEnv: string;
  let savedBashEnv: string;
  const label = `retry-suite-${process.pid}`;
  const host = (python: string) => {
    const sshd = testSshHost();
    return [
      {
        name: 'retry-sshd',
        host: '127.0.0.1',
        port: sshd.port,
        user: sshd.user,
        identityFile: sshd.identityFile,
        python,
        roots: [],
      },
    ];
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-vscode-retry-'));
    ({ wheels } = goodAndBadVenvs(dir, NAMES, { basePython: BASE_PYTHON }));
    // the source the baseline records: every wheel listed, kg-bravo 1.0's file no wheel at all
    broken = join(dir, 'wheels-broken');
    cpSync(wheels, broken, { recursive: true });
    writeFileSync(join(broken, 'kg_bravo-1.0-py3-none-any.whl'), 'not a zip file\n');
    bashEnv = join(dirname(testSshHost().home), 'bash_env');
    savedBashEnv = readFileSync(bashEnv, 'utf8');
    writeFileSync(bashEnv, `${savedBashEnv}\nexport PIP_NO_INDEX=1\nexport PIP_FIND_LINKS=${broken}\n`);
    const api = await activated();
    // the baseline's interpreter: the venv of the 1.0 wheels, which has no torch
    await setSetting('hosts', host(join(dir, 'good/bin/python')));
    hostId = (await waitFor('the SSH host', () => api.registry.hosts().find((h) => h.name === 'retry-sshd'))).id;
  });
  after(async () => {
    writeFileSync(bashEnv, savedBashEnv);
    await setSetting('hosts', undefined);
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(testSshHost().home, '.known-good/envs', label), { recursive: true, force: true });
  });

  let baselineId: string;
  let first: RestoreOutcome;

  it('a pin pip cannot install: the rest go in, it is named in the outcome and the report (exit 4)', async () => {
    const captured = await vscode.commands.executeCommand<CaptureOutcome>(
      'knownGood.baselines.capture',
      { hostId },
      { label },
    );
    baselineId = captured.id;
    first = await vscode.commands.executeCommand<RestoreOutcome>(
      'knownGood.baselines.restoreEnv',
      { hostId, baselineId },
      { run: true, benchmark: 'none' },
    );
    assert.equal(first.exitCode, 4, first.freeze);
    assert.deepEqual(first.failedPins, ['kg-bravo==1.0']);
    assert.match(first.reportText ?? '', /\*\*1 pinned package could not be installed: kg-bravo==1\.0\*\*/);
    assert.match(first.reportText ?? '', /again offers \*\*Resume\*\*/);
    // what the folder holds: every package but kg-bravo
    assert.match(first.freeze ?? '', /1 differ:\n {2}kg-bravo: baseline 1\.0, restored —/);
  });

  it('Restore again: the folder is resumed (kg-bravo mended), not refused; one plan tab, one report tab', async () => {
    assert.ok(first, 'the first restore ran');
    copyFileSync(join(wheels, 'kg_bravo-1.0-py3-none-any.whl'), join(broken, 'kg_bravo-1.0-py3-none-any.whl'));
    const again = await vscode.commands.executeCommand<RestoreOutcome>(
      'knownGood.baselines.restoreEnv',
      { hostId, baselineId },
      { run: true, benchmark: 'none', existing: 'resume' },
    );
    assert.equal(again.existing, 'resume');
    assert.deepEqual(again.earlierFailed, ['kg-bravo==1.0'], 'what the earlier restore could not install is known');
    assert.equal(again.exitCode, 0, again.freeze);
    assert.match(again.freeze ?? '', /identical to the baseline/);
    assert.equal(tabsNamed(`restore ${label}.sh`).length, 1, 'the new plan took the tab of the one before');
    assert.equal(tabsNamed(`restore ${label} report.md`).length, 1, 'one report tab');

    // Run on the plan document's editor title: the same restore (same label, Resume) planned and run again
    const pkg = vscode.extensions.getExtension('known-good.known-good')!.packageJSON as {
      contributes: { menus: Record<string, { command: string; when?: string }[]> };
    };
    const editorTitle = pkg.contributes.menus['editor/title']!.find(
      (m) => m.command === 'knownGood.baselines.runRestorePlan',
    );
    assert.match(editorTitle?.when ?? '', /resourceScheme == '?knownGood-doc'?/);
    const viaTitle = await vscode.commands.executeCommand<RestoreOutcome>(
      'knownGood.baselines.runRestorePlan',
      vscode.Uri.parse(again.document),
      { benchmark: 'none' },
    );
    assert.equal(viaTitle.existing, 'resume');
    assert.equal(viaTitle.exitCode, 0, viaTitle.freeze);
    assert.equal(tabsNamed(`restore ${label}.sh`).length, 1);
  });

  it("Bisect on that baseline once the host's python has torch: the baseline's interpreter is the problem, Restore is offered", async () => {
    assert.ok(baselineId, 'the baseline was captured');
    const api = await activated();
    await setSetting('hosts', host(BASE_PYTHON));
    await waitFor('the host with its new python', () =>
      api.registry.hosts().find((h) => h.name === 'retry-sshd' && h.python === BASE_PYTHON),
    );
    const r = await vscode.commands.executeCommand<BisectRunOutcome>('knownGood.bisect.environment', {
      hostId,
      baselineId,
    });
    assert.ok(r, 'the bisect resolved to an outcome');
    assert.match(r.error ?? '', /^The baseline's interpreter \S+\/good\/bin\/python has no torch now/, r.screen);
    assert.match(r.error ?? '', /Restore Known Good rebuilds the baseline's packages/);
    assert.doesNotMatch(r.screen, /Select Remote Python/);
    // the benchmark's configuration is never "{} (defaults)"
    assert.doesNotMatch(r.screen, /\{\} \(defaults\)/);
    assert.match(r.screen, /throughput_bench\.py with its defaults for the device it finds/);
  });
});
