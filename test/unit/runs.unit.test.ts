import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeLenient, parseStep, printableName } from '../../src/core/runs/format';
import { formatAge, formatBytes, formatExactBytes, naturalCompare } from '../../src/core/util/format';
import {
  entryProblem,
  listRunsProbe,
  runsListingSchema,
  type RootListing,
  type RunEntry,
  type RunsListing,
} from '../../src/core/runs/listRuns';
import {
  buildRootNodes,
  childrenOf,
  graftListing,
  hostChildren,
  hostNode,
  newestCheckpoint,
  remoteNow,
  type EntryNode,
  type MessageNode,
  type RootNode,
  type RunsNode,
} from '../../src/core/runs/model';
import { renderTextTree } from '../../src/core/runs/textTree';

const NOW_S = 1_700_000_000;
const NOW = NOW_S * 1000;
const H = 3600;
const GB21 = 2_254_857_830;

function file(path: string, size: number, mtime: number, extra: Partial<RunEntry> = {}): RunEntry {
  const name = path.split('/').pop()!;
  return { name, path, kind: 'file', size, mtime, role: 'other', ...extra };
}

function dir(path: string, children: RunEntry[], extra: Partial<RunEntry> = {}): RunEntry {
  const name = path === '' ? 'ckpts' : path.split('/').pop()!;
  const size = children.reduce((s, c) => s + c.size, 0);
  const mtime = Math.max(NOW_S - 10 * H, ...children.map((c) => c.mtime ?? 0));
  return { name, path, kind: 'dir', size, mtime, role: 'dir', children, ...extra };
}

function step(run: string, n: number, size: number, mtime: number): RunEntry {
  const p = `${run}/step_${n}`;
  return dir(p, [file(`${p}/checkpoint.pt`, size, mtime, { role: 'weights', format: 'torch' })], {
    role: 'checkpoint',
    step: n,
    format: 'step',
    mtime,
  });
}

function root(entry: RunEntry | null, status: RootListing['status'] = 'ok', message = ''): RootListing {
  return { root: '/ckpts', path: '/ckpts', status, message, signature: '1:1', entry };
}

function listing(...roots: RootListing[]): RunsListing {
  return { roots, depth: 3, maxEntries: 5000, now: NOW_S, user: 'alice', elapsedMs: 1 };
}

const runA = dir('runA', [
  step('runA', 100, 30, NOW_S - 5 * H),
  step('runA', 9, 10, NOW_S - 7 * H),
  step('runA', 690, GB21, NOW_S - 3 * H),
  step('runA', 10, 20, NOW_S - 6 * H),
  file('runA/train_log.jsonl', 2048, NOW_S - 60, { role: 'train-log' }),
  file('runA/train_stdout.log', 100, NOW_S - 60, { role: 'stdout' }),
  file('runA/config.yaml', 100, NOW_S - 9 * H, { role: 'config' }),
]);
const sample = listing(root(dir('', [runA])));

function labels(nodes: RunsNode[]): string[] {
  return nodes.map((n) => n.label);
}

function only(nodes: RunsNode[], kind: EntryNode['kind']): EntryNode[] {
  return nodes.filter((n): n is EntryNode => n.kind === kind);
}

