import { createHash } from 'node:crypto';

/**
 * One set of redaction rules for everything Known Good shows or stores that came from a host: env snapshots,
 * checkpoint args, log lines. The same rules live in python/kg_redact.py (the probes redact before anything leaves
 * the host); this copy is defence in depth for data that arrives some other way (an old probe, a cache, a baseline
 * written before). Both are tested against test/fixtures/redaction/cases.json. A secret becomes
 * `<redacted sha256:XXXXXXXXXXXX>` (12 hex digits of its sha256), so a rotated secret still shows as changed.
 */

/** Words of a name (split at `_`, `-`, `.`, camelCase) that make its value a secret. */
const SECRET_WORDS = new Set([
  'token',
  'tokens',
  'key',
  'keys',
  'secret',
  'secrets',
  'password',
  'passwords',
  'passwd',
  'pass',
  'passphrase',
  'credential',
  'credentials',
  'auth',
  'authorization',
  'pat',
  'apikey',
  'privatekey',
  'accesskey',
  'secretkey',
  'sig',
  'signature',
  'bearer',
  'cookie',
  'cookies',
  // `--pwd`, `MYSQL_PWD`, `db_pwd`: but not the shell's own `PWD` (the working folder, NOT_SECRET)
  'pwd',
]);
/** Names that hold a secret word and are known to hold none: the shell's working folder. */
const NOT_SECRET = new Set(['PWD', 'OLDPWD']);
/** One-word compounds: `hftoken`, `dbpassword`, `clientsecret`. */
const SECRET_SUFFIXES = ['token', 'password', 'passwd', 'secret', 'apikey'];
const HARMLESS_BEFORE_TOKEN = new Set(
  // the last ten are counts: HF's include_num_input_tokens_seen ("no"), max_tokens, prompt_tokens
  (
    'pad eos bos unk sep cls mask special additional start end stop image audio video eot sentinel ' +
    'input inputs output outputs prompt completion num max min total'
  ).split(' '),
);
const HARMLESS_BEFORE_KEY = new Set(
  (
    'text label labels input inputs image images audio video sort metric monitor primary foreign column dataset data ' +
    'target output outputs prompt response answer feature field cache chosen rejected message messages reward sample ' +
    'group partition lookup hash dict'
  ).split(' '),
);
const HARMLESS_BEFORE = new Map<string, Set<string>>([
  ['token', HARMLESS_BEFORE_TOKEN],
  ['tokens', HARMLESS_BEFORE_TOKEN],
  ['key', HARMLESS_BEFORE_KEY],
  ['keys', HARMLESS_BEFORE_KEY],
]);

