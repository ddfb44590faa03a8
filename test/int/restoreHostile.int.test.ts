import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { baselineSchema, readBaseline, type Baseline } from '../../src/core/baselines/store';
import { envLabelOf, planDocument, planScript, restorePlan, type RestorePlan } from '../../src/core/restore/plan';
import { runScript } from '../../src/core/restore/run';
import { LocalTransport } from '../../src/core/transport/local';
import { SshPool } from '../../src/core/transport/ssh';
import type { Transport } from '../../src/core/transport/types';
import { fakeInstallers, type FakeInstallers } from '../support/fakeInstallers';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Issue 31 items 1 and 2: a baseline file is data, never a command. Every string of a baseline as the store saves it
 * (test/fixtures/hostile/base.json: a torch family from a configured cu130 index, an editable install, a VCS install,
 * conda, pip's index configuration), and every key of its maps, is set in turn to a newline followed by a command (and a `#` hiding the rest of the line),
 * `$(…)`, a backtick command, `; …`, a leading `-`, `--index-url=…`, `-e git+…` and `--target=…` (and the ones with
 * whitespace appended to the real value too). For each, the plan is built and its script RUN with sh — here and over
 * a real sshd — against stand-ins for python, pip and uv that record their argv (test/support/fakeInstallers.ts), so
 * nothing reaches the network. Then: the marker a command would touch is absent; nothing was written in the home
 * folder outside the env's own folder; the installer saw only our options, each value a URL or a file of ours, and
 * the requirements files hold only `name==version` lines; every refused value is in the plan with why, in its
 * document and in the script's comments; and the script still ran to its end (the rest proceeds).
 */

const HOSTILE = 'test/fixtures/hostile';
/** base.json's interpreter prefix: the test points it at the stand-ins (nothing real is run). */
const BASE_PREFIX = '/usr';
/** Where the `--target=` payload would install (the fixture package-target.json names it too). */
const TARGET = '/tmp/known-good-hostile-target';
/** The interpreter that runs the guard (python/kg_guard.py), found before the stand-ins go first on PATH. */
const REAL_PYTHON = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
  encoding: 'utf8',
}).stdout.trim();
const PAYLOADS = [
  '\ntouch $MARK\n',
  // `#` makes a comment of whatever the plan writes after the value (a closing quote, a parenthesis)
  '\ntouch $MARK #',
  '$(touch $MARK)',
  '`touch $MARK`',
  '; touch $MARK',
  '-U',
  '--index-url=http://127.0.0.1:9/',
  '-e git+file:///nonexistent/known-good-hostile.git#egg=evil',
  `--target=${TARGET}`,
];
/** What any of the payloads would leave in an argv word or a requirements line had it got through. */
const SIGNATURES = ['touch $MARK', '--index-url=', 'git+file', '--target='];

/** The maps of a baseline whose keys are data (package names, variable names): their keys are walked too. */
const MAPS = new Set([
  'snapshot.packages.packages',
  'snapshot.packages.editable',
  'snapshot.packages.directUrls',
  'snapshot.packages.pins',
  'snapshot.packages.installers',
  'snapshot.packages.key',
  'snapshot.packages.indexes.uv',
  'snapshot.toolchain',
  'snapshot.env.vars',
  'snapshot.host.cgroup',
  'snapshot.timings',
]);

type Path = (string | number)[];
interface Site {
  path: Path;
  kind: 'value' | 'key';
}

function sitesOf(v: unknown, path: Path = [], out: Site[] = []): Site[] {
  if (typeof v === 'string') out.push({ path, kind: 'value' });
  else if (Array.isArray(v)) v.forEach((x, i) => sitesOf(x, [...path, i], out));
  else if (v !== null && typeof v === 'object') {
    const keyed = MAPS.has(path.join('.'));
    for (const [k, x] of Object.entries(v)) {
      if (keyed) out.push({ path: [...path, k], kind: 'key' });
      sitesOf(x, [...path, k], out);
    }
  }
  return out;
}

