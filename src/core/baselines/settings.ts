import { z } from 'zod';
import { describeIssues } from '../util/zod';

/** The baselines settings, parsed (never cast): bad values fall back to the default and are reported by name. */
export interface BaselineSettings {
  /** `knownGood.baselines.copyToRemote`: also write the baseline to the host's `~/.known-good/baselines/` (off unless set). */
  copyToRemote: boolean;
  /** `knownGood.env.scriptGlobs`: training scripts to hash, e.g. `/workspace/*.py`. */
  scriptGlobs: string[];
  /** `knownGood.env.extraVariables`: variables recorded besides the built-in families. */
  extraVariables: string[];
  /** `knownGood.env.cacheDirs`: compile caches besides inductor's and triton's. */
  cacheDirs: string[];
  problems: string[];
}

const words = z.array(z.string().trim().min(1));

export function parseBaselineSettings(get: (key: string) => unknown): BaselineSettings {
  const problems: string[] = [];
  const list = (key: string): string[] => {
    const raw = get(key);
    if (raw === undefined || raw === null) return [];
    const r = words.safeParse(raw);
    if (r.success) return r.data;
    problems.push(`knownGood.${key}: ${describeIssues(r.error)}`);
    return [];
  };
  const copy = get('baselines.copyToRemote');
  if (copy !== undefined && copy !== null && typeof copy !== 'boolean') {
    problems.push(`knownGood.baselines.copyToRemote: expected true or false, got ${JSON.stringify(copy)}`);
  }
  return {
    copyToRemote: copy === true,
    scriptGlobs: list('env.scriptGlobs'),
    extraVariables: list('env.extraVariables'),
    cacheDirs: list('env.cacheDirs'),
    problems,
  };
}
