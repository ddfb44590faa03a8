/*
 * A launch's command line edited word by word (replay's overrides): a flag's value is the word after it (`--lr
 * 0.1`) or after its `=` (`--lr=0.1`); a Hydra override is `key=value`. Words are never re-split or joined into shell
 * text: what comes out is argv again, each word as it was unless this edit set it.
 */

const FLAG = /^--?[A-Za-z]/;

/** Where `name` stands in argv: the index of the flag word, and of its value (-1 for a bare flag or `=` form). */
function find(argv: readonly string[], name: string): { at: number; value: number; eq: boolean } | undefined {
  for (let i = 0; i < argv.length; i++) {
    const w = argv[i]!;
    if (w === '--') return undefined;
    if (w === name) {
      const next = argv[i + 1];
      return { at: i, value: next !== undefined && !FLAG.test(next) ? i + 1 : -1, eq: false };
    }
    if (w.startsWith(`${name}=`)) return { at: i, value: -1, eq: true };
  }
  return undefined;
}

/** The value of `--name` (`true` for a bare flag), or undefined when argv does not say it. */
export function flagValue(argv: readonly string[], name: string): string | undefined {
  const f = find(argv, name);
  if (!f) return undefined;
  if (f.eq) return argv[f.at]!.slice(name.length + 1);
  return f.value >= 0 ? argv[f.value]! : 'true';
}

/** argv with `--name` set to `value`: in place where it stands (its own style kept), else appended as `style` says. */
export function withFlag(
  argv: readonly string[],
  name: string,
  value: string,
  style: 'space' | 'eq' = 'space',
): string[] {
  const out = [...argv];
  const f = find(out, name);
  if (!f) return [...out, ...(style === 'eq' ? [`${name}=${value}`] : [name, value])];
  if (f.eq) out[f.at] = `${name}=${value}`;
  else if (f.value >= 0) out[f.value] = value;
  else out.splice(f.at + 1, 0, value);
  return out;
}

/** argv without `--name` (and its value). */
export function withoutFlag(argv: readonly string[], name: string): string[] {
  const f = find(argv, name);
  if (!f) return [...argv];
  const out = [...argv];
  out.splice(f.at, f.value >= 0 ? 2 : 1);
  return out;
}

/** A Hydra override `key=value` (`+key=value` where it was added) set, replaced or appended. */
export function withOverride(argv: readonly string[], key: string, value: string): string[] {
  const out = [...argv];
  const i = out.findIndex((w) => w.replace(/^\+\+?/, '').startsWith(`${key}=`));
  if (i >= 0) {
    const plus = /^\+*/.exec(out[i]!)![0];
    out[i] = `${plus}${key}=${value}`;
    return out;
  }
  return [...out, `${key}=${value}`];
}

export function overrideValue(argv: readonly string[], key: string): string | undefined {
  const w = argv.find((x) => x.replace(/^\+\+?/, '').startsWith(`${key}=`));
  return w === undefined ? undefined : w.slice(w.indexOf('=') + 1);
}

/** `--key value`, `--key=value` and bare `--flag` of a command line (the program and positionals left out). */
export function flagsOf(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') break;
    if (!FLAG.test(a)) continue;
    const eq = a.indexOf('=');
    if (eq > 0) out.set(a.slice(0, eq), a.slice(eq + 1));
    else if (i + 1 < argv.length && !FLAG.test(argv[i + 1]!)) out.set(a, argv[++i]!);
    else out.set(a, 'true');
  }
  return out;
}
