import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { cliCommands } from '../../src/cli/commands';
import { commandHelp, hostOptions, optionsOf, parseCommandLine, type CliOption } from '../../src/cli/options';

const CLI = ['--import', 'tsx', 'src/cli/main.ts'];
const cli = (...argv: string[]) => spawnSync(process.execPath, [...CLI, ...argv], { encoding: 'utf8' });

/** `--json` but not `--jsonl`: an option's spelling as a whole word. */
const spelled = (name: string) => new RegExp(`(^|[\\s,\\[(])--${name}(?![\\w-])`);

const everyOption = [...new Set(cliCommands.flatMap((c) => optionsOf(c).map((o) => o.name)))];

/** A word the option takes: valid for its parser. */
function sampleValue(o: CliOption): string[] {
  if (o.kind === 'flag') return [`--${o.name}`];
  const value: Record<string, string> = {
    container: 'docker:trainer',
    timeout: '7',
    repeats: '5',
    steps: '40',
    threshold: '0.2',
    'run-timeout': '90',
    gpus: '0,1',
  };
  return [`--${o.name}`, value[o.name] ?? `v-${o.name}`];
}

void describe('every command has its own options table', () => {
  for (const command of cliCommands) {
    void it(`${command.name} --help: its usage and every option of its own, and none of another command's`, () => {
      const text = commandHelp(command);
      assert.ok(text.startsWith(`Usage: known-good ${command.usage}\n`), text);
      const own = optionsOf(command).map((o) => o.name);
      for (const name of own) assert.match(text, spelled(name), `${command.name} --help lacks --${name}`);
      for (const name of everyOption.filter((n) => !own.includes(n)))
        assert.doesNotMatch(text, spelled(name), `${command.name} --help mentions --${name}, not its option`);
      assert.match(text, /-h, --help/);
    });

    void it(`${command.name}: an option of another command is refused, naming it and the command`, () => {
      const own = optionsOf(command).map((o) => o.name);
      const foreign = everyOption.filter((n) => !own.includes(n));
      for (const name of [...foreign, 'no-such-option']) {
        assert.throws(
          () => parseCommandLine(command, ['host', `--${name}`, 'x']),
          (e: Error) => {
            assert.equal(
              e.message,
              `--${name} is not an option of ${command.name} (see known-good ${command.name} --help)`,
            );
            return true;
          },
        );
      }
      assert.throws(() => parseCommandLine(command, ['host', '-x']), /: -x is not an option of /);
    });

    void it(`${command.name}: each of its options is read, and -- passes --x through untouched`, () => {
      const words = optionsOf(command)
        .filter((o) => o.name !== 'help')
        .flatMap(sampleValue);
      const r = parseCommandLine(command, ['host', ...words, 'word', '--', '--x', '--json', '-h', '--']);
      assert.equal(r.help, false);
      assert.deepEqual(r.positional, ['host', 'word']);
      assert.deepEqual(r.rest, ['--x', '--json', '-h', '--']);
      // the host options, and a sample of the commands' own, reach CliOptions under their field names
      assert.deepEqual(r.options.container, { kind: 'docker', id: 'trainer' });
      assert.equal(r.options.identity, 'v-identity');
      assert.equal(r.options.knownHosts, 'v-known-hosts');
      assert.equal(r.options.acceptNew, true);
      assert.equal(r.options.python, 'v-python');
      assert.equal(r.options.timeoutMs, 7000);
      const own = command.options.map((o) => o.name);
      if (own.includes('json')) assert.equal(r.options.json, true);
      if (own.includes('repeats')) assert.equal(r.options.repeats, 5);
      if (own.includes('slurm-conf')) assert.equal(r.options.slurmConf, 'v-slurm-conf');
      if (own.includes('cpu-clock')) assert.equal(r.options.cpuClock, true);
      if (own.includes('key')) assert.deepEqual(r.options.keys, ['v-key']);
      if (own.includes('change')) assert.deepEqual(r.options.changes, ['v-change']);
      if (own.includes('run-timeout')) assert.equal(r.options.runTimeoutS, 90);
      if (own.includes('steps')) assert.equal(r.options.steps, 40);
      if (own.includes('gpus')) assert.deepEqual(r.options.gpus, [0, 1]);
    });
  }
});

