"""Reduce a jsonl metrics log to plot data, on the host that has it (stdlib only, Python 3.8+).

    metrics_reduce.py FILE [--buckets N] [--x step|time|line] [--from X --to X] [--offset BYTES]
                           [--series k1,k2] [--jobs N] [--no-fast] [--preview | --preview-bytes N] [--fresh]

One pass over the file in binary mode.  Numeric keys are found by themselves (nested dicts flattened as ``a.b``);
NaN/Infinity values, lines without numbers and malformed lines are skipped and counted, never fatal.  A last line
without its newline is being written: it is left for the next read and ``nextOffset`` points at its start.

Per series the points are reduced to at most ``--buckets`` buckets of equal width in x, each keeping the smallest,
largest and last value (the last is the value at the greatest x; at equal x the later line wins, so a run resumed
from an earlier step overrides what it replays).  Plot lines drawn through min and max keep every spike.

Large files are split at line starts into parts reduced by forked worker processes (Linux; ``--jobs``, default
the CPUs available, at most 8): the buckets are powers of two wide from x = 0, so the parts' grids merge exactly.

A first look at a large file (``--preview``): whole lines from evenly spaced windows (8 MiB in all by default, the
start and the end of the file always among them), reduced the same way and marked ``sample``; an exact read follows.

Inside the resident helper the module lives on between requests, and so does what it learnt about a file: the
exact reduction at the offset it reached and, per stretch of about 256 KiB, the range of x in it (a zone map).
Opening the same log again reads only the bytes appended since; a zoom window reads only the stretches whose x
range meets the window.  Both are dropped when the file is no longer the one read (other inode, shorter, or the
bytes at its start or at the cached offset changed).

Speed: ``json.loads`` per line costs about 2.5 s per million lines here.  Real logs repeat a handful of line
shapes (same keys in the same order, only the numbers change), so each shape seen is turned into a regular
expression that captures its numbers; one ``findall`` per 4 MiB block then yields the numbers of every line of a
known shape, converted column by column at C speed.  A shape is only trusted after it reproduced ``json.loads`` on
the line it came from; lines of no known shape (first of their kind, NaN, odd spacing) take the json.loads path.
"""
import bisect
import itertools
import json
import marshal
import math
import os
import re
import sys
import threading
import time
import warnings

import kg_common

STEP_KEYS = ("step", "global_step", "_step", "iter", "iteration", "train/global_step", "trainer/global_step")
TIME_KEYS = ("time", "timestamp", "_timestamp", "wall_time")
DEFAULT_BUCKETS = 2000
# Bytes per findall.  Small blocks keep each block's few thousand objects in memory the allocator has just freed
# (and in the CPU caches): 64 KiB reads a million-line log in 1.5 s here where 4 MiB took 2.5-3.6 s.
BLOCK = 64 << 10
MAX_SHAPES = 12
MAX_SERIES = 256
# Below this many bytes per process, forking costs more than it saves.
PART_MIN = 8 << 20
PREVIEW_BYTES = 8 << 20
PREVIEW_WINDOWS = 2048
# A zone of the zone map covers at least this many bytes (whole blocks).
ZONE_MIN = 256 << 10
CACHE_FILES = 8
# Memory the kept reductions and zone maps may use in all (about: marshal bytes, ~100 bytes per zone).
CACHE_BYTES = 64 << 20
# Bytes compared at the start of the file and before the cached offset to tell that the file is still the same.
SIG = 4096

_NUM = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
# The same numbers, matched twice as fast where the regex engine has possessive quantifiers (Python 3.11+): the
# token after a number is always a fixed character, so giving up backtracking changes no match.
_NUM_FAST = rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][-+]?[0-9]++)?+" if sys.version_info >= (3, 11) else _NUM
_STR = rb'"(?:[^"\\\n]|\\.)*"'
_TOKEN = re.compile(
    rb"([ \t]*)(?:(" + _STR + rb")|(" + _NUM + rb")|(true|false|null)|([{}\[\]:,])|(NaN|-?Infinity))"
)


class _Args(object):
    pass


