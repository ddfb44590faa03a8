import { posix } from 'node:path';
import type { EnvSnapshot } from '../baselines/envProbe';
import { KnownGoodError } from '../errors';
import { shellQuote } from '../quote';
import { checkDriver, type DriverCheck } from './driver';
import { isTorchFamily, normalizeName, packageUnits } from './units';
import {
  checkAbsolutePath,
  checkFindLinks,
  checkIndexUrl,
  checkInterpreter,
  checkPackageName,
  checkPythonVersion,
  checkToolkitVersion,
  checkVersion,
  commentLine,
  oneLine,
  requirementLine,
  shownValue,
  type Check,
} from './validate';

/*
 * Restore Known Good (issue 26): from a baseline's recorded environment, the exact commands that rebuild it in a
 * fresh venv on its host. Pure: what the host has (uv, the indexes that answer, the versions a wheel folder holds)
 * comes in as facts, and everything the plan cannot do is named in `notes` — an editable install, a package no
 * source has, an index that does not answer — never guessed and never left out in silence.
 *
 * What the baseline says reaches pip, uv and sh only as data (issue 31): every name, version, URL and path is checked
 * (validate.ts) before it is used, and one that is not what it claims to be is refused — a `refused` note with the
 * field, the value shown escaped and why — while the rest proceeds. Packages reach the installer through a
 * requirements file of checked `name==version` lines, never as arguments; the installer's options are ours alone.
 */

export const TORCH_WHEEL_ROOT = 'https://download.pytorch.org/whl';
/** Under the user's home on the host: `~/.known-good/envs/<label>`. */
export const RESTORED_ENVS = '.known-good/envs';

export interface Pin {
  name: string;
  version: string;
}

/** Where a unit's packages come from (pip's and uv's options of the same names). */
export interface PackageSource {
  indexUrl: string | null;
  extraIndexUrls: string[];
  findLinks: string[];
  noIndex: boolean;
  /** Why this source: `the torch cu130 wheel index`, `pip's configuration (/etc/pip.conf)`. */
  why: string;
}

export interface PlanUnit {
  /** `torch` for the torch family, else the unit's first name. */
  id: string;
  label: string;
  pins: Pin[];
  source: PackageSource;
}

export type NoteKind =
  | 'editable'
  | 'direct'
  | 'missing'
  | 'unreachable'
  | 'driver'
  | 'conda'
  | 'unversioned'
  | 'torch-build'
  | 'python'
  | 'packages'
  /** A value in the baseline that is not what its field holds (a name, a version, a URL): not used. */
  | 'refused';

export interface PlanNote {
  kind: NoteKind;
  /** `blocker`: the plan cannot rebuild the baseline as recorded; `warning`: it can, with this caveat. */
  severity: 'blocker' | 'warning' | 'info';
  name?: string;
  /** `refused`: where in the snapshot the value was (`packages.indexes.indexUrl`, `packages.packages["torch"]`). */
  field?: string;
  /** `refused`: the value as read, escaped onto one line and cut (`shownValue`). */
  value?: string;
  message: string;
}

/** A requirements file a step writes into the env folder first: checked `name==version` lines only. */
export interface RequirementsFile {
  /** Its name in the env folder. */
  file: string;
  lines: string[];
}

export interface PlanStep {
  title: string;
  /** One shell command line (POSIX sh; `$ENV_DIR` is the restored env). */
  command: string;
  /** Written before `command` runs (which reads it with `-r`). */
  requirements?: RequirementsFile;
}

export interface RestorePlan {
  label: string;
  /** What the plan does with an env folder that exists (see RestoreOptions.existing). */
  existing?: Existing;
  /** The env's folder as the plan's shell sees it (`$HOME/.known-good/envs/<label>` unless a home was given). */
  envDir: string;
  /** The interpreter the venv is made from, and the version recorded. */
  python: { command: string; version: string | null };
  tool: 'uv' | 'pip';
  torch: { build: string; cuda: string | null; source: PackageSource; driver: DriverCheck | null } | null;
  units: PlanUnit[];
  /** Every package the plan installs, pinned as recorded. */
  pins: Pin[];
  notes: PlanNote[];
  steps: PlanStep[];
}

/** What a look at the host's package sources found (`restore_check.py`): what is there and what did not answer. */
export interface SourceFacts {
  /** name → versions the sources hold, for the sources that can be listed (a wheel folder, a file:// index). */
  available?: ReadonlyMap<string, readonly string[]>;
  /** For messages: where `available` was read. */
  availableFrom?: string;
  /** Index URLs that did not answer, with why. */
  unreachable?: readonly { url: string; error: string }[];
}