void describe('format', () => {
  void it('formats bytes 1024-based', () => {
    assert.equal(formatBytes(0), '0 B');
    assert.equal(formatBytes(1023), '1023 B');
    assert.equal(formatBytes(1024), '1.0 KB');
    assert.equal(formatBytes(GB21), '2.1 GB');
    assert.equal(formatBytes(24.3 * 1024 ** 3), '24.3 GB');
    assert.equal(formatBytes(512 * 1024 ** 2), '512 MB');
    assert.equal(formatBytes(1024 * 1024 - 1), '1.0 MB');
    assert.equal(formatBytes(3 * 1024 ** 4), '3.0 TB');
    assert.equal(formatExactBytes(GB21), '2,254,857,830 bytes');
  });

  void it('formats ages', () => {
    assert.equal(formatAge(NOW, NOW), 'just now');
    assert.equal(formatAge(NOW + 30_000, NOW), 'just now');
    assert.equal(formatAge(NOW + 3_600_000, NOW), 'in the future');
    assert.equal(formatAge(NOW - 42_000, NOW), '42 s ago');
    assert.equal(formatAge(NOW - 12 * 60_000, NOW), '12 min ago');
    assert.equal(formatAge(NOW - 3 * 3_600_000 - 5, NOW), '3 h ago');
    assert.equal(formatAge(NOW - 5 * 86_400_000, NOW), '5 d ago');
    assert.equal(formatAge(NOW - 120 * 86_400_000, NOW), '3 mo ago');
    assert.equal(formatAge(NOW - 800 * 86_400_000, NOW), '2 y ago');
  });

  void it('parses steps like the probe', () => {
    assert.deepEqual(parseStep('step_690'), { step: 690 });
    assert.deepEqual(parseStep('checkpoint-500'), { step: 500 });
    assert.deepEqual(parseStep('global_step500'), { step: 500 });
    assert.deepEqual(parseStep('epoch=3-step=1200.ckpt'), { step: 1200, epoch: 3 });
    assert.deepEqual(parseStep('iter_0000500'), { step: 500 });
    assert.deepEqual(parseStep('000200'), { step: 200 });
    assert.deepEqual(parseStep('checkpoint.pt'), {});
    assert.deepEqual(parseStep('model-00001-of-00002.safetensors'), {});
  });

  void it('orders names naturally', () => {
    const got = ['step_100', 'step_10', 'step_9', 'a', 'step_2'].sort(naturalCompare);
    assert.deepEqual(got, ['a', 'step_2', 'step_9', 'step_10', 'step_100']);
  });

  void it('makes names printable', () => {
    assert.equal(printableName('a\nb\tc'), 'a\\nb\\tc');
    assert.equal(decodeLenient(Buffer.from([0x62, 0xff, 0xc3, 0xa9, 0xe6, 0xbc])), 'b\\xffé\\xe6\\xbc');
    assert.equal(printableName('ignored', Buffer.from('x\n\xfe', 'latin1')), 'x\\n\\xfe');
  });
});

