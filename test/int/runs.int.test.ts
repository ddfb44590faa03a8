import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ProbeRunner } from '../../src/core/probes/runner';
import { listRunsProbe, type RunEntry, type RunsListing } from '../../src/core/runs/listRuns';
import { buildRootNodes, childrenOf, newestCheckpoint, type EntryNode } from '../../src/core/runs/model';
import { renderTextTree } from '../../src/core/runs/textTree';
import { LocalTransport } from '../../src/core/transport/local';

const STEPS = 1000;
const NASTY = [
  'with space.pt',
  "it's.log",
  'say "hi".jsonl',
  '$(touch pwned).pt',
  '`touch pwned2`.yaml',
  'new\nline.log',
  '\u00fcnic\u00f6de \u6f22\u5b57 \u{1f600}.json',
  '-dash.pt',
];

function strip(l: RunsListing): unknown {
  return { ...l, now: 0, elapsedMs: 0 };
}

function child(e: RunEntry | null | undefined, name: string): RunEntry {
  const c = e?.children?.find((x) => x.name === name);
  assert.ok(c, `${name} not listed`);
  return c;
}

void describe('list_runs through the probe runner (local transport)', () => {
  let tmp: string;
  let runner: ProbeRunner;

  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'kg-runs-int-'));
    const run = join(tmp, 'root', 'run1');
    mkdirSync(run, { recursive: true });
    for (let i = 0; i < STEPS; i++) {
      mkdirSync(join(run, `step_${i}`));
      writeFileSync(join(run, `step_${i}`, 'checkpoint.pt'), 'c');
    }
    writeFileSync(join(run, 'train_log.jsonl'), '{"step": 0}\n');
    const odd = join(tmp, 'root', 'odd names');
    mkdirSync(odd);
    for (const n of NASTY) writeFileSync(join(odd, n), 'x');
    writeFileSync(Buffer.concat([Buffer.from(`${odd}/bad`), Buffer.from([0xff, 0xfe]), Buffer.from('.pt')]), 'b');
    mkdirSync(join(tmp, '-root-with-dash'));
    runner = new ProbeRunner(new LocalTransport(), { python: 'python3', timeoutMs: 30000 });
  });

  after(() => {
    runner.dispose();
    rmSync(tmp, { recursive: true, force: true });
  });

  void it('lists 1,000 checkpoint folders in one request, resident and one-shot alike', async (t) => {
    const roots = [join(tmp, 'root'), join(tmp, 'missing')];
    await runner.run(listRunsProbe(roots)); // starts the helper and sends the probe's source once
    let best = Infinity;
    let resident: RunsListing | undefined;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      resident = (await runner.run(listRunsProbe(roots))).value;
      best = Math.min(best, performance.now() - t0);
    }
    const t1 = performance.now();
    const once = (await runner.runOnce(listRunsProbe(roots))).value;
    const onceMs = performance.now() - t1;
    t.diagnostic(
      `resident request: ${best.toFixed(1)} ms (walk ${resident!.elapsedMs} ms); one-shot: ${onceMs.toFixed(1)} ms`,
    );

    assert.deepEqual(strip(once), strip(resident!));
    const [ok, missing] = resident!.roots;
    assert.equal(ok!.status, 'ok');
    assert.equal(ok!.counts!.checkpoints, STEPS + 4); // and the four flat *.pt files of odd names
    assert.equal(missing!.status, 'missing');
    const run1 = child(ok!.entry, 'run1');
    assert.equal(run1.children!.length, STEPS + 1);
    assert.equal(run1.size, STEPS + 12);

    const [rootNode] = buildRootNodes('local', resident!);
    const runNode = childrenOf(rootNode!).find((n) => n.label === 'run1')!;
    const steps = childrenOf(runNode, { newestFirst: false }).filter((n) => n.kind === 'checkpoint');
    assert.deepEqual(
      steps.slice(0, 12).map((n) => n.label),
      Array.from({ length: 12 }, (_, i) => `step_${i}`),
    );
    assert.equal(steps.at(-1)!.label, `step_${STEPS - 1}`);
    const newest = newestCheckpoint(resident!, 'local');
    assert.ok(newest && newest.entry.role === 'checkpoint');
  });

  void it('carries nasty names intact and runs none of them', async () => {
    const res = (await runner.run(listRunsProbe([join(tmp, 'root')]))).value;
    const odd = child(res.roots[0]!.entry, 'odd names');
    const names = odd.children!.map((c) => c.name);
    for (const n of NASTY) assert.ok(names.includes(n), `${JSON.stringify(n)} missing from ${JSON.stringify(names)}`);
    const bad = odd.children!.find((c) => c.escaped && c.nameB64)!;
    assert.deepEqual(
      Buffer.from(bad.nameB64!, 'base64'),
      Buffer.concat([Buffer.from('bad'), Buffer.from([0xff, 0xfe, 0x2e, 0x70, 0x74])]),
    );
    assert.equal(bad.name, 'bad\ufffd\ufffd.pt');
    assert.ok(!existsSync(join(tmp, 'pwned')) && !existsSync('pwned') && !existsSync('pwned2'));

    const [rootNode] = buildRootNodes('local', res);
    const oddNode = childrenOf(rootNode!).find((n) => n.label === 'odd names')!;
    const labels = childrenOf(oddNode).map((n) => n.label);
    assert.ok(labels.includes('new\\nline.log'));
    assert.ok(labels.includes('bad\\xff\\xfe.pt'));
    const badNode = childrenOf(oddNode).find((n) => n.label === 'bad\\xff\\xfe.pt') as EntryNode;
    assert.ok(Buffer.from(badNode.remotePathB64!, 'base64').toString('latin1').endsWith('/odd names/bad\xff\xfe.pt'));
    const text = renderTextTree(res);
    assert.ok(text.includes('$(touch pwned).pt'));
    assert.ok(!text.includes('new\nline'));
  });

  void it('takes a root that starts with a dash, and polls signatures without listing', async () => {
    const dash = join(tmp, '-root-with-dash');
    const res = (await runner.run(listRunsProbe([dash]))).value;
    assert.equal(res.roots[0]!.status, 'empty');
    const sig = (await runner.run(listRunsProbe([join(tmp, 'root')], { signatureOnly: true }))).value.roots[0]!;
    assert.equal(sig.entry, null);
    assert.match(sig.signature!, /^\d+:\d+$/);
    mkdirSync(join(tmp, 'root', 'run2'));
    const sig2 = (await runner.run(listRunsProbe([join(tmp, 'root')], { signatureOnly: true }))).value.roots[0]!;
    assert.notEqual(sig2.signature, sig.signature);
  });

  void it('cuts a huge folder at maxEntries and keeps the newest steps', async () => {
    const res = (await runner.run(listRunsProbe([join(tmp, 'root')], { maxEntries: 100, depth: 2 }))).value;
    const run1 = child(res.roots[0]!.entry, 'run1');
    assert.equal(run1.omitted, STEPS + 1 - 100);
    const steps = run1.children!.filter((c) => c.step !== undefined).map((c) => c.step!);
    assert.equal(Math.max(...steps), STEPS - 1);
    assert.ok(run1.children!.some((c) => c.name === 'train_log.jsonl'));
  });
});
