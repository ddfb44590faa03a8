import { KnownGoodError } from '../errors';

/*
 * How a value read from a file (a baseline's variable, a launch record's environment) reaches a process: as an entry
 * of its environment map, handed to python/kg_guard.py as JSON data and applied there with execve's env — never as
 * `env NAME=VALUE` argv (an `env` option such as `-S` or `--chdir=` in a name was obeyed), never as shell text.
 */

/** What a variable name may be: POSIX's portable names. `PATH=/x:…`, `-S…`, `--chdir=…` are not. */
export const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface EnvMap {
  /** Set to these values (over what the process would inherit). */
  readonly set: Readonly<Record<string, string>>;
  /** Removed from what it would inherit. */
  readonly unset: readonly string[];
}

export const EMPTY_ENV: EnvMap = { set: {}, unset: [] };

/** Why `name` cannot be a variable of ours, or undefined when it can. */
export function envNameProblem(name: string): string | undefined {
  if (ENV_NAME_RE.test(name)) return undefined;
  return `${JSON.stringify(name.length > 60 ? `${name.slice(0, 59)}…` : name)} is not a variable name (letters, digits and _, not starting with a digit)`;
}

/** Why `value` cannot be a variable's value, or undefined. */
export function envValueProblem(value: string): string | undefined {
  return value.includes('\0') ? 'a value cannot hold a NUL byte' : undefined;
}

/** The map, checked: a KnownGoodError('usage') naming the first bad entry. */
export function checkedEnvMap(env: EnvMap): EnvMap {
  for (const name of [...Object.keys(env.set), ...env.unset]) {
    const why = envNameProblem(name);
    if (why) throw new KnownGoodError('usage', why);
  }
  for (const [name, value] of Object.entries(env.set)) {
    const why = envValueProblem(value);
    if (why) throw new KnownGoodError('usage', `${name}: ${why}`);
  }
  return env;
}

export function isEmptyEnv(env: EnvMap): boolean {
  return Object.keys(env.set).length === 0 && env.unset.length === 0;
}