export interface RestoreOptions {
  label: string;
  /** The user's home on the host, absolute: the plan then names the env's real path. */
  home?: string;
  /** Use uv (default: when the baseline's host had uv on PATH). */
  useUv?: boolean;
  /** The interpreter to make the venv with (default: the baseline's base interpreter, python3.X). */
  python?: string;
  /** Every unit from this source instead of the recorded ones (an offline wheel folder, a mirror). */
  source?: Partial<Omit<PackageSource, 'why'>> & { why?: string };
  facts?: SourceFacts;
  /**
   * The env folder exists (an earlier restore, finished or not): `resume` installs into it what it lacks, `rebuild`
   * removes it first. Unset, the script refuses to touch a folder that exists (exit 3).
   */
  existing?: Existing;
}

export type Existing = 'resume' | 'rebuild';

/** In the env folder: the pinned packages the installer could not install (one `name==version` a line). */
export const FAILED_PINS_FILE = 'known-good-failed.txt';
/** The script's exit when it ended with packages it could not install (named in FAILED_PINS_FILE). */
export const FAILED_PINS_EXIT = 4;
/** The script's exit when the env folder exists and neither resume nor rebuild was asked. */
export const ENV_EXISTS_EXIT = 3;

/** Why `label` is no env folder name (letters, digits, . _ -; 64 at most), or undefined when it is one. */
export function labelProblem(label: string): string | undefined {
  return LABEL_RE.test(label) ? undefined : 'letters, digits, . _ - (at most 64, not starting with . or -)';
}

/** The `name==version` lines of FAILED_PINS_FILE (anything else in it is not a pin and is left out). */
export function failedPinsOf(text: string): string[] {
  return [...new Set(text.split('\n').map((l) => l.trim()))].filter((l) => /^[A-Za-z0-9][\w.-]*==[\w.!+-]+$/.test(l));
}

const LABEL_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** The local builds PyTorch publishes indexes for: the tag becomes part of an index URL. */
const BUILD_RE = /^(cu\d+|cpu|rocm[\d.]+|xpu)$/;

/** A label for a venv folder: the baseline's label made a safe folder name. */
export function envLabelOf(label: string): string {
  const s = label
    .trim()
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[-.]+/, '')
    .replace(/-+$/, '')
    .slice(0, 64);
  return s || 'baseline';
}

/**
 * The local build of torch: `cu130`, `cpu`, `rocm6.4`; from torch/version.py's version, else its CUDA/HIP. A CUDA or
 * HIP version that is not a version leaves the build unknown (null), never guessed from what is left of it.
 */
export function torchBuildOf(s: EnvSnapshot): { build: string; cuda: string | null } | null {
  if (!s.packages.packages['torch'] && !s.torch.found) return null;
  const v = s.torch.versionPy ?? s.torch.version ?? s.packages.packages['torch'] ?? '';
  const local = /\+([A-Za-z0-9.]+)$/.exec(v)?.[1] ?? null;
  const cuda = s.torch.cuda !== null && checkToolkitVersion(s.torch.cuda) === null ? s.torch.cuda : null;
  if (local && BUILD_RE.test(local)) return { build: local, cuda };
  if (s.torch.cuda !== null && cuda === null) return null;
  if (cuda) return { build: `cu${cuda.replace(/\./g, '').slice(0, 3)}`, cuda };
  if (s.torch.hip) {
    if (checkToolkitVersion(s.torch.hip) !== null) return null;
    return { build: `rocm${/^\d+\.\d+/.exec(s.torch.hip)![0]}`, cuda: null };
  }
  return { build: 'cpu', cuda: null };
}

/** Checks a value before the plan uses it: true when it passes, else false and a `refused` note saying why. */
type Refuse = (field: string, value: string, check: Check, outcome: string, name?: string) => boolean;

function refuser(notes: PlanNote[]): Refuse {
  return (field, value, check, outcome, name) => {
    const why = check(value);
    if (why === null) return true;
    const shown = shownValue(value);
    notes.push({
      kind: 'refused',
      severity: 'blocker',
      field,
      value: shown,
      ...(name !== undefined ? { name } : {}),
      message: `${field} "${shown}" is refused: it ${why}; ${outcome}`,
    });
    return false;
  };
}

