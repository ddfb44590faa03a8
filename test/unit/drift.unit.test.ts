import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeDrift, driftCount, renderDriftMarkdown, renderDriftText } from '../../src/core/baselines/drift';
import type { EnvSnapshot } from '../../src/core/baselines/envProbe';
import { cloneSnapshot, h200KnownGood, h200Now } from '../fixtures/env';

/** The summary's bullets (text rendering: `  label: text`). */
const bullets = (txt: string) => txt.trim().split('\n').slice(1);

/** `now` run by another interpreter: another venv, so packages and PATH follow. */
function otherInterpreter(base: EnvSnapshot): EnvSnapshot {
  const now = cloneSnapshot(base);
  now.python.executable = '/usr/bin/python3';
  now.python.prefix = '/usr';
  now.python.venv = false;
  now.packages.packages['transformers'] = '4.40.0';
  now.env.vars['NCCL_P2P_DISABLE'] = '1';
  return now;
}

void describe('drift summary reads in the order that explains it', () => {
  it('an interpreter switch comes first', () => {
    const txt = renderDriftText(computeDrift(h200KnownGood, otherInterpreter(h200KnownGood)));
    assert.match(bullets(txt)[0]!, /^ {2}python: interpreter \/workspace\/\.venv\/bin\/python3 → \/usr\/bin\/python3$/);
  });

  it('…right after a swapped torch build, which stays first', () => {
    const now = otherInterpreter(h200KnownGood);
    now.torch.version = (h200KnownGood.torch.version ?? '').replace(/\+.*$/, '') + '+cu128';
    const b = bullets(renderDriftText(computeDrift(h200KnownGood, now)));
    assert.match(b[0]!, /^ {2}torch: build \+cu130 → \+cu128/);
    assert.match(b[1]!, /^ {2}python: interpreter /);
  });

  it('torch gone with the other interpreter is one fact, not each of its fields turned to "none"', () => {
    const now = otherInterpreter(h200KnownGood);
    now.torch = { ...now.torch, version: null, gitVersion: null, cuda: null, debug: null, location: null };
    const torch = bullets(renderDriftText(computeDrift(h200KnownGood, now))).find((l) => l.startsWith('  torch: '));
    assert.equal(torch, `  torch: not importable now (was ${h200KnownGood.torch.version})`);
    const back = bullets(renderDriftText(computeDrift(now, h200KnownGood))).find((l) => l.startsWith('  torch: '));
    assert.equal(back, `  torch: now importable: ${h200KnownGood.torch.version}`);
  });

  it('PATH-like variables are shown entry by entry, after the plain variables', () => {
    const now = cloneSnapshot(h200KnownGood);
    now.env.vars['PATH'] = '/usr/local/cuda-13/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
    now.env.vars['LD_LIBRARY_PATH'] = '/usr/local/cuda/lib64:/opt/nccl/lib';
    now.env.vars['NCCL_P2P_DISABLE'] = '1';
    const env = bullets(renderDriftText(computeDrift(h200KnownGood, now))).find((l) => l.startsWith('  env: '))!;
    assert.equal(
      env,
      '  env: NCCL_P2P_DISABLE=1 added; LD_LIBRARY_PATH: +/opt/nccl/lib; ' +
        'PATH: +/usr/local/cuda-13/bin, −/workspace/.venv/bin, −/usr/local/cuda/bin',
    );
  });

  it('a PATH with only its order changed says so', () => {
    const now = cloneSnapshot(h200KnownGood);
    now.env.vars['PATH'] = h200KnownGood.env.vars['PATH']!.split(':').reverse().join(':');
    assert.match(renderDriftText(computeDrift(h200KnownGood, now)), /env: PATH reordered/);
  });
});

