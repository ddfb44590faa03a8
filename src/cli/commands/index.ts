import { execCommand, probeCommand } from './basic';
import { lsCommand } from './ls';
import { envCommand } from './env';
import { argsCommand, diffCommand } from './args';
import { benchCommand } from './bench';
import { whyCommand } from './why';
import { fleetCommand } from './fleet';
import { bisectCommand } from './bisect';
import { restoreCommand } from './restore';
import { replayCommand } from './replay';
import type { CliCommand } from './types';

/** Every `known-good` subcommand; a feature adds its own file and one entry here. */
export const cliCommands: CliCommand[] = [
  execCommand,
  probeCommand,
  lsCommand,
  envCommand,
  argsCommand,
  diffCommand,
  benchCommand,
  whyCommand,
  fleetCommand,
  bisectCommand,
  restoreCommand,
  replayCommand,
];