/** A source's URLs, each checked (`field` names where they came from); a refused one is left out. */
function checkedSource(src: Omit<PackageSource, 'why'>, field: string, refuse: Refuse): Omit<PackageSource, 'why'> {
  return {
    indexUrl:
      src.indexUrl !== null &&
      refuse(`${field}.indexUrl`, src.indexUrl, checkIndexUrl, "not used: pip's default index is used instead")
        ? src.indexUrl
        : null,
    extraIndexUrls: src.extraIndexUrls.filter((u, i) =>
      refuse(`${field}.extraIndexUrls[${i}]`, u, checkIndexUrl, 'not used'),
    ),
    findLinks: src.findLinks.filter((u, i) => refuse(`${field}.findLinks[${i}]`, u, checkFindLinks, 'not used')),
    noIndex: src.noIndex,
  };
}

function recordedSource(s: EnvSnapshot, refuse: Refuse): PackageSource {
  const ix = s.packages.indexes;
  if (!ix || ix.error)
    return { indexUrl: null, extraIndexUrls: [], findLinks: [], noIndex: false, why: "pip's default index" };
  const set = ix.indexUrl !== null || ix.extraIndexUrls.length > 0 || ix.findLinks.length > 0 || ix.noIndex;
  return {
    ...checkedSource(ix, 'packages.indexes', refuse),
    why: set ? `the host's pip configuration (${ix.sources.join(', ') || 'recorded'})` : "pip's default index",
  };
}

/** The torch family's index: the host's own when its pip is configured with one for this build, else PyTorch's. */
function torchSource(build: string, recorded: PackageSource): PackageSource {
  const configured = [recorded.indexUrl, ...recorded.extraIndexUrls].filter(
    (u): u is string => u !== null && new RegExp(`/${build.replace(/\./g, '\\.')}/?$`).test(u),
  );
  if (configured[0])
    return {
      indexUrl: configured[0],
      extraIndexUrls: [],
      findLinks: [],
      noIndex: false,
      why: `the ${build} index the host's pip is configured with`,
    };
  return {
    indexUrl: `${TORCH_WHEEL_ROOT}/${build}`,
    extraIndexUrls: [],
    findLinks: [],
    noIndex: false,
    why: `PyTorch's ${build} wheel index (torch's local build +${build})`,
  };
}

/** pip's (and uv's) options for a source: the flags are our own words, each (checked) value a quoted word after one. */
function sourceArgs(src: PackageSource): string {
  const a: string[] = [];
  if (src.noIndex) a.push('--no-index');
  else if (src.indexUrl) a.push(`--index-url ${shellQuote(src.indexUrl)}`);
  for (const u of src.noIndex ? [] : src.extraIndexUrls) a.push(`--extra-index-url ${shellQuote(u)}`);
  for (const f of src.findLinks) a.push(`--find-links ${shellQuote(f)}`);
  return a.join(' ');
}

/** The baseline's interpreter (its base prefix's `python3.X`), from checked parts only. */
function pythonCommand(s: EnvSnapshot, version: string | null, refuse: Refuse): string {
  const mm = /^(\d+\.\d+)/.exec(version ?? '')?.[1];
  const exe = mm ? `python${mm}` : 'python3';
  const prefix = s.python.basePrefix;
  if (prefix === null) return exe;
  return refuse('python.basePrefix', prefix, checkAbsolutePath, `not used: ${exe} is looked up on PATH instead`)
    ? posix.join(prefix, 'bin', exe)
    : exe;
}

/** `"$ENV_DIR"/bin/python`: the shell expands the variable, the rest is quoted by the one quoting function. */
function inEnv(rel: string): string {
  return `"$ENV_DIR"/${shellQuote(rel)}`;
}

/** The snapshot's packages, each name and version checked: the valid ones, in the order recorded. */
function checkedPackages(s: EnvSnapshot, refuse: Refuse): Map<string, string | null> {
  const out = new Map<string, string | null>();
  for (const [name, version] of Object.entries(s.packages.packages)) {
    if (!refuse('packages.packages', name, checkPackageName, 'not installed', name)) continue;
    if (
      version !== null &&
      !refuse(`packages.packages[${JSON.stringify(name)}]`, version, checkVersion, `${name} is not installed`, name)
    )
      continue;
    out.set(name, version);
  }
  return out;
}