function mutated(raw: unknown, site: Site, to: (old: string) => string): unknown {
  const copy = JSON.parse(JSON.stringify(raw)) as Record<string | number, unknown>;
  let parent = copy;
  for (const p of site.path.slice(0, -1)) parent = parent[p] as Record<string | number, unknown>;
  const last = site.path[site.path.length - 1]!;
  if (site.kind === 'value') parent[last] = to(parent[last] as string);
  else {
    const entries = Object.entries(parent);
    for (const k of Object.keys(parent)) delete parent[k];
    for (const [k, x] of entries) parent[k === last ? to(k) : k] = x;
  }
  return copy;
}

/** The snapshot fields whose values reach pip, uv or sh, as the plan names them: these must be refused. */
function processField(site: Site): string | null {
  const [top, ...p] = site.path;
  if (top !== 'snapshot') return null;
  const s = p.join('.');
  if (p[0] === 'packages' && p[1] === 'packages' && p.length === 3)
    return site.kind === 'key' ? 'packages.packages' : `packages.packages[${JSON.stringify(p[2])}]`;
  if (site.kind === 'key') return null;
  if (s === 'packages.indexes.indexUrl') return s;
  if (p[0] === 'packages' && p[1] === 'indexes' && (p[2] === 'extraIndexUrls' || p[2] === 'findLinks'))
    return `packages.indexes.${p[2]}[${p[3]}]`;
  if (['python.version', 'python.basePrefix', 'torch.cuda', 'torch.hip'].includes(s)) return s;
  return null;
}

function listTree(root: string, under = root, out: string[] = []): string[] {
  if (!existsSync(under)) return out;
  for (const e of readdirSync(under, { withFileTypes: true })) {
    const p = join(under, e.name);
    out.push(relative(root, p));
    if (e.isDirectory()) listTree(root, p, out);
  }
  return out;
}

interface Tier {
  transport: Transport;
  home: string;
  fakes: FakeInstallers;
  mark: string;
}

const title = (b: Baseline) => `baseline "${b.label}" (${b.capturedAt})`;

/** Points the baseline's interpreter at the stand-ins, as the host's own python would be. */
function onStandIns(raw: unknown, fakes: FakeInstallers): unknown {
  const b = JSON.parse(JSON.stringify(raw)) as { snapshot: { python: { basePrefix: string | null } } };
  if (b.snapshot.python.basePrefix === BASE_PREFIX) b.snapshot.python.basePrefix = fakes.prefix;
  return b;
}

const URL_OR_PATH = /^((https?|file):\/\/\S+|\/\S+)$/;
const REQUIREMENT = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*$/;

/** What the installer was asked: only our options; every value a URL, our file or the env's interpreter. */
function argvProblems(calls: string[][], plan: RestorePlan): string[] {
  const out: string[] = [];
  let installs = 0;
  const words = (rest: string[], flags: Set<string>, valued: Set<string>) => {
    for (let i = 0; i < rest.length; i++) {
      const w = rest[i]!;
      if (flags.has(w)) continue;
      if (!valued.has(w)) {
        out.push(`unexpected installer argument ${JSON.stringify(w)}`);
        continue;
      }
      const v = rest[++i] ?? '';
      if (w === '-r') {
        if (!v.startsWith(`${plan.envDir}/`)) out.push(`-r ${JSON.stringify(v)} is outside the env`);
        for (const line of readFileSync(v, 'utf8').split('\n').filter(Boolean))
          if (!REQUIREMENT.test(line)) out.push(`requirements line ${JSON.stringify(line)}`);
      } else if (w === '--python') {
        if (v !== `${plan.envDir}/bin/python`) out.push(`--python ${JSON.stringify(v)}`);
      } else if (!URL_OR_PATH.test(v)) out.push(`${w} ${JSON.stringify(v)}`);
    }
  };
  const source = ['--index-url', '--extra-index-url', '--find-links', '-r', '--python'];
  for (const [tool, , ...a] of calls) {
    for (const w of a) for (const sig of SIGNATURES) if (w.includes(sig)) out.push(`${tool} got ${JSON.stringify(w)}`);
    const [head, sub, ...rest] = tool === 'python' && a[0] === '-m' ? a.slice(1) : a;
    if (tool === 'python' && a[0] === '-c') {
      if (a.length !== 2 || !a[1]!.startsWith('import sys; v = ')) out.push(`python ${JSON.stringify(a)}`);
    } else if (head === 'venv') {
      const dir = a[a.length - 1];
      const ok =
        tool === 'python'
          ? a.length === 3
          : a.length === 5 && a[1] === '--seed' && a[2] === '--python' && !a[3]!.startsWith('-');
      if (!ok || dir !== plan.envDir) out.push(`${tool} ${JSON.stringify(a)}`);
    } else if (head === 'pip' && sub === 'install') {
      installs++;
      words(rest, new Set(['--no-deps', '--disable-pip-version-check', '--no-index']), new Set(source));
    } else if (head === 'pip' && sub === 'freeze') {
      words(rest, new Set(['--all', '--disable-pip-version-check']), new Set(['--python']));
    } else out.push(`${tool} ${JSON.stringify(a)}`);
  }
  if (installs === 0) out.push('no pip install ran');
  for (const f of readdirSync(plan.envDir).filter((n) => n.endsWith('.txt')))
    for (const line of readFileSync(join(plan.envDir, f), 'utf8').split('\n'))
      for (const sig of SIGNATURES) if (line.includes(sig)) out.push(`${f} holds ${JSON.stringify(line)}`);
  return out;
}

