import { execCommand, probeCommand } from './basic';
import type { CliCommand } from './types';

/** Every `known-good` subcommand; a feature adds its own file and one entry here. */
export const cliCommands: CliCommand[] = [execCommand, probeCommand];