export function restorePlan(s: EnvSnapshot, opts: RestoreOptions): RestorePlan {
  if (!LABEL_RE.test(opts.label))
    throw new KnownGoodError(
      'usage',
      `restore: "${shownValue(opts.label)}" is no folder name (letters, digits, . _ -)`,
    );
  if (opts.python !== undefined) {
    const why = checkInterpreter(opts.python);
    if (why) throw new KnownGoodError('usage', `restore: the interpreter "${shownValue(opts.python)}" ${why}`);
  }
  const notes: PlanNote[] = [];
  const refuse = refuser(notes);
  const packages = checkedPackages(s, refuse);
  if (s.packages.error || Object.keys(s.packages.packages).length === 0)
    notes.push({
      kind: 'packages',
      severity: 'blocker',
      message: `the baseline has no package list${s.packages.error ? ` (${s.packages.error})` : ''}: nothing to restore`,
    });
  const envDir = opts.home ? posix.join(opts.home, RESTORED_ENVS, opts.label) : `$HOME/${RESTORED_ENVS}/${opts.label}`;
  const tool: 'uv' | 'pip' = (opts.useUv ?? Boolean(s.toolchain['uv'])) ? 'uv' : 'pip';
  const version =
    s.python.version !== null &&
    refuse('python.version', s.python.version, checkPythonVersion, "not used: the interpreter's version is not checked")
      ? s.python.version
      : null;
  const python = { command: opts.python ?? pythonCommand(s, version, refuse), version };
  if (s.python.conda || s.packages.conda)
    notes.push({
      kind: 'conda',
      severity: 'warning',
      message:
        `the baseline ran in a conda environment${s.python.conda?.env ? ` (${s.python.conda.env})` : ''}: ` +
        `the plan rebuilds its pip-visible packages in a venv; conda's own packages (MKL, cudatoolkit) are not restored`,
    });

  // What cannot be pinned from an index: named, with where it came from.
  const excluded = new Set<string>();
  for (const [name, where] of Object.entries(s.packages.editable)) {
    excluded.add(name);
    notes.push({
      kind: 'editable',
      severity: 'warning',
      name,
      message: `${name} ${packages.get(name) ?? ''} is an editable install from ${where}: not restored (reinstall it from its source: pip install -e ${where})`,
    });
  }
  for (const [name, du] of Object.entries(s.packages.directUrls)) {
    if (excluded.has(name) || du.kind === 'editable') continue;
    excluded.add(name);
    const how =
      du.kind === 'vcs'
        ? `${du.vcs ?? 'vcs'} ${du.url}${du.commit ? ` at ${du.commit}` : ''}`
        : du.kind === 'archive'
          ? `the file ${du.url}`
          : `${du.kind} ${du.url}`;
    notes.push({
      kind: 'direct',
      severity: 'warning',
      name,
      message: `${name} ${packages.get(name) ?? ''} was installed from ${how}, not an index: not restored by the plan`,
    });
  }
  const pins: Pin[] = [];
  for (const [name, version] of packages) {
    if (excluded.has(name)) continue;
    if (!version) {
      notes.push({
        kind: 'unversioned',
        severity: 'warning',
        name,
        message: `${name} has no recorded version: not restored`,
      });
      continue;
    }
    pins.push({ name, version });
  }

  const recorded = recordedSource(s, refuse);
  const override: PackageSource | null = opts.source
    ? {
        ...checkedSource(
          {
            indexUrl: opts.source.indexUrl ?? null,
            extraIndexUrls: opts.source.extraIndexUrls ?? [],
            findLinks: opts.source.findLinks ?? [],
            noIndex: opts.source.noIndex ?? false,
          },
          'source',
          refuse,
        ),
        why: opts.source.why ?? 'the source given',
      }
    : null;
  const build = torchBuildOf(s);
  const hasTorch = pins.some((p) => isTorchFamily(p.name));
  if (hasTorch)
    for (const f of ['cuda', 'hip'] as const) {
      const v = s.torch[f];
      if (v !== null)
        refuse(
          `torch.${f}`,
          v,
          checkToolkitVersion,
          "not used: the torch build is read from torch's own version, else the torch family comes from the other packages' source",
        );
    }
  let torch: RestorePlan['torch'] = null;
  if (build && hasTorch) {
    const driverVersion = s.gpus.gpus[0]?.driver_version ?? null;
    const driver = build.cuda ? checkDriver(build.cuda, driverVersion) : null;
    torch = { build: build.build, cuda: build.cuda, source: override ?? torchSource(build.build, recorded), driver };
    if (driver && driver.status !== 'ok')
      notes.push({
        kind: 'driver',
        severity: driver.status === 'too-old' ? 'blocker' : 'warning',
        message: driver.message,
      });
    const dist = packages.get('torch');
    const local = s.torch.versionPy ?? s.torch.version;
    if (dist && local && dist !== local && !dist.includes('+'))
      notes.push({
        kind: 'torch-build',
        severity: 'info',
        name: 'torch',
        message:
          `torch is recorded as ${dist} (its wheel's metadata) and was built as ${local}: the ${build.build} index's ` +
          `${dist}+${build.build} is that build, and pip freeze will name it so`,
      });
  }

  // Names no source has: left out of the commands (pip would refuse the whole command) and named.
  const facts = opts.facts;
  const missing = new Set<string>();
  if (facts?.available) {
    for (const p of pins) {
      const have = facts.available.get(normalizeName(p.name));
      if (!have || !have.some((v) => v === p.version || v.split('+')[0] === p.version)) {
        missing.add(p.name);
        notes.push({
          kind: 'missing',
          severity: 'blocker',
          name: p.name,
          message: `${p.name}==${p.version} is not in ${facts.availableFrom ?? 'the package source'}${
            have?.length ? ` (it has ${have.join(', ')})` : ''
          }: not installed`,
        });
      }
    }
  }
  for (const u of facts?.unreachable ?? [])
    notes.push({
      kind: 'unreachable',
      severity: 'blocker',
      message: `the index ${u.url} does not answer from the host: ${u.error}`,
    });

  const installable = pins.filter((p) => !missing.has(p.name));
  const groups = packageUnits(
    installable.map((p) => p.name),
    s.packages.pins,
  );
  const byName = new Map(installable.map((p) => [normalizeName(p.name), p]));
  const units: PlanUnit[] = groups.map((g) => {
    const isTorch = g.some(isTorchFamily);
    return {
      id: isTorch ? 'torch' : g[0]!,
      label: isTorch ? `torch family (${g.length})` : g.join(' + '),
      pins: g.map((n) => byName.get(n)!),
      source: isTorch && torch ? torch.source : (override ?? recorded),
    };
  });

  const steps: PlanStep[] = [];
  const venvPython = inEnv('bin/python');
  if (opts.existing === 'rebuild')
    steps.push({ title: 'the env folder of an earlier restore removed (Rebuild)', command: 'rm -rf -- "$ENV_DIR"' });
  else if (opts.existing === 'resume')
    steps.push({
      title: 'the env folder of an earlier restore kept (Resume): what it holds stays, what it lacks is installed',
      command: `test -d "$ENV_DIR" || { echo "$ENV_DIR is gone: nothing to resume" >&2; exit ${ENV_EXISTS_EXIT}; }; rm -f -- ${inEnv(FAILED_PINS_FILE)}`,
    });
  else
    steps.push({
      title: 'the env folder must not exist yet',
      command: `test ! -e "$ENV_DIR" || { echo "$ENV_DIR exists (an earlier restore): restore again to resume it, rebuild it or pick another label" >&2; exit ${ENV_EXISTS_EXIT}; }`,
    });
  const want = /^(\d+\.\d+)/.exec(python.version ?? '')?.[1];
  if (want)
    steps.push({
      title: `the interpreter is Python ${want} (the baseline ran ${python.version})`,
      command: `${shellQuote(python.command)} -c ${shellQuote(`import sys; v = "%d.%d" % sys.version_info[:2]; sys.exit(0 if v == "${want}" else "needs Python ${want}, found " + v)`)}`,
    });
  const makeVenv =
    tool === 'uv'
      ? `uv venv --seed --python ${shellQuote(python.command)} "$ENV_DIR"`
      : `${shellQuote(python.command)} -m venv "$ENV_DIR"`;
  steps.push(
    opts.existing === 'resume'
      ? { title: 'its venv, made if it was not', command: `test -x ${venvPython} || ${makeVenv}` }
      : { title: `a fresh venv (${tool === 'uv' ? 'uv venv' : 'python -m venv'})`, command: makeVenv },
  );
  // --no-deps: every package is pinned as recorded, so no resolver may pick another version of anything. The
  // packages go in through a requirements file (`-r`), never as arguments: the options before it are all ours.
  const install =
    tool === 'uv'
      ? `uv pip install --python ${venvPython} --no-deps`
      : `${venvPython} -m pip install --no-deps --disable-pip-version-check`;
  // A torch family split between two sources is the mix this exists to prevent: pip must not fall back to another.
  const bySource = new Map<string, { source: PackageSource; pins: Pin[]; labels: string[] }>();
  for (const u of units) {
    const key = sourceArgs(u.source) + (u.id === 'torch' ? '#torch' : '');
    const e = bySource.get(key);
    if (e) {
      e.pins.push(...u.pins);
      e.labels.push(u.label);
    } else bySource.set(key, { source: u.source, pins: [...u.pins], labels: [u.label] });
  }
  let n = 0;
  for (const [key, e] of bySource) {
    const isTorch = key.endsWith('#torch');
    const file = `known-good-requirements-${++n}.txt`;
    const cmd = [install, sourceArgs(e.source)].filter(Boolean).join(' ');
    steps.push({
      title: isTorch
        ? `the torch family as one unit from ${e.source.why}`
        : `${e.pins.length} package${e.pins.length === 1 ? '' : 's'} pinned as recorded, from ${e.source.why}`,
      // One package the installer cannot install fails the whole command: then each is tried alone (same source,
      // --no-deps, its own one-line requirements file), so the others are in and the ones that fail are named.
      command:
        `${cmd} -r ${inEnv(file)} || { echo ${shellQuote('== that install failed: each of its packages is tried alone, to name the ones that cannot be installed')}; ` +
        `while IFS= read -r KG_PIN; do printf '%s\\n' "$KG_PIN" > ${inEnv(ONE_PIN_FILE)}; ` +
        `${cmd} -r ${inEnv(ONE_PIN_FILE)} || printf '%s\\n' "$KG_PIN" >> ${inEnv(FAILED_PINS_FILE)}; done < ${inEnv(file)}; }`,
      requirements: { file, lines: e.pins.map((p) => checkedRequirement(p.name, p.version)) },
    });
  }
  steps.push({
    title: 'what the restored env holds (compared with the baseline after the run)',
    command: tool === 'uv' ? `uv pip freeze --python ${venvPython}` : `${venvPython} -m pip freeze --all`,
  });
  const failed = inEnv(FAILED_PINS_FILE);
  steps.push({
    title: `the packages that could not be installed, if any (then it ends with exit ${FAILED_PINS_EXIT})`,
    command:
      `if [ -s ${failed} ]; then echo "== $(wc -l < ${failed} | tr -d ' ') pinned package(s) could not be installed ` +
      `(listed in $ENV_DIR/${FAILED_PINS_FILE}); restore again to resume once the source has them:"; ` +
      `sed 's/^/   /' ${failed}; exit ${FAILED_PINS_EXIT}; fi`,
  });
  // Every text a person reads (a note, a title) on one line: a line break in a recorded path cannot forge another.
  return {
    label: opts.label,
    ...(opts.existing ? { existing: opts.existing } : {}),
    envDir,
    python,
    tool,
    torch,
    units,
    pins: installable,
    notes: notes.map((x) => ({ ...x, message: oneLine(x.message) })),
    steps: steps.map((st) => ({ ...st, title: oneLine(st.title) })),
  };
}

