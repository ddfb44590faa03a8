/** Step numbers and printable names as the Remote Runs tree and `known-good ls` show them. */

// Same rules as python/list_runs.py parse_step: the keyword says which number in the name is the step.
const STEP_RES = [
  /(?:^|[^a-z0-9])(?:global_)?steps?[_\-=]?(\d+)/i,
  /(?:^|[^a-z0-9])(?:checkpoint|ckpt|iter|iteration)s?[_\-=]?(\d+)/i,
];
const EPOCH_RE = /(?:^|[^a-z0-9])epochs?[_\-=]?(\d+)/i;

/** The step (and epoch) in a checkpoint's name: `epoch=3-step=1200.ckpt` → `{ step: 1200, epoch: 3 }`. */
export function parseStep(name: string): { step?: number; epoch?: number } {
  const out: { step?: number; epoch?: number } = {};
  if (!/\d/.test(name)) return out;
  for (const rx of STEP_RES) {
    const m = rx.exec(name);
    if (m) {
      out.step = Number(m[1]);
      break;
    }
  }
  if (out.step === undefined) {
    const base = name.startsWith('.') ? name : (name.split('.')[0] ?? '');
    if (/^\d+$/.test(base)) out.step = Number(base);
  }
  const e = EPOCH_RE.exec(name);
  if (e) out.epoch = Number(e[1]);
  return out;
}

/**
 * A name as one printable line: invalid UTF-8 bytes as `\xNN`, control characters as `\n`, `\t`, `\xNN`. `raw` is
 * the exact bytes when the probe had to escape the name (nameB64), else the text is used as it is.
 */
export function printableName(text: string, raw?: Uint8Array): string {
  const s = raw ? decodeLenient(raw) : text;
  // eslint-disable-next-line no-control-regex -- control characters are exactly what must be made visible
  return s.replace(/[\u0000-\u001f\u007f]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\t') return '\\t';
    if (c === '\r') return '\\r';
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}

/** UTF-8 where the bytes are valid UTF-8, `\xNN` for each byte that is not. */
export function decodeLenient(bytes: Uint8Array): string {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    const len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    if (len > 0 && i + len <= bytes.length) {
      try {
        out += decoder.decode(bytes.subarray(i, i + len));
        i += len;
        continue;
      } catch {
        /* not a valid sequence: escape its first byte */
      }
    }
    out += `\\x${b.toString(16).padStart(2, '0')}`;
    i++;
  }
  return out;
}