void describe('list_runs.py on special files', () => {
  void it('a FIFO in a run shows as a FIFO, never read, never a metrics log (it was kind "file", role metrics)', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'kg-runs-special-'));
    try {
      mkdirSync(join(tmp, 'run'));
      execFileSync('mkfifo', [join(tmp, 'run', 'metrics.jsonl')]);
      writeFileSync(join(tmp, 'run', 'step_1.pt'), 'c');
      const call = listRunsProbe([tmp]);
      const listing = call.parse(
        JSON.parse(execFileSync('python3', ['python/list_runs.py', ...call.args], { encoding: 'utf8' })),
      );
      const fifo = listing.roots[0]!.entry!.children![0]!.children!.find((e) => e.name === 'metrics.jsonl')!;
      assert.deepEqual([fifo.kind, fifo.special, fifo.role], ['special', 'fifo', 'other']);
      const [r] = buildRootNodes('h1', listing);
      const node = childrenOf(childrenOf(r!)[0]!).find((n) => n.label === 'metrics.jsonl') as EntryNode;
      assert.equal(node.description, 'FIFO (named pipe), not read');
      assert.match(node.contextValue, /;special\b/);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

void describe('tree model', () => {
  void it('describes a checkpoint with step, size and age, and a tooltip with path, bytes and a readable local time', () => {
    const [r] = buildRootNodes('h1', sample);
    const run = childrenOf(r!, { now: NOW })[0] as EntryNode;
    assert.equal(run.kind, 'run');
    assert.equal(run.description, '4 checkpoints · last step 690 · 2.1 GB · 1 min ago');
    const ck = only(childrenOf(run, { now: NOW }), 'checkpoint').find((n) => n.label === 'step_690')!;
    assert.equal(ck.description, 'step 690 · 2.1 GB · 3 h ago');
    assert.match(ck.tooltip!, /^\/ckpts\/runA\/step_690\n/);
    assert.match(ck.tooltip!, /2,254,857,830 bytes \(2\.1 GB\)/);
    assert.match(ck.tooltip!, /modified \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(UTC/);
    assert.equal(ck.icon, 'package');
    assert.match(ck.contextValue, /\bcheckpoint\b/);
    assert.equal(ck.collapsible, 'collapsed');
    assert.equal(ck.remotePath, '/ckpts/runA/step_690');
  });

  void it('orders steps numerically, newest first or last, after plain files', () => {
    const [r] = buildRootNodes('h1', sample);
    const run = childrenOf(r!)[0]!;
    assert.deepEqual(labels(childrenOf(run, { newestFirst: true })), [
      'config.yaml',
      'train_log.jsonl',
      'train_stdout.log',
      'step_690',
      'step_100',
      'step_10',
      'step_9',
    ]);
    assert.deepEqual(labels(only(childrenOf(run, { newestFirst: false }), 'checkpoint')), [
      'step_9',
      'step_10',
      'step_100',
      'step_690',
    ]);
  });

  void it("accelerate's checkpoint_N: a save counter orders the folders but is never shown as a step", () => {
    const save = (n: number, mtime: number) =>
      dir(`acc/checkpoints/checkpoint_${n}`, [file(`acc/checkpoints/checkpoint_${n}/model.safetensors`, 10, mtime)], {
        role: 'checkpoint',
        format: 'accelerate',
        step: n,
        stepIsIndex: true,
        mtime,
      });
    const run = dir('acc', [dir('acc/checkpoints', [save(1, NOW_S - H), save(0, NOW_S - 2 * H)])]);
    const [r] = buildRootNodes('h1', listing(root(dir('', [run]))));
    const accNode = childrenOf(r!, { now: NOW })[0]!;
    assert.equal(accNode.description, '2 checkpoints · 20 B · 1 h ago'); // no "last step 1"
    const folder = childrenOf(accNode, { now: NOW })[0]!;
    const cks = only(childrenOf(folder, { now: NOW, newestFirst: false }), 'checkpoint');
    assert.deepEqual(labels(cks), ['checkpoint_0', 'checkpoint_1']);
    assert.equal(cks[1]!.description, '10 B · 1 h ago');
    assert.match(cks[1]!.tooltip!, /\ncheckpoint \(accelerate\) · save 1 of the run, not a training step\n/);
    // a folder of one save as a root of its own
    const one = buildRootNodes('h1', listing({ ...root(save(1, NOW_S - H)), path: '/ckpts/checkpoint_1' }))[0]!;
    assert.equal(one.description, '10 B · accelerate');
  });

  void it('gives files codicons and contextValue tokens menus can match', () => {
    const [r] = buildRootNodes('h1', sample);
    const files = only(childrenOf(childrenOf(r!)[0]!, { now: NOW }), 'file');
    const by = (name: string) => files.find((f) => f.label === name)!;
    assert.match(by('train_log.jsonl').contextValue, /\blog\b/);
    assert.match(by('train_log.jsonl').contextValue, /\bjsonl\b/);
    assert.equal(by('train_log.jsonl').icon, 'graph-line');
    assert.match(by('train_stdout.log').contextValue, /\blog\b/);
    assert.equal(by('train_stdout.log').icon, 'output');
    assert.match(by('config.yaml').contextValue, /\bconfig\b/);
    assert.doesNotMatch(by('config.yaml').contextValue, /\bcheckpoint\b/);
    assert.equal(by('train_log.jsonl').description, '2.0 KB · 1 min ago');
  });

  void it('shows the parts of a checkpoint as files', () => {
    const [r] = buildRootNodes('h1', sample);
    const ck = only(childrenOf(childrenOf(r!)[0]!), 'checkpoint')[0]!;
    const parts = childrenOf(ck);
    assert.deepEqual(labels(parts), ['checkpoint.pt']);
    assert.equal(parts[0]!.kind, 'file');
    assert.match(parts[0]!.contextValue, /\bweights\b/);
  });

  void it('handles step folders directly in the root and one folder deeper', () => {
    const flat = listing(root(dir('', [step('', 2, 1, NOW_S), step('', 11, 1, NOW_S)].map(rebaseTop))));
    const [r] = buildRootNodes('h', flat);
    assert.deepEqual(labels(childrenOf(r!, { newestFirst: false })), ['step_2', 'step_11']);
    assert.equal(r!.description, '2 checkpoints · 2 B');

    const deep = dir('', [dir('runB', [dir('runB/ckpts', [step('runB/ckpts', 5, 1, NOW_S)])])]);
    const [r2] = buildRootNodes('h', listing(root(deep)));
    const runB = childrenOf(r2!)[0]!;
    const group = childrenOf(runB)[0]!;
    assert.equal(group.kind, 'run');
    assert.equal(childrenOf(group)[0]!.kind, 'checkpoint');
    assert.equal(runB.description!.split(' · ')[0], '1 checkpoint');
  });

  void it('shows a root that is itself one checkpoint as that checkpoint', () => {
    const ck = { ...step('', 42, 7, NOW_S - 60), path: '', name: 'step_42' };
    ck.children = ck.children!.map((c) => ({ ...c, path: 'checkpoint.pt' }));
    const [r] = buildRootNodes('h', listing(root(ck)));
    assert.equal(r!.description, 'step 42 · 7 B');
    assert.match(r!.contextValue, /\bcheckpoint\b/);
    const kids = childrenOf(r!);
    assert.deepEqual(labels(kids), ['checkpoint.pt']);
    assert.equal(kids[0]!.kind, 'file');
    assert.notEqual(kids[0]!.id, r!.id);
  });

  void it('says honestly why a root shows no checkpoints', () => {
    const cases: [RootListing['status'], string, RegExp, MessageNode['severity']][] = [
      ['missing', '/ckpts does not exist', /does not exist/, 'warning'],
      ['denied', 'permission denied: alice cannot read /ckpts', /^Permission denied: alice/, 'error'],
      ['not-a-directory', '/ckpts is a file, not a folder', /not a folder/, 'warning'],
      ['error', '/ckpts: Input/output error', /Input\/output/, 'error'],
    ];
    for (const [status, msg, re, severity] of cases) {
      const [r] = buildRootNodes('h', listing(root(null, status, msg)));
      const kids = childrenOf(r!);
      assert.equal(kids.length, 1, status);
      const m = kids[0] as MessageNode;
      assert.equal(m.kind, 'message');
      assert.match(m.label, re);
      assert.equal(m.severity, severity);
      assert.match(r!.contextValue, new RegExp(`\\broot;${status}\\b`));
    }
    const [empty] = buildRootNodes('h', listing(root(dir('', []), 'empty', '/ckpts is empty')));
    assert.equal(empty!.description, 'empty');
    assert.match(childrenOf(empty!)[0]!.label, /^Empty/);

    const other = dir('', [
      file('README.md', 3, NOW_S),
      file('notes.txt', 3, NOW_S),
      file('x.log', 3, NOW_S, { role: 'log' }),
    ]);
    const [none] = buildRootNodes('h', listing(root(other, 'no-checkpoints', 'no checkpoints found; 3 other files')));
    const kids = childrenOf(none!);
    assert.equal(kids[0]!.label, 'No checkpoints found; 3 other files');
    assert.deepEqual(
      labels(kids.slice(1)),
      ['notes.txt', 'README.md', 'x.log'].sort((a, b) => (a < b ? -1 : 1)),
    );
  });

  void it('shows a permission error on a run and a count of what was cut', () => {
    const tree = dir('', [
      dir('private', [], { children: undefined, listed: false, error: 'permission denied' }),
      dir('big', [step('big', 1, 1, NOW_S)], { omitted: 1234, sizeComplete: false }),
    ]);
    const [r] = buildRootNodes('h', listing(root(tree)));
    const [big, priv] = childrenOf(r!) as EntryNode[];
    assert.equal(priv!.description, 'permission denied');
    assert.equal(priv!.collapsible, 'collapsed');
    assert.equal(priv!.needsListing, false);
    assert.equal((childrenOf(priv!)[0] as MessageNode).severity, 'error');
    const more = childrenOf(big!).at(-1) as MessageNode;
    assert.equal(more.label, '1,234 more not shown');
    assert.match(big!.description!, /≥ 1 B/);
  });

  void it('asks for one more listing for a folder past the depth, and grafts it', () => {
    const tree = dir('', [dir('runC', [dir('runC/deep', [], { children: undefined, listed: false })])]);
    const [r] = buildRootNodes('h', listing(root(tree)));
    const deep = childrenOf(childrenOf(r!)[0]!)[0] as EntryNode;
    assert.equal(deep.needsListing, true);
    assert.equal(deep.collapsible, 'collapsed');
    assert.equal(deep.remotePath, '/ckpts/runC/deep');
    const sub: RootListing = {
      ...root(dir('', [step('', 7, 5, NOW_S).children![0]!].map(rebaseTop))),
      root: '/ckpts/runC/deep',
      path: '/ckpts/runC/deep',
    };
    const grafted = graftListing(deep.entry, sub);
    assert.equal(grafted.listed, undefined);
    assert.deepEqual(
      grafted.children!.map((c) => c.path),
      ['runC/deep/step_7/checkpoint.pt'],
    );
    assert.equal(grafted.size, 5);
  });

  void it('gives every node a unique id, stable across refreshes', () => {
    const ids = new Set<string>();
    const walk = (n: RunsNode) => {
      assert.ok(!ids.has(n.id), n.id);
      ids.add(n.id);
      childrenOf(n).forEach(walk);
    };
    buildRootNodes('h1', sample).forEach(walk);
    const again = new Set<string>();
    const walk2 = (n: RunsNode) => {
      again.add(n.id);
      childrenOf(n).forEach(walk2);
    };
    buildRootNodes('h1', sample).forEach(walk2);
    assert.deepEqual([...again].sort(), [...ids].sort());
    assert.ok(ids.size > 10);
  });

  void it('shows host states: connecting, listing, failed with Retry, connected with roots', () => {
    const h = { id: 'h1', label: 'gpu-box', detail: 'me@gpu:22' };
    assert.equal(hostNode({ ...h, state: 'connected' }).contextValue, 'host;connected');
    assert.equal(hostNode({ ...h, state: 'connecting' }).icon, 'loading~spin');
    assert.equal((hostChildren({ ...h, state: 'connecting' }, undefined)[0] as MessageNode).severity, 'loading');
    assert.equal((hostChildren({ ...h, state: 'listing' }, undefined)[0] as MessageNode).severity, 'loading');
    const failed = hostChildren({ ...h, state: 'error', error: 'gpu-box: connection refused' }, undefined);
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.label, 'gpu-box: connection refused');
    assert.equal((failed[0] as MessageNode).action, 'retry');
    assert.match(failed[0]!.contextValue, /\bretry\b/);
    // A connection failure (a key, a port, a host key) is fixed in the host's settings: the row opens Edit Host…,
    // its tooltip holds the whole message, and Retry stays (its menu entries match `retry`).
    const long = `no key offered to root@127.0.0.1:2222: the agent has no identities and ~/.ssh has no id_ed25519 — Edit Host… to choose a key. Tried: ssh-agent (no identities).`;
    const auth = hostChildren({ ...h, state: 'error', error: long, errorCode: 'auth-failed' }, undefined);
    assert.equal((auth[0] as MessageNode).action, 'editHost');
    assert.equal(auth[0]!.contextValue, 'message;error;retry;editHost');
    assert.equal(auth[0]!.tooltip, long);
    assert.equal(hostNode({ ...h, state: 'error', error: long }).tooltip, `gpu-box\nme@gpu:22\nfailed\n${long}`);
    const roots = hostChildren({ ...h, state: 'connected' }, sample);
    assert.equal(roots[0]!.kind, 'root');
    assert.equal((roots[0] as RootNode).remotePath, '/ckpts');
  });

  void it('measures ages on the remote clock', () => {
    // The remote is 2 h behind this machine; 10 s passed since the listing arrived.
    const local = NOW + 2 * H * 1000;
    assert.equal(remoteNow(sample, local, local + 10_000), NOW + 10_000);
    const [r] = buildRootNodes('h1', sample);
    const run = childrenOf(r!)[0]!;
    const ck = only(childrenOf(run, { now: remoteNow(sample, local, local + 10_000) }), 'checkpoint')[0]!;
    assert.equal(ck.description, 'step 690 · 2.1 GB · 3 h ago');
  });

  void it('finds the newest checkpoint by time across runs, with the ids to reveal it', () => {
    const runD = dir('runD', [step('runD', 50, 1, NOW_S - 60)]);
    const l = listing(root(dir('', [runA, runD])));
    const n = newestCheckpoint(l, 'h1')!;
    assert.equal(n.entry.path, 'runD/step_50');
    assert.equal(n.remotePath, '/ckpts/runD/step_50');
    assert.equal(n.ids.length, 3);
    const [r] = buildRootNodes('h1', l);
    assert.equal(r!.id, n.ids[0]);
    const runNode = childrenOf(r!).find((c) => c.id === n.ids[1])!;
    assert.ok(childrenOf(runNode).some((c) => c.id === n.ids[2]));
    assert.equal(newestCheckpoint(listing(root(null, 'missing', 'x'))), undefined);
    assert.equal(newestCheckpoint(sample)!.entry.step, 690);
  });
});

function rebaseTop(e: RunEntry): RunEntry {
  const fix = (x: RunEntry): RunEntry => ({
    ...x,
    path: x.path.replace(/^\//, ''),
    ...(x.children ? { children: x.children.map(fix) } : {}),
  });
  return fix(e);
}

void describe('text tree', () => {
  void it('renders the same nodes as text', () => {
    const text = renderTextTree(sample, { hostLabel: 'gpu', newestFirst: false });
    const lines = text.trimEnd().split('\n');
    assert.equal(lines[0], 'gpu:/ckpts  1 run · 4 checkpoints · 2.1 GB');
    assert.equal(lines[1], '└── runA/  4 checkpoints · last step 690 · 2.1 GB · 1 min ago');
    assert.equal(lines[2], '    ├── config.yaml  100 B · 9 h ago');
    assert.equal(lines.at(-1), '    └── step_690/  step 690 · 2.1 GB · 3 h ago');
    assert.ok(!text.includes('checkpoint.pt'));
    const withFiles = renderTextTree(sample, { checkpointFiles: true });
    assert.match(
      withFiles,
      /\n {4}├── step_690\/ {2}step 690 · 2\.1 GB · 3 h ago\n {4}│ {3}└── checkpoint\.pt {2}2\.1 GB · 3 h ago\n/,
    );
  });

  void it('prints root problems as lines', () => {
    const text = renderTextTree(listing(root(null, 'denied', 'permission denied: alice cannot read /ckpts')));
    assert.equal(text, '/ckpts  permission denied\n└── ✗ Permission denied: alice cannot read /ckpts\n');
  });
});

void describe('real probe output', () => {
  let tmp: string;
  let parsed: RunsListing;

  before(() => {
    tmp = mkdtempSync(join(tmpdir(), 'kg-runs-unit-'));
    const w = (rel: string, data: string | Buffer = 'x') => {
      const p = join(tmp, rel);
      mkdirSync(join(p, '..'), { recursive: true });
      writeFileSync(p, data);
    };
    for (const n of [9, 10, 100]) w(`run1/step_${n}/checkpoint.pt`, 'c'.repeat(n));
    w('run1/train_log.jsonl', '{"step": 1}\n');
    w('hf/checkpoint-500/config.json', '{}');
    w('hf/checkpoint-500/trainer_state.json', '{}');
    w('hf/checkpoint-500/model.safetensors', 'm');
    w('light/epoch=3-step=1200.ckpt', 'l');
    w('dcp/step_7/.metadata', 'm');
    w('dcp/step_7/__0_0.distcp', 'd');
    w('odd/new\nline $(touch x) "q".pt', 'n');
    mkdirSync(join(tmp, 'odd'), { recursive: true });
    writeFileSync(
      Buffer.concat([Buffer.from(join(tmp, 'odd') + '/'), Buffer.from([0x62, 0xff, 0x2e, 0x70, 0x74])]),
      'b',
    );
    utimesSync(join(tmp, 'run1', 'step_100'), NOW_S - 3 * H, NOW_S - 3 * H);
    const call = listRunsProbe([tmp, join(tmp, 'missing')]);
    const stdout = execFileSync('python3', ['python/list_runs.py', ...call.args], { encoding: 'utf8' });
    parsed = call.parse(JSON.parse(stdout));
  });

  after(() => rmSync(tmp, { recursive: true, force: true }));

  void it('parses with the schema and names the probe on bad output', () => {
    assert.equal(parsed.roots.length, 2);
    assert.equal(parsed.roots[0]!.status, 'ok');
    assert.equal(parsed.roots[1]!.status, 'missing');
    assert.ok(runsListingSchema.safeParse(parsed).success);
    assert.throws(() => listRunsProbe(['/x']).parse({ roots: 'nope' }), /probe list_runs returned unexpected output/);
    const broken = structuredClone(parsed);
    const deep = broken.roots[0]!.entry!.children![0]!.children![0]!;
    (deep as unknown as Record<string, unknown>)['role'] = 'banana';
    assert.throws(
      () => listRunsProbe(['/x']).parse(broken),
      /roots\.0\.entry.*entry\.children\.0\.children\.0\.role: unknown role/,
    );
    assert.equal(
      entryProblem({ name: 'a', path: 'a', kind: 'file', size: 1, mtime: null, role: 'other', step: '3' }),
      'entry.step: expected a number',
    );
    assert.deepEqual(listRunsProbe(['-odd', '/b'], { depth: 4, maxEntries: 10, signatureOnly: true }).args, [
      '--depth',
      '4',
      '--max-entries',
      '10',
      '--signature-only',
      '--',
      '-odd',
      '/b',
    ]);
  });

  void it('builds the tree from it', () => {
    const [r] = buildRootNodes('local', parsed);
    const kids = childrenOf(r!, { newestFirst: false, now: (NOW_S + 0) * 1000 });
    assert.deepEqual(labels(kids), ['dcp', 'hf', 'light', 'odd', 'run1']);
    const run1 = kids.find((k) => k.label === 'run1')!;
    const steps = only(childrenOf(run1, { newestFirst: false, now: NOW }), 'checkpoint');
    assert.deepEqual(labels(steps), ['step_9', 'step_10', 'step_100']);
    assert.equal(steps[2]!.description, 'step 100 · 100 B · 3 h ago');
    const odd = childrenOf(kids.find((k) => k.label === 'odd')!);
    const oddLabels = labels(odd).sort();
    assert.deepEqual(oddLabels, ['b\\xff.pt', 'new\\nline $(touch x) "q".pt']);
    const bad = odd.find((n) => n.label === 'b\\xff.pt') as EntryNode;
    assert.equal(Buffer.from(bad.remotePathB64!, 'base64').subarray(-5).toString('latin1'), 'b\xff.pt');
    assert.match(bad.contextValue, /\bescaped\b/);
    const hf = only(childrenOf(kids.find((k) => k.label === 'hf')!), 'checkpoint')[0]!;
    assert.match(hf.contextValue, /format-hf/);
    const text = renderTextTree(parsed, { newestFirst: true });
    assert.match(text, /new\\nline \$\(touch x\) "q"\.pt/);
    assert.match(text, /missing {2}not found/);
  });
});
