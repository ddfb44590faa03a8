/*
 * What a restore takes from a baseline file, checked before any of it reaches a process (issue 31). A baseline is a
 * file anyone with write access to the store, or to the host it was copied from, can edit: its package names,
 * versions, index URLs and interpreter reach pip, uv and sh. Each value must be exactly the kind of thing it claims
 * to be — a PEP 508 name, a PEP 440 version, an http(s)/file URL, a Python version, an absolute path — and anything
 * else is refused (named in the plan with why), never repaired: a repaired value is a guess about someone else's
 * intent. Nothing accepted here can start with `-`, so none can be read as an option, and none holds whitespace or a
 * control character, so none can end a requirements line or a comment line early.
 */

/** PEP 508's name rule (the packaging spec's "Names" section), case-insensitive. */
const PACKAGE_NAME_RE = /^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$/i;

/**
 * PEP 440's version regex (its appendix, the one `packaging` uses: the public version with the spellings pip
 * normalises, `1.0-1`, `1.0.post1`, `v2.0rc1`), with the local label `+cu130`. Linear: no nested quantifier.
 */
const VERSION_RE = new RegExp(
  '^v?(?:[0-9]+!)?[0-9]+(?:\\.[0-9]+)*' +
    '(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?' +
    '(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?' +
    '(?:[-_.]?dev[-_.]?[0-9]*)?' +
    '(?:\\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$',
  'i',
);

/** `platform.python_version()`: `3.12.3`, `3.13.0rc1`, `3.14.0a2`, `3.12.0+` (a build from a checkout). */
const PYTHON_VERSION_RE = /^\d+\.\d+(\.\d+)?((a|b|rc)\d+)?\+?$/;

/** torch's CUDA (`13.0`) and HIP (`6.4.43482`) versions: the build tag is made of their digits. */
const TOOLKIT_VERSION_RE = /^\d+\.\d+(\.[0-9A-Za-z]+)*$/;

/** C0, DEL, C1, the line and paragraph separators and the bidi controls (which reorder what a reader sees). */
// eslint-disable-next-line no-control-regex -- control characters are what this finds
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
// eslint-disable-next-line no-control-regex -- the same set, every match
const CONTROL_ALL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** Why `value` is refused as what it claims to be, or null when it is fine. */
export type Check = (value: string) => string | null;

const OPTION = "starts with '-', so pip would read it as an option";
const CONTROL = 'holds a line break or a control character';

function common(value: string): string | null {
  if (value.startsWith('-')) return OPTION;
  if (CONTROL_RE.test(value)) return CONTROL;
  return null;
}

export const checkPackageName: Check = (v) =>
  common(v) ??
  (PACKAGE_NAME_RE.test(v)
    ? null
    : 'is not a package name (PEP 508: letters, digits, . _ -; a letter or digit at each end)');

export const checkVersion: Check = (v) =>
  common(v) ?? (VERSION_RE.test(v) ? null : 'is not a version (PEP 440, like 2.11.0 or 2.11.0+cu130)');

/** An index URL: http(s) or file, one word. */
export const checkIndexUrl: Check = (v) =>
  common(v) ??
  (/\s/.test(v)
    ? 'holds whitespace'
    : /^(https?|file):\/\/\S+$/i.test(v)
      ? null
      : 'is not an http://, https:// or file:// URL');

/** A find-links source: a URL as an index, or an absolute folder (pip takes both; neither can be an option). */
export const checkFindLinks: Check = (v) =>
  v.startsWith('/') && !CONTROL_RE.test(v) && !/\s/.test(v) ? null : checkIndexUrl(v);

export const checkPythonVersion: Check = (v) =>
  common(v) ?? (PYTHON_VERSION_RE.test(v) ? null : 'is not a Python version (like 3.12.3)');

export const checkToolkitVersion: Check = (v) =>
  common(v) ?? (TOOLKIT_VERSION_RE.test(v) ? null : 'is not a version (like 13.0)');

/** An interpreter or the prefix it lives in: an absolute path, one word (pip's own paths hold no whitespace either). */
export const checkAbsolutePath: Check = (v) =>
  common(v) ?? (!v.startsWith('/') ? 'is not an absolute path' : /\s/.test(v) ? 'holds whitespace' : null);

/** An interpreter given by the user: an absolute path, or a bare command name found on PATH (`python3.12`). */
export const checkInterpreter: Check = (v) =>
  /^[A-Za-z0-9._+-]+$/.test(v) && !v.startsWith('-') ? null : checkAbsolutePath(v);

const MAX_SHOWN = 120;

function escaped(c: string): string {
  if (c === '\n') return '\\n';
  if (c === '\t') return '\\t';
  if (c === '\r') return '\\r';
  const n = c.charCodeAt(0);
  return n <= 0xff ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
}

/** Text on one line: every control character (line breaks included) written as its escape, `\n`, `\x1b`, `\u202e`. */
export function oneLine(text: string): string {
  return text.replace(CONTROL_ALL, escaped);
}

/** A refused value as a plan shows it: on one line, escaped, cut to 120 characters (its length said). */
export function shownValue(value: string): string {
  const line = oneLine(value);
  return line.length <= MAX_SHOWN ? line : `${line.slice(0, MAX_SHOWN)}… (${value.length} characters)`;
}

/**
 * A comment line of a plan script. A shell comment ends only at a newline, so with every line break and control
 * character escaped, nothing in `text` can become a command: the one way any text enters the script's comments.
 */
export function commentLine(text: string): string {
  return `# ${oneLine(text)}`;
}

/**
 * A requirements line as the plan writes it: `name==version`, both checked above. pip and uv read options in a
 * requirements file (`--index-url`, `-e`, `-r`, `--find-links`, a per-line `--config-settings` after whitespace) and
 * expand `${VAR}`; a checked name starts with a letter or digit, and neither part can hold whitespace, `$`, `#` or a
 * line break, so no line of ours is anything but one pinned requirement.
 */
export function requirementLine(name: string, version: string): string | null {
  return checkPackageName(name) === null && checkVersion(version) === null ? `${name}==${version}` : null;
}
