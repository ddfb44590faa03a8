import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type BisectChange, type BisectEvent, type Measure, bisect, slotOf } from '../../src/core/bisect/engine';
import { bisectEventLine, renderBisectMarkdown } from '../../src/core/bisect/render';
import { isKnownGoodError } from '../../src/core/errors';

/*
 * The engine's slots (issue 33 item 4, issue 37): a round's runs k at a time, run r of state j on slot (j + r) mod k,
 * so that one slow slot (a slow GPU) cannot make a culprit. The fake slots here are a factor on the speed: no GPU.
 */

/** mulberry32: the same seed gives the same noise, so a failure replays exactly. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const changes = (n: number): BisectChange[] =>
  Array.from({ length: n }, (_, i) => ({ id: `c${i}`, label: `VAR${i}=${i}` }));

/** 1000 × (1 − the culprit's cost when applied) × 0.7 on the slow slot, ± 1 % seeded noise. */
function slowSlot(o: { culprit?: string; cost?: number; slow: number; seed?: number }): Measure {
  const r = rng(o.seed ?? 1);
  return (applied, _signal, slot) => {
    const cost = o.culprit !== undefined && applied.has(o.culprit) ? (o.cost ?? 0) : 0;
    return Promise.resolve(1000 * (1 - cost) * (slot === o.slow ? 0.7 : 1) * (1 + (r() * 2 - 1) * 0.01));
  };
}