def parse_args(argv):
    a = _Args()
    a.path = None
    a.buckets = DEFAULT_BUCKETS
    a.x = "step"
    a.lo = None
    a.hi = None
    a.offset = 0
    a.series = None
    a.fast = True
    a.jobs = None
    a.preview = None
    a.fresh = False
    it = iter(argv)
    for tok in it:
        if tok in ("--buckets", "--x", "--from", "--to", "--offset", "--series", "--jobs", "--preview-bytes"):
            try:
                val = next(it)
            except StopIteration:
                raise kg_common.ProbeError("%s needs a value" % tok, "bad-args")
            try:
                if tok == "--buckets":
                    a.buckets = int(val)
                elif tok == "--x":
                    a.x = val
                elif tok == "--from":
                    a.lo = float(val)
                elif tok == "--to":
                    a.hi = float(val)
                elif tok == "--offset":
                    a.offset = int(val)
                elif tok == "--jobs":
                    a.jobs = max(1, int(val))
                elif tok == "--preview-bytes":
                    a.preview = int(val)
                else:
                    a.series = [s for s in val.split(",") if s]
            except ValueError:
                raise kg_common.ProbeError("bad value for %s: %r" % (tok, val), "bad-args")
        elif tok == "--no-fast":
            a.fast = False
        elif tok == "--preview":
            a.preview = PREVIEW_BYTES
        elif tok == "--fresh":
            a.fresh = True
        elif tok.startswith("--"):
            raise kg_common.ProbeError("unknown option %s" % tok, "bad-args")
        elif a.path is None:
            a.path = tok
        else:
            raise kg_common.ProbeError("only one FILE is read", "bad-args")
    if a.path is None:
        raise kg_common.ProbeError("usage: metrics_reduce.py FILE [--buckets N] [--x step|time|line] "
                                   "[--from X --to X] [--offset BYTES] [--series k1,k2]", "bad-args")
    if a.x not in ("step", "time", "line"):
        raise kg_common.ProbeError("--x must be step, time or line", "bad-args")
    if not 1 <= a.buckets <= 1000000:
        raise kg_common.ProbeError("--buckets must be between 1 and 1000000", "bad-args")
    if (a.lo is None) != (a.hi is None):
        raise kg_common.ProbeError("--from and --to go together", "bad-args")
    if a.lo is not None and not (math.isfinite(a.lo) and math.isfinite(a.hi) and a.lo <= a.hi):
        raise kg_common.ProbeError("--from must be a number not above --to", "bad-args")
    if a.offset < 0:
        raise kg_common.ProbeError("--offset must not be negative", "bad-args")
    if a.preview is not None and a.preview < 1:
        raise kg_common.ProbeError("--preview-bytes must be positive", "bad-args")
    return a


# ---------------------------------------------------------------------------------------------------------------
# Lines one by one (the reference; every line of no known shape goes here)


def _flatten(d, prefix, out, counts):
    for k, v in d.items():
        t = type(v)
        if t is float:
            if v - v == 0.0:
                out[prefix + k] = v
            else:
                counts["nonFinite"] += 1
        elif t is int:
            try:
                out[prefix + k] = float(v)
            except OverflowError:
                counts["nonFinite"] += 1
        elif t is dict:
            _flatten(v, prefix + k + ".", out, counts)


def numbers_of(line, counts):
    """The flattened numeric values of one line, or None (counted as malformed / not numeric)."""
    try:
        doc = json.loads(line)
    except ValueError:
        counts["malformed"] += 1
        return None
    if type(doc) is not dict:
        counts["malformed"] += 1
        return None
    out = {}
    _flatten(doc, "", out, counts)
    if not out:
        counts["nonNumeric"] += 1
        return None
    return out


# ---------------------------------------------------------------------------------------------------------------
# Line shapes


class Shape(object):
    """A line shape: the regex source that matches lines like it, and the key path of each captured number."""

    def __init__(self, pattern, paths):
        self.pattern = pattern
        self.paths = paths  # one per group, in order
        self.first = 0  # index of its first group in the combined pattern


def shape_of(line):
    """The shape of one line, or None when it has none worth keeping (no numbers, NaN, arrays of objects...)."""
    pos = 0
    parts = []
    paths = []
    # Stack of [kind, path prefix, expecting a key, current key, inside an array].
    stack = []
    in_array = False
    first = True
    while True:
        m = _TOKEN.match(line, pos)
        if m is None:
            break
        ws, s, num, lit, punct, nonfinite = m.groups()
        if nonfinite is not None:
            return None
        if first:
            if punct != b"{" or ws:
                return None
            first = False
        elif not stack:
            return None  # something after the closing brace
        if ws:
            parts.append(re.escape(ws))
        pos = m.end()
        top = stack[-1] if stack else None
        if punct is not None:
            parts.append(re.escape(punct))
            if punct == b"{":
                prefix = ""
                if top is not None:
                    prefix = top[1] + (top[3] + "." if top[0] == "obj" else "")
                stack.append(["obj", prefix, True, None, in_array])
            elif punct == b"[":
                stack.append(["arr", "", False, None, in_array])
                in_array = True
            elif punct in (b"}", b"]"):
                if top is None:
                    return None
                stack.pop()
                in_array = top[4]
                if not stack:
                    break
            elif punct == b",":
                if top is not None and top[0] == "obj":
                    top[2] = True
            continue
        if s is not None:
            if top is not None and top[0] == "obj" and top[2]:
                try:
                    key = json.loads(s)
                except ValueError:
                    return None
                top[3] = key
                top[2] = False
                parts.append(re.escape(s))
            else:
                parts.append(_STR)
            continue
        if num is not None:
            if top is not None and top[0] == "obj" and not in_array:
                parts.append(b"(" + _NUM_FAST + b")")
                paths.append(top[1] + top[3])
            else:
                parts.append(_NUM)
            continue
        parts.append(rb"(?:true|false|null)")
    if stack or first:
        return None
    if line[pos:] not in (b"", b"\r"):
        return None
    parts.append(rb"\r?")
    if not paths:
        return None
    return Shape(b"".join(parts), paths)


def verified_shape(line):
    """A shape only counts when its captures give exactly what json.loads gives on the line it came from."""
    shape = shape_of(line)
    if shape is None:
        return None
    try:
        m = re.compile(shape.pattern).fullmatch(line)
    except (re.error, OverflowError, RecursionError):
        return None
    if m is None:
        return None
    counts = {"malformed": 0, "nonNumeric": 0, "nonFinite": 0}
    want = numbers_of(line, counts)
    if want is None or counts["nonFinite"]:
        return None
    got = {}
    for path, g in zip(shape.paths, m.groups()):
        got[path] = float(g)
    if got != want:
        return None  # duplicate keys and the like: leave such lines to json.loads
    return shape


