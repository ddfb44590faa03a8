import { z } from 'zod';
import { KnownGoodError } from '../errors';
import { parsePythonJson } from '../json';
import { importedModules, probeSource } from '../probes/sources';
import { shellQuote } from '../quote';
import type { Transport } from '../transport/types';

/*
 * "Record Launches of This Run…": python/kg_record.py put on the host (with the python/ modules it imports, so that it
 * runs by hand from where it lies) and the one line to put in front of a launch. Core only: the command in
 * src/whatChanged/ asks the questions and shows the answer.
 */

/** Where kg_record.py goes on the host unless the person names another folder: `~` is the remote home. */
export const KG_RECORD_DIR = '~/.known-good/bin';

/** kg_record.py and every python/ module it imports (kg_common too), as file name → source. */
export function kgRecordFiles(): Record<string, string> {
  const names = ['kg_record', 'kg_common', ...importedModules('kg_record')];
  return Object.fromEntries([...new Set(names)].map((n) => [`${n}.py`, probeSource(n).source]));
}

// Run on the host with the folder (`~` expanded there) and `copy` or `check`: with `copy`, stdin holds the files as
// JSON, each written whole beside the others (temp file, then rename: a launch that starts meanwhile never reads half
// a module). Prints where kg_record.py lies and whether it is there.
const PLACE = `
import json, os, sys, tempfile
dest = os.path.abspath(os.path.expanduser(sys.argv[1]))
copied = []
if sys.argv[2] == "copy":
    files = json.loads(sys.stdin.read())
    os.makedirs(dest, mode=0o755, exist_ok=True)
    for name, text in sorted(files.items()):
        if "/" in name or name.startswith(".") or not name.endswith(".py"):
            raise SystemExit("not a module name: %r" % name)
        fd, tmp = tempfile.mkstemp(dir=dest, prefix="." + name + ".")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(dest, name))
        copied.append(name)
script = os.path.join(dest, "kg_record.py")
print(json.dumps({"dir": dest, "script": script, "present": os.path.isfile(script), "copied": copied}))
`;

const placeSchema = z.object({
  dir: z.string(),
  script: z.string(),
  present: z.boolean(),
  copied: z.array(z.string()),
});
export type KgRecordPlace = z.infer<typeof placeSchema>;

/** Where kg_record.py is (or goes) on the host; with `copy`, copies it and its modules there first. */
export async function placeKgRecord(
  transport: Transport,
  python: string,
  o: { copy: boolean; dir?: string; signal?: AbortSignal },
): Promise<KgRecordPlace> {
  const r = await transport.exec([python, '-c', PLACE, o.dir ?? KG_RECORD_DIR, o.copy ? 'copy' : 'check'], {
    ...(o.copy ? { stdin: JSON.stringify(kgRecordFiles()) } : {}),
    timeoutMs: 30_000,
    ...(o.signal ? { signal: o.signal } : {}),
  });
  const last = r.stdout.trim().split('\n').pop() ?? '';
  let parsed: unknown;
  try {
    parsed = parsePythonJson(last);
  } catch {
    parsed = undefined;
  }
  const p = placeSchema.safeParse(parsed);
  if (r.exitCode !== 0 || !p.success)
    throw new KnownGoodError(
      'probe-failed',
      `kg_record.py could not be ${o.copy ? 'copied to' : 'looked for on'} the host (${python} exit ${r.exitCode ?? r.exitSignal ?? '?'}): ${r.stderr.trim().split('\n').pop() ?? ''}`,
    );
  return p.data;
}

export interface RecordLines {
  /** What to put in front of the launch, ending in `--`. */
  prefix: string;
  plain: string;
  torchrun: string;
  accelerate: string;
}

/**
 * The line to put in front of a launch, and its torchrun/accelerate forms: the interpreter and the paths quoted for
 * the host's shell (shellQuote), kg_record's own flags as they are so that the line reads as a person would type it.
 */
export function recordLines(o: { python: string; script: string; run: string; home: boolean }): RecordLines {
  const prefix = `${shellQuote(o.python)} ${shellQuote(o.script)} --run ${shellQuote(o.run)}${o.home ? ' --home' : ''} --`;
  return {
    prefix,
    plain: `${prefix} python train.py …`,
    torchrun: `${prefix} torchrun --nproc_per_node=8 train.py …`,
    accelerate: `${prefix} accelerate launch train.py …`,
  };
}

/** What kg_record.py records and where, with the lines: the document the command opens. */
export function recordSetupText(o: {
  host: string;
  run: string;
  place: KgRecordPlace;
  home: boolean;
  lines: RecordLines;
}): string {
  const where = o.home
    ? `~/.known-good/runs/HASH/launches.jsonl on ${o.host}, HASH from the run's real path (nothing is written in the run folder)`
    : `${o.run}/.known-good/launches.jsonl on ${o.host}`;
  return [
    `# Record launches of ${o.run}`,
    '',
    'Put this in front of the command that starts (or restarts) the training:',
    '',
    `    ${o.lines.plain}`,
    '',
    'The same in front of torchrun or accelerate launch (one record a launch, not one a rank):',
    '',
    `    ${o.lines.torchrun}`,
    `    ${o.lines.accelerate}`,
    '',
    `kg_record.py ${o.place.present ? 'is at' : 'is NOT yet at'} ${o.place.script}${o.place.copied.length ? ` (copied now: ${o.place.copied.join(', ')})` : ''}.`,
    '',
    '## What it records',
    '',
    [
      'One line a launch, before the command starts: the time, the command line, the working folder, the environment',
      '(secrets redacted on the host: tokens, passwords, keys), the interpreter and its version, the torch build (read',
      "from torch/version.py, torch is never imported), the installed packages, git HEAD and a hash of the script's",
      'uncommitted diff, the GPUs and driver (nvidia-smi), and for accelerate launch the launch config it reads.',
    ].join(' '),
    '',
    `Where: ${where}.`,
    '',
    '## What it changes',
    '',
    [
      'Nothing in the launch: it replaces itself with the command (exec: same process, exit code, signals, stdin and',
      'terminal). Its facts are bounded by --timeout (1 s by default); a fact that fails is named in the record, and a',
      'record that cannot be written costs one line on stderr, never the launch.',
    ].join(' '),
    '',
    [
      'With nvidia-smi on the host it also samples the GPUs every 5 s for as long as the command runs (--gpu-interval,',
      '0 for none): clocks, power, temperature, throttle reasons, PCIe link, ECC and the processes on each GPU, into',
      'gpu-timeline.jsonl beside the records (at most 64 MiB: --gpu-cap). The sampler is a process of its own that',
      'stops when the command ends; What Changed? reads it for the hardware causes (docs/hardware.md).',
    ].join(' '),
    '',
    [
      'What Changed? compares consecutive launches around each restart: a changed flag, environment variable,',
      'interpreter, torch, driver, package or launch config becomes a ranked suspect with both records as evidence.',
    ].join(' '),
    '',
  ].join('\n');
}
