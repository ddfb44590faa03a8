import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { envSnapshotArgs, envSnapshotProbe, type EnvSnapshot } from '../../src/core/baselines/envProbe';
import { buildChange, computeDrift, renderDriftMarkdown, renderDriftText } from '../../src/core/baselines/drift';
import { renderSnapshot, SECTIONS } from '../../src/core/baselines/render';
import { naturalCompare } from '../../src/core/util/format';
import {
  BaselineStore,
  fileTime,
  hostFolder,
  remoteBaselinePath,
  writeFileAtomic,
} from '../../src/core/baselines/store';
import { cloneSnapshot, cpuBoxPartial, h200KnownGood, h200Now } from '../fixtures/env';
import { waitUntil } from '../support/process';
import { formatLocalTime } from '../../src/core/util/format';

/** The same machine captured again: only values that move on their own differ. */
function recapture(s: EnvSnapshot): EnvSnapshot {
  const c = cloneSnapshot(s);
  c.capturedAt = '2030-01-01T00:00:00Z';
  c.tookMs = 999;
  c.timings = { packages: 12, gpus: 700 };
  c.host.memory!.availableBytes = 1;
  c.host.shm!.freeBytes = 2;
  c.host.disks[0]!.freeBytes = 3;
  c.host.load = [9, 9, 9];
  c.host.uptimeS = 4;
  for (const g of c.gpus.gpus) g['pcie.link.gen.current'] = g['pcie.link.gen.current'] === 1 ? 5 : 1;
  for (const f of c.scripts.files) f.mtime = 2_000_000_000;
  for (const k of c.caches) k.newestMtime = k.oldestMtime = 2_000_000_000;
  return c;
}

void describe('canonical rendering', () => {
  void it('renders an unchanged machine to identical text, volatile values apart', () => {
    const a = renderSnapshot(h200KnownGood);
    const again = renderSnapshot(h200KnownGood);
    const b = renderSnapshot(recapture(h200KnownGood));
    assert.equal(again.text, a.text);
    assert.equal(b.text, a.text);
    assert.notEqual(b.volatileText, a.volatileText);
    // a readable local time, not ISO
    assert.ok(
      a.volatileText.includes(`snapshot.capturedAt: ${formatLocalTime(Date.parse('2026-11-02T09:14:31Z'))}\n`),
      a.volatileText,
    );
    assert.match(a.volatileText, /^host\.memory\.available: /m);
    assert.match(a.volatileText, /^gpu\.0\.pcie\.link\.gen\.current: 1$/m);
    assert.doesNotMatch(a.text, /capturedAt|available|2026-11-02|pcie\.link\.gen\.current|\.mtime|\.newest/);
  });

  void it('writes sections in order and sorted key: value lines', () => {
    const { text, lines } = renderSnapshot(h200KnownGood);
    assert.match(text, /^packages\.torch: 2\.10\.0\+cu130$/m);
    assert.match(text, /^packages\.my-trainer: 0\.3\.0 \(editable \/workspace\/my-trainer\)$/m);
    assert.match(text, /^cache\.inductor\.files: 1245$/m);
    assert.match(text, /^torch\.git: a8a6c1f6b0e2d8e3b4c5a6d7e8f9a0b1c2d3e4f5$/m);
    assert.match(text, /^gpu\.7\.driver: 580\.82\.07$/m);
    assert.match(text, /^env\.WANDB_API_KEY: <redacted sha256:[0-9a-f]{12}>$/m);
    assert.match(text, /^script\.\/workspace\/data loader\.py\.sha256: (1a2b3c4d){8}$/m);
    const headers = text
      .split('\n')
      .filter((l) => /^\[\w+\]$/.test(l))
      .map((l) => l.slice(1, -1));
    assert.deepEqual(
      headers,
      SECTIONS.filter((s) => headers.includes(s)),
    );
    assert.ok(headers.length >= 10, headers.join());
    for (let i = 1; i < lines.length; i++) {
      const [p, q] = [lines[i - 1]!, lines[i]!];
      if (p.section === q.section) assert.ok(naturalCompare(p.key, q.key) < 0, `${p.key} before ${q.key}`);
    }
  });

  void it('orders numbers naturally and quotes keys that would break a line', () => {
    assert.ok(naturalCompare('gpu.2.name', 'gpu.10.name') < 0);
    assert.ok(naturalCompare('a10', 'a9') > 0);
    const s = cloneSnapshot(h200KnownGood);
    s.scripts.files.push({
      path: '/w/evil\nkey: injected.py',
      size: 1,
      mtime: 1,
      sha256: 'ab',
      md5: 'cd',
      error: null,
    });
    s.env.vars['NCCL_ALGO'] = 'Ring\nTree';
    const { text } = renderSnapshot(s);
    assert.doesNotMatch(text, /^key: injected/m);
    assert.match(text, /^script\."\/w\/evil\\nkey: injected\.py"\.sha256: ab$/m);
    assert.match(text, /^env\.NCCL_ALGO: "Ring\\nTree"$/m);
  });

  void it('renders a snapshot whose parts failed', () => {
    const { text } = renderSnapshot(cpuBoxPartial);
    assert.match(text, /^packages\.error: PermissionError/m);
    assert.match(text, /^gpus\.status: not found$/m);
    assert.match(text, /^cache\.inductor\.error: PermissionError/m);
    assert.match(text, /^error\.packages: PermissionError/m);
  });
});