void describe('compile caches are described by what happened to them', () => {
  const withCache = (files: number, exists = true) => {
    const s = cloneSnapshot(h200KnownGood);
    const c = s.caches.find((x) => x.name === 'inductor')!;
    c.exists = exists;
    c.files = exists ? files : null;
    c.bytes = exists ? files * 4096 : null;
    return s;
  };

  it('a cache that existed empty and now has files grew; it did not appear', () => {
    const d = computeDrift(withCache(0), withCache(1));
    const c = d.caches.find((x) => x.name === 'inductor')!;
    assert.equal(c.change, 'grown');
    assert.doesNotMatch(renderDriftText(d), /appeared/);
    assert.match(renderDriftText(d), /inductor grown \(0 → 1 files/);
  });

  it('a cache folder that did not exist and now has files appeared', () => {
    const d = computeDrift(withCache(0, false), withCache(3));
    assert.match(renderDriftText(d), /inductor appeared \(none → 3 files/);
  });

  it('an empty folder that appeared or went away is not a change', () => {
    assert.deepEqual(computeDrift(withCache(0, false), withCache(0)).caches, []);
    assert.deepEqual(computeDrift(withCache(0), withCache(0, false)).caches, []);
  });

  it('emptied and disappeared are told apart', () => {
    assert.equal(computeDrift(withCache(5), withCache(0)).caches[0]!.change, 'emptied');
    assert.equal(computeDrift(withCache(5), withCache(0, false)).caches[0]!.change, 'disappeared');
  });
});

void describe('the count in the headline is the number of bullets', () => {
  const cases: [string, EnvSnapshot, EnvSnapshot][] = [
    ['the H200 fixture', h200KnownGood, h200Now],
    ['an interpreter switch', h200KnownGood, otherInterpreter(h200KnownGood)],
    [
      'two env variables (two lines, one bullet)',
      h200KnownGood,
      (() => {
        const s = cloneSnapshot(h200KnownGood);
        s.env.vars['NCCL_P2P_DISABLE'] = '1';
        s.env.vars['OMP_NUM_THREADS'] = '4';
        return s;
      })(),
    ],
  ];
  for (const [name, a, b] of cases) {
    it(name, () => {
      const d = computeDrift(a, b);
      const txt = renderDriftText(d);
      const n = Number(/^(\d+) differences? /.exec(txt)![1]);
      const shown = bullets(txt).filter((l) => !l.startsWith('  not compared:'));
      assert.equal(n, shown.length, txt);
      assert.equal(driftCount(d), n);
      const md = renderDriftMarkdown(d);
      assert.equal((md.match(/^- \*\*/gm) ?? []).length, n);
    });
  }

  it('one env change is "1 difference" with one bullet', () => {
    const s = cloneSnapshot(h200KnownGood);
    s.env.vars['NCCL_P2P_DISABLE'] = '1';
    s.env.vars['OMP_NUM_THREADS'] = '4';
    assert.match(
      renderDriftText(computeDrift(h200KnownGood, s)),
      /^1 difference between the baseline and now\n {2}env: /,
    );
  });
});

void describe('snapshot values people read', () => {
  it('cgroup v1 "no limit" (9223372036854771712) and v2 "max" read unlimited; a real limit gets its size', async () => {
    const { cgroupValue, renderSnapshot } = await import('../../src/core/baselines/render');
    assert.equal(cgroupValue('memoryLimitV1', '9223372036854771712'), 'unlimited (9223372036854771712)');
    assert.equal(cgroupValue('memoryMax', 'max'), 'unlimited (max)');
    assert.equal(cgroupValue('cpuMax', 'max 100000'), 'unlimited (max 100000)');
    assert.equal(cgroupValue('memoryMax', '8589934592'), '8.0 GB (8589934592)'); // the one formatBytes (core/util/format)
    assert.equal(cgroupValue('cpuMax', '200000 100000'), '200000 100000');
    const s = cloneSnapshot(h200KnownGood);
    s.host.cgroup = { memoryLimitV1: '9223372036854771712' };
    assert.match(renderSnapshot(s).text, /memoryLimitV1: unlimited \(9223372036854771712\)/);
  });

  it('times in the snapshot document are readable local times, not ISO', async () => {
    const { renderSnapshot } = await import('../../src/core/baselines/render');
    const text = renderSnapshot(h200KnownGood).text;
    assert.doesNotMatch(text, /\d{4}-\d\d-\d\dT\d\d:\d\d/);
  });
});

void describe('the dashboard drift text', () => {
  it('names the time of "now" readably, not as ISO', async () => {
    const { runDrift } = await import('../../src/core/dashboard/sources');
    const { baselineSchema } = await import('../../src/core/baselines/store');
    const base = baselineSchema.parse({
      schema: 1,
      id: 'b1',
      label: 'good run',
      host: 'local',
      capturedAt: '2026-01-01T00:00:00Z',
      snapshot: h200KnownGood,
    });
    const span = { from: Date.parse('2025-12-31T23:00:00Z') / 1000, to: Date.parse('2026-01-01T02:00:00Z') / 1000 };
    const now = { ...h200Now, capturedAt: '2026-01-01T01:00:00Z' };
    const d = runDrift({ id: 'r', label: 'run', span }, [base], now).drift!;
    assert.doesNotMatch(d.text, /\d{4}-\d\d-\d\dT\d\d:/);
    assert.match(d.text, /now \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC/);
    assert.equal(d.changes, driftCount(computeDrift(h200KnownGood, h200Now)));
  });
});

void describe('each set of variables says where it came from (issue 32 item 5)', () => {
  const login = (s: EnvSnapshot): EnvSnapshot => {
    const c = cloneSnapshot(s);
    c.env.source = 'a new login on gpu-box';
    return c;
  };
  const withProcess = (s: EnvSnapshot, vars: Record<string, string>): EnvSnapshot => {
    const c = login(s);
    c.liveRun = {
      error: null,
      path: '/runs/a',
      supported: true,
      scanned: 40,
      process: {
        pid: 4242,
        argv: ['/workspace/.venv/bin/python3', '/runs/a/train.py', '--steps', '100'],
        exe: '/usr/bin/python3.12',
        startTime: 1_770_000_000,
        vars,
        missingExtra: [],
        errors: [],
      },
      others: 0,
    };
    return c;
  };

  it('the new login\'s variables are labelled with it; a snapshot that did not record it keeps "env"', () => {
    const now = login(h200KnownGood);
    now.env.vars['NCCL_P2P_DISABLE'] = '1';
    const txt = renderDriftText(computeDrift(login(h200KnownGood), now));
    assert.ok(bullets(txt).includes('  env of a new login on gpu-box: NCCL_P2P_DISABLE=1 added'), txt);
    assert.match(txt, /\nVariables: baseline — a new login on gpu-box; now — a new login on gpu-box\n$/);
    const old = cloneSnapshot(h200KnownGood);
    old.env.vars['NCCL_P2P_DISABLE'] = '1';
    const plain = renderDriftText(computeDrift(h200KnownGood, old));
    assert.ok(bullets(plain).includes('  env: NCCL_P2P_DISABLE=1 added'), plain);
    assert.doesNotMatch(plain, /Variables:/);
  });

  it("a live training process's own variables are compared with the baseline's and counted, under its id and command", () => {
    const base = login(h200KnownGood);
    const vars: Record<string, string> = { ...base.env.vars, NCCL_ALGO: 'Tree' };
    delete vars['OMP_NUM_THREADS'];
    const d = computeDrift(base, withProcess(h200KnownGood, vars));
    assert.equal(d.unchanged, false, 'the login matches, the process does not: not "No drift"');
    assert.deepEqual(d.env, []);
    const label = 'the training process 4242 (python3 train.py --steps 100)';
    assert.equal(d.liveRun?.process?.label, label);
    const txt = renderDriftText(d);
    assert.equal(driftCount(d), 1);
    assert.match(txt, /^1 difference between/);
    assert.ok(
      bullets(txt).includes(
        `  env of ${label}: NCCL_ALGO=Tree added, OMP_NUM_THREADS removed (was ${base.env.vars['OMP_NUM_THREADS']})`,
      ),
      txt,
    );
    const same = Object.keys(base.env.vars).length - 1;
    assert.match(txt, new RegExp(`and ${label.replace(/[()]/g, '\\$&')} of /runs/a \\(2 differing, ${same} as`));
    assert.match(
      renderDriftMarkdown(d),
      /- \*\*env of the training process 4242 \(python3 train\.py --steps 100\)\*\*:/,
    );
  });

  it('a process that matches the baseline is no drift; a run with nothing running says so', () => {
    const base = login(h200KnownGood);
    const d = computeDrift(base, withProcess(h200KnownGood, { ...base.env.vars }));
    assert.equal(d.unchanged, true);
    const idle = login(h200KnownGood);
    idle.liveRun = { error: null, path: '/runs/a', supported: true, scanned: 40, process: null, others: 0 };
    assert.match(renderDriftText(computeDrift(base, idle)), /; no training process of \/runs\/a runs now\n$/);
    const noProc = login(h200KnownGood);
    noProc.liveRun = { ...idle.liveRun, supported: false, error: 'no /proc: live processes are read on Linux only' };
    assert.match(
      renderDriftText(computeDrift(base, noProc)),
      /; the training process of \/runs\/a was not read: no \/proc: live processes are read on Linux only\n$/,
    );
  });
});
