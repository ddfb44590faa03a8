import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { BenchRunOutcome, ProbeRunOutcome } from '../../../src/api';
import { activated, setSetting, testSshHost, waitFor } from './helpers';

describe('Terminal: Run Probe… and the throughput benchmark', function () {
  this.timeout(240_000);
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kg-term-'));
    const api = await activated();
    const sshd = testSshHost();
    // /usr/bin/python3 has Debian's torch: the benchmark needs it; the probes do not care.
    await setSetting('hosts', [
      {
        name: 'test-sshd',
        host: '127.0.0.1',
        port: sshd.port,
        user: sshd.user,
        identityFile: sshd.identityFile,
        python: '/usr/bin/python3',
        roots: [dir],
      },
    ]);
    await waitFor('the SSH host', () => (api.registry.hosts().some((h) => h.name === 'test-sshd') ? true : undefined));
  });
  after(async () => {
    await setSetting('hosts', undefined);
    await setSetting('benchmark.command', undefined);
    await setSetting('benchmark.throughputJsonl', undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  function sshHostId(api: Awaited<ReturnType<typeof activated>>): string {
    const h = api.registry.hosts().find((x) => x.name === 'test-sshd');
    assert.ok(h);
    return h.id;
  }

  it('Run Probe… runs GPU status in a terminal named after it and hands back the framed result', async () => {
    const api = await activated();
    const out = await vscode.commands.executeCommand<ProbeRunOutcome>(
      'knownGood.probes.run',
      { hostId: sshHostId(api) },
      'gpuStatus',
    );
    assert.ok(out, 'no outcome');
    assert.equal(out.terminalName, 'Known Good: GPU status @ test-sshd');
    assert.ok(
      vscode.window.terminals.some((t) => t.name === 'Known Good: GPU status @ test-sshd'),
      `terminals: ${vscode.window.terminals.map((t) => t.name).join(', ')}`,
    );
    assert.equal(out.exit.exitCode, 0, out.screen);
    assert.equal((out.result as { source: string }).source, 'none');
    assert.match(out.screen, /^\S*\$ \/usr\/bin\/python3 -u -c <loader> <python\/gpu_status\.py/);
    assert.match(out.screen, /nvidia-smi not found/);
    assert.match(out.screen, /── GPU status ──\r\nno nvidia-smi on this host/);
    assert.doesNotMatch(out.screen, /KNOWN-GOOD-BEGIN/);
  });

  it('Run Probe… on a root lists its runs', async () => {
    const api = await activated();
    const run = join(dir, 'run-a', 'step_100');
    mkdirSync(run, { recursive: true });
    writeFileSync(join(run, 'model.safetensors'), Buffer.alloc(64));
    const out = await vscode.commands.executeCommand<ProbeRunOutcome>(
      'knownGood.probes.run',
      { kind: 'root', hostId: sshHostId(api), remotePath: dir },
      'listRuns',
    );
    assert.ok(out);
    assert.equal(out.terminalName, 'Known Good: List runs @ test-sshd');
    assert.equal(out.exit.exitCode, 0, out.screen);
    assert.match(out.screen, /run-a/);
    assert.match(out.screen, /step_100|100/);
  });

  it('the benchmark result is kept and compared with the baseline run', async () => {
    const api = await activated();
    const host = { hostId: sshHostId(api) };
    const first = await vscode.commands.executeCommand<BenchRunOutcome>('knownGood.bench.run', host, {
      config: 'tiny',
      label: 'good-run',
    });
    assert.ok(first?.file, first?.error ?? first?.screen);
    assert.equal(first.terminalName, 'Known Good: Throughput benchmark @ test-sshd');
    // What runs, in words, first; then a command a person can copy (not the packed script).
    assert.match(
      first.screen,
      /Known Good benchmark: cpu, 6 timed steps after a first step and 1 warm-up \(8 in all\)/,
    );
    assert.match(first.screen, /\$ \S+ -u throughput_bench\.py --device cpu {2}# /);
    assert.match(first.screen, /step \d+\/\d+ .* tok\/s/);
    assert.match(first.screen, /kept with the baselines of test-sshd as "good-run"/);
    assert.ok((first.tokensPerSec ?? 0) > 0);

    const second = await vscode.commands.executeCommand<BenchRunOutcome>('knownGood.bench.run', host, {
      config: '{"device": "cpu", "layers": 1}',
      label: 'now',
    });
    assert.ok(second?.file, second?.error ?? second?.screen);
    const doc = await vscode.commands.executeCommand<{ uri: string; text: string }>(
      'knownGood.bench.compareWithBaseline',
      host,
      { reference: 'good-run' },
    );
    assert.ok(doc);
    assert.match(doc.text, /tok\/s now vs [\d.]+K? tok\/s at baseline "good-run" \([\d.]+×\)/);
    assert.match(doc.text, /- layers: 1 \(baseline 2\)/);
    await waitFor('the comparison document', () =>
      vscode.window.visibleTextEditors.some((e) => e.document.uri.toString() === doc.uri) ? true : undefined,
    );
  });

  it('your own benchmark command: throughput by regex, then by jsonl key', async () => {
    const api = await activated();
    const host = { hostId: sshHostId(api) };
    await setSetting('benchmark.command', 'for i in 1 2 3 4; do echo "step $i loss 2.1 | $((i * 1000)) tok/s"; done');
    const byRegex = await vscode.commands.executeCommand<BenchRunOutcome>('knownGood.bench.runCustom', host, {
      label: 'regex',
    });
    assert.equal(byRegex?.tokensPerSec, 2500, byRegex?.error ?? byRegex?.screen);
    assert.equal(byRegex.terminalName, 'Known Good: Benchmark command @ test-sshd');

    const log = join(dir, 'metrics.jsonl');
    await setSetting(
      'benchmark.command',
      `for i in 1 2 3; do echo "{\\"step\\": $i, \\"perf\\": {\\"tok_per_s\\": $((i * 300))}}" >> ${log}; done; printf '{"step": 4, "perf": {"tok' >> ${log}`,
    );
    await setSetting('benchmark.throughputJsonl', log);
    await setSetting('benchmark.throughputKey', 'perf.tok_per_s');
    const byJsonl = await vscode.commands.executeCommand<BenchRunOutcome>('knownGood.bench.runCustom', host, {
      label: 'jsonl',
    });
    assert.equal(byJsonl?.tokensPerSec, 600, byJsonl?.error ?? byJsonl?.screen);
    await setSetting('benchmark.throughputKey', undefined);
  });
});