function checkedRequirement(name: string, version: string): string {
  const line = requirementLine(name, version);
  if (line === null)
    throw new KnownGoodError('internal', `restore: ${shownValue(`${name}==${version}`)} reached a requirements file`);
  return line;
}

/** In the env folder: the one-line requirements file each package is installed from when its group failed. */
const ONE_PIN_FILE = 'known-good-one.txt';

/** The here-document's end marker: no requirements line (`name==version`) can be this word. */
const REQUIREMENTS_END = 'KNOWN_GOOD_REQUIREMENTS';

/**
 * `cat > FILE <<'END'`: the quoted marker makes the body literal to sh (no `$`, backtick or backslash is read), and
 * each body line is checked again here, so the body is requirement lines and nothing else.
 */
function requirementsHeredoc(r: RequirementsFile): string[] {
  for (const line of r.lines) {
    const [name = '', version = '', ...rest] = line.split('==');
    if (rest.length || requirementLine(name, version) !== line)
      throw new KnownGoodError('internal', `restore: "${shownValue(line)}" is no requirement line`);
  }
  return [`cat > ${inEnv(r.file)} <<'${REQUIREMENTS_END}'`, ...r.lines, REQUIREMENTS_END];
}

/**
 * The plan as a shell script the user can read, copy or run: notes first, then each step with its title. Text
 * enters it in two ways only: comment lines (`commentLine`, every line break escaped) and words quoted by
 * `shellQuote`; the requirement lines of a here-document are checked `name==version` lines.
 */