# ---------------------------------------------------------------------------------------------------------------
# Buckets


class Reducer(object):
    """Equal-width buckets over x shared by all series; without a window the width doubles as the range grows."""

    def __init__(self, nb, lo=None, hi=None):
        self.nb = nb
        self.window = lo is not None
        self.origin = lo
        self.width = None
        if self.window:
            self.width = (hi - lo) / nb if hi > lo else 1.0
            self.hi = hi
        self.lo_idx = None
        self.hi_idx = None
        self.buckets = {}  # series -> {index: [min, max, last x, last y, last t, count]}
        self.xmin = None
        self.xmax = None

    def _double(self):
        self.width *= 2.0
        self.lo_idx //= 2
        self.hi_idx //= 2
        for name, old in self.buckets.items():
            new = {}
            for k in sorted(old):
                b = old[k]
                k2 = k // 2
                cur = new.get(k2)
                if cur is None:
                    new[k2] = b
                else:
                    _fold(cur, b)
            self.buckets[name] = new

    def _bounds(self, xs):
        """(bucket, i, j) for each run xs[i:j] of sorted xs in one bucket: a few divisions per bucket, not per point."""
        o, w, floor = self.origin, self.width, math.floor
        last_idx = self.nb - 1 if self.window else None
        n = len(xs)
        out = []
        i = 0
        left = bisect.bisect_left
        while i < n:
            k = floor((xs[i] - o) / w)
            if last_idx is not None and k >= last_idx:
                out.append((last_idx, i, n))
                break
            # The first x of the next bucket, then corrected so that membership is exactly floor((x - o) / w).
            j = left(xs, o + (k + 1) * w, i + 1)
            while j > i + 1 and floor((xs[j - 1] - o) / w) > k:
                j -= 1
            while j < n and floor((xs[j] - o) / w) <= k:
                j += 1
            out.append((k, i, j))
            i = j
        return out

    def add(self, xs, ts, series):
        """Points sharing xs (and ts, wall times, or None): series maps a key to its ys."""
        if not xs:
            return
        xmin = min(xs)
        xmax = max(xs)
        if self.xmin is None or xmin < self.xmin:
            self.xmin = xmin
        if self.xmax is None or xmax > self.xmax:
            self.xmax = xmax
        if self.window:
            lo, hi = self.origin, self.hi
            if xmin < lo or xmax > hi:
                keep = [i for i, x in enumerate(xs) if lo <= x <= hi]
                if not keep:
                    return
                xs = [xs[i] for i in keep]
                ts = [ts[i] for i in keep] if ts is not None else None
                series = dict((k, [ys[i] for i in keep]) for k, ys in series.items())
        else:
            if self.width is None:
                # Buckets are [k * w, (k + 1) * w) with w a power of two: x / w is then exact, and the width ends
                # up the smallest power of two that fits the data in nb buckets, however the lines were chunked.
                self.origin = 0.0
                mag = max(abs(xmin), abs(xmax), 1.0)
                w = 2.0 ** max(math.frexp(mag)[1] - 41, -1000)
                span = xmax - xmin
                if span > 0:
                    w = max(w, 2.0 ** max(math.floor(math.log2(span / self.nb)) - 1, -1000))
                self.width = w
            o, w = self.origin, self.width
            blo = math.floor((xmin - o) / w)
            bhi = math.floor((xmax - o) / w)
            if self.lo_idx is None:
                self.lo_idx, self.hi_idx = blo, bhi
            while max(self.hi_idx, bhi) - min(self.lo_idx, blo) + 1 > self.nb:
                self._double()
                blo = math.floor((xmin - o) / self.width)
                bhi = math.floor((xmax - o) / self.width)
            self.lo_idx = min(self.lo_idx, blo)
            self.hi_idx = max(self.hi_idx, bhi)
        # In x order (stable: at equal x the later line stays later) so that each bucket is one slice.
        if any(map(float.__gt__, xs, itertools.islice(xs, 1, None))):
            order = sorted(range(len(xs)), key=xs.__getitem__)
            xs = [xs[i] for i in order]
            ts = [ts[i] for i in order] if ts is not None else None
            series = dict((k, [ys[i] for i in order]) for k, ys in series.items())
        bounds = self._bounds(xs)
        for name, ys in series.items():
            table = self.buckets.get(name)
            if table is None:
                table = self.buckets[name] = {}
            for k, i, j in bounds:
                if j - i == 1:
                    y = ys[i]
                    mn = mx = y
                else:
                    seg = ys[i:j]
                    mn = min(seg)
                    mx = max(seg)
                    y = ys[j - 1]
                lx = xs[j - 1]
                lt = ts[j - 1] if ts is not None else None
                cur = table.get(k)
                if cur is None:
                    table[k] = [mn, mx, lx, y, lt, j - i]
                else:
                    if mn < cur[0]:
                        cur[0] = mn
                    if mx > cur[1]:
                        cur[1] = mx
                    if lx >= cur[2]:
                        cur[2], cur[3], cur[4] = lx, y, lt
                    cur[5] += j - i

    def result(self, names):
        out = []
        for name in names:
            table = self.buckets.get(name)
            if not table:
                continue
            keys = sorted(table)
            rows = [table[k] for k in keys]
            s = {
                "key": name,
                "x": [_compact(r[2]) for r in rows],
                "min": [_compact(r[0]) for r in rows],
                "max": [_compact(r[1]) for r in rows],
                "last": [_compact(r[3]) for r in rows],
                "count": sum(r[5] for r in rows),
                "lastX": _compact(rows[-1][2]),
                "lastValue": _compact(rows[-1][3]),
            }
            if all(r[4] is not None for r in rows):
                s["t"] = [r[4] for r in rows]
            out.append(s)
        return out


