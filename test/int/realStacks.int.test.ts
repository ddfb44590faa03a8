import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ArgValue, CkptArgs } from '../../src/core/args/argsProbe';
import { ArgsReader } from '../../src/core/args/reader';
import { checkpointOfEntry, type CheckpointRef } from '../../src/core/args/target';
import { findMetricsLog, joinRemote } from '../../src/core/dashboard/sources';
import { metricsReduceProbe, type MetricsReduction } from '../../src/core/metrics/metricsProbe';
import { ProbeRunner } from '../../src/core/probes/runner';
import { listRunsProbe, type RootListing, type RunsListing } from '../../src/core/runs/listRuns';
import { childrenOf, rootNode, type EntryNode, type RunsNode } from '../../src/core/runs/model';
import { SshPool } from '../../src/core/transport/ssh';
import { endpointOf, recordingPrompts, sshOptions } from '../support/hosts';
import { startSshd, type TestSshd } from '../support/sshd';

/*
 * Artifacts written by the real libraries on a GPU box (test/fixtures/real/, ground_truth.json from the libraries
 * themselves) read over a real OpenSSH sshd with the code the extension runs: the list_runs probe and the tree model
 * for listing, checkpointOfEntry + ArgsReader for args, findMetricsLog + the metrics_reduce probe for the dashboard.
 *
 * Not asserted here:
 * - accelerate: only the custom_checkpoint_0.pkl values, not the folder's other files (random states, optimizer).
 * - an enum's member name when the pickle holds only its class and value (Python ≥ 3.11.7 pickles by value): the
 *   class and value are compared; the name is not in the file and is never guessed by running code.
 * - `accelerator_config` carries its `$class`: compared apart from that.
 * - DCP: the ground truth has key names only, so values are not compared.
 */

const REAL = join(__dirname, '..', 'fixtures', 'real');
const TRUTH = JSON.parse(readFileSync(join(REAL, 'ground_truth.json'), 'utf8')) as GroundTruth;
const STACKS = ['lightning', 'hf', 'accelerate', 'peft', 'dcp', 'torch', 'tensorboard'] as const;
type Stack = (typeof STACKS)[number];

interface Scalars {
  scalars: Record<string, [number, number, number][]>;
  tensors?: Record<string, [number, number, number][]>;
}
interface GroundTruth {
  lightning: {
    versions: Record<
      string,
      {
        checkpoints: Record<
          string,
          { epoch: number; global_step: number; hyper_parameters: Record<string, unknown>; keys: string[] }
        >;
        metrics_csv_rows: Record<string, string>[];
      }
    >;
  };
  hf_trainer: {
    checkpoints: Record<string, { args_type: string; global_step: number; log_history: Record<string, number>[] }>;
    to_dict: Record<string, unknown>;
    tensorboard_files: string[];
  };
  accelerate: { folders: Record<string, { custom: Record<string, Record<string, unknown>>; files: string[] }> };
  peft: Record<string, { adapter_config_json: Record<string, unknown> }>;
  dcp: Record<string, { keys: string[] }>;
  torch_save: Record<
    string,
    {
      args_repr: Record<string, string>;
      legacy: boolean;
      class: Record<string, string>;
      enum: Record<string, { name: string; value: number }>;
    }
  >;
  tensorboard: Record<string, Scalars>;
}

const REDACTED = /^<redacted sha256:[0-9a-f]+>$/;
const unquote = (repr: string) => repr.replace(/^'(.*)'$/, '$1');

/** The secrets the fixtures hold in clear, taken from the ground truth. */
function secretsOfTruth(): string[] {
  const lightning = Object.values(TRUTH.lightning.versions)[0]!;
  const wandb = String(Object.values(lightning.checkpoints)[0]!.hyper_parameters['wandb_api_key']);
  const accel = Object.values(TRUTH.accelerate.folders)[0]!.custom['custom_checkpoint_0.pkl']!;
  const torchArgs = Object.values(TRUTH.torch_save)[0]!.args_repr;
  // The Trainer's to_dict() masks hub_token as <HUB_TOKEN>; the pickled TrainingArguments holds the one the script
  // passed, the same fake token the torch files carry.
  const hubToken = unquote(torchArgs['hub_token']!);
  const url = /^https:\/\/[^:]+:(.*)@[^@]*\?token=(.*)$/.exec(unquote(torchArgs['data_url']!))!;
  const secrets = [wandb, String(accel['wandb_api_key']), hubToken, url[1]!, url[2]!];
  assert.ok(
    secrets.every((s) => s.length >= 8),
    'a secret of the ground truth was not found',
  );
  return [...new Set(secrets)];
}
const SECRETS = secretsOfTruth();

function allFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? allFiles(join(dir, d.name)) : [join(dir, d.name)],
  );
}

/** Everything that came back from the host, to check for secrets at the end. */
const seen: { what: string; text: string }[] = [];
function keep(what: string, value: unknown): void {
  seen.push({ what, text: typeof value === 'string' ? value : JSON.stringify(value) });
}

describe('real training stacks (test/fixtures/real) over the real sshd, as the extension reads them', () => {
  let sshd: TestSshd;
  let pool: SshPool;
  let runner: ProbeRunner;
  let reader: ArgsReader;
  let listing: RunsListing;
  const tmp = mkdtempSync(join(tmpdir(), 'kg-real-stacks-'));
  const roots = Object.fromEntries(STACKS.map((s) => [s, join(tmp, s)])) as Record<Stack, string>;
  const rootOf = (s: Stack): RootListing => listing.roots.find((r) => r.path === roots[s])!;

  before(async () => {
    for (const s of STACKS) cpSync(join(REAL, s), roots[s], { recursive: true });
    sshd = await startSshd();
    pool = new SshPool(sshOptions(sshd, recordingPrompts().prompts));
    runner = new ProbeRunner(pool.transport(endpointOf(sshd), 'test-sshd'), { python: 'python3', timeoutMs: 60000 });
    reader = new ArgsReader({
      host: () => ({ label: 'test-sshd', probes: runner }),
      allowTorchLoad: () => false,
      confirmUnsafeLoad: () => Promise.reject(new Error('must not be asked: the safe reader reads every stack')),
    });
    // The tree's call: every root of the host in one listing, at the probe's default depth (src/container.ts asks 3).
    listing = (await runner.run(listRunsProbe(STACKS.map((s) => roots[s])))).value;
    keep('listing', listing);
  });

  after(async () => {
    runner?.dispose();
    pool?.dispose();
    await sshd?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** The tree's node at `labels` below the root node of a stack (each step: the child with that label). */
  function nodeAt(stack: Stack, ...labels: string[]): RunsNode {
    let node: RunsNode = rootNode('test-sshd', rootOf(stack));
    for (const label of labels) {
      const kids = childrenOf(node, { newestFirst: false });
      const next = kids.find((k) => k.label === label);
      assert.ok(next, `${stack}: no "${label}" below "${node.label}" (has ${kids.map((k) => k.label).join(', ')})`);
      node = next;
    }
    return node;
  }
  const labelsBelow = (node: RunsNode) => childrenOf(node, { newestFirst: false }).map((n) => n.label);
  /** A Lightning checkpoint's node: its run (the stack's root here) lists every version's checkpoints itself. */
  const lightningCheckpointAt = (path: string): RunsNode => {
    const rel = relative('lightning', path);
    const node = childrenOf(nodeAt('lightning')).find((n) => n.kind === 'checkpoint' && n.entry.path === rel);
    assert.ok(node, `no checkpoint ${rel} below the Lightning run`);
    return node;
  };
  const checkpointsBelow = (node: RunsNode) =>
    childrenOf(node, { newestFirst: false }).filter((n): n is EntryNode => n.kind === 'checkpoint');

  describe('listing: each root recognised at the default depth and named for what it is', () => {
    test('every root lists at depth 3 with its checkpoints counted', () => {
      assert.equal(listing.depth, 3);
      const counts = Object.fromEntries(STACKS.map((s) => [s, [rootOf(s).status, rootOf(s).counts?.checkpoints]]));
      assert.deepEqual(counts, {
        lightning: ['ok', 6],
        hf: ['ok', 2],
        accelerate: ['ok', 4],
        peft: ['ok', 2],
        dcp: ['ok', 2],
        torch: ['ok', 2],
        // TensorBoard logs alone: no checkpoints, but listed, with the event files as metrics
        tensorboard: ['no-checkpoints', 0],
      });
    });

    test('Lightning: one run, its version_N folders with their .ckpt steps in numeric order, metrics.csv and events as metrics', () => {
      const versions = Object.entries(TRUTH.lightning.versions);
      assert.deepEqual(labelsBelow(nodeAt('lightning', 'lightning_logs')), ['version_0', 'version_1']);
      for (const [vdir] of versions) {
        const name = vdir.split('/').pop()!;
        const version = nodeAt('lightning', 'lightning_logs', name);
        // one launch of the run above it (issue 22: a Lightning run is one run), not a run of its own
        assert.equal(version.kind, 'folder');
        assert.match(version.contextValue, /lightning-version/);
        assert.equal(version.entry.layout, 'lightning-version');
        assert.match(version.description ?? '', /^3 checkpoints · last step 6 · /);
        // its checkpoints are listed by the run, not below the version
        assert.ok(!labelsBelow(version).includes('checkpoints'));
        const files = childrenOf(version).filter((n): n is EntryNode => n.kind === 'file');
        const metrics = files.filter((f) => f.entry.role === 'metrics').map((f) => [f.label, f.entry.format]);
        assert.deepEqual(metrics.sort(), [
          [files.find((f) => f.label.startsWith('events.out.tfevents'))!.label, 'tensorboard'],
          ['metrics.csv', 'csv'],
        ]);
        assert.equal(files.find((f) => f.label === 'hparams.yaml')?.entry.role, 'config');
      }
      // the run lists the checkpoints of both versions in one numeric order; both hold each name, so each is labelled
      // with its version
      const ckpts = checkpointsBelow(nodeAt('lightning'));
      const want = versions
        .flatMap(([vdir, v]) => Object.entries(v.checkpoints).map(([p, w]) => ({ vdir, p, w })))
        .sort((a, b) => a.w.global_step - b.w.global_step || a.vdir.localeCompare(b.vdir));
      assert.deepEqual(
        ckpts.map((c) => [c.label, c.entry.step, c.entry.epoch]),
        want.map(({ vdir, p, w }) => [`${vdir.split('/').pop()}/${p.split('/').pop()}`, w.global_step, w.epoch]),
      );
      for (const c of ckpts) {
        assert.match(c.contextValue, /^checkpoint;file;format-lightning$/);
        assert.match(c.description ?? '', /^version_\d · epoch 0 · step \d+ · /);
      }
    });

    test('Hugging Face Trainer: checkpoint-N folders (hf) by step; trainer_state.json and runs/ events as metrics', () => {
      const run = nodeAt('hf', 'run-hf');
      const ckpts = checkpointsBelow(run);
      const want = Object.entries(TRUTH.hf_trainer.checkpoints).sort((a, b) => a[1].global_step - b[1].global_step);
      assert.deepEqual(
        ckpts.map((c) => [c.label, c.entry.step, c.entry.format]),
        want.map(([p, w]) => [p.split('/').pop(), w.global_step, 'hf']),
      );
      assert.equal(ckpts[0]!.contextValue, 'checkpoint;dir;format-hf');
      const state = childrenOf(ckpts[1]!).find((n) => n.label === 'trainer_state.json') as EntryNode;
      assert.deepEqual([state.entry.role, state.entry.format], ['metrics', 'hf-trainer-state']);
      const tb = TRUTH.hf_trainer.tensorboard_files[0]!.split('/');
      const events = nodeAt('hf', 'run-hf', 'runs', tb.at(-2)!, tb.at(-1)!) as EntryNode;
      assert.deepEqual([events.entry.role, events.entry.format], ['metrics', 'tensorboard']);
    });

    test('accelerate: checkpoints/checkpoint_N (a save counter) and step_N folders, in numeric order', () => {
      const auto = checkpointsBelow(nodeAt('accelerate', 'run-auto', 'checkpoints'));
      assert.deepEqual(
        auto.map((c) => [c.label, c.entry.format, c.entry.step, c.entry.stepIsIndex]),
        [
          ['checkpoint_0', 'accelerate', 0, true],
          ['checkpoint_1', 'accelerate', 1, true],
        ],
      );
      // step_100 after step_50: numbers, not text
      const named = checkpointsBelow(nodeAt('accelerate', 'run-named'));
      assert.deepEqual(
        named.map((c) => [c.label, c.entry.format, c.entry.step, c.entry.stepIsIndex]),
        [
          ['step_50', 'accelerate', 50, undefined],
          ['step_100', 'accelerate', 100, undefined],
        ],
      );
      for (const c of [...auto, ...named]) assert.equal(c.contextValue, 'checkpoint;dir;format-accelerate');
      // checkpoint_1 holds step 100 (its custom_checkpoint_0.pkl says so): the counter is not shown as a step
      for (const c of auto) {
        assert.doesNotMatch(c.description ?? '', /step/);
        assert.match(c.tooltip ?? '', new RegExp(`save ${c.entry.step} of the run, not a training step`));
      }
      assert.doesNotMatch(nodeAt('accelerate', 'run-auto').description ?? '', /step/);
      assert.deepEqual(
        named.map((c) => /^step \d+/.exec(c.description ?? '')?.[0]),
        ['step 50', 'step 100'],
      );
      assert.match(nodeAt('accelerate', 'run-named').description ?? '', /^2 checkpoints · last step 100 · /);
      for (const [folder, want] of Object.entries(TRUTH.accelerate.folders)) {
        const node = nodeAt('accelerate', ...relative('accelerate', folder).split('/'));
        assert.deepEqual(labelsBelow(node), want.files);
      }
    });

    test('peft: adapter folders (peft) by step', () => {
      const ckpts = checkpointsBelow(nodeAt('peft', 'run-lora'));
      assert.deepEqual(
        ckpts.map((c) => [c.label, c.entry.format, c.entry.step]),
        Object.keys(TRUTH.peft)
          .map((p) => p.split('/').pop()!)
          .map((n) => [n, 'peft', Number(n.split('-')[1])]),
      );
      assert.equal(
        (childrenOf(ckpts[0]!).find((n) => n.label === 'adapter_config.json') as EntryNode).entry.role,
        'config',
      );
    });

    test('DCP: step_N folders (dcp) with their .metadata and shards', () => {
      const ckpts = checkpointsBelow(nodeAt('dcp', 'run-dcp'));
      assert.deepEqual(
        ckpts.map((c) => [c.label, c.entry.format, c.entry.step]),
        [
          ['step_10', 'dcp', 10],
          ['step_20', 'dcp', 20],
        ],
      );
      assert.deepEqual(labelsBelow(ckpts[0]!), ['.metadata', '__0_0.distcp']);
    });

    test('torch.save: step_N.pt files (torch), numeric order', () => {
      const ckpts = checkpointsBelow(nodeAt('torch', 'run-plain'));
      assert.deepEqual(
        ckpts.map((c) => [c.label, c.entry.format, c.entry.step]),
        Object.keys(TRUTH.torch_save).map((p) => {
          const n = p.split('/').pop()!;
          return [n, 'torch', Number(/\d+/.exec(n)![0])];
        }),
      );
      assert.equal(ckpts[0]!.contextValue, 'checkpoint;file;format-torch');
    });

    test('TensorBoard: event files are metrics (tensorboard), their folders runs the dashboard opens', () => {
      for (const run of ['run-tb', 'run-tb-v2']) {
        const node = nodeAt('tensorboard', run);
        assert.equal(node.kind, 'run');
        const files = childrenOf(node) as EntryNode[];
        assert.equal(files.length, 1);
        assert.deepEqual([files[0]!.entry.role, files[0]!.entry.format], ['metrics', 'tensorboard']);
        assert.match(files[0]!.contextValue, /\bmetrics\b/);
      }
    });
  });

  describe('args: one checkpoint of each stack through checkpointOfEntry + ArgsReader, against the ground truth', () => {
    const read = async (node: RunsNode): Promise<{ ref: CheckpointRef; args: CkptArgs; doc: string }> => {
      assert.ok(node.kind === 'checkpoint', `${node.label} is not a checkpoint`);
      const ref = checkpointOfEntry(node.hostId, node.root, node.entry);
      const { result } = await reader.read(ref);
      const doc = await reader.document(ref);
      keep(ref.path, result);
      keep(`${ref.path} (document)`, doc);
      return { ref, args: result, doc };
    };
    const obj = (v: ArgValue | undefined) => v as Record<string, ArgValue>;

    test('Lightning .ckpt: hyper_parameters, step and epoch; wandb_api_key redacted', async () => {
      const [vdir, v] = Object.entries(TRUTH.lightning.versions)[1]!;
      const [cpath, want] = Object.entries(v.checkpoints)[1]!;
      const node = lightningCheckpointAt(cpath);
      const { args, doc } = await read(node);
      assert.equal(args.format, 'lightning');
      assert.equal(args.key, 'hyper_parameters');
      assert.deepEqual([args.step, args.epoch], [want.global_step, want.epoch]);
      assert.deepEqual([...args.topLevelKeys].sort(), [...want.keys].sort());
      const hp = obj(args.args);
      const truth = want.hyper_parameters;
      for (const k of ['betas', 'dataset', 'hidden', 'lr']) assert.deepEqual(hp[k], truth[k], `${vdir} ${k}`);
      assert.ok(str(hp['layer_cls']).includes(String(truth['layer_cls'])), str(hp['layer_cls']));
      assert.match(str(hp['wandb_api_key']), REDACTED);
      assert.match(doc, /"wandb_api_key": "<redacted sha256:[0-9a-f]+>"/);
    });

    test('Lightning: the two versions differ in dataset and lr (what Compare shows)', async () => {
      const [a, b] = Object.values(TRUTH.lightning.versions).map((v) => Object.entries(v.checkpoints)[2]!);
      const refs = [a!, b!].map(([p]) => {
        const node = lightningCheckpointAt(p);
        assert.ok(node.kind === 'checkpoint', p);
        return checkpointOfEntry(node.hostId, node.root, node.entry);
      });
      const changed = await reader.changed(refs[0]!, refs[1]!);
      keep('changed', changed);
      const hpA = a![1].hyper_parameters;
      const hpB = b![1].hyper_parameters;
      const differ = Object.keys(hpA).filter((k) => JSON.stringify(hpA[k]) !== JSON.stringify(hpB[k]));
      assert.deepEqual(differ.sort(), ['dataset', 'lr']);
      for (const k of differ)
        assert.match(changed, new RegExp(`^\\s*${k}: .*${String(hpA[k])}.*${String(hpB[k])}`, 'm'));
      assert.doesNotMatch(changed, /wandb|hidden|betas/);
    });

    test('HF Trainer checkpoint-N: TrainingArguments as to_dict() has them; hub_token redacted', async () => {
      const [cpath, want] = Object.entries(TRUTH.hf_trainer.checkpoints)[0]!;
      const { args, doc } = await read(nodeAt('hf', ...relative('hf', cpath).split('/')));
      assert.equal(args.format, 'hf-folder');
      assert.equal(args.argsType, want.args_type);
      assert.equal(args.step, want.global_step);
      const got = obj(args.args);
      const truth = TRUTH.hf_trainer.to_dict;
      const apart = new Set(['hub_token', 'accelerator_config']);
      const compared = Object.keys(truth).filter((k) => !apart.has(k));
      assert.ok(compared.length > 100, `${compared.length} keys compared`);
      // to_dict() gives an enum's value; the reader keeps its class beside it ({"$enum": class, "value": v})
      const plain = (v: ArgValue | undefined) =>
        v !== null && typeof v === 'object' && !Array.isArray(v) && '$enum' in v
          ? (v as Record<string, ArgValue>)['value']
          : v;
      for (const k of compared) assert.deepEqual(plain(got[k]), truth[k], `TrainingArguments.${k}`);
      assert.match(str(obj(got['eval_strategy'])['$enum']), /IntervalStrategy$/);
      const { $class, ...accel } = obj(got['accelerator_config']);
      assert.match(str($class), /AcceleratorConfig$/);
      assert.deepEqual(accel, truth['accelerator_config']);
      assert.equal(truth['hub_token'], '<HUB_TOKEN>'); // to_dict's mask; the file holds the token itself
      assert.match(str(got['hub_token']), REDACTED);
      assert.match(doc, /"hub_token": "<redacted sha256:[0-9a-f]+>"/);
    });

    test('accelerate checkpoint_N: the custom_checkpoint_0.pkl values; wandb_api_key redacted', async () => {
      for (const [folder, want] of Object.entries(TRUTH.accelerate.folders)) {
        const { ref, args } = await read(nodeAt('accelerate', ...relative('accelerate', folder).split('/')));
        const truth = want.custom['custom_checkpoint_0.pkl']!;
        // wherever the reader puts them (today: the pickle's dict is the args)
        const holder = findObjectWith(args.args, 'wandb_api_key');
        assert.ok(holder, `${ref.path}: no custom values in ${JSON.stringify(args.args)}`);
        for (const k of ['dataset', 'grad_accum', 'lr', 'step'])
          assert.deepEqual(holder[k], truth[k], `${folder} ${k}`);
        assert.match(str(holder['wandb_api_key']), REDACTED);
      }
    });

    test('peft adapter folder: adapter_config.json as the args, as PeftConfig wrote it; its base model named', async () => {
      for (const [folder, want] of Object.entries(TRUTH.peft)) {
        const { args, doc } = await read(nodeAt('peft', ...relative('peft', folder).split('/')));
        assert.equal(args.format, 'peft');
        assert.equal(args.key, 'adapter_config');
        assert.deepEqual(args.args, want.adapter_config_json, folder);
        assert.equal(args.baseModel, want.adapter_config_json['base_model_name_or_path'] ?? null);
        assert.match(doc, /^\/\/ base: /m);
        assert.match(doc, /"target_modules": \[\s*"c_attn"\s*\]/);
      }
    });

    test('DCP step_N: the args keys of the ground truth', async () => {
      const [folder, want] = Object.entries(TRUTH.dcp)[0]!;
      const { args } = await read(nodeAt('dcp', ...relative('dcp', folder).split('/')));
      assert.equal(args.format, 'dcp-metadata');
      assert.equal(args.key, 'args');
      const argKeys = want.keys.filter((k) => k.startsWith('args.')).map((k) => k.slice('args.'.length));
      assert.deepEqual(Object.keys(obj(args.args)).sort(), argKeys.sort());
      const top = new Set(want.keys.map((k) => (k.startsWith('args.') ? 'args' : k)));
      assert.deepEqual([...args.topLevelKeys].sort(), [...top].sort());
      assert.equal(args.step, Number(folder.split('_').pop()));
    });

    test('torch.save step_N.pt (zip and legacy): args as their repr; hub_token and URL credentials redacted', async () => {
      for (const [file, want] of Object.entries(TRUTH.torch_save)) {
        const { args } = await read(nodeAt('torch', ...relative('torch', file).split('/')));
        assert.equal(args.format, want.legacy ? 'torch-legacy' : 'torch-zip');
        assert.equal(args.argsType, 'argparse.Namespace');
        const got = obj(args.args);
        assert.equal(got['dataset'], unquote(want.args_repr['dataset']!));
        assert.equal(got['lr'], Number(want.args_repr['lr']));
        assert.equal(got['dtype'], want.args_repr['dtype']);
        // the class named alike in both formats (legacy torch.save pickles a module class with its source)
        assert.ok(str(got['layer_cls']).includes(want.class['layer_cls']!), `${file}: ${str(got['layer_cls'])}`);
        // the enum keeps its class and value (the member name is not in a by-value pickle)
        const [cls, member] = want.enum['sched']!.name.split('.');
        assert.deepEqual(got['sched'], { $enum: `__main__.${cls}`, value: want.enum['sched']!.value }, member);
        assert.match(str(got['hub_token']), REDACTED);
        assert.match(
          str(got['data_url']),
          /^https:\/\/user:<redacted sha256:[0-9a-f]+>@data\.example\.com\/shards\?token=<redacted sha256:[0-9a-f]+>$/,
        );
      }
    });
  });

  describe('metrics: each stack’s log as the dashboard finds and reads it, against the ground truth', () => {
    /** The log the dashboard opens for a run folder, read as Open Dashboard reads it first (a preview). */
    const reduce = async (stack: Stack, ...labels: string[]) => {
      const run = nodeAt(stack, ...labels) as EntryNode;
      const log = findMetricsLog(run.entry);
      assert.ok(log, `${labels.join('/')}: no metrics log found`);
      const path = joinRemote(rootOf(stack).path, log.path);
      const r = (await runner.run(metricsReduceProbe({ path, preview: true }))).value;
      keep(path, r);
      return { log, r };
    };
    const pointCounts = (r: MetricsReduction) => Object.fromEntries(r.series.map((s) => [s.key, s.count]));

    test('Lightning version_N: metrics.csv (csv), one series per column but step', async () => {
      for (const [vdir, v] of Object.entries(TRUTH.lightning.versions)) {
        const { log, r } = await reduce('lightning', 'lightning_logs', vdir.split('/').pop()!);
        assert.equal(log.name, 'metrics.csv');
        assert.equal(r.format, 'csv');
        assert.equal(r.lines, v.metrics_csv_rows.length);
        const columns = Object.keys(v.metrics_csv_rows[0]!).filter((k) => k !== 'step');
        assert.deepEqual(
          pointCounts(r),
          Object.fromEntries(columns.map((k) => [k, v.metrics_csv_rows.filter((row) => row[k] !== '').length])),
        );
        const last = v.metrics_csv_rows.at(-1)!;
        const loss = r.series.find((s) => s.key === 'train_loss')!;
        assert.deepEqual([loss.lastX, loss.lastValue], [Number(last['step']), Number(last['train_loss'])]);
      }
    });

    test('HF Trainer run: its runs/ TensorBoard events, every scalar tag with its point count', async () => {
      const { log, r } = await reduce('hf', 'run-hf');
      assert.equal(log.format, 'tensorboard');
      const file = TRUTH.hf_trainer.tensorboard_files[0]!;
      assert.equal(joinRemote(rootOf('hf').path, log.path), join(tmp, file));
      assert.equal(r.format, 'tensorboard');
      assert.deepEqual(pointCounts(r), countsOf(TRUTH.tensorboard[file]!.scalars));
    });

    test('HF Trainer trainer_state.json (hf-trainer-state): log_history series', async () => {
      const [cpath, want] = Object.entries(TRUTH.hf_trainer.checkpoints).at(-1)!;
      const path = join(tmp, cpath, 'trainer_state.json');
      const r = (await runner.run(metricsReduceProbe({ path }))).value;
      keep(path, r);
      assert.equal(r.format, 'hf-trainer-state');
      const keys = new Set(want.log_history.flatMap((h) => Object.keys(h)).filter((k) => k !== 'step'));
      assert.deepEqual(
        pointCounts(r),
        Object.fromEntries([...keys].map((k) => [k, want.log_history.filter((h) => k in h).length])),
      );
      const loss = r.series.find((s) => s.key === 'loss')!;
      assert.deepEqual(loss.last.at(-1), want.log_history.at(-1)!['loss']);
    });

    test('TensorBoard runs: scalars (v1 summaries) and scalar tensors (v2), counts and last values', async () => {
      for (const run of ['run-tb', 'run-tb-v2']) {
        const { log, r } = await reduce('tensorboard', run);
        const truth = TRUTH.tensorboard[`tensorboard/${run}/${log.name}`]!;
        assert.ok(truth, `${run}/${log.name} not in the ground truth`);
        const series = { ...truth.scalars, ...truth.tensors };
        assert.deepEqual(pointCounts(r), countsOf(series));
        for (const s of r.series) {
          const pts = series[s.key]!;
          assert.equal(s.lastX, pts.at(-1)![1]);
          assert.ok(Math.abs(s.lastValue - pts.at(-1)![2]) < 1e-6, `${run} ${s.key} ${s.lastValue}`);
        }
      }
    });
  });

  test('the fixtures hold each secret in clear, and nothing that came back over SSH does', () => {
    const files = allFiles(tmp).filter((f) => statSync(f).size < 1 << 20);
    const bytes = files.map((f) => readFileSync(f).toString('latin1')).join('\n');
    for (const s of SECRETS) assert.ok(bytes.includes(s), `the fixtures do not hold ${s}`);
    assert.ok(seen.length >= 15, `only ${seen.length} results kept`);
    for (const { what, text } of seen) {
      for (const s of SECRETS) assert.ok(!text.includes(s), `${what} shows a secret in clear (${s.slice(0, 6)}…)`);
      assert.doesNotMatch(text, /FAKE(wandb|fixture|tok)/, what);
    }
  });
});

/** An args value as text: strings as they are, anything else as JSON (a secret must not hide in an object). */
function str(v: ArgValue | undefined): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function countsOf(series: Record<string, [number, number, number][]>): Record<string, number> {
  return Object.fromEntries(Object.entries(series).map(([k, pts]) => [k, pts.length]));
}

function findObjectWith(v: ArgValue, key: string): Record<string, ArgValue> | undefined {
  if (v === null || typeof v !== 'object') return undefined;
  if (!Array.isArray(v) && key in v) return v;
  for (const c of Array.isArray(v) ? v : Object.values(v)) {
    const found = findObjectWith(c, key);
    if (found) return found;
  }
  return undefined;
}