const WORD = /[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+/g;
const REDACTED = /^<redacted sha256:[0-9a-f]{12}>/;
const URL_RE = /([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^\s"'<>`]+)/g;
const URL_USER_PASSWORD = /^([^:/@?#]*):(.*)@/s;
const PORT = /^[0-9]*(?:[/?#]|$)/;
const TOKEN_LIKE = /^[A-Za-z0-9_-]{20,}$/;
const KNOWN_TOKEN =
  /(?<![A-Za-z0-9_-])(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16})(?![A-Za-z0-9_-])/g;
/**
 * `name=value` (also `?token=…&sig=…` in a URL, `--hub_token=…`, `HF_TOKEN=… cmd`, `?to%6Ben=…`: a name may be
 * percent-encoded). A value ends at `,` or `;` (`a=1,b=2`), but a secret one runs on to ASSIGN_SECRET_END.
 */
const ASSIGN =
  /(?<![A-Za-z0-9_.%-])(-{0,2}(?:[A-Za-z_]|%[0-9A-Fa-f]{2})(?:[A-Za-z0-9_.-]|%[0-9A-Fa-f]{2})*)=([^\s"'<>`&#,;]+)/g;
const ASSIGN_SECRET_END = /[\s"'<>`&#]|$/g;
const PERCENT = /%([0-9A-Fa-f]{2})/g;
/** `--hub_token VALUE` on a command line */
const FLAG = /(?<![A-Za-z0-9_.-])(--?[A-Za-z_][A-Za-z0-9_.-]*)([ \t]+)([^\s"'<>`-][^\s"'<>`]*)/g;
/** `"hub_token": "…"` / `'api_key': '…'` in printed JSON or a printed dict */
const QUOTED = /(["'])([A-Za-z_][A-Za-z0-9_.-]*)\1(\s*[:=]\s*)(["'])([^"'<>]+)\4/g;
/** `Authorization: Bearer …` in a printed header or a curl command line */
const AUTH_HEADER =
  /((?:proxy-)?authorization\s*:\s*(?:(?:bearer|basic|token)\s+|(?!(?:bearer|basic|token)\b)))([^\s"'<>]+)/gi;
const PLAIN_VALUE = /^(?:[+-]?[0-9][0-9_.eE+-]*|true|false|none|null|True|False|None)$/;
/**
 * `-p` in a command line given as words (argv): mysql's `-pSECRET`, sshpass's `-p SECRET`, 7z's and rar's `-pSECRET`.
 * It is also ssh's, docker's and many servers' port flag, so a separate word that is a port or a port mapping
 * (`-p 2222`, `-p 8080:80`, `-p 127.0.0.1:8888:8888`, `-p 8000-8010/udp`) is kept; anything else after `-p` is held
 * (srun's partition, pytest's plugin: a hash costs little there, a password in clear costs much). Joined to the flag
 * (`-pVALUE`) it is always held: mysql reads a password only that way, a port is rarely written so. Only argv: in free
 * text `-p` is too common (`mkdir -p out`, prose) to be read as a password.
 */
const PORTS = /^[0-9][0-9.:-]*(?:\/(?:tcp|udp|sctp))?$/;

const secretNames = new Map<string, boolean>();

/** The `<redacted sha256:…>` stand-in of a secret value. */
export function redactSecret(value: string): string {
  return `<redacted sha256:${createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 12)}>`;
}

/** Whether a variable, argument or query parameter named `name` holds a secret (by whole words of the name). */
export function isSecretName(name: string): boolean {
  if (NOT_SECRET.has(name)) return false;
  let hit = secretNames.get(name);
  if (hit !== undefined) return hit;
  hit = false;
  const words = (name.match(WORD) ?? []).map((w) => w.toLowerCase());
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (SECRET_WORDS.has(w)) {
      if (i > 0 && HARMLESS_BEFORE.get(w)?.has(words[i - 1]!)) continue;
      hit = true;
      break;
    }
    if (w.length > 6 && SECRET_SUFFIXES.some((s) => w.endsWith(s))) {
      hit = true;
      break;
    }
  }
  if (secretNames.size < 10000) secretNames.set(name, hit);
  return hit;
}

function redactUrl(whole: string, scheme: string, rest: string): string {
  const up = URL_USER_PASSWORD.exec(rest);
  if (up && up[2] && !PORT.test(up[2])) {
    // user:password@host; an unencoded `/` or `@` in the password runs it to the word's last `@`
    let user = up[1]!;
    if (TOKEN_LIKE.test(user) && /[0-9]/.test(user)) user = redactSecret(user);
    return scheme + user + ':' + redactSecret(up[2]) + rest.slice(up[0].length - 1);
  }
  let end = rest.length;
  for (const c of '/?#') {
    const i = rest.indexOf(c);
    if (i >= 0 && i < end) end = i;
  }
  const at = rest.lastIndexOf('@', end - 1);
  if (at <= 0 || rest.slice(0, at) === 'git') return whole;
  return scheme + redactSecret(rest.slice(0, at)) + rest.slice(at);
}

function assignName(name: string): string {
  const bare = name.replace(/^-+/, '');
  return bare.includes('%') ? bare.replace(PERCENT, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))) : bare;
}

/**
 * ASSIGN's matches with a secret name redacted, each value whole: `token=ab;cd,ef` hides all of `ab;cd,ef`
 * (a replace cannot widen a match, so the matches are walked by hand).
 */
function redactAssignments(text: string): string {
  let out = '';
  let pos = 0;
  for (const m of text.matchAll(ASSIGN)) {
    const start = m.index;
    if (start < pos || !isSecretName(assignName(m[1]!)) || REDACTED.test(m[2]!)) continue;
    const valueStart = start + m[0].length - m[2]!.length;
    ASSIGN_SECRET_END.lastIndex = valueStart;
    const end = ASSIGN_SECRET_END.exec(text)!.index;
    out += text.slice(pos, valueStart) + redactSecret(text.slice(valueStart, end));
    pos = end;
  }
  return pos === 0 ? text : out + text.slice(pos);
}

/**
 * `text` with the secrets inside it redacted: URL userinfo, `name=value` and `--name value` with a secret name,
 * quoted `"name": "value"`, and tokens of well-known shapes (hf_…, ghp_…, github_pat_…).
 */
export function redactText(text: string): string {
  if (text.length < 4) return text;
  if (text.includes('://')) text = text.replace(URL_RE, redactUrl);
  if (text.includes('=')) text = redactAssignments(text);
  if (text.includes('-')) {
    text = text.replace(FLAG, (m, flag: string, space: string, value: string) =>
      !isSecretName(flag.replace(/^-+/, '')) || PLAIN_VALUE.test(value) ? m : flag + space + redactSecret(value),
    );
  }
  if (text.includes('"') || text.includes("'")) {
    text = text.replace(QUOTED, (m, q: string, name: string, sep: string, vq: string, value: string) =>
      isSecretName(name) ? `${q}${name}${q}${sep}${vq}${redactSecret(value)}${vq}` : m,
    );
  }
  if (text.includes(':')) {
    text = text.replace(AUTH_HEADER, (_m, head: string, value: string) => head + redactSecret(value));
  }
  if (text.includes('_') || text.includes('-') || text.includes('AKIA')) {
    text = text.replace(KNOWN_TOKEN, (m) => redactSecret(m));
  }
  return text;
}

/**
 * Whether `value`, the argv word after the flag word `flag`, is a secret: a secret-named flag's (`--token X`), or
 * `-p`'s unless it is a port (PORTS).
 */
function secretAfter(flag: string, value: string): boolean {
  if (value === '' || !flag.startsWith('-') || flag.includes('=')) return false;
  if (flag === '-p') return !value.startsWith('-') && !PORTS.test(value);
  return isSecretName(flag.replace(/^-+/, ''));
}

/**
 * A command line with secrets hidden: a secret flag's next word (`--token X`, `-p X`: secretAfter), the password
 * joined to `-p` (`-pX`) and secrets inside words.
 */
export function redactArgv(argv: readonly string[]): string[] {
  return argv.map((a, i) => {
    if (i > 0 && secretAfter(argv[i - 1]!, a)) return secretString(a);
    if (a.startsWith('-p') && a.length > 2 && !isRedacted(a.slice(2))) return '-p' + redactSecret(a.slice(2));
    return redactText(a);
  });
}

/** A string value of a variable or argument named `name`: all of it if the name is secret, else its text. */
export function redactValue(name: string | undefined, value: string): string {
  if (name !== undefined && value !== '' && isSecretName(name) && !isRedacted(value)) {
    return redactSecret(value);
  }
  return redactText(value);
}

function isScalar(x: unknown): boolean {
  return x === null || typeof x === 'number' || typeof x === 'boolean';
}

/**
 * A dict under a key whose last word is one of these holds secrets throughout (`credentials: {pw: …}`, `secrets:
 * {db: …}`). Not `key`/`token`: a tensor's `attn.key` or a tokenizer's `added_tokens` are dicts of plain data.
 */
const HOLDER_WORDS = new Set(
  (
    'secret secrets credential credentials password passwords passwd passphrase auth authorization cookie cookies ' +
    'privatekey accesskey secretkey apikey'
  ).split(' '),
);
/** `--hub_token` as a list item of its own: the next item is its value */
const FLAG_ITEM = /^--?[A-Za-z_][A-Za-z0-9_.-]*$/;

function holdsSecrets(name: string): boolean {
  const words = name.match(WORD) ?? [];
  return words.length > 0 && HOLDER_WORDS.has(words[words.length - 1]!.toLowerCase()) && isSecretName(name);
}

function isRedacted(value: string): boolean {
  return REDACTED.test(value) && value.length === 30;
}

function secretString(value: string): string {
  return value !== '' && !isRedacted(value) ? redactSecret(value) : value;
}

/**
 * A copy of a JSON-like tree with secrets redacted: string values by their key's name (unless `byName` is false: a
 * document whose keys are not variable names, like a package list) and by their text; every string under a key that
 * holds secrets; in an array, the item after a `--secret_flag` item. Arrays of numbers (a metrics series) are
 * returned as they are.
 */
export function redactTree<T>(value: T, byName = true): T {
  return walk(value, undefined, byName, false) as T;
}

function walk(value: unknown, name: string | undefined, byName: boolean, secret: boolean): unknown {
  if (typeof value === 'string') {
    if (secret) return secretString(value);
    return byName ? redactValue(name, value) : redactText(value);
  }
  if (Array.isArray(value)) {
    if (value.every(isScalar)) return value;
    const out = value.map((x) => walk(x, name, byName, secret));
    for (let i = 0; i + 1 < value.length; i++) {
      const flag: unknown = value[i];
      const next: unknown = value[i + 1];
      if (
        typeof flag === 'string' &&
        typeof next === 'string' &&
        FLAG_ITEM.test(flag) &&
        !next.startsWith('-') &&
        !PLAIN_VALUE.test(next) &&
        secretAfter(flag, next)
      ) {
        out[i + 1] = secretString(next);
      }
    }
    return out;
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = walk(v, k, byName, secret || (byName && holdsSecrets(k)));
    return out;
  }
  return value;
}