void describe('bisect engine: runs side by side on slots, states rotated across them', () => {
  it('slots = 1 is today: every run told slot 0, the same report as without the option', async () => {
    const seen: (number | undefined)[] = [];
    const make = (): Measure => {
      const r = rng(5);
      return (a, _s, slot) => {
        seen.push(slot);
        return Promise.resolve(1000 * (a.has('c3') ? 0.7 : 1) * (1 + (r() * 2 - 1) * 0.02));
      };
    };
    const plain = await bisect(changes(6), make());
    seen.length = 0;
    const one = await bisect(changes(6), make(), { slots: 1 });
    assert.deepEqual(one, plain);
    assert.equal('slots' in one, false);
    assert.ok(seen.length > 0 && seen.every((s) => s === 0));
  });

  it('run r of state j goes to slot (j + r) mod k: every state meets every slot equally when its runs are a multiple of k', async () => {
    const events: BisectEvent[] = [];
    const r = await bisect(changes(4), slowSlot({ culprit: 'c1', cost: 0.5, slow: -1 }), {
      slots: 2,
      repeats: 4,
      onEvent: (e) => events.push(e),
    });
    assert.equal(r.slots, 2);
    for (const round of r.rounds)
      for (const [j, st] of round.states.entries()) {
        assert.deepEqual(
          st.slots,
          st.samples.map((_, i) => (j + i) % 2),
          `${round.index} ${st.name}`,
        );
        assert.equal(st.slots.filter((s) => s === 0).length, st.samples.length / 2);
      }
    // every sample event says where it ran, and the samples are those events
    const samples = events.filter((e) => e.kind === 'sample');
    assert.equal(samples.length, r.runs);
    assert.ok(samples.every((e) => e.slot === 0 || e.slot === 1));
    assert.deepEqual(
      samples.map((e) => e.slot).sort(),
      r.rounds.flatMap((x) => x.states.flatMap((s) => s.slots!)).sort(),
    );
    assert.deepEqual(
      [0, 1, 2, 3].map((x) => slotOf(1, x, 3)),
      [1, 2, 0, 1],
    );
    assert.deepEqual(
      [0, 1, 2, 3].map((x) => slotOf(1, x, 3, 'by-state')),
      [1, 1, 1, 1],
    );
  });

  it('k runs are in flight at once, never two on one slot, never more than k', async () => {
    const k = 3;
    let inFlight = 0;
    let most = 0;
    const busy = new Set<number>();
    let gate: (() => void) | undefined;
    const opened = new Promise<void>((res) => (gate = res));
    let calls = 0;
    let firstWave = -1;
    const measure: Measure = async (a, _s, slot) => {
      assert.ok(slot !== undefined && !busy.has(slot), `slot ${slot} given twice at once`);
      busy.add(slot);
      inFlight++;
      most = Math.max(most, inFlight);
      if (++calls === 1)
        // the engine starts its k slots in one go: by the next turn of the event loop all k have been called, or
        // it runs them one at a time (the gate then opens anyway, and `firstWave` says how many had come)
        setImmediate(() => {
          firstWave = calls;
          gate!();
        });
      await opened;
      busy.delete(slot);
      inFlight--;
      return a.has('c2') ? 500 : 1000;
    };
    const r = await bisect(changes(5), measure, { slots: k });
    assert.equal(firstWave, k);
    assert.equal(most, k);
    assert.equal(r.verdict.kind, 'culprit');
    assert.deepEqual(r.verdict.ids, ['c2']);
  });

  it('one slot 30 % slow, one change costing 50 %: rotated, the true culprit, confirmed (every change, slot, k)', async () => {
    for (const n of [2, 3, 5, 8])
      for (const k of [2, 3])
        for (let slow = 0; slow < k; slow++)
          for (let c = 0; c < n; c++) {
            const what = `${n} changes, c${c}, ${k} slots, slot ${slow} slow`;
            const r = await bisect(changes(n), slowSlot({ culprit: `c${c}`, cost: 0.5, slow, seed: n * 7 + c }), {
              slots: k,
            });
            assert.equal(r.verdict.kind, 'culprit', `${what}: ${r.verdict.why}`);
            assert.deepEqual(r.verdict.ids, [`c${c}`], what);
            assert.equal(r.confirmation?.confirmed, true, what);
            // the slow slot was used, by every state of every round
            assert.ok(
              r.rounds.every((x) => x.states.every((st) => new Set(st.slots).size === k)),
              what,
            );
          }
  });

  it('… and the same runs with each state pinned to one slot (no rotation) give a wrong verdict', async () => {
    // 4 changes, c3 costs 50 %, slot 1 slow: pinned, "first half" sits on the slow slot and looks slower too
    const measure = () => slowSlot({ culprit: 'c3', cost: 0.5, slow: 1 });
    const rotated = await bisect(changes(4), measure(), { slots: 2 });
    assert.deepEqual([rotated.verdict.kind, rotated.verdict.ids], ['culprit', ['c3']]);
    const pinned = await bisect(changes(4), measure(), { slots: 2, assign: 'by-state' });
    assert.notDeepEqual([pinned.verdict.kind, pinned.verdict.ids], ['culprit', ['c3']], pinned.verdict.why);
    assert.equal(pinned.verdict.kind, 'group', pinned.verdict.why);
  });

  it('no change costs anything, one slot 30 % slow: rotated, never a culprit; pinned, the slow slot makes a confirmed wrong culprit', async () => {
    for (const n of [2, 4, 7])
      for (let seed = 1; seed <= 4; seed++) {
        const rotated = await bisect(changes(n), slowSlot({ slow: 1, seed }), { slots: 2 });
        assert.equal(rotated.verdict.kind, 'not-reproduced', `${n}/${seed}: ${rotated.verdict.why}`);
      }
    const pinned = await bisect(changes(4), slowSlot({ slow: 1 }), { slots: 2, assign: 'by-state' });
    assert.equal(pinned.verdict.kind, 'culprit');
    assert.deepEqual(pinned.verdict.ids, ['c0']);
    assert.equal(pinned.confirmation?.confirmed, true, 'a slow GPU, pinned to one state, "confirms" a change');
  });

  it('a run failing on one slot stops the run in flight on the other; the failure is what the bisect says', async () => {
    let otherSawStop = false;
    const measure: Measure = (_a, signal, slot) => {
      if (slot === 1) return Promise.resolve(NaN);
      return new Promise((resolve, reject) => {
        signal?.addEventListener('abort', () => {
          otherSawStop = true;
          reject(new Error('stopped'));
        });
      });
    };
    await assert.rejects(bisect(changes(3), measure, { slots: 2 }), (e) => isKnownGoodError(e, 'bad-output'));
    assert.equal(otherSawStop, true);
  });

  it("cancel: the caller's signal reaches every run in flight; a cancelled error", async () => {
    const ac = new AbortController();
    const stopped: number[] = [];
    let calls = 0;
    const measure: Measure = (_a, signal, slot) =>
      new Promise((_resolve, reject) => {
        signal?.addEventListener('abort', () => {
          stopped.push(slot!);
          reject(new Error('stopped'));
        });
        if (++calls === 2) ac.abort();
      });
    await assert.rejects(bisect(changes(3), measure, { slots: 2, signal: ac.signal }), (e) =>
      isKnownGoodError(e, 'cancelled'),
    );
    assert.deepEqual(stopped.sort(), [0, 1]);
  });

  it('slots outside 1–64 are a usage error', async () => {
    for (const slots of [0, 1.5, 65])
      await assert.rejects(bisect(changes(2), slowSlot({ slow: -1 }), { slots }), (e) => isKnownGoodError(e, 'usage'));
  });

  it('the report and the live lines say where each run went', async () => {
    const events: BisectEvent[] = [];
    const cs = changes(3);
    const r = await bisect(cs, slowSlot({ culprit: 'c1', cost: 0.5, slow: -1 }), {
      slots: 2,
      onEvent: (e) => events.push(e),
    });
    const gpu = (slot: number) => `GPU ${[4, 7][slot]}`;
    const md = renderBisectMarkdown(r, { slotLabel: gpu });
    assert.match(md, /2 runs side by side/);
    assert.match(md, /\| good \| none \(good\) \| [^|]+ \| [^|]+ \| \S+ \(GPU 4\), \S+ \(GPU 7\), \S+ \(GPU 4\) \|/);
    const sample = events.find((e) => e.kind === 'sample' && e.slot === 1)!;
    assert.match(bisectEventLine(sample, cs, { slotLabel: gpu }) ?? '', / on GPU 7$/);
    assert.match(bisectEventLine(events[0]!, cs) ?? '', /, 2 side by side$/);
  });
});
