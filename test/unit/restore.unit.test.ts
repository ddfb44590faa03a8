import { packageChanges } from '../../src/core/restore/packageBisect';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseEnvSnapshot } from '../../src/core/baselines/envProbe';
import { checkDriver } from '../../src/core/restore/driver';
import { envLabelOf, planDocument, planScript, restorePlan, torchBuildOf } from '../../src/core/restore/plan';
import { restoredSpeedLine } from '../../src/core/restore/run';
import { keptSpeed } from '../../src/core/restore/speeds';
import { isTorchFamily, normalizeName, packageUnits } from '../../src/core/restore/units';
import type { Baseline } from '../../src/core/baselines/store';
import { cloneSnapshot, cpuBoxPartial, h200KnownGood } from '../fixtures/env';

const REAL = 'test/fixtures/real/env';
/** The GPU box's own environment, as our probe captured it there, and its `pip freeze` of the same moment. */
const gpuBox = parseEnvSnapshot(JSON.parse(readFileSync(`${REAL}/gpu-box-env.json`, 'utf8')));
const gpuFreeze = readFileSync(`${REAL}/gpu-box-freeze.txt`, 'utf8')
  .split('\n')
  .filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) => {
    const [name, version] = l.split('==');
    return { name: normalizeName(name!), version: version! };
  });