/** Builds the plan of `raw` (a baseline as stored), runs its script on the tier, and says what went wrong. */
async function tryBaseline(
  tier: Tier,
  raw: unknown,
  expectRefused: string | null,
  seen: Map<string, string[]>,
  opts: { useUv?: boolean } = {},
): Promise<string[] | 'not a baseline'> {
  const parsed = baselineSchema.safeParse(raw);
  if (!parsed.success) return 'not a baseline';
  const b = parsed.data;
  const problems: string[] = [];
  const plan = restorePlan(b.snapshot, { label: envLabelOf(b.label), home: tier.home, ...opts });
  const t = title(b);
  const script = planScript(plan, t);
  if (expectRefused !== null) {
    const n = plan.notes.find((x) => x.kind === 'refused' && x.field === expectRefused);
    if (!n) problems.push(`no refused note for ${expectRefused}`);
    else {
      if (!/ is refused: it \S.*; \S/.test(n.message)) problems.push(`refused without why: ${n.message}`);
      if (!planDocument(plan, t).includes(`  ${n.message}`)) problems.push('the refusal is not in the plan document');
      if (!script.includes(`# REFUSED: ${n.message}`)) problems.push('the refusal is not in the script');
    }
  }
  const cached = seen.get(script);
  if (cached) return [...problems, ...cached];
  const ran: string[] = [];
  const before = new Set(listTree(tier.home));
  tier.fakes.clear();
  const lines: string[] = [];
  let code: number | null;
  try {
    // The guard runs under the host's real interpreter; the plan's own python3 calls reach the stand-ins on PATH.
    code = await runScript(tier.transport, script, (l) => lines.push(l), undefined, { python: REAL_PYTHON });
  } catch (e) {
    code = null;
    ran.push(`the script did not run: ${String(e)}`);
  }
  const envRel = relative(tier.home, plan.envDir);
  if (!/^\.known-good\/envs\/[A-Za-z0-9][A-Za-z0-9._-]*$/.test(envRel)) ran.push(`the env is at ${plan.envDir}`);
  if (code !== 0) ran.push(`exit ${code}: ${lines.slice(-5).join(' | ')}`);
  if (!lines.some((l) => l.startsWith('== restored into'))) ran.push('the script did not reach its end');
  if (existsSync(tier.mark)) ran.push('a command from the baseline ran (the marker exists)');
  if (existsSync(TARGET)) ran.push(`something was installed in ${TARGET}`);
  const allowed = ['.known-good', '.known-good/envs', envRel];
  for (const p of listTree(tier.home))
    if (!before.has(p) && !allowed.includes(p) && !p.startsWith(`${envRel}/`))
      ran.push(`written outside the env: ${p}`);
  if (existsSync(plan.envDir)) ran.push(...argvProblems(tier.fakes.calls(), plan));
  else ran.push('no env folder was made');
  // The next run starts from the same home: a leftover outside the env would hide the next one's.
  rmSync(join(tier.home, '.known-good'), { recursive: true, force: true });
  for (const p of listTree(tier.home)) if (!before.has(p)) rmSync(join(tier.home, p), { recursive: true, force: true });
  rmSync(tier.mark, { force: true });
  rmSync(TARGET, { recursive: true, force: true });
  seen.set(script, ran);
  return [...problems, ...ran];
}

