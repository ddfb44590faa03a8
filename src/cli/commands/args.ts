import { ckptArgsProbe, type CkptArgs } from '../../core/args/argsProbe';
import { diffArgs } from '../../core/args/diff';
import { changedArgs, checkpointLabel, renderArgsDocument } from '../../core/args/render';
import { KnownGoodError, messageOf } from '../../core/errors';
import type { HostSession } from '../../core/registry';
import type { CliCommand, CliContext } from './types';
import { jsonOption, valued, type CliOption } from '../options';
import { printable, printableLines, printableTree } from '../output';

async function readArgs(session: HostSession, path: string, ctx: CliContext): Promise<CkptArgs> {
  const call = ckptArgsProbe(path, { keys: ctx.options.keys ?? [] });
  return (await session.probes.run(call, { timeoutMs: ctx.options.timeoutMs })).value;
}

/** JSON for scripts: NaN and ±Infinity kept as Python writes them (JSON.stringify would turn them into null). */
export function jsonOut(value: unknown): string {
  const text = JSON.stringify(
    value,
    (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? `\u0000${String(v)}\u0000` : v),
    2,
  );
  return text.replace(/"\\u0000(NaN|Infinity|-Infinity)\\u0000"/g, '$1');
}

const argsOptions: readonly CliOption[] = [
  valued('key', 'KEY', 'the key(s) to show (repeatable; a.b reaches inside)', (o, v) => (o.keys ??= []).push(v)),
  jsonOption('JSON, NaN and Infinity kept as Python writes them'),
];

export const argsCommand: CliCommand = {
  name: 'args',
  usage: 'args HOST:PATH [--key K]… [--json]',
  summary: "a checkpoint's args, read safely (no torch, no weights, nothing run)",
  options: argsOptions,
  async run(ctx) {
    const { session, path, out } = ctx;
    if (!path) throw new KnownGoodError('settings', 'args: give the checkpoint as HOST:/path/to/checkpoint');
    const r = await readArgs(session, path, ctx);
    if (ctx.options.json) out.write(jsonOut(r) + '\n');
    else out.write(renderArgsDocument(printableTree(r), { host: printable(session.label), capturedAt: new Date() }));
    return 0;
  },
};

export const diffCommand: CliCommand = {
  name: 'diff',
  usage: 'diff HOST:A HOST:B [--key K]… [--json]',
  summary: 'the args that differ between two checkpoints (exit 0 same, 1 differ, 2 trouble)',
  options: argsOptions,
  async run(ctx) {
    const { session, path, positional, out, err } = ctx;
    const second = positional[0];
    if (!path || !second) throw new KnownGoodError('settings', 'diff: give two checkpoints: HOST:/a.pt HOST:/b.pt');
    const other = ctx.open(second);
    if (!other.path) throw new KnownGoodError('settings', `diff: ${second} has no path (HOST:/path)`);
    let a: CkptArgs;
    let b: CkptArgs;
    try {
      [a, b] = await Promise.all([readArgs(session, path, ctx), readArgs(other.session, other.path, ctx)]);
    } catch (e) {
      err.write(`known-good diff: ${printableLines(messageOf(e))}\n`);
      return 2;
    }
    const d = diffArgs(a.args, b.args);
    const differ = d.changed.length + d.added.length + d.removed.length > 0;
    if (ctx.options.json) {
      out.write(
        jsonOut({ a: { host: session.label, path }, b: { host: other.session.label, path: other.path }, ...d }) + '\n',
      );
    } else {
      const sameHost = session.label === other.session.label;
      const label = (p: string, host: string) =>
        printable(sameHost ? checkpointLabel(p) : `${checkpointLabel(p)} (${host})`);
      const labels = { a: label(path, session.label), b: label(other.path, other.session.label) };
      out.write(changedArgs(printableTree(a.args), printableTree(b.args), labels));
      for (const [side, r] of [
        ['A', a],
        ['B', b],
      ] as const) {
        for (const w of r.warnings) if (w.startsWith('UNSAFE')) err.write(`warning (${side}): ${printable(w)}\n`);
      }
    }
    return differ ? 1 : 0;
  },
};
