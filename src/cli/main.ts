import { isKnownGoodError, KnownGoodError, messageOf } from '../core/errors';
import { localHost, resolveEndpoint, type HostSpec } from '../core/hosts';
import { HostRegistry, type HostSession } from '../core/registry';
import { parseSshConfig, readUserSshConfig } from '../core/sshConfig';
import { defaultKnownHostsFile } from '../core/transport/ssh';
import { cliCommands } from './commands';
import type { CliCommand } from './commands/types';
import { commandHelp, HOST_WORDS, hostOptionsHelp, parseCommandLine, type CliOptions } from './options';
import { checkArgvUtf8, exitAfterFlush, guardOutput, printableLines } from './output';
import { terminalPrompts } from './prompts';
import { exitCodeOf, stopOnSignals } from './stop';

export function usage(): string {
  return `known-good — Known Good's core from a terminal

Usage:
${cliCommands.map(commandLine).join('\n')}

${HOST_WORDS}

${hostOptionsHelp()}`;
}

/** One command in the list: its usage, then what it does (on a line of its own when the usage is long). */
function commandLine(c: CliCommand): string {
  const words = `known-good ${c.usage}`;
  return words.length <= 55 ? `  ${words.padEnd(55)} ${c.summary}` : `  ${words}\n  ${''.padEnd(55)} ${c.summary}`;
}

/** `HOST:/abs/path` → host and path; `user@host:2222` stays a host (the part after `:` must start with `/`). */
export function splitHostPath(word: string): { host: string; path?: string } {
  const m = /^([^/]*?):(\/.*)$/s.exec(word);
  return m ? { host: m[1]!, path: m[2]! } : { host: word };
}

export function hostFromCli(host: string, options: CliOptions): HostSpec {
  if (host === 'local') {
    return { ...localHost([], options.python), ...(options.container ? { container: options.container } : {}) };
  }
  const configText = readUserSshConfig();
  const ssh = resolveEndpoint(
    host,
    parseSshConfig(configText),
    options.identity ? { identityFile: options.identity } : {},
  );
  return {
    id: `cli:${host}`,
    name: host,
    source: 'cli',
    ssh,
    ...(options.container ? { container: options.container } : {}),
    python: options.python,
    roots: [],
  };
}

export function openSession(host: string, options: CliOptions): { session: HostSession; registry: HostRegistry } {
  const registry = new HostRegistry({
    commandTimeoutMs: options.timeoutMs,
    ssh: {
      knownHostsFiles: [options.knownHosts ?? defaultKnownHostsFile()],
      connectTimeoutMs: 15000,
      prompts: terminalPrompts(options.acceptNew),
    },
  });
  const spec = hostFromCli(host, options);
  registry.setHosts([spec]);
  return { session: registry.session(spec), registry };
}

async function main(argv: string[]): Promise<number> {
  checkArgvUtf8(argv);
  const [command, ...args] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    const about = command === 'help' && args[0] !== undefined ? commandNamed(args[0]) : undefined;
    process.stdout.write(about ? commandHelp(about) : usage());
    return command ? 0 : 2;
  }
  const cmd = commandNamed(command);
  const { help, positional, rest, options } = parseCommandLine(cmd, args);
  if (help) {
    process.stdout.write(commandHelp(cmd));
    return 0;
  }
  const host = positional[0];
  if (!host) throw new KnownGoodError('settings', `${command}: HOST is missing\n\n${commandHelp(cmd)}`);
  const first = splitHostPath(host);
  const { session, registry } = openSession(first.host, options);
  const sessions = new Map<string, HostSession>([[first.host, session]]);
  const open = (word: string): { session: HostSession; path?: string } => {
    const hp = splitHostPath(word);
    let s = sessions.get(hp.host);
    if (!s) {
      const spec = { ...hostFromCli(hp.host, options), id: `cli:${hp.host}` };
      registry.setHosts([...registry.hosts(), spec]);
      s = registry.session(spec);
      sessions.set(hp.host, s);
    }
    return { session: s, ...(hp.path !== undefined ? { path: hp.path } : {}) };
  };
  const stop = stopOnSignals(process.stderr);
  try {
    const code = await cmd.run({
      session,
      ...(first.path !== undefined ? { path: first.path } : {}),
      open,
      registry,
      positional: positional.slice(1),
      rest,
      options,
      signal: stop.signal,
      out: process.stdout,
      err: process.stderr,
    });
    const sig = stop.received();
    return sig ? exitCodeOf(sig) : code;
  } catch (e) {
    const sig = stop.received();
    if (sig && isKnownGoodError(e, 'cancelled')) {
      process.stderr.write(`known-good: ${printableLines(messageOf(e))}\n`);
      return exitCodeOf(sig);
    }
    throw e;
  } finally {
    stop.dispose();
    registry.dispose();
  }
}

function commandNamed(name: string): CliCommand {
  const cmd = cliCommands.find((c) => c.name === name);
  if (!cmd) throw new KnownGoodError('settings', `unknown command ${name}\n\n${usage()}`);
  return cmd;
}

/**
 * `known-good ls: …` for a failure of a command (its messages that start with its name already say it: `known-good
 * fleet probe: NAME is missing`), `known-good: …` before one is known.
 */
export function errorLine(argv: readonly string[], message: string): string {
  const name = cliCommands.some((c) => c.name === argv[0]) ? argv[0]! : undefined;
  if (name === undefined) return `known-good: ${message}`;
  if (message.startsWith(`${name}:`) || message.startsWith(`${name} `)) return `known-good ${message}`;
  return `known-good ${name}: ${message}`;
}

if (require.main === module) {
  guardOutput();
  const argv = process.argv.slice(2);
  main(argv).then(
    (code) => exitAfterFlush(code),
    (e: unknown) => {
      process.stderr.write(`${printableLines(errorLine(argv, messageOf(e)))}\n`);
      exitAfterFlush(e instanceof KnownGoodError && e.code === 'settings' ? 2 : 255);
    },
  );
}