export function planScript(plan: RestorePlan, title: string): string {
  const lines = [
    '#!/bin/sh',
    commentLine(`Known Good — restore ${title}`),
    commentLine(`into ${plan.envDir} with ${plan.tool}`),
  ];
  if (plan.torch)
    lines.push(
      commentLine(
        `torch build ${plan.torch.build} from ${plan.torch.source.indexUrl ?? plan.torch.source.why}` +
          (plan.torch.driver ? `; ${plan.torch.driver.message}` : ''),
      ),
    );
  for (const n of plan.notes)
    lines.push(commentLine(`${n.kind === 'refused' ? 'REFUSED' : n.severity.toUpperCase()}: ${n.message}`));
  lines.push('set -eu');
  const dir = plan.envDir.startsWith('$HOME/')
    ? `"$HOME"/${shellQuote(plan.envDir.slice('$HOME/'.length))}`
    : shellQuote(plan.envDir);
  lines.push(`ENV_DIR=${dir}`);
  plan.steps.forEach((st, i) => {
    lines.push(
      '',
      commentLine(`${i + 1}. ${st.title}`),
      `echo ${shellQuote(oneLine(`== ${i + 1}/${plan.steps.length} ${st.title}`))}`,
      ...(st.requirements ? requirementsHeredoc(st.requirements) : []),
      st.command,
    );
  });
  const blockers = plan.notes.filter((n) => n.severity === 'blocker' && n.kind !== 'driver').length;
  lines.push(
    '',
    `echo ${shellQuote(oneLine(`== restored into ${plan.envDir}${blockers ? `; ${blockers} thing(s) not restored, named above` : ''}`))}`,
    '',
  );
  return lines.join('\n');
}