def _fold(cur, b):
    """Adds bucket b ([min, max, last x, last y, last t, count]) into bucket cur; at equal x, b is the later one."""
    if b[0] < cur[0]:
        cur[0] = b[0]
    if b[1] > cur[1]:
        cur[1] = b[1]
    if b[2] >= cur[2]:
        cur[2], cur[3], cur[4] = b[2], b[3], b[4]
    cur[5] += b[5]


def _compact(v):
    return int(v) if v.is_integer() and abs(v) < 2 ** 53 else v


def _finite_or_filter(xs, ts, ys, counts):
    """Values that overflowed float (1e999) are the only non-finite ones a shape can capture: drop them."""
    total = sum(ys)
    if total - total == 0.0:
        return xs, ts, ys
    keep = [i for i, y in enumerate(ys) if y - y == 0.0]
    counts["nonFinite"] += len(ys) - len(keep)
    return [xs[i] for i in keep], ([ts[i] for i in keep] if ts is not None else None), [ys[i] for i in keep]


# ---------------------------------------------------------------------------------------------------------------
# The pass


class Pass(object):
    def __init__(self, a, xmode, track=False):
        self.a = a
        self.xmode = xmode
        self.want = set(a.series) if a.series else None
        self.xkeys = STEP_KEYS if xmode == "step" else TIME_KEYS if xmode == "time" else ()
        self.skip_default = set(STEP_KEYS) | set(TIME_KEYS)
        self.reducer = Reducer(a.buckets, a.lo, a.hi)
        self.counts = {"malformed": 0, "nonNumeric": 0, "nonFinite": 0, "noX": 0}
        self.keys = set()
        self.xused = set()
        self.lines = 0
        self.blank = 0
        self.fast_lines = 0
        self.shapes = []
        self.merged_shapes = 0
        self.jobs = 1
        self.shape_keys = set()
        self.combined = None
        self.bytes_read = 0
        # The zone map being built (track): (start, end, x min, x max) per stretch of whole blocks, in file order.
        self.zones = [] if track else None
        self.zlo = None
        self.zhi = None

    def _zone_x(self, lo, hi):
        if self.zlo is None or lo < self.zlo:
            self.zlo = lo
        if self.zhi is None or hi > self.zhi:
            self.zhi = hi

    def end_block(self, start, end):
        """The lines of bytes [start, end) were read: extends the zone map with their x range."""
        self.bytes_read += end - start
        zones = self.zones
        if zones is None:
            return
        lo, hi = self.zlo, self.zhi
        self.zlo = self.zhi = None
        if zones and zones[-1][1] == start and zones[-1][1] - zones[-1][0] < ZONE_MIN:
            s0, _, lo0, hi0 = zones[-1]
            if lo0 is not None and (lo is None or lo0 < lo):
                lo = lo0
            if hi0 is not None and (hi is None or hi0 > hi):
                hi = hi0
            zones[-1] = (s0, end, lo, hi)
        else:
            zones.append((start, end, lo, hi))

    def is_series(self, key):
        if self.want is not None:
            return key in self.want
        return key not in self.skip_default

    def _x_of(self, keys):
        for k in self.xkeys:
            if k in keys:
                return k
        return None

    def _t_of(self, keys):
        if self.xmode != "step":
            return None
        for k in TIME_KEYS:
            if k in keys:
                return k
        return None

    def _learn(self, line):
        if not self.a.fast or len(self.shapes) >= MAX_SHAPES:
            return
        shape = verified_shape(line)
        if shape is None or shape.pattern in self.shape_keys:
            return
        self.shape_keys.add(shape.pattern)
        self.shapes.append(shape)
        parts = []
        g = 0
        for s in self.shapes:
            s.first = g
            g += len(s.paths)
            parts.append(s.pattern)
        try:
            self.combined = re.compile(rb"^(?:" + b"|".join(parts) + rb"|(.*))$", re.M)
        except (re.error, OverflowError, RecursionError):
            self.shapes.pop()
            self.shape_keys.discard(shape.pattern)
            self.combined = None

    def block(self, buf, start, end, base):
        """The complete lines in buf[start:end] (end is the position of the last newline); base = lines before."""
        if self.combined is None and self.a.fast:
            # Learn a shape from the first lines so the rest of this block already takes the fast path.
            tries = 0
            while self.combined is None and tries < 64:
                nl = buf.find(b"\n", start, end)
                stop = end if nl < 0 else nl
                self.lines += 1
                base += 1
                tries += 1
                self._slow([bytes(buf[start:stop])], [base])
                if nl < 0:
                    return
                start = nl + 1
        combined = self.combined
        if combined is None:
            lines = bytes(buf[start:end]).split(b"\n")
            self.lines += len(lines)
            self._slow(lines, range(base + 1, base + len(lines) + 1))
            return
        # The catch-all alternative matches whatever no shape does, so there is exactly one row per line.
        rows = combined.findall(buf, start, end)
        n = len(rows)
        self.lines += n
        cols = list(zip(*rows))
        compress = itertools.compress
        matched = 0
        for shape in self.shapes:
            mask = cols[shape.first]
            if not any(mask):
                continue
            paths = shape.paths
            xk = self._x_of(paths)
            tk = self._t_of(paths)
            cnt = n - mask.count(b"")
            matched += cnt
            if self.xmode == "line":
                xs = [float(i) for i in compress(range(base + 1, base + n + 1), mask)]
            elif xk is None:
                self.counts["noX"] += cnt
                self.keys.update(paths)
                continue
            else:
                xs = list(map(float, compress(cols[shape.first + paths.index(xk)], mask)))
                self.xused.add(xk)
                if self.zones is not None:
                    self._zone_x(min(xs), max(xs))
            ts = list(map(float, compress(cols[shape.first + paths.index(tk)], mask))) if tk else None
            series = {}
            for j, p in enumerate(paths):
                self.keys.add(p)
                if p == xk or not self.is_series(p):
                    continue
                ys = list(map(float, compress(cols[shape.first + j], mask)))
                sx, st, sy = _finite_or_filter(xs, ts, ys, self.counts)
                if sx is xs:
                    series[p] = sy
                else:
                    self.reducer.add(sx, st, {p: sy})
            if xs and (ts is None or sum(ts) - sum(ts) == 0.0) and sum(xs) - sum(xs) == 0.0:
                self.reducer.add(xs, ts, series)
            else:  # x itself overflowed somewhere: point by point
                for p, ys in series.items():
                    keep = [i for i in range(len(xs)) if xs[i] - xs[i] == 0.0 and (ts is None or ts[i] - ts[i] == 0.0)]
                    self.reducer.add([xs[i] for i in keep], [ts[i] for i in keep] if ts else None,
                                     {p: [ys[i] for i in keep]})
        self.fast_lines += matched
        rest = cols[-1]
        others = list(compress(rest, rest))
        if others:
            self._slow(others, compress(range(base + 1, base + n + 1), rest))
        self.blank += n - matched - len(others)

    def _slow(self, lines, numbers):
        """json.loads line by line; numbers yields each line's 1-based number."""
        per = {}  # series -> (xs, ts, ys)
        learned = 0
        for line, lineno in zip(lines, numbers):
            if not line or line.isspace():
                self.blank += 1
                continue
            vals = numbers_of(line, self.counts)
            if vals is None:
                continue
            if learned < 4 and len(self.shapes) < MAX_SHAPES and self.a.fast:
                before = len(self.shapes)
                self._learn(line)
                learned += len(self.shapes) - before
            self.keys.update(vals)
            if self.xmode == "line":
                xk = None
                x = float(lineno)
            else:
                xk = self._x_of(vals)
                if xk is None:
                    self.counts["noX"] += 1
                    continue
                self.xused.add(xk)
                x = vals[xk]
                if self.zones is not None:
                    self._zone_x(x, x)
            tk = self._t_of(vals)
            t = vals[tk] if tk else None
            for k, v in vals.items():
                if k == xk or not self.is_series(k):
                    continue
                e = per.get(k)
                if e is None:
                    e = per[k] = ([], [], [], [True])
                e[0].append(x)
                e[1].append(t)
                e[2].append(v)
                if t is None:
                    e[3][0] = False
        for k, (xs, ts, ys, has_t) in per.items():
            self.reducer.add(xs, ts if has_t[0] else None, {k: ys})