function hostileSuite(name: string, setUp: () => Promise<Tier>, tearDown: () => Promise<void>) {
  void describe(`a hostile baseline is data, never a command (${name})`, () => {
    let tier: Tier;
    let baseRaw: unknown;
    before(async () => {
      tier = await setUp();
      rmSync(TARGET, { recursive: true, force: true });
      baseRaw = onStandIns(JSON.parse(readFileSync(join(HOSTILE, 'base.json'), 'utf8')), tier.fakes);
    });
    after(tearDown);

    void it('the base fixture: a plan with nothing refused that runs to its end', async () => {
      const r = await tryBaseline(tier, baseRaw, null, new Map());
      assert.deepEqual(r, []);
      const b = baselineSchema.parse(baseRaw);
      const plan = restorePlan(b.snapshot, { label: 'x', home: tier.home });
      assert.deepEqual(
        plan.notes.filter((n) => n.kind === 'refused'),
        [],
      );
    });

    void it('each fixture of test/fixtures/hostile, read by the store: refused where it reaches a process', async () => {
      const expect: Record<string, string | null> = {
        'label-newline.json': null,
        'python-version-newline.json': 'python.version',
        'index-url-newline.json': 'packages.indexes.indexUrl',
        'index-sources-newline.json': null,
        'torch-index-newline.json': 'packages.indexes.extraIndexUrls[0]',
        'package-index-url.json': 'packages.packages',
        'package-editable-git.json': 'packages.packages',
        'package-target.json': 'packages.packages',
        'version-option.json': 'packages.packages["numpy"]',
        'driver-newline.json': null,
        'editable-path-newline.json': null,
      };
      const files = readdirSync(HOSTILE).filter((f) => f.endsWith('.json') && f !== 'base.json');
      assert.deepEqual(files.sort(), Object.keys(expect).sort());
      const problems: string[] = [];
      for (const f of files) {
        const read = await readBaseline(join(HOSTILE, f));
        assert.ok(read.ok, f);
        for (const useUv of [false, true]) {
          const r = await tryBaseline(tier, onStandIns(read.baseline, tier.fakes), expect[f]!, new Map(), { useUv });
          if (r !== 'not a baseline') problems.push(...r.map((p) => `${f}${useUv ? ' (uv)' : ''}: ${p}`));
          else problems.push(`${f}: not a baseline`);
        }
      }
      assert.deepEqual(problems, []);
    });

    void it('every string and map key of a baseline set in turn to each payload: nothing runs, nothing escapes', async () => {
      const sites = sitesOf(baseRaw);
      assert.ok(sites.length > 80, `${sites.length} places`);
      const problems: string[] = [];
      const seen = new Map<string, string[]>();
      let tried = 0;
      let notBaselines = 0;
      for (const site of sites)
        for (const payload of PAYLOADS)
          for (const form of /\s/.test(payload) ? (['replace', 'append'] as const) : (['replace'] as const)) {
            const raw = mutated(baseRaw, site, (old) => (form === 'replace' ? payload : old + payload));
            const r = await tryBaseline(tier, raw, processField(site), seen);
            if (r === 'not a baseline') {
              notBaselines++;
              continue;
            }
            tried++;
            const where = `${site.kind} ${site.path.join('.')} ${form} ${JSON.stringify(payload)}`;
            problems.push(...r.map((p) => `${where}: ${p}`));
          }
      console.log(
        `${name}: ${sites.length} places x payloads = ${tried} baselines (${notBaselines} the store refuses), ` +
          `${seen.size} distinct scripts run`,
      );
      assert.deepEqual(problems.slice(0, 40), [], `${problems.length} problems`);
    });
  });
}

