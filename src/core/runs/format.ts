/** Sizes, ages and step numbers as the Remote Runs tree and `known-good ls` show them. */

const UNITS = ['KB', 'MB', 'GB', 'TB', 'PB', 'EB'] as const;

/** 1024-based, one decimal below 100: `512 B`, `2.1 GB`, `24.3 GB`, `512 MB`. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return '?';
  if (bytes < 1024) return `${Math.round(bytes)} B`;
  let v = bytes / 1024;
  let u = 0;
  while (u < UNITS.length - 1 && roundShown(v) >= 1024) {
    v /= 1024;
    u++;
  }
  const shown = roundShown(v);
  return `${shown < 100 ? shown.toFixed(1) : String(shown)} ${UNITS[u]}`;
}

function roundShown(v: number): number {
  return v < 100 ? Math.round(v * 10) / 10 : Math.round(v);
}

/** `2,254,857,830 bytes`, for tooltips where the exact number matters. */
export function formatExactBytes(bytes: number): string {
  return `${Math.round(bytes).toLocaleString('en-US')} ${bytes === 1 ? 'byte' : 'bytes'}`;
}

/**
 * How long ago `ms` was, seen from `now` (both epoch milliseconds, on the same clock): `just now`, `42 s ago`,
 * `12 min ago`, `3 h ago`, `5 d ago`, `4 mo ago`, `2 y ago`. A time a little ahead of `now` (clock skew between
 * this machine and the remote) still reads `just now`; one far ahead says so.
 */
export function formatAge(ms: number, now: number): string {
  const s = Math.floor((now - ms) / 1000);
  if (s < -120) return 'in the future';
  if (s < 10) return 'just now';
  if (s < 60) return `${s} s ago`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min ago`;
  const h = Math.floor(min / 60);
  if (h < 48) return `${h} h ago`;
  const d = Math.floor(h / 24);
  if (d < 60) return `${d} d ago`;
  if (d < 730) return `${Math.floor(d / 30.44)} mo ago`;
  return `${Math.floor(d / 365.25)} y ago`;
}

export function formatIso(ms: number): string {
  return new Date(ms).toISOString();
}

const two = (n: number) => String(n).padStart(2, '0');

/**
 * A time as people read it, in this machine's time zone with its offset: `2026-12-01 14:02:33 (UTC+01:00)`.
 * The offset keeps it unambiguous (a remote's time and this one's can differ); an invalid time reads `unknown`.
 */
export function formatLocalTime(ms: number): string {
  const d = new Date(ms);
  if (!Number.isFinite(d.getTime())) return 'unknown';
  const off = -d.getTimezoneOffset();
  const sign = off < 0 ? '-' : '+';
  const zone = off === 0 ? 'UTC' : `UTC${sign}${two(Math.floor(Math.abs(off) / 60))}:${two(Math.abs(off) % 60)}`;
  return (
    `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
    `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())} (${zone})`
  );
}

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

/** Name order with numbers compared as numbers: `step_9` < `step_10` < `step_100`. */
export function naturalCompare(a: string, b: string): number {
  const pa = a.split(/(\d+)/);
  const pb = b.split(/(\d+)/);
  const n = Math.min(pa.length, pb.length);
  for (let i = 0; i < n; i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    if (i % 2 === 1) {
      const d = Number(x) - Number(y);
      if (d !== 0) return d;
      return x.length - y.length;
    }
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
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