def scan(p, f, start, stop, buf=None):
    """Feeds the complete lines of bytes [start, stop) (stop None: to the end) to p; returns the offset after them."""
    f.seek(start)
    pos = start
    left = None if stop is None else stop - start
    # One buffer, reused: fresh allocations cost more than the parsing on some hosts.
    if buf is None:
        buf = bytearray(BLOCK)
    filled = 0
    first = start == 0
    base = 0
    while left is None or left > 0:
        if filled == len(buf):  # one line longer than the buffer
            buf.extend(bytes(len(buf)))
        with memoryview(buf) as mv:
            room = len(buf) - filled if left is None else min(len(buf) - filled, left)
            got = f.readinto(mv[filled:filled + room])
        if not got:
            break
        if left is not None:
            left -= got
        filled += got
        begin = 0
        if first and filled >= 3:
            first = False
            if buf[:3] == b"\xef\xbb\xbf":
                begin = 3
        cut = buf.rfind(b"\n", begin, filled)
        if cut < 0:
            continue
        p.block(buf, begin, cut, base)
        base = p.lines
        done = cut + 1
        p.end_block(pos, pos + done)
        buf[: filled - done] = buf[done:filled]
        filled -= done
        pos += done
    # A line still being written (no newline yet) is read next time, whole.
    return pos


def _line_start_after(f, pos):
    """The offset of the first line that starts at or after pos."""
    f.seek(pos - 1)
    at = pos - 1
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            return None
        nl = chunk.find(b"\n")
        if nl >= 0:
            return at + nl + 1
        at += len(chunk)


def _last_line_start(f, start, size):
    """Where the last whole line of [start, size) starts (start when there is at most one)."""
    newlines = []
    end = size
    while end > start and len(newlines) < 2:
        begin = max(start, end - (1 << 16))
        f.seek(begin)
        chunk = f.read(end - begin)
        at = len(chunk)
        while len(newlines) < 2:
            at = chunk.rfind(b"\n", 0, at)
            if at < 0:
                break
            newlines.append(begin + at)
        end = begin
    return newlines[1] + 1 if len(newlines) == 2 else start