let localDir: string;
const saved = { HOME: process.env['HOME'], PATH: process.env['PATH'], MARK: process.env['MARK'] };
hostileSuite(
  'this machine',
  () => {
    localDir = mkdtempSync(join(tmpdir(), 'kg-hostile-'));
    const fakes = fakeInstallers(join(localDir, 'fakes'));
    const home = join(localDir, 'home');
    const mark = join(localDir, 'marker');
    // The plan's script runs with this test's environment: its own home, the stand-ins first on PATH.
    process.env['HOME'] = home;
    process.env['PATH'] = `${fakes.bin}:${saved.PATH ?? '/usr/bin:/bin'}`;
    process.env['MARK'] = mark;
    mkdirSync(home);
    return Promise.resolve({ transport: new LocalTransport(), home, fakes, mark });
  },
  () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    rmSync(localDir, { recursive: true, force: true });
    return Promise.resolve();
  },
);

let sshd: TestSshd;
let pool: SshPool;
let sshDir: string;
hostileSuite(
  'over a real sshd',
  async () => {
    sshDir = mkdtempSync(join(tmpdir(), 'kg-hostile-ssh-'));
    const fakes = fakeInstallers(join(sshDir, 'fakes'));
    const mark = join(sshDir, 'marker');
    sshd = await startSshd({ bashrc: `export PATH=${fakes.bin}:$PATH\nexport MARK=${mark}` });
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    return { transport: pool.transport(endpointOf(sshd), 'test-sshd'), home: sshd.home, fakes, mark };
  },
  async () => {
    pool.dispose();
    await sshd.stop();
    rmSync(sshDir, { recursive: true, force: true });
  },
);

void describe('the refusals where a person reads them', () => {
  let home: string;
  before(() => {
    home = mkdtempSync(join(tmpdir(), 'kg-hostile-cli-'));
  });
  after(() => rmSync(home, { recursive: true, force: true }));
  const cli = (...argv: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...argv], {
      encoding: 'utf8',
      env: { ...process.env, HOME: home },
    });

  void it('known-good restore prints them in the plan, --json carries them, --run says them before it starts', () => {
    const file = join(HOSTILE, 'package-index-url.json');
    const text = cli('restore', 'local', file);
    assert.equal(text.status, 1, text.stderr);
    assert.match(text.stdout, /^Refused: 1 value\(s\) in the baseline that are not what their field holds/m);
    assert.match(
      text.stdout,
      /^ {2}packages\.packages "--index-url=http:\/\/127\.0\.0\.1:9\/" is refused: it starts with '-', so pip would read it as an option; not installed$/m,
    );
    assert.match(text.stdout, /^# REFUSED: packages\.packages "--index-url=/m);
    const json = cli('restore', 'local', file, '--json');
    const plan = (JSON.parse(json.stdout) as { plan: RestorePlan }).plan;
    assert.deepEqual(
      plan.notes.filter((n) => n.kind === 'refused').map((n) => [n.field, n.value, n.severity]),
      [['packages.packages', '--index-url=http://127.0.0.1:9/', 'blocker']],
    );
    // The env folder is there already: the script's first step stops it, after the refusals were said.
    mkdirSync(plan.envDir, { recursive: true });
    const run = cli('restore', 'local', file, '--run');
    assert.equal(run.status, 1);
    const lines = run.stderr.split('\n');
    const said = lines.findIndex((l) => l.startsWith('refused: packages.packages "--index-url='));
    const started = lines.findIndex((l) => l.startsWith('== 1/'));
    assert.ok(said >= 0 && started > said, run.stderr);
    assert.match(run.stderr, /the restore script stopped \(exit 3\)/);
  });

  void it('pip reads options inside a requirements file: why every line the plan writes is a checked name==version', () => {
    // The premise, shown with the real pip: a line `-r FILE` in a requirements file is obeyed (pip opens FILE).
    const dir = mkdtempSync(join(home, 'req-'));
    writeFileSync(join(dir, 'evil.txt'), `-r ${join(dir, 'never-there.txt')}\n`);
    const pip = spawnSync(
      'python3',
      ['-m', 'pip', 'install', '--dry-run', '--no-index', '--no-deps', '-r', join(dir, 'evil.txt')],
      {
        encoding: 'utf8',
      },
    );
    assert.notEqual(pip.status, 0);
    assert.match(pip.stderr + pip.stdout, /never-there\.txt/);
  });
});
