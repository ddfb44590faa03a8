import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { envSnapshotProbe, type EnvSnapshot } from '../../src/core/baselines/envProbe';
import { renderBisectMarkdown } from '../../src/core/bisect/render';
import { ProbeRunner } from '../../src/core/probes/runner';
import {
  ENV_EXISTS_EXIT,
  FAILED_PINS_EXIT,
  FAILED_PINS_FILE,
  failedPinsOf,
  planScript,
} from '../../src/core/restore/plan';
import { packageBisect } from '../../src/core/restore/packageBisect';
import { compareFreeze, freezeComparisonText, freezeOf, planOnHost, runScript } from '../../src/core/restore/run';
import { LocalTransport } from '../../src/core/transport/local';
import { goodAndBadVenvs, ratioBench } from '../support/wheels';

/*
 * Restore and package bisect with real installs: pure-Python wheels written here (stdlib zipfile), a folder of them
 * as the only index (--no-index --find-links), two real venvs differing in 8 packages. kg-slow 2.0's hot function
 * does 10x the work of 1.0's: slower by that ratio on any machine, whatever its speed.
 */

const NAMES = ['kg-alpha', 'kg-bravo', 'kg-charlie', 'kg-delta', 'kg-echo', 'kg-foxtrot', 'kg-golf', 'kg-slow'];

const BENCH = ratioBench(NAMES);