def default_jobs():
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def _can_fork():
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def _state(p, pos):
    r = p.reducer
    return {
        "pos": pos, "counts": p.counts, "keys": sorted(p.keys), "xused": sorted(p.xused), "lines": p.lines,
        "blank": p.blank, "fast": p.fast_lines, "shapes": len(p.shapes), "width": r.width, "lo": r.lo_idx,
        "hi": r.hi_idx, "buckets": r.buckets, "xmin": r.xmin, "xmax": r.xmax, "zones": p.zones,
        "read": p.bytes_read,
    }


def _merge(p, st):
    """Adds a worker's pass (a later part of the file) into p."""
    for k, v in st["counts"].items():
        p.counts[k] += v
    p.keys.update(st["keys"])
    p.xused.update(st["xused"])
    p.lines += st["lines"]
    p.blank += st["blank"]
    p.fast_lines += st["fast"]
    p.merged_shapes = max(p.merged_shapes, st["shapes"])
    p.bytes_read += st["read"]
    if p.zones is not None:
        if st["zones"] is None:
            p.zones = None
        else:
            p.zones.extend(tuple(z) for z in st["zones"])
    r = p.reducer
    if st["width"] is None or not st["buckets"]:
        if st["xmin"] is not None:
            r.xmin = st["xmin"] if r.xmin is None else min(r.xmin, st["xmin"])
            r.xmax = st["xmax"] if r.xmax is None else max(r.xmax, st["xmax"])
        return
    other = Reducer(r.nb)
    other.window = r.window
    other.width, other.lo_idx, other.hi_idx = st["width"], st["lo"], st["hi"]
    other.buckets = st["buckets"]
    if r.window:
        other.origin, other.hi = r.origin, r.hi
    elif r.width is None or not r.buckets:
        r.width, r.lo_idx, r.hi_idx, r.origin = other.width, other.lo_idx, other.hi_idx, 0.0
    else:
        # Both grids are powers of two from 0: the finer one coarsens onto the other exactly.
        while r.width < other.width:
            r._double()
        while other.width < r.width:
            other._double()
        r.lo_idx = min(r.lo_idx, other.lo_idx)
        r.hi_idx = max(r.hi_idx, other.hi_idx)
    for name, table in other.buckets.items():
        mine = r.buckets.setdefault(name, {})
        for k, b in table.items():
            cur = mine.get(k)
            if cur is None:
                mine[k] = b
            else:
                _fold(cur, b)
    if not r.window:
        while r.hi_idx - r.lo_idx + 1 > r.nb:
            r._double()
    r.xmin = st["xmin"] if r.xmin is None else min(r.xmin, st["xmin"])
    r.xmax = st["xmax"] if r.xmax is None else max(r.xmax, st["xmax"])


def _fork_worker(a, xmode, start, stop, track):
    """A child process that reduces [start, stop) and sends its state back through a pipe: (pid, read fd)."""
    rfd, wfd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns about fork in a threaded process (the resident helper): the child only reads its own
        # file, computes and writes to its pipe, and leaves with os._exit, touching no lock another thread holds.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(rfd)
            p = Pass(a, xmode, track)
            with open(a.path, "rb", buffering=0) as f:
                pos = scan(p, f, start, stop)
            data = marshal.dumps(_state(p, pos))
            view = memoryview(data)
            while view:
                n = os.write(wfd, view)
                view = view[n:]
            code = 0
        except BaseException:  # noqa: BLE001 - the parent redoes this part itself
            pass
        finally:
            os._exit(code)
    os.close(wfd)
    return pid, rfd


def _collect(pid, rfd):
    chunks = []
    try:
        while True:
            c = os.read(rfd, 1 << 20)
            if not c:
                break
            chunks.append(c)
    finally:
        os.close(rfd)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not chunks:
        return None
    try:
        return marshal.loads(b"".join(chunks))
    except (ValueError, EOFError, TypeError):
        return None