/** The refused values of a plan, one line each (the CLI prints them before a run). */
export function refusedLines(plan: RestorePlan): string[] {
  return plan.notes.filter((n) => n.kind === 'refused').map((n) => `refused: ${oneLine(n.message)}`);
}

/** The plan as text for a document or a terminal: sources, units, refused values, notes, then the script. */
export function planDocument(plan: RestorePlan, title: string): string {
  const out = [oneLine(`Restore ${title}`), ''];
  out.push(oneLine(`Into: ${plan.envDir} (${plan.tool}, ${plan.python.command})`));
  if (plan.existing === 'resume')
    out.push('Resume: the folder of an earlier restore is kept; what it lacks is installed into it');
  if (plan.existing === 'rebuild') out.push('Rebuild: the folder of an earlier restore is removed first');
  if (plan.torch)
    out.push(
      oneLine(
        `torch family: build ${plan.torch.build} from ${plan.torch.source.indexUrl ?? plan.torch.source.why}` +
          (plan.torch.driver ? ` — ${plan.torch.driver.message}` : ''),
      ),
    );
  out.push(`Packages pinned: ${plan.pins.length} in ${plan.units.length} unit(s)`);
  for (const u of plan.units.filter((x) => x.pins.length > 1))
    out.push(`  unit ${u.label}: ${u.pins.map((p) => p.name).join(', ')}`);
  const refused = plan.notes.filter((n) => n.kind === 'refused');
  if (refused.length) {
    out.push('', `Refused: ${refused.length} value(s) in the baseline that are not what their field holds (not used):`);
    for (const n of refused) out.push(`  ${oneLine(n.message)}`);
  }
  const others = plan.notes.filter((n) => n.kind !== 'refused');
  if (others.length) {
    out.push('', 'Not restored as recorded, or to know:');
    for (const n of others) out.push(`  [${n.severity}] ${oneLine(n.message)}`);
  }
  out.push('', '--- the script (copy it, or run it with Restore) ---', planScript(plan, title));
  return out.join('\n');
}

/**
 * The restored env's interpreter as What Changed?'s probe stats it (`~` expanded there): it exists once Restore
 * Known Good… ran for that baseline, and then the package bisect can run against it.
 */
export function restoredEnvProbePath(baselineLabel: string): string {
  return `~/${RESTORED_ENVS}/${envLabelOf(baselineLabel)}/bin/python`;
}