void describe('parsing values', () => {
  const command = (name: string) => cliCommands.find((c) => c.name === name)!;

  it('defaults, repeatable --key, -i, --name=value, and a value that starts with -', () => {
    const d = parseCommandLine(command('exec'), ['local', 'true']);
    assert.deepEqual(d.options, { acceptNew: false, python: 'python3', timeoutMs: 60000, json: false });
    assert.deepEqual(d.positional, ['local', 'true']);
    const a = parseCommandLine(command('args'), ['h:/c.pt', '--key', 'lr', '--key=model.dim', '-i', '/k']);
    assert.deepEqual(a.options.keys, ['lr', 'model.dim']);
    assert.equal(a.options.identity, '/k');
    const b = parseCommandLine(command('bisect'), ['h', 'base', '--bench', 'run.sh', '--regex', '-?([0-9.]+) it/s']);
    assert.equal(b.options.regex, '-?([0-9.]+) it/s');
    assert.equal(b.options.bench, 'run.sh');
  });

  it('a value that is missing, a flag given a value, a value its parser refuses', () => {
    assert.throws(() => parseCommandLine(command('exec'), ['h', '--timeout']), /--timeout needs a value/);
    assert.throws(
      () => parseCommandLine(command('exec'), ['h', '--identity', '--', 'true']),
      /--identity needs a value/,
    );
    assert.throws(() => parseCommandLine(command('ls'), ['h', '--json=yes']), /--json takes no value/);
    assert.throws(() => parseCommandLine(command('exec'), ['h', '--timeout', '0']), /--timeout 0: expected a number/);
    assert.throws(() => parseCommandLine(command('bisect'), ['h', 'b', '--repeats', '2']), /--repeats 2: a whole/);
    assert.throws(() => parseCommandLine(command('exec'), ['h', '--container', 'podman:x']), /expected pct/);
  });

  it('--help or -h before -- asks for help whatever else is there; after -- it is the command’s', () => {
    assert.equal(parseCommandLine(command('ls'), ['--help']).help, true);
    assert.equal(parseCommandLine(command('ls'), ['h', '--packages', '-h']).help, true);
    const r = parseCommandLine(command('exec'), ['h', '--', 'grep', '--help']);
    assert.equal(r.help, false);
    assert.deepEqual(r.rest, ['grep', '--help']);
  });

  it('the host options are every command’s', () => {
    for (const c of cliCommands)
      for (const o of hostOptions) assert.ok(optionsOf(c).includes(o), `${c.name} ${o.name}`);
  });
});

void describe('the CLI', () => {
  it('known-good CMD --help and -h: that command’s help on stdout, exit 0', () => {
    for (const c of cliCommands) {
      const r = cli(c.name, '--help');
      assert.equal(r.status, 0, `${c.name} --help: ${r.stderr}`);
      assert.equal(r.stdout, commandHelp(c));
      assert.equal(r.stderr, '');
    }
    const bisect = cliCommands.find((c) => c.name === 'bisect')!;
    const short = cli('bisect', 'gpu-box', '-h');
    assert.equal(short.status, 0, short.stderr);
    assert.equal(short.stdout, commandHelp(bisect));
    assert.equal(cli('help', 'bisect').stdout, commandHelp(bisect));
  });

  it('known-good --help lists every command; an option of another command exits 2 with the message', () => {
    const r = cli('--help');
    assert.equal(r.status, 0);
    for (const c of cliCommands) assert.ok(r.stdout.includes(`known-good ${c.usage}`), c.name);
    const bad = cli('ls', 'local', '--packages');
    assert.equal(bad.status, 2);
    assert.equal(bad.stdout, '');
    assert.equal(bad.stderr, 'known-good ls: --packages is not an option of ls (see known-good ls --help)\n');
  });
});