void describe('drift summary', () => {
  const d = computeDrift(h200KnownGood, h200Now);

  void it('finds packages with torch and triton first', () => {
    assert.deepEqual(
      d.packages.changed.map((c) => c.name),
      ['torch', 'triton', 'transformers', 'nvidia-nccl-cu13'],
    );
    assert.deepEqual(d.packages.changed[0], { name: 'torch', from: '2.10.0+cu130', to: '2.11.0+cu130' });
    assert.deepEqual(d.packages.added, [{ name: 'liger-kernel', from: null, to: '0.6.2' }]);
    assert.deepEqual(d.packages.removed, [{ name: 'einops', from: '0.8.1', to: null }]);
  });

  void it('finds torch, CUDA, GPU, env, script and cache changes', () => {
    assert.equal(d.unchanged, false);
    assert.deepEqual(d.torch.gitVersion, { from: h200KnownGood.torch.gitVersion, to: h200Now.torch.gitVersion });
    assert.equal(d.torch.cuda, undefined);
    assert.deepEqual(d.cuda.driver, { from: '580.82.07', to: '580.95.05' });
    assert.equal(d.cuda.nvcc, undefined);
    const nonDriver = d.gpus.changed.filter((c) => c.field !== 'driver_version');
    assert.deepEqual(nonDriver, [{ index: 3, field: 'pcie.link.width.max', from: 16, to: 8 }]);
    assert.deepEqual(
      d.env.map((e) => [e.name, e.kind]),
      [
        ['CUDA_DEVICE_MAX_CONNECTIONS', 'removed'],
        ['NCCL_P2P_DISABLE', 'added'],
        ['OMP_NUM_THREADS', 'changed'],
        ['WANDB_API_KEY', 'changed'],
      ],
    );
    const secret = d.env.find((e) => e.name === 'WANDB_API_KEY')!;
    assert.deepEqual(secret, { name: 'WANDB_API_KEY', kind: 'changed', redacted: true });
    assert.deepEqual(d.scripts, { changed: ['/workspace/eval.py'], added: [], removed: [] });
    assert.deepEqual(
      d.caches.map((c) => [c.name, c.change, c.files.from, c.files.to]),
      [
        ['inductor', 'emptied', 1245, 0],
        ['triton', 'grown', 312, 1804],
      ],
    );
    assert.deepEqual(d.host, {});
    assert.deepEqual(d.errors, []);
  });

  void it('reads in five seconds and never shows a secret', () => {
    const md = renderDriftMarkdown(d, { baseline: 'known good (Nov 2)', now: 'now' });
    const txt = renderDriftText(d);
    for (const out of [md, txt]) {
      assert.doesNotMatch(out, /redacted|sha256/);
      assert.match(out, /WANDB_API_KEY changed \(secret\)/);
    }
    const lines = txt.trim().split('\n');
    assert.match(lines[0]!, /^\d+ differences between the baseline and now$/);
    assert.match(lines[1]!, /^ {2}torch: 2\.10\.0\+cu130 → 2\.11\.0\+cu130; git a8a6c1f6b0 → c8cd2c4a3e$/);
    assert.match(lines[2]!, /^ {2}triton: 3\.5\.1 → 3\.6\.0$/);
    assert.match(txt, /CUDA: driver 580\.82\.07 → 580\.95\.05/);
    assert.match(txt, /NCCL_P2P_DISABLE=1 added/);
    assert.match(txt, /scripts: changed \/workspace\/eval\.py/);
    assert.match(txt, /inductor emptied \(1245 → 0 files/);
    assert.ok(lines.length <= 12, txt);
    assert.match(md, /^\*\*\d+ differences between known good \(Nov 2\) and now\*\*/);
    assert.match(md, /^- \*\*torch\*\*: /m);
  });

  void it('puts a torch build change first in the summary', () => {
    const now = cloneSnapshot(h200KnownGood);
    now.torch.version = (h200KnownGood.torch.version ?? '').replace(/\+.*$/, '') + '+cu128';
    const txt = renderDriftText(computeDrift(h200KnownGood, now));
    const lines = txt.trim().split('\n');
    assert.match(lines[1]!, /^ {2}torch: build \+cu130 → \+cu128; 2\.10\.0\+cu130 → 2\.10\.0\+cu128$/);
    assert.equal(buildChange('2.11.0+cu130', '2.11.0+cu130'), undefined);
    assert.equal(buildChange('2.11.0', '2.11.0+cpu'), 'no local build → +cpu');
  });

  void it('says no drift for an unchanged machine', () => {
    const same = computeDrift(h200KnownGood, recapture(h200KnownGood));
    assert.equal(same.unchanged, true);
    assert.equal(same.differingLines, 0);
    assert.deepEqual(same.packages, { changed: [], added: [], removed: [] });
    assert.deepEqual(same.env, []);
    assert.deepEqual(same.caches, []);
    assert.match(renderDriftText(same), /^No drift: now matches the baseline\n$/);
  });

  void it('does not claim drift for a part that failed', () => {
    const x = computeDrift(h200KnownGood, cpuBoxPartial);
    assert.deepEqual(x.packages, { changed: [], added: [], removed: [] });
    assert.deepEqual(x.torch, {});
    assert.ok(!x.caches.some((c) => c.name === 'inductor'));
    assert.deepEqual(x.errors, [{ side: 'now', part: 'packages', message: cpuBoxPartial.errors[0]!.message }]);
    assert.deepEqual(x.gpus.count, { from: 8, to: 0 });
    assert.match(renderDriftText(x), /not compared: packages failed on now/);
  });
});

void describe('probe call', () => {
  void it('passes options as --flag=value words and parses the probe document', () => {
    assert.deepEqual(
      envSnapshotArgs({ scripts: ['-weird*.py'], cacheDirs: ['/c'], roots: ['/r'], extraVars: ['X'], deep: true }),
      ['--script=-weird*.py', '--cache-dir=/c', '--root=/r', '--extra-var=X', '--deep'],
    );
    const call = envSnapshotProbe({});
    assert.equal(call.probe, 'env_snapshot');
    assert.deepEqual(call.args, []);
    const parsed = call.parse(JSON.parse(JSON.stringify(h200KnownGood)));
    assert.equal(parsed.torch.version, '2.10.0+cu130');
    const partial = call.parse({
      schema: 1,
      capturedAt: 'x',
      host: {},
      python: { error: 'e' },
      packages: { error: 'p' },
      torch: {},
      cuda: {},
      gpus: {},
      env: {},
      scripts: {},
    });
    assert.equal(partial.python.error, 'e');
    assert.deepEqual(partial.packages.packages, {});
    assert.throws(() => call.parse({ schema: 2 }), /env_snapshot/);
  });
});

void describe('baseline store', () => {
  let dir: string;
  let store: BaselineStore;
  const host = 'ssh:root@gpu-box:22/pct:200';

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kg-baselines-'));
    store = new BaselineStore(join(dir, 'baselines'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  void it('says each change after the write: save, rename, delete, results, reference, an announced snapshot', async () => {
    const heard: { hostId: string; kind: string; snapshot?: EnvSnapshot; listed: number }[] = [];
    const sub = store.onDidChange((c) => {
      // After the write: what the listener reads back already has it.
      void store.list(c.hostId).then((l) => heard.push({ ...c, listed: l.baselines.length }));
    });
    store.onDidChange(() => {
      throw new Error('a failing listener neither fails the write nor silences the others');
    });
    // Each listener reads the store back before it records: wait for what it records, never for a set time.
    const heardAll = async (n: number) =>
      assert.ok(
        await waitUntil(() => heard.length >= n, 30_000),
        `heard ${heard.length} of ${n}: ${JSON.stringify(heard)}`,
      );
    const a = await store.save({ label: 'known good', host, snapshot: h200KnownGood });
    await heardAll(1);
    assert.deepEqual(heard.shift(), { hostId: host, kind: 'baseline', snapshot: h200KnownGood, listed: 1 });
    await store.rename(host, a.baseline.id, 'trained well');
    await heardAll(1);
    assert.deepEqual(heard.shift(), { hostId: host, kind: 'baseline', listed: 1 });
    const r = await store.appendResult(host, { kind: 'throughput', baselineId: null });
    await heardAll(1);
    assert.equal(heard.shift()?.kind, 'result');
    await store.setReference(host, r.result.id);
    await store.setReference(host, null);
    await heardAll(2);
    assert.deepEqual(
      heard.splice(0).map((h) => h.kind),
      ['reference', 'reference'],
    );
    store.announceSnapshot(host, h200Now);
    await heardAll(1);
    assert.deepEqual(heard.shift(), { hostId: host, kind: 'snapshot', snapshot: h200Now, listed: 1 });
    await store.delete(host, a.baseline.id);
    await heardAll(1);
    assert.deepEqual(heard.shift(), { hostId: host, kind: 'baseline', listed: 0 });
    sub.dispose();
    // A listener added after the dispose reads back the same way: once it has recorded the save, a listener still
    // subscribed would have too.
    const control: number[] = [];
    store.onDidChange((c) => void store.list(c.hostId).then((l) => control.push(l.baselines.length)));
    await store.save({ label: 'unheard', host, snapshot: h200Now });
    assert.ok(await waitUntil(() => control.length === 1, 30_000), 'the save was announced');
    assert.deepEqual(heard, []);
  });

  void it('saves, lists, gets, renames and deletes', async () => {
    const a = await store.save({
      label: 'known good',
      host,
      hostLabel: 'gpu-box',
      container: 'pct:200',
      snapshot: h200KnownGood,
    });
    const b = await store.save({ label: 'after upgrade', host, snapshot: h200Now });
    assert.equal(a.baseline.capturedAt, h200KnownGood.capturedAt);
    const listed = await store.list(host);
    assert.deepEqual(listed.problems, []);
    assert.deepEqual(
      listed.baselines.map((x) => x.baseline.label),
      ['after upgrade', 'known good'],
    );
    assert.deepEqual((await store.list()).baselines.length, 2);

    const got = await store.get(host, a.baseline.id);
    assert.deepEqual(got.baseline.snapshot, h200KnownGood);
    assert.equal(got.baseline.container, 'pct:200');

    const renamed = await store.rename(host, a.baseline.id, 'trained well');
    assert.notEqual(renamed.file, a.file);
    assert.equal(renamed.baseline.revision, 1);
    const names = await readdir(store.hostDir(host));
    assert.ok(!names.includes(a.file.split('/').pop()!), 'old revision removed');
    assert.equal((await store.get(host, a.baseline.id)).baseline.label, 'trained well');

    await store.delete(host, b.baseline.id);
    assert.deepEqual(
      (await store.list(host)).baselines.map((x) => x.baseline.label),
      ['trained well'],
    );
    await assert.rejects(store.get(host, b.baseline.id), /no baseline/);
  });

  void it('reports a corrupt or invalid file by name and still loads the others', async () => {
    const good = await store.save({ label: 'good', host, snapshot: h200KnownGood });
    const hdir = store.hostDir(host);
    const text = await readFile(good.file, 'utf8');
    await writeFile(join(hdir, 'truncated01.r0.json'), text.slice(0, text.length / 2));
    await writeFile(join(hdir, 'wrongshape.r0.json'), JSON.stringify({ schema: 1, id: 'wrongshape', label: 3 }));
    await writeFile(join(hdir, '.tmp-123-abcdef'), text.slice(0, 100)); // an interrupted write
    await writeFile(join(hdir, 'notes.txt'), 'not a baseline');
    const { baselines, problems } = await store.list(host);
    assert.deepEqual(
      baselines.map((b) => b.baseline.label),
      ['good'],
    );
    assert.deepEqual(
      problems.map((p) => p.file),
      [join(hdir, 'truncated01.r0.json'), join(hdir, 'wrongshape.r0.json')],
    );
    assert.match(problems[0]!.message, /not readable JSON/);
    assert.match(problems[1]!.message, /not a valid baseline: .*label/);
  });

  void it('prefers the higher revision left by an interrupted rename', async () => {
    const a = await store.save({ label: 'v0', host, snapshot: h200KnownGood });
    const next = { ...JSON.parse(await readFile(a.file, 'utf8')), label: 'v1', revision: 1 };
    await writeFile(a.file.replace('.r0.json', '.r1.json'), JSON.stringify(next));
    const { baselines } = await store.list(host);
    assert.deepEqual(
      baselines.map((b) => b.baseline.label),
      ['v1'],
    );
    await store.delete(host, a.baseline.id);
    assert.deepEqual(await readdir(store.hostDir(host)), []);
  });

  void it('never overwrites an existing file', async () => {
    const f = join(dir, 'x.json');
    await writeFileAtomic(f, 'first', true);
    await assert.rejects(writeFileAtomic(f, 'second', true), /EEXIST/);
    assert.equal(await readFile(f, 'utf8'), 'first');
    assert.deepEqual(await readdir(dir), ['x.json'], 'no temp file left behind');
  });

  void it('keeps benchmark results in their own files', async () => {
    await store.save({ label: 'good', host, snapshot: h200KnownGood });
    const r = await store.appendResult(host, { kind: 'throughput', baselineId: null, tokensPerS: 41234.5 });
    await store.appendResult(host, { kind: 'throughput', baselineId: null, at: '2026-11-29T08:00:00Z', tokensPerS: 1 });
    const { results, problems } = await store.listResults(host);
    assert.deepEqual(problems, []);
    assert.equal(results.length, 2);
    assert.equal(results.find((x) => x.file === r.file)?.result['tokensPerS'], 41234.5);
    assert.deepEqual((await store.list(host)).baselines.length, 1);
  });

  void it('names folders and remote copies safely', () => {
    const f = hostFolder('ssh:root@gpu-box:22/pct:200');
    assert.match(f, /^ssh_root@gpu-box_22_pct_200-[0-9a-f]{8}$/);
    assert.notEqual(hostFolder('a/b'), hostFolder('a:b'));
    assert.doesNotMatch(hostFolder('../../etc'), /\//);
    assert.ok(!hostFolder('..').startsWith('.'));
    const t = new Date('2026-11-29T11:37:05.123Z');
    assert.equal(fileTime(t), '2026-11-29T11-37-05Z');
    // Under the host's home, never in a checkpoint root.
    assert.equal(remoteBaselinePath(t), '~/.known-good/baselines/env-2026-11-29T11-37-05Z.json');
  });
});
