import type { HostRegistry, HostSession } from '../../core/registry';
import type { CliOption, CliOptions } from '../options';

export interface CliContext {
  session: HostSession;
  /** The path of `HOST:/path` in the first positional word, if given. */
  path?: string;
  /** Another `HOST[:/path]` word (e.g. the second side of a diff): its session, sharing connections. */
  open(word: string): { session: HostSession; path?: string };
  registry: HostRegistry;
  /** Positional words after HOST. */
  positional: string[];
  /** Words after `--`, untouched. */
  rest: string[];
  options: CliOptions;
  /** Aborted when the CLI gets SIGINT, SIGTERM or SIGHUP (src/cli/stop.ts): pass it to whatever runs. */
  signal: AbortSignal;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
}

/** One `known-good <name>` subcommand: resolves to the process exit code. */
export interface CliCommand {
  name: string;
  /** e.g. `exec HOST [options] -- CMD [ARG…]` */
  usage: string;
  summary: string;
  /** Its own options (the host options and --help are every command's): the parser and --help both read this. */
  options: readonly CliOption[];
  run(ctx: CliContext): Promise<number>;
}