def read_range(a, xmode, f, size, start, track=False):
    """Reduces the complete lines from start to the end of the file, in parallel parts when it is large."""
    p = Pass(a, xmode, track)
    jobs = a.jobs if a.jobs is not None else default_jobs()
    span = (size or 0) - start
    jobs = min(jobs, max(1, span // PART_MIN))
    if jobs < 2 or xmode == "line" or not _can_fork():
        return p, scan(p, f, start, None)
    # Parts that start at line starts; the last one runs to the end (and finds the torn line, if any).
    cuts = [start]
    for i in range(1, jobs):
        c = _line_start_after(f, start + span * i // jobs)
        if c is not None and c > cuts[-1]:
            cuts.append(c)
    parts = [(cuts[i], cuts[i + 1] if i + 1 < len(cuts) else None) for i in range(len(cuts))]
    workers = []
    for lo, hi in parts[1:]:
        try:
            workers.append((lo, hi, _fork_worker(a, xmode, lo, hi, track)))
        except OSError:
            workers.append((lo, hi, None))
    pos = scan(p, f, parts[0][0], parts[0][1])
    for lo, hi, w in workers:
        st = _collect(*w) if w is not None else None
        if st is None:  # the worker failed: do its part here
            q = Pass(a, xmode, track)
            st = _state(q, scan(q, f, lo, hi))
        _merge(p, st)
        pos = st["pos"]
    p.jobs = 1 + sum(1 for w in workers if w[2] is not None)
    return p, pos


def sample(p, f, start, size, budget):
    """A first look: whole lines from evenly spaced windows of [start, size), the first and the last included."""
    span = size - start
    n = max(2, min(PREVIEW_WINDOWS, budget // 4096))
    win = max(1, budget // n)
    buf = bytearray(min(win, BLOCK))
    done = start
    used = 0
    for i in range(n):
        if i == 0:
            lo = start
        else:
            lo = _line_start_after(f, max(start + (span - win) * i // (n - 1), done, start + 1))
            if lo is None and i != n - 1:
                continue
        if i == n - 1 or p.bytes_read > 2 * budget:
            # The last window, to the end: the newest lines (and the torn one left alone).  Lines far longer
            # than a window can make the others overrun the budget: then this one comes at once.
            if i != n - 1:
                lo = _line_start_after(f, max(start + span - win, done, start + 1))
            # The last whole line is in even when it is longer than a window.
            last = _last_line_start(f, start, size)
            lo = max(done, last if lo is None else min(lo, last))
            if lo < size:
                scan(p, f, lo, None, buf)
                used += 1
            break
        done = scan(p, f, lo, min(lo + win, size), buf)
        if done == lo:
            # No whole line fits in a window: take the one that starts here, however long.
            end = _line_start_after(f, min(lo + win, size))
            done = scan(p, f, lo, size if end is None else end, buf)
        used += 1
    return {"bytes": p.bytes_read, "windows": used, "of": span}


# ---------------------------------------------------------------------------------------------------------------
# What a long-lived process (the resident helper) keeps per file between requests


class _Known(object):
    """A file as last read to pos: its identity, the bytes that must not have changed, its zone map and, for the
    options it was read with (state_key), the exact reduction up to pos (marshal bytes: a fresh copy per use)."""

    def __init__(self, ident, mtime, pos, sig, zones, state_key, state):
        self.ident = ident
        self.mtime = mtime
        self.pos = pos
        self.sig = sig
        self.zones = zones
        self.state_key = state_key
        self.state = state


_known = {}
_known_lock = threading.Lock()
# Run by hand the process ends after one answer: nothing to keep.
_KEEP = __name__ != "__main__"


def _signature(f, pos):
    """The file's first bytes and the bytes just before pos."""
    f.seek(0)
    head = f.read(min(SIG, pos))
    back = max(0, pos - SIG)
    f.seek(back)
    return head, f.read(pos - back)


def _recall(key, f, st):
    with _known_lock:
        k = _known.get(key)
    if k is None:
        return None
    same = (k.ident == (st.st_dev, st.st_ino) and st.st_size >= k.pos
            # Not grown: any write since shows in the mtime.  Grown: logs are appended to, so the bytes at both ends
            # of what was read tell a rewritten file.
            and (st.st_size > k.pos or st.st_mtime_ns == k.mtime)
            and _signature(f, k.pos) == k.sig)
    with _known_lock:
        if _known.get(key) is k:
            del _known[key]
            if same:
                _known[key] = k  # the most recently used goes last: eviction takes the oldest
    return k if same else None


def _remember(key, f, st, pos, zones, state_key, p):
    state = None
    if p is not None:
        d = _state(p, pos)
        d["zones"] = None
        state = marshal.dumps(d)
        if len(state) + _ZONE_BYTES * len(zones) > CACHE_BYTES // 2:
            state = None  # hundreds of series: keep the zone map only
    k = _Known((st.st_dev, st.st_ino), st.st_mtime_ns, pos, _signature(f, pos), zones, state_key, state)
    with _known_lock:
        _known.pop(key, None)
        _known[key] = k
        # Oldest first out, down to the count and the memory allowed (the newest always stays).
        while len(_known) > 1 and (len(_known) > CACHE_FILES or sum(map(_weight, _known.values())) > CACHE_BYTES):
            del _known[next(iter(_known))]


_ZONE_BYTES = 100


def _weight(k):
    return len(k.state or b"") + _ZONE_BYTES * len(k.zones) + 2 * SIG


def forget():
    """Drops everything kept (tests; a host running short of memory)."""
    with _known_lock:
        _known.clear()


# The resident helper runs each request in a fresh process and carries what is kept from one to the next as plain
# data (kg_helper.py: KG_STATE_EXPORT after the answer, KG_STATE_IMPORT before the next request): oldest first.
_ENTRY = (("ident", "ident"), ("mtime", "mtime"), ("pos", "pos"), ("sig", "sig"), ("zones", "zones"),
          ("stateKey", "state_key"), ("state", "state"))


def KG_STATE_EXPORT(full=False):  # noqa: N802 - the name the resident helper looks for
    with _known_lock:
        put = [(key, dict((n, getattr(k, a)) for n, a in _ENTRY)) for key, k in _known.items()]
    return {"version": 1, "full": True, "put": put, "drop": []}


def KG_STATE_IMPORT(data):  # noqa: N802
    if not isinstance(data, dict) or data.get("version") != 1:
        return
    with _known_lock:
        if data.get("full"):
            _known.clear()
        for key in data.get("drop") or ():
            _known.pop(tuple(key), None)
        for key, entry in data.get("put") or ():
            _known.pop(tuple(key), None)
            _known[tuple(key)] = _Known(*[entry[n] for n, _ in _ENTRY])


def _restore(a, xmode, k):
    """A pass holding the kept exact reduction (and zone map) of k."""
    p = Pass(a, xmode, True)
    d = marshal.loads(k.state)
    d["zones"] = k.zones
    _merge(p, d)
    p.bytes_read = 0
    return p


def reduce_file(a, xmode):
    """(pass, next offset, size, sample or None, "read" or "cache")."""
    try:
        f = open(a.path, "rb", buffering=0)
    except OSError as e:
        raise kg_common.ProbeError("cannot read %s: %s" % (a.path, e.strerror or e), "not-found")
    with f:
        try:
            st = os.fstat(f.fileno())
            size = st.st_size
        except OSError:
            st, size = None, None
        whole = a.lo is None
        key = (os.path.abspath(a.path), xmode)
        state_key = (a.buckets, tuple(a.series) if a.series else None)
        keep = _KEEP and st is not None and xmode != "line"
        # --fresh reads the file even when it was read before (and keeps the new read).
        k = _recall(key, f, st) if keep and not a.fresh else None
        exact = k is not None and k.state is not None and k.state_key == state_key
        if a.offset:
            # Following: the appended lines are the answer.  Where they continue what was kept, the kept
            # reduction and zone map grow with them, so that reopening or zooming a live run stays cheap.
            p, pos = read_range(a, xmode, f, size, a.offset, k is not None and a.offset == k.pos)
            if p.zones is not None and pos != k.pos and whole:
                if exact:
                    m = _restore(a, xmode, k)
                    # A copy: merging regrids the buckets it is given, and p's are the answer.
                    _merge(m, marshal.loads(marshal.dumps(_state(p, pos))))
                    _remember(key, f, st, pos, m.zones, state_key, m)
                else:
                    _remember(key, f, st, pos, list(k.zones) + p.zones, None, None)
            return p, pos, size, None, "read"
        if exact and whole:
            # The exact reduction up to where it was read, plus the lines appended since.
            p = _restore(a, xmode, k)
            q, pos = read_range(a, xmode, f, size, k.pos, True)
            _merge(p, _state(q, pos))
            p.jobs = q.jobs
            if pos != k.pos:
                _remember(key, f, st, pos, p.zones, state_key, p)
            return p, pos, size, None, "cache"
        if k is not None and not whole:
            # Only the stretches whose x range meets the window, then whatever was appended since.
            p = Pass(a, xmode)
            ranges = []
            for z0, z1, lo, hi in k.zones:
                if lo is None or lo > a.hi or hi < a.lo:
                    continue
                if ranges and ranges[-1][1] == z0:
                    ranges[-1][1] = z1
                else:
                    ranges.append([z0, z1])
            buf = bytearray(BLOCK)
            for z0, z1 in ranges:
                scan(p, f, z0, z1, buf)
            pos = scan(p, f, k.pos, None, buf)
            return p, pos, size, None, "cache"
        if a.preview is not None and whole and xmode != "line" and size is not None and size - a.offset > 2 * a.preview:
            p = Pass(a, xmode)
            return p, a.offset, size, sample(p, f, a.offset, size, a.preview), "read"
        p, pos = read_range(a, xmode, f, size, a.offset, keep)
        if keep and p.zones is not None:
            _remember(key, f, st, pos, p.zones, state_key, p if whole else None)
        return p, pos, size, None, "read"


def main(argv):
    a = parse_args(argv)
    started = time.time()
    requested = a.offset
    reset = False
    try:
        if a.offset and os.path.getsize(a.path) < a.offset:
            # Shorter than where the last read stopped: a new run rewrote the log. Start over, and say so.
            a.offset = 0
            reset = True
    except OSError:
        pass
    p, next_offset, size, sampled, source = reduce_file(a, a.x)
    xmode = a.x
    if a.x == "step" and not p.xused and p.counts["noX"] > 0:
        # No line has a step: number the lines instead (a second pass, only for such logs).
        p, next_offset, size, sampled, source = reduce_file(a, "line")
        xmode = "line"
    names = sorted(p.reducer.buckets)
    truncated = len(names) > MAX_SERIES
    series = p.reducer.result(names[:MAX_SERIES])
    r = p.reducer
    skipped = dict(p.counts)
    return {
        "path": a.path,
        "size": size,
        "offset": a.offset,
        "requestedOffset": requested,
        "reset": reset,
        "nextOffset": next_offset,
        "lines": p.lines,
        "blank": p.blank,
        "skipped": skipped,
        "x": xmode,
        "xKeys": sorted(p.xused),
        "xRange": [_compact(r.xmin), _compact(r.xmax)] if r.xmin is not None else None,
        "keys": sorted(p.keys),
        "buckets": a.buckets,
        "bucketWidth": r.width,
        "window": {"from": a.lo, "to": a.hi} if a.lo is not None else None,
        "series": series,
        "seriesTruncated": truncated,
        "fastLines": p.fast_lines,
        "shapes": max(len(p.shapes), p.merged_shapes),
        "jobs": p.jobs,
        "sample": sampled,
        "source": source,
        "bytesRead": p.bytes_read,
        "elapsedMs": round((time.time() - started) * 1000.0, 1),
    }


if __name__ == "__main__":
    kg_common.run(main)