void describe('restore plan', () => {
  void it('the GPU box: every package of its pip freeze pinned, the torch family from the cu130 index', () => {
    const plan = restorePlan(gpuBox, { label: 'box' });
    const pinned = new Map(plan.pins.map((p) => [normalizeName(p.name), p.version]));
    assert.ok(gpuFreeze.length > 150);
    for (const f of gpuFreeze) assert.equal(pinned.get(f.name), f.version, `${f.name}==${f.version} pinned`);
    assert.equal(plan.torch?.build, 'cu130');
    assert.equal(plan.torch?.driver?.status, 'ok');
    const torchUnit = plan.units.find((u) => u.id === 'torch')!;
    assert.equal(torchUnit.source.indexUrl, 'https://download.pytorch.org/whl/cu130');
    for (const n of ['torch', 'torchvision', 'torchaudio', 'triton', 'nvidia-cublas', 'nvidia-nccl-cu13'])
      assert.ok(
        torchUnit.pins.some((p) => p.name === n),
        n,
      );
    // nvidia-ml-py is PyPI's NVML binding, not a CUDA wheel of PyTorch's index
    assert.ok(!torchUnit.pins.some((p) => p.name === 'nvidia-ml-py'));
    const torchStep = plan.steps.find((s) => s.title.startsWith('the torch family'))!;
    // the packages reach pip through a requirements file of `name==version` lines; the options are ours
    assert.match(
      torchStep.command,
      /--no-deps .*--index-url https:\/\/download\.pytorch\.org\/whl\/cu130 -r "\$ENV_DIR"\/known-good-requirements-1\.txt \|\| /,
    );
    // when the group fails, each package is tried alone from the same index: never another source for the family
    assert.match(
      torchStep.command,
      /--index-url https:\/\/download\.pytorch\.org\/whl\/cu130 -r "\$ENV_DIR"\/known-good-one\.txt \|\| printf/,
    );
    assert.ok(torchStep.requirements!.lines.includes('torch==2.11.0'));
    assert.ok(!torchStep.requirements!.lines.some((l) => l.startsWith('nvidia-ml-py')));
    assert.ok(!plan.steps.some((st) => /\S==\S/.test(st.command)), 'no requirement as an argument');
    // the wheel's metadata says 2.11.0, torch/version.py +cu130: said, not hidden
    assert.ok(plan.notes.some((n) => n.kind === 'torch-build' && /2\.11\.0\+cu130/.test(n.message)));
    assert.ok(!plan.notes.some((n) => n.severity === 'blocker'));
  });

  void it('the GPU box with uv (it has uv 0.11): uv venv and uv pip, same pins', () => {
    const plan = restorePlan(gpuBox, { label: 'box', useUv: true, home: '/root' });
    assert.equal(plan.envDir, '/root/.known-good/envs/box');
    assert.match(planScript(plan, 'x'), /uv venv --seed --python \/usr\/bin\/python3\.12 "\$ENV_DIR"/);
    assert.match(planScript(plan, 'x'), /uv pip install --python "\$ENV_DIR"\/bin\/python --no-deps --index-url/);
  });

  void it('names the editable install and leaves it out; torch on cu130 with the driver checked', () => {
    const plan = restorePlan(h200KnownGood, { label: 'known-good' });
    assert.ok(!plan.pins.some((p) => p.name === 'my-trainer'));
    const ed = plan.notes.find((n) => n.kind === 'editable')!;
    assert.equal(ed.name, 'my-trainer');
    assert.match(ed.message, /\/workspace\/my-trainer/);
    assert.equal(plan.tool, 'pip');
    assert.equal(plan.python.command, '/usr/bin/python3.12');
    assert.equal(plan.torch?.driver?.status, 'ok');
    assert.equal(plan.pins.length, Object.keys(h200KnownGood.packages.packages).length - 1);
    const doc = planDocument(plan, 'baseline known-good');
    assert.match(doc, /\[warning\] my-trainer 0\.3\.0 is an editable install/);
    assert.match(doc, /ENV_DIR="\$HOME"\/\.known-good\/envs\/known-good/);
  });

  void it('a driver too old for the build is a blocker, named with the driver it needs', () => {
    const s = cloneSnapshot(h200KnownGood);
    for (const g of s.gpus.gpus) g.driver_version = '570.86.10';
    const plan = restorePlan(s, { label: 'x' });
    const n = plan.notes.find((x) => x.kind === 'driver')!;
    assert.equal(n.severity, 'blocker');
    assert.match(n.message, /too old for CUDA 13\.0: it needs ≥ 580\.65\.06/);
    assert.equal(checkDriver('12.8', '560.35.03').status, 'compat');
    assert.equal(checkDriver('12.8', '570.86.10').status, 'ok');
    assert.equal(checkDriver('12.8', null).status, 'no-driver');
  });

  void it('the index the host is configured with for the build wins over PyTorch’s', () => {
    const s = cloneSnapshot(h200KnownGood);
    s.packages.indexes = {
      error: null,
      indexUrl: 'https://mirror.internal/pypi/simple',
      extraIndexUrls: ['https://mirror.internal/torch/cu130'],
      findLinks: [],
      noIndex: false,
      sources: ['/etc/pip.conf'],
      uv: {},
    };
    const plan = restorePlan(s, { label: 'x' });
    assert.equal(plan.units.find((u) => u.id === 'torch')!.source.indexUrl, 'https://mirror.internal/torch/cu130');
    const other = plan.steps.find((st) => /pinned as recorded/.test(st.title))!;
    assert.match(other.command, /--index-url https:\/\/mirror\.internal\/pypi\/simple --extra-index-url/);
    assert.match(other.title, /\/etc\/pip\.conf/);
  });

  void it('a package the source lacks is named and left out of the commands; an unreachable index is named', () => {
    const plan = restorePlan(h200KnownGood, {
      label: 'x',
      source: { noIndex: true, findLinks: ['/w/wheels'], why: 'the wheel folder /w/wheels' },
      facts: {
        available: new Map(
          Object.entries(h200KnownGood.packages.packages)
            .filter(([n]) => n !== 'einops')
            .map(([n, v]) => [n, n === 'tqdm' ? ['4.66.0'] : [v!]]),
        ),
        availableFrom: 'the wheel folder /w/wheels',
        unreachable: [{ url: 'https://pypi.org/simple', error: 'timed out' }],
      },
    });
    const missing = plan.notes.filter((n) => n.kind === 'missing').map((n) => n.message);
    assert.deepEqual(missing, [
      'einops==0.8.1 is not in the wheel folder /w/wheels: not installed',
      'tqdm==4.67.1 is not in the wheel folder /w/wheels (it has 4.66.0): not installed',
    ]);
    const script = planScript(plan, 'x');
    const commands = script.split('\n').filter((l) => !l.startsWith('#'));
    assert.ok(!commands.some((l) => /einops==|tqdm==/.test(l)));
    assert.match(script, /# BLOCKER: einops==0\.8\.1 is not in/);
    assert.match(script, /--no-index --find-links \/w\/wheels/);
    assert.ok(plan.notes.some((n) => n.kind === 'unreachable' && /pypi\.org/.test(n.message)));
  });

  void it('a baseline without a package list is a blocker, not an empty success', () => {
    const plan = restorePlan(cpuBoxPartial, { label: 'x' });
    assert.ok(plan.notes.some((n) => n.kind === 'packages' && n.severity === 'blocker'));
  });

  void it('labels are folder names; the build tag comes from torch/version.py', () => {
    assert.throws(() => restorePlan(h200KnownGood, { label: '../x' }), /no folder name/);
    assert.equal(envLabelOf(' known good / Nov 3 '), 'known-good-Nov-3');
    assert.equal(torchBuildOf(gpuBox)?.build, 'cu130');
    const s = cloneSnapshot(h200KnownGood);
    s.torch.versionPy = s.torch.version = '2.10.0';
    s.packages.packages['torch'] = '2.10.0';
    s.torch.cuda = '12.8';
    assert.equal(torchBuildOf(s)?.build, 'cu128');
    s.torch.cuda = null;
    assert.equal(torchBuildOf(s)?.build, 'cpu');
  });
});

void describe('package units', () => {
  void it('the torch family is one unit; == pins join sets; the rest stand alone', () => {
    assert.ok(isTorchFamily('nvidia-cudnn-cu13') && isTorchFamily('pytorch-triton') && !isTorchFamily('nvidia-ml-py'));
    assert.deepEqual(
      packageUnits(['numpy', 'torch', 'triton', 'nvidia-nccl-cu13', 'jax', 'jaxlib', 'jax-cuda13-plugin', 'six'], {
        jax: ['jaxlib'],
        'jax-cuda13-plugin': ['jax-cuda13-pjrt', 'jaxlib'],
      }),
      [['nvidia-nccl-cu13', 'torch', 'triton'], ['jax', 'jax-cuda13-plugin', 'jaxlib'], ['numpy'], ['six']],
    );
  });
});

void describe("the baseline's kept speed beside a restore", () => {
  const at = (min: number) => new Date(Date.parse('2026-11-30T10:00:00Z') + min * 60_000).toISOString();
  const baseline = { id: 'b1', capturedAt: at(0) } as unknown as Baseline;
  const custom = { kind: 'custom', bench: { command: 'python bench.py', regex: 'x (\\d+)', lastN: 10 } } as const;
  const result = (id: string, min: number, source: string, tokensPerSec: number, command?: string) =>
    ({ id, at: at(min), kind: 'throughput', baselineId: null, source, tokensPerSec, config: { command } }) as const;

  void it('the result marked Known-Good first, else the matching one nearest the capture within a day', () => {
    const results = [
      result('r1', -30, 'custom-regex', 100, 'python bench.py'),
      result('r2', 5, 'custom-regex', 200, 'python bench.py'),
      result('r3', 2, 'throughput_bench', 300),
      result('r4', 1, 'custom-regex', 400, 'python other.py'),
      result('r5', 3000, 'custom-regex', 500, 'python bench.py'),
    ];
    assert.equal(keptSpeed(baseline, custom, results)?.speed, 200);
    assert.match(keptSpeed(baseline, custom, results)!.from, /measured 5 min from the baseline's capture/);
    assert.equal(keptSpeed(baseline, { kind: 'builtin' }, results)?.speed, 300);
    assert.equal(
      keptSpeed(baseline, { kind: 'builtin', clock: 'cpu' }, results),
      undefined,
      'kept speeds are wall time',
    );
    assert.equal(keptSpeed(baseline, custom, results, 'r5')?.speed, 500);
    assert.match(keptSpeed(baseline, custom, results, 'r5')!.from, /marked Known-Good/);
    assert.equal(keptSpeed(baseline, custom, results.slice(3, 5)), undefined, 'another command, or days away');
  });

  void it('the line reads restored vs at baseline vs now', () => {
    assert.equal(
      restoredSpeedLine({ restored: 284_000, baseline: 285_000, now: 190_000 }, 'tok/s'),
      'restored: 284K tok/s vs 285K at baseline, 190K now',
    );
  });
});

void describe('package bisect: what pip freeze printed is checked before pip sees it', () => {
  void it('a name or version that could be an option is refused and named; the rest are changes', () => {
    const good = new Map([
      ['numpy', '1.26.4'],
      ['--index-url=http://127.0.0.1:9/', '1.0'],
      ['-e', 'git+file:///tmp/x'],
      ['kg-evil', '--target=/tmp/x'],
    ]);
    const bad = new Map([
      ['numpy', '2.0.0'],
      ['--index-url=http://127.0.0.1:9/', '2.0'],
      ['kg-evil', '1.0'],
    ]);
    const r = packageChanges(good, bad);
    assert.deepEqual(
      r.changes.map((c) => c.id),
      ['numpy'],
    );
    assert.deepEqual(r.refused.map((x) => x.name).sort(), ['--index-url=http://127.0.0.1:9/', '-e', 'kg-evil']);
    for (const x of r.refused) assert.match(x.why, /refused$/);
  });
});