function py(python: string, args: string[]): string {
  return execFileSync(python, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

void describe('restore and package bisect (real venvs, a wheel folder as the only index)', () => {
  let dir: string;
  let wheels: string;
  let base: string;
  const savedHome = process.env['HOME'];
  const transport = new LocalTransport();
  let goodSnapshot: EnvSnapshot;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kg-restore-'));
    await writeFile(join(dir, 'bench.py'), BENCH);
    base = py('python3', ['-c', 'import sys, os; print(os.path.realpath(sys.executable))']).trim();
    ({ wheels } = goodAndBadVenvs(dir, NAMES, { basePython: base, extra: ['kg-same'] }));
    // The restore writes under ~/.known-good/envs: this test's home is its own folder.
    process.env['HOME'] = dir;
    const runner = new ProbeRunner(transport, {
      python: join(dir, 'good/bin/python'),
      timeoutMs: 120_000,
      resident: false,
    });
    goodSnapshot = (await runner.run(envSnapshotProbe())).value;
  });

  after(async () => {
    if (savedHome === undefined) delete process.env['HOME'];
    else process.env['HOME'] = savedHome;
    await rm(dir, { recursive: true, force: true });
  });

  const host = () => ({
    transport,
    probes: new ProbeRunner(transport, { python: 'python3', timeoutMs: 60_000, resident: false }),
    label: 'this machine',
  });
  const source = () => ({ noIndex: true, findLinks: [wheels], why: `the wheel folder ${wheels}` });

  void it("restore reproduces the baseline's pip freeze exactly", async () => {
    const plan = await planOnHost(host(), goodSnapshot, { label: 'kg-good', source: source() });
    assert.deepEqual(
      plan.notes.filter((n) => n.severity === 'blocker'),
      [],
    );
    assert.equal(plan.envDir, join(dir, '.known-good/envs/kg-good'));
    const lines: string[] = [];
    const code = await runScript(transport, planScript(plan, 'baseline kg-good'), (l) => lines.push(l));
    assert.equal(code, 0, lines.join('\n'));
    assert.ok(
      lines.some((l) => l.startsWith('== 4/')),
      'progress lines',
    );
    const freeze = await freezeOf(transport, plan);
    const cmp = compareFreeze(goodSnapshot.packages.packages, freeze, plan);
    assert.ok(cmp.identical, freezeComparisonText(cmp));
    assert.equal(
      freeze,
      py(join(dir, 'good/bin/python'), ['-m', 'pip', 'freeze', '--all', '--disable-pip-version-check']),
    );
    console.log(`restore: ${plan.pins.length} packages; ${freezeComparisonText(cmp)}`);
    // The env exists now: a second run refuses to overwrite it.
    const again = await runScript(transport, planScript(plan, 'again'), () => undefined);
    assert.equal(again, 3);
  });

  void it('a package pip cannot install: the others go in, it is named (exit 4); Resume finishes the env, Rebuild starts over', async () => {
    // a wheel folder that lists kg-echo 1.0, whose file is no wheel: the plan sees it, pip cannot install it
    const broken = join(dir, 'wheels-broken');
    await cp(wheels, broken, { recursive: true });
    await writeFile(join(broken, 'kg_echo-1.0-py3-none-any.whl'), 'not a zip file\n');
    const src = { noIndex: true, findLinks: [broken], why: `the wheel folder ${broken}` };
    const plan = await planOnHost(host(), goodSnapshot, { label: 'kg-half', source: src });
    assert.deepEqual(
      plan.notes.filter((n) => n.kind === 'missing'),
      [],
      'the plan takes kg-echo 1.0 as available',
    );
    const lines: string[] = [];
    const code = await runScript(transport, planScript(plan, 'half'), (l) => lines.push(l));
    assert.equal(code, FAILED_PINS_EXIT, lines.join('\n'));
    assert.ok(
      lines.some((l) => /^== 1 pinned package\(s\) could not be installed/.test(l)),
      lines.join('\n'),
    );
    assert.deepEqual(failedPinsOf(await readFile(join(plan.envDir, FAILED_PINS_FILE), 'utf8')), ['kg-echo==1.0']);
    const half = compareFreeze(goodSnapshot.packages.packages, await freezeOf(transport, plan), plan);
    assert.deepEqual(
      half.differences.map((d) => d.name),
      ['kg-echo'],
      'every other package is in',
    );

    // again as before: the folder exists, and the script says what to do instead of "remove it"
    const refused: string[] = [];
    assert.equal(await runScript(transport, planScript(plan, 'half'), (l) => refused.push(l)), ENV_EXISTS_EXIT);
    assert.match(
      refused.join('\n'),
      /exists \(an earlier restore\): restore again to resume it, rebuild it or pick another label/,
    );

    // the source mended: Resume installs what the folder lacks, keeps what it holds
    await cp(join(wheels, 'kg_echo-1.0-py3-none-any.whl'), join(broken, 'kg_echo-1.0-py3-none-any.whl'));
    await writeFile(join(plan.envDir, 'kept-by-resume'), 'x');
    const resume = await planOnHost(host(), goodSnapshot, { label: 'kg-half', source: src, existing: 'resume' });
    const resumed: string[] = [];
    assert.equal(await runScript(transport, planScript(resume, 'half'), (l) => resumed.push(l)), 0, resumed.join('\n'));
    const whole = compareFreeze(goodSnapshot.packages.packages, await freezeOf(transport, resume), resume);
    assert.ok(whole.identical, freezeComparisonText(whole));
    assert.ok(existsSync(join(plan.envDir, 'kept-by-resume')), 'Resume keeps the folder');
    assert.ok(!existsSync(join(plan.envDir, FAILED_PINS_FILE)), 'no failure left from before');

    // Rebuild: the folder removed first, made again whole
    const rebuild = await planOnHost(host(), goodSnapshot, { label: 'kg-half', source: src, existing: 'rebuild' });
    const rebuilt: string[] = [];
    assert.equal(
      await runScript(transport, planScript(rebuild, 'half'), (l) => rebuilt.push(l)),
      0,
      rebuilt.join('\n'),
    );
    assert.ok(!existsSync(join(plan.envDir, 'kept-by-resume')), 'Rebuild starts from an empty folder');
    assert.ok(compareFreeze(goodSnapshot.packages.packages, await freezeOf(transport, rebuild), rebuild).identical);
  });

  void it('a package missing from the index is named in the plan and left out of its commands', async () => {
    const s: EnvSnapshot = JSON.parse(JSON.stringify(goodSnapshot)) as EnvSnapshot;
    s.packages.packages['kg-gone'] = '1.0';
    s.packages.packages['kg-slow'] = '9.9';
    const plan = await planOnHost(host(), s, { label: 'kg-missing', source: source() });
    const missing = plan.notes.filter((n) => n.kind === 'missing');
    assert.deepEqual(missing.map((n) => n.name).sort(), ['kg-gone', 'kg-slow']);
    assert.match(
      missing.find((n) => n.name === 'kg-slow')!.message,
      /kg-slow==9\.9 is not in .*wheels \(it has 1\.0, 2\.0\)/,
    );
    const script = planScript(plan, 'x');
    assert.ok(!script.split('\n').some((l) => !l.startsWith('#') && /kg-gone==|kg-slow==/.test(l)));
  });

  void it('the package bisect finds kg-slow in at most 5 rounds and confirms it', async () => {
    const events: string[] = [];
    const t0 = Date.now();
    const r = await packageBisect(transport, {
      goodPython: join(dir, '.known-good/envs/kg-good/bin/python'),
      badPython: join(dir, 'bad/bin/python'),
      basePython: base,
      workDir: join(dir, 'bisect'),
      bench: { command: `python ${join(dir, 'bench.py')}`, regex: 'speed: ([\\d.]+)', lastN: 1 },
      sources: [{ indexUrl: null, extraIndexUrls: [], ...source() }],
      onEvent: (e) => events.push(e.kind),
      // The engine's default 5 % threshold: the benchmark's ratio is taken in CPU time (test/support/wheels.ts), whose
      // A/A spread here stays a few percent at any load (wall time spread ±20 % and needed a 35 % threshold).
    });
    assert.equal(r.changes.length, 8);
    assert.equal(r.report.verdict.kind, 'culprit', renderBisectMarkdown(r.report));
    assert.deepEqual(r.report.verdict.ids, ['kg-slow']);
    assert.ok(r.report.rounds.length <= 5, `${r.report.rounds.length} rounds`);
    const c = r.report.confirmation!;
    assert.equal(c.confirmed, true, renderBisectMarkdown(r.report));
    // every wheel once: the two sides' versions of the 8, and the good env's others
    const files = await readdir(r.wheelhouse);
    assert.equal(new Set(files).size, files.length);
    assert.ok(files.some((f) => f.startsWith('kg_slow-2.0')) && files.some((f) => f.startsWith('kg_slow-1.0')));
    console.log(
      `package bisect: ${r.report.rounds.length} rounds, ${r.report.runs} runs, ${r.switches} env switches, ` +
        `${((Date.now() - t0) / 1000).toFixed(1)} s; good ${r.report.good.toFixed(3)}, bad ${r.report.bad.toFixed(3)}; ` +
        `confirmed ${c.confirmed} (reverted matches good: ${c.revertedMatchesGood})`,
    );
  });
});
