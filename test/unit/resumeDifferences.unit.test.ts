import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  describeWhere,
  resumeDifferences,
  STEP_BACK_ON_CPU_HINT,
  STEP_ON_GPU_HINT,
} from '../../src/core/whatChanged/resumeDifferences';
import {
  resumeFactsProbe,
  type OptimizerFacts,
  type ParamValue,
  type ResumeFacts,
} from '../../src/core/whatChanged/resumeFacts';

// Real probe results (test/fixtures/resume/README.md), parsed the way the extension parses a host's answer.
function fixture(name: string): ResumeFacts {
  const raw: unknown = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'resume', `${name}.json`), 'utf8'));
  return resumeFactsProbe('/runs/demo/ckpt').parse(raw);
}

const before = (): ResumeFacts => fixture('gpu-before');
const after = (): ResumeFacts => fixture('gpu-after');

/** A copy with one change made by `edit`. */
function edited(facts: ResumeFacts, edit: (f: ResumeFacts) => void): ResumeFacts {
  const copy = structuredClone(facts);
  edit(copy);
  return copy;
}

/** The first item, which the test needs to be there. */
function first<T>(items: readonly T[]): T {
  const x = items[0];
  assert.ok(x !== undefined, 'expected at least one item');
  return x;
}

const optimizer = (f: ResumeFacts): OptimizerFacts => first(f.optimizers);
const groupValues = (f: ResumeFacts): Record<string, ParamValue> => first(optimizer(f).paramGroups).values;

void test('a resume that put the step counters on the GPU is the one difference, named with where they went and what to do', () => {
  const diffs = resumeDifferences(before(), after());
  assert.equal(diffs.length, 1, JSON.stringify(diffs, null, 1));
  const d = first(diffs);
  assert.equal(d.kind, 'optimizer-state');
  assert.equal(d.key, 'step');
  assert.equal(d.text, 'optimizer state `step`: cpu (float32, 4 tensors) → cuda:0 (float32, 4)');
  assert.equal(d.speed, 'known');
  assert.equal(d.hint, STEP_ON_GPU_HINT);
  assert.match(d.hint ?? '', /map_location="cpu"/);
  assert.match(d.hint ?? '', /s\["step"\] = s\["step"\]\.cpu\(\)/);
  assert.match(d.hint ?? '', /`\.item\(\)`/);
});

void test('two checkpoints of one steady run differ in nothing (the lr a scheduler moves is not a difference)', () => {
  const later = edited(before(), (f) => {
    f.step = 600;
    groupValues(f)['lr'] = 0.00021;
  });
  assert.deepEqual(resumeDifferences(before(), later), []);
  // without a scheduler saved the lr is a plain value difference that costs nothing
  const noSched = (f: ResumeFacts): ResumeFacts => edited(f, (x) => (x.scheduler = []));
  const lr = first(resumeDifferences(noSched(before()), noSched(later)));
  assert.equal(lr.text, 'param group `lr`: 0.0003 → 0.00021');
  assert.equal(lr.speed, 'no');
});

void test('step counters on the GPU are expected with capturable or fused: no hint then', () => {
  const fused = (f: ResumeFacts): ResumeFacts => edited(f, (x) => (groupValues(x)['fused'] = true));
  const d = first(resumeDifferences(fused(before()), fused(after())));
  assert.equal(d.key, 'step');
  assert.equal(d.speed, 'possible');
  assert.equal(d.hint, null);
});

void test('step counters back on the CPU after a restart are named as the speed-up they are', () => {
  const d = first(resumeDifferences(after(), before()));
  assert.equal(d.text, 'optimizer state `step`: cuda:0 (float32, 4 tensors) → cpu (float32, 4)');
  assert.equal(d.hint, STEP_BACK_ON_CPU_HINT);
});

void test('moments cast to another dtype, weights moved to the CPU, a flag turned on: each its own difference', () => {
  const changed = edited(before(), (f) => {
    optimizer(f).state['exp_avg'] = {
      kind: 'tensor',
      numbers: 0,
      other: 0,
      tensors: [{ location: 'cuda:0', dtype: 'bfloat16', count: 4 }],
    };
    first(f.weights).where = [{ location: 'cpu', dtype: 'float32', count: 4 }];
    groupValues(f)['foreach'] = true;
  });
  const byKey = new Map(resumeDifferences(before(), changed).map((d) => [`${d.kind}:${d.key}`, d]));
  assert.deepEqual([...byKey.keys()].sort(), ['optimizer-flag:foreach', 'optimizer-state:exp_avg', 'weights:']);
  assert.equal(
    byKey.get('optimizer-state:exp_avg')?.text,
    'optimizer state `exp_avg`: cuda:0 (float32, 4 tensors) → cuda:0 (bfloat16, 4)',
  );
  assert.match(byKey.get('optimizer-state:exp_avg')?.hint ?? '', /casts floating-point state to its parameter's dtype/);
  assert.equal(byKey.get('weights:')?.text, 'weights (model): cuda:0 (float32, 4 tensors) → cpu (float32, 4)');
  assert.match(byKey.get('weights:')?.hint ?? '', /saved from cpu after the restart and from cuda:0 before/);
  assert.equal(byKey.get('optimizer-flag:foreach')?.text, 'param group `foreach`: None → True');
});

void test('step as a number before and a tensor after: another torch wrote them', () => {
  const old = edited(
    before(),
    (f) => (optimizer(f).state['step'] = { kind: 'number', tensors: [], numbers: 4, other: 0 }),
  );
  const d = first(resumeDifferences(old, before()));
  assert.equal(d.text, 'optimizer state `step`: 4 numbers → cpu (float32, 4 tensors)');
  assert.match(d.hint ?? '', /different torch versions/);
});

void test('a Lightning source pairs with itself; state saved on one side only, and the loader position, are said', () => {
  const lightning = (f: ResumeFacts): ResumeFacts => edited(f, (x) => (optimizer(x).source = 'optimizer_states[0]'));
  const noOpt = edited(after(), (f) => {
    f.optimizers = [];
    f.loader = [];
  });
  const diffs = resumeDifferences(lightning(before()), noOpt);
  assert.deepEqual(
    diffs.map((d) => d.text),
    [
      'optimizer state optimizer_states[0]: saved before the restart, not after',
      'data-loader state: sampler → not saved',
    ],
  );
  const step = first(resumeDifferences(lightning(before()), lightning(after())));
  assert.equal(
    step.text,
    'optimizer state `step` (optimizer_states[0]): cpu (float32, 4 tensors) → cuda:0 (float32, 4)',
  );
});

void test('describeWhere: locations, dtypes, numbers and unknown locations', () => {
  assert.equal(
    describeWhere([
      { location: 'cuda:0', dtype: 'bfloat16', count: 20 },
      { location: 'cuda:0', dtype: 'float32', count: 4 },
      { location: null, dtype: 'float32', count: 1 },
    ]),
    'cuda:0 (bfloat16, 20 tensors; float32, 4), location not saved (float32, 1 tensor)',
  );
  assert.equal(describeWhere([], 3), '3 numbers');
  assert.equal(describeWhere([]), 'none');
});
