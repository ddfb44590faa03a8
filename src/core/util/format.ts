/**
 * Sizes, ages and name order as every part of Known Good shows them (Remote Runs, `known-good ls`, baselines,
 * cache archives, probe summaries): one function each, so the same number never reads two ways.
 */

const UNITS = ['KB', 'MB', 'GB', 'TB', 'PB', 'EB'] as const;

/** 1024-based, one decimal below 100: `512 B`, `2.1 GB`, `24.3 GB`, `512 MB`. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return 'unknown';
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
 * this machine and the remote) still reads `just now`; one far ahead says so. For listings, where seconds matter.
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

export function formatIso(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * The coarser age of something a person made by hand (a baseline, a cache archive), from its ISO time: `just now`
 * for the first minute, `5 min ago`, `3 h ago`, `2 days ago`, `4 months ago`, `in the future` (clock skew).
 */
export function timeAgo(iso: string, now: number = Date.now()): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return 'unknown time';
  const s = Math.round((now - t) / 1000);
  if (s < -60) return 'in the future';
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  const d = Math.floor(s / 86400);
  if (d < 60) return `${d} day${d === 1 ? '' : 's'} ago`;
  return `${Math.floor(d / 30)} months ago`;
}

/**
 * Name order with numbers compared as numbers, independent of the locale: `step_9` < `step_10` < `step_100`,
 * `gpu.2` < `gpu.10`.
 */
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
