"""Reduce a metrics log to plot data, on the host that has it (stdlib only, Python 3.8+).

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

Besides JSON lines it reads Lightning's CSVLogger ``metrics.csv``, the Hugging Face Trainer's ``trainer_state.json``
and TensorBoard event files (``--format`` forces one; see "TensorBoard events" below).

A first look at a large file (``--preview``): whole lines from evenly spaced windows (8 MiB in all by default, the
start and the end of the file always among them), reduced the same way and marked ``sample``; an exact read follows.

Inside the resident helper (each request in a fresh child process) what it learnt about a file is carried to the
next request as plain data (KG_STATE_EXPORT / KG_STATE_IMPORT, python/HELPER_STATE.md): the
exact reduction at the offset it reached and, per stretch of about 256 KiB, the range of x in it (a zone map).
Opening the same log again reads only the bytes appended since; a zoom window reads only the stretches whose x
range meets the window.  Both are dropped when the file is no longer the one read (other inode, shorter, or the
bytes at its start or at the cached offset changed).  What is kept is plain data in ``_known`` (at most 8 files,
64 MiB); a helper that serves each request in a forked child carries it back with ``KG_STATE_EXPORT`` /
``KG_STATE_IMPORT`` (python/HELPER_STATE.md).

Hostile input costs bounded memory (kg_common.LIMITS): the file is read in blocks; a line longer than
LIMITS["line"] is skipped without being held whole (``skipped.tooLong``), a line of more than LIMITS["keys"] keys or
nested deeper than LIMITS["depth"] is skipped (``tooManyKeys``, ``tooDeep``); the rest of the file still plots.
Series past the first LIMITS["keys"] are not kept (``seriesTruncated``).  FIFOs and devices are refused unread.

Speed: ``json.loads`` per line costs about 2.5 s per million lines here.  Real logs repeat a handful of line
shapes (same keys in the same order, only the numbers change), so each shape seen is turned into a regular
expression that captures its numbers; one ``findall`` per 4 MiB block then yields the numbers of every line of a
known shape, converted column by column at C speed.  A shape is only trusted after it reproduced ``json.loads`` on
the line it came from; lines of no known shape (first of their kind, NaN, odd spacing) take the json.loads path.
"""
import bisect
import csv
import errno
import io
import itertools
import json
import marshal
import math
import os
import re
import struct
import sys
import threading
import time
import warnings
from typing import List, Optional  # noqa: F401 (type comments)

import kg_common

STEP_KEYS = ("step", "global_step", "_step", "iter", "iteration", "train/global_step", "trainer/global_step")
TIME_KEYS = ("time", "timestamp", "_timestamp", "wall_time")
DEFAULT_BUCKETS = 2000
# Bytes per findall.  Small blocks keep each block's few thousand objects in memory the allocator has just freed
# (and in the CPU caches): 64 KiB reads a million-line log in 1.5 s here where 4 MiB took 2.5-3.6 s.
BLOCK = 64 << 10
MAX_SHAPES = 12
# Lines with more numbers than this are read by json.loads: a regex of thousands of groups compiles for seconds.
MAX_SHAPE_KEYS = 512
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
# A string, in memory a small multiple of its length: a repeated group pushes onto the regex engine's stack once per
# repetition (a 30 MB string took 5 GB with ``(?:[^"\\]|\\.)*``), so characters are taken in runs, possessively where
# the engine can (3.11+); before 3.11 the stack grows once per escape only.
_STR = (rb'"(?:[^"\\\n]++|\\.)*+"' if sys.version_info >= (3, 11) else rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_TOKEN = re.compile(
    rb"([ \t]*)(?:(" + _STR + rb")|(" + _NUM + rb")|(true|false|null)|([{}\[\]:,])|(NaN|-?Infinity))"
)


class _Args(object):
    """The parsed command line (attributes set by parse_args)."""

    path = None  # type: Optional[str]
    buckets = 0  # type: int
    x = "step"  # type: str
    lo = None  # type: Optional[float]
    hi = None  # type: Optional[float]
    offset = 0  # type: int
    series = None  # type: Optional[List[str]]
    fast = True  # type: bool
    jobs = None  # type: Optional[int]
    preview = None  # type: Optional[int]
    fresh = False  # type: bool
    format = None  # type: Optional[str]
    verify = False  # type: bool


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
    a.format = None
    a.verify = False
    it = iter(argv)
    for tok in it:
        if tok in ("--buckets", "--x", "--from", "--to", "--offset", "--series", "--jobs", "--preview-bytes",
                   "--format"):
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
                elif tok == "--format":
                    if val not in FORMATS:
                        raise ValueError(val)
                    a.format = val
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
        elif tok == "--verify":
            a.verify = True
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


class _Skip(Exception):
    """A line skipped for a limit; ``what`` is the count it goes to (tooManyKeys, tooDeep)."""

    def __init__(self, what):
        Exception.__init__(self, what)
        self.what = what


def _flatten(d, prefix, out, counts, budget=None):
    """Numeric leaves of d into out (``a.b`` keys); budget = [keys left, depth left] bounds what one line may cost."""
    if budget is None:
        budget = [kg_common.LIMITS["keys"], kg_common.LIMITS["depth"]]
    budget[0] -= len(d)
    if budget[0] < 0:
        raise _Skip("tooManyKeys")
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
            budget[1] -= 1
            if budget[1] < 0:
                raise _Skip("tooDeep")
            _flatten(v, prefix + k + ".", out, counts, budget)
            budget[1] += 1


def numbers_of(line, counts):
    """The flattened numeric values of one line, or None (counted as malformed / not numeric)."""
    try:
        doc = json.loads(line)
    except ValueError:
        counts["malformed"] += 1
        return None
    except RecursionError:  # nested deeper than the interpreter's recursion limit: that line only
        counts["tooDeep"] += 1
        return None
    if type(doc) is not dict:
        counts["malformed"] += 1
        return None
    out = {}
    try:
        _flatten(doc, "", out, counts)
    except _Skip as e:
        counts[e.what] += 1
        return None
    if not out:
        counts["nonNumeric"] += 1
        return None
    return out


def _new_counts():
    # Lines skipped, by why: tooLong (over LIMITS["line"], never held whole), tooManyKeys (over LIMITS["keys"]),
    # tooDeep (nested over LIMITS["depth"]); never fatal for the rest of the file.
    return {"malformed": 0, "nonNumeric": 0, "nonFinite": 0, "noX": 0, "tooLong": 0, "tooManyKeys": 0, "tooDeep": 0}


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
    tokens = 0
    while True:
        m = _TOKEN.match(line, pos)
        if m is None:
            break
        tokens += 1
        if tokens > 16 * MAX_SHAPE_KEYS:
            return None  # a line this big is read by json.loads
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
    if not paths or len(paths) > MAX_SHAPE_KEYS:
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
    counts = _new_counts()
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
        # Points of series past the first LIMITS["keys"] ones: not kept (a log inventing keys must not take memory).
        self.dropped = 0
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
                if len(self.buckets) >= kg_common.LIMITS["keys"]:
                    self.dropped += len(ys)
                    continue
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
        self.counts = _new_counts()
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
            if learned < 4 and len(self.shapes) < MAX_SHAPES and self.a.fast and len(vals) <= MAX_SHAPE_KEYS:
                before = len(self.shapes)
                self._learn(line)
                learned += len(self.shapes) - before
            self._put(per, vals, lineno)
        self._flush(per)

    def _put(self, per, vals, lineno):
        """One record's numbers (key -> float) into per-series columns."""
        if len(self.keys) < kg_common.LIMITS["keys"]:
            self.keys.update(vals)
        if self.xmode == "line":
            xk = None
            x = float(lineno)
        else:
            xk = self._x_of(vals)
            if xk is None:
                self.counts["noX"] += 1
                return
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

    def _flush(self, per):
        for k, (xs, ts, ys, has_t) in per.items():
            self.reducer.add(xs, ts if has_t[0] else None, {k: ys})

    def records(self, items):
        """(line number, {key: number}) records of a format other than jsonl: CSV rows, log_history entries."""
        per = {}
        for lineno, vals in items:
            self.lines += 1
            if not vals:
                self.counts["nonNumeric"] += 1
                continue
            self._put(per, vals, lineno)
        self._flush(per)

    def columns(self, tag, steps, walls, vals):
        """A TensorBoard tag's points: steps (floats), wall times and values, in file order."""
        n = len(vals)
        first = self.lines
        self.lines += n
        if len(self.keys) < kg_common.LIMITS["keys"]:
            self.keys.add(tag)
        if not n or not self.is_series(tag):
            return
        if self.xmode == "time":
            xs, ts = list(walls), None
            self.xused.add("wall_time")
        elif self.xmode == "line":
            xs, ts = [float(i) for i in range(first + 1, first + n + 1)], None
        else:
            xs, ts = list(steps), list(walls)
            self.xused.add("step")
        if self.zones is not None and self.xmode != "line":
            self._zone_x(min(xs), max(xs))
        sx, st, sy = _finite_or_filter(xs, ts, list(vals), self.counts)
        self.reducer.add(sx, st, {tag: sy})


def next_data(f, pos):
    """The offset of the first byte at or after pos that is not in a hole of a sparse file (pos where holes cannot be
    told).  A hole reads as zeros, so it holds no newline: a line being skipped passes over it unread, and a 10 GB
    sparse file neither costs 10 GB of reading nor fills the host's page cache with zeros."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return pos
    try:
        return max(pos, os.lseek(f.fileno(), pos, seek_data))
    except OSError as e:
        if e.errno == getattr(errno, "ENXIO", None):  # only a hole up to the end
            try:
                return max(pos, os.fstat(f.fileno()).st_size)
            except OSError:
                return pos
        return pos
    finally:
        f.seek(pos)


def _mid_line(f, pos):
    """Whether pos is inside a line (the byte before it is no newline)."""
    if pos <= 0:
        return False
    f.seek(pos - 1)
    return f.read(1) not in (b"\n", b"")


def scan(p, f, start, stop, buf=None):
    """Feeds the complete lines of bytes [start, stop) (stop None: to the end) to p; returns the offset after them.

    A line longer than LIMITS["line"] is never held whole: it is counted (tooLong) and skipped to its newline. When
    the bytes end inside such a line the offset returned is where reading stopped, inside it, and a read that starts
    inside a line skips to the next one, so a huge unterminated tail is passed over once, not on every poll.
    """
    limit = kg_common.LIMITS["line"]
    skipping = _mid_line(f, start)
    f.seek(start)
    pos = start
    left = None if stop is None else stop - start
    # One buffer, reused: fresh allocations cost more than the parsing on some hosts.
    if buf is None:
        buf = bytearray(BLOCK)
    filled = 0
    first = start == 0
    base = 0
    while True:
        ended = False  # a skipped line just ended: the bytes after it are already in buf
        if skipping:
            nl = buf.find(b"\n", 0, filled)
            done = filled if nl < 0 else nl + 1
            if done:
                p.end_block(pos, pos + done)
                buf[: filled - done] = buf[done:filled]
                filled -= done
                pos += done
            skipping = nl < 0
            ended = not skipping
            if skipping:
                hole = next_data(f, pos) - pos
                if left is not None:
                    hole = min(hole, left)
                if hole > 0:
                    p.end_block(pos, pos + hole)
                    pos += hole
                    if left is not None:
                        left -= hole
                    f.seek(pos)
        elif filled == len(buf):  # one line longer than the buffer
            if filled > limit:
                p.counts["tooLong"] += 1
                p.lines += 1
                base = p.lines
                skipping = True
                first = False
                continue
            buf.extend(bytes(min(len(buf), limit + 1 - len(buf))))
        if not ended:
            if left is not None and left <= 0:
                break
            with memoryview(buf) as mv:
                room = len(buf) - filled if left is None else min(len(buf) - filled, left)
                got = f.readinto(mv[filled:filled + room])
            if not got:
                break
            if left is not None:
                left -= got
            filled += got
            if skipping:
                continue
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
    if skipping and filled:
        p.end_block(pos, pos + filled)
        pos += filled
    # A line still being written (no newline yet) is read next time, whole (a too long one is passed over).
    return pos


def _reach():
    # How far to look for a line boundary: past a line of the longest length read, there is none worth finding.
    return kg_common.LIMITS["line"] + (1 << 16)


def _line_start_after(f, pos):
    """The offset of the first line that starts at or after pos; None when there is none within _reach()."""
    f.seek(pos - 1)
    at = pos - 1
    reach = pos + _reach()
    while at < reach:
        chunk = f.read(1 << 16)
        if not chunk:
            return None
        nl = chunk.find(b"\n")
        if nl >= 0:
            return at + nl + 1
        at += len(chunk)
    return None


def _last_line_start(f, start, size):
    """Where the last whole line of [start, size) starts (start when there is at most one).  Looking back stops
    after _reach() bytes: it then answers where it stopped, inside a line too long to read, which scan skips."""
    newlines = []
    end = size
    stop = max(start, size - 2 * _reach())
    while end > start and len(newlines) < 2:
        if end <= stop:
            return newlines[0] + 1 if newlines else end
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
        "read": p.bytes_read, "dropped": r.dropped,
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
    r.dropped += st.get("dropped", 0)
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


def _fork_worker(a, xmode, start, stop, track, scanner=None):
    """A child process that reduces [start, stop) and sends its state back through a pipe: (pid, read fd)."""
    scanner = scanner or scan
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
            with kg_common.open_regular(a.path, buffering=0) as f:
                pos = scanner(p, f, start, stop)
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


def read_range(a, xmode, f, size, start, track=False, scanner=None, cutter=None):
    """Reduces the complete lines from start to the end of the file, in parallel parts when it is large.

    ``scanner(p, f, lo, hi)`` reads one part (default: JSON lines), ``cutter(f, pos)`` finds where a part may start
    at or after pos (default: a line start); TensorBoard event files pass their own (record starts)."""
    scan = scanner or globals()["scan"]
    _line_start_after = cutter or globals()["_line_start_after"]
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
            workers.append((lo, hi, _fork_worker(a, xmode, lo, hi, track, scanner)))
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


# The kept state is plain data, so that a helper running each request in a forked child can carry it back to the
# parent (python/HELPER_STATE.md): _known maps (absolute path, x mode) to one entry per file, oldest first:
#   {"ident": (st_dev, st_ino), "mtime": st_mtime_ns, "pos": offset read to, "sig": (first bytes, bytes before pos),
#    "zones": [(start, end, x min, x max), ...], "stateKey": (buckets, series or None),
#    "state": marshal bytes of the exact reduction up to pos, or None}
# bounded to CACHE_FILES files and CACHE_BYTES in all (_weight).
_known = {}
_known_lock = threading.Lock()
# What changed since the last KG_STATE_EXPORT or KG_STATE_IMPORT: keys put (their entries are in _known), keys dropped.
_put = set()
_dropped = set()
# Run by hand the process ends after one answer: nothing to keep.
_KEEP = __name__ != "__main__"


def _signature(f, pos):
    """The file's first bytes and the bytes just before pos."""
    f.seek(0)
    head = f.read(min(SIG, pos))
    back = max(0, pos - SIG)
    f.seek(back)
    return head, f.read(pos - back)


def _drop(key):
    _known.pop(key, None)
    _put.discard(key)
    _dropped.add(key)


def _recall(key, f, st):
    with _known_lock:
        k = _known.get(key)
    if k is None:
        return None
    same = (k["ident"] == (st.st_dev, st.st_ino) and st.st_size >= k["pos"]
            # Not grown: any write since shows in the mtime.  Grown: logs are appended to, so the bytes at both ends
            # of what was read tell a rewritten file.
            and (st.st_size > k["pos"] or st.st_mtime_ns == k["mtime"])
            and _signature(f, k["pos"]) == k["sig"])
    with _known_lock:
        if _known.get(key) is k:
            if same:
                del _known[key]
                _known[key] = k  # the most recently used goes last: eviction takes the oldest
            else:
                _drop(key)
    return k if same else None


def _put_entry(key, k):
    """Keeps k for key as the most recent, then evicts the oldest down to the bounds. Holds _known_lock."""
    _known.pop(key, None)
    _known[key] = k
    _put.add(key)
    _dropped.discard(key)
    # Oldest first out, down to the count and the memory allowed (the newest always stays).
    while len(_known) > 1 and (len(_known) > CACHE_FILES or sum(map(_weight, _known.values())) > CACHE_BYTES):
        _drop(next(iter(_known)))


def _remember(key, f, st, pos, zones, state_key, p):
    state = None
    if p is not None:
        d = _state(p, pos)
        d["zones"] = None
        state = marshal.dumps(d)
        if len(state) + _ZONE_BYTES * len(zones) > CACHE_BYTES // 2:
            state = None  # hundreds of series: keep the zone map only
    k = {"ident": (st.st_dev, st.st_ino), "mtime": st.st_mtime_ns, "pos": pos, "sig": _signature(f, pos),
         "zones": zones, "stateKey": state_key, "state": state}
    with _known_lock:
        _put_entry(key, k)


_ZONE_BYTES = 100


def _weight(k):
    return len(k["state"] or b"") + _ZONE_BYTES * len(k["zones"]) + 2 * SIG


def forget():
    """Drops everything kept (tests; a host running short of memory)."""
    with _known_lock:
        for key in list(_known):
            _drop(key)


def KG_STATE_EXPORT(full=False):  # noqa: N802 - the name the resident helper looks for
    """What this process learnt since the last export or import, as plain data (dicts, lists, tuples, str, bytes,
    int, float, None: marshal and pickle carry it): {"version": 1, "put": [(key, entry), ...] oldest first,
    "drop": [key, ...]}. full: every entry kept, and "drop" empty (then "full" is True: the receiver drops the rest)."""
    with _known_lock:
        keys = list(_known) if full else [k for k in _known if k in _put]
        data = {"version": 1, "full": bool(full), "put": [(k, dict(_known[k])) for k in keys],
                "drop": [] if full else sorted(_dropped, key=repr)}
        _put.clear()
        _dropped.clear()
    return data


def KG_STATE_IMPORT(data):  # noqa: N802
    """Applies what KG_STATE_EXPORT gave (in another process, e.g. a forked child that served a request); entries
    are put as the most recent and the bounds (CACHE_FILES, CACHE_BYTES) hold afterwards. Bad data is ignored."""
    if not isinstance(data, dict) or data.get("version") != 1:
        return
    with _known_lock:
        if data.get("full"):
            _known.clear()
        for key in data.get("drop") or ():
            _known.pop(tuple(key) if isinstance(key, list) else key, None)
        for key, k in data.get("put") or ():
            if isinstance(k, dict) and isinstance(k.get("zones"), list):
                _put_entry(tuple(key) if isinstance(key, list) else key, dict(k))
        _put.clear()
        _dropped.clear()


def _restore(a, xmode, k):
    """A pass holding the kept exact reduction (and zone map) of k."""
    p = Pass(a, xmode, True)
    d = marshal.loads(k["state"])
    d["zones"] = k["zones"]
    _merge(p, d)
    p.bytes_read = 0
    return p


# ------------------------------------------------------------------------------------------ TensorBoard events
# TensorBoard event files (``events.out.tfevents.*``) read with the stdlib: the remote may lack tensorboard, and
# tensorboard's own EventAccumulator takes ~20 s and ~700 MB for a million scalars. A file is a sequence of
# TFRecords: u64 length, u32 masked CRC-32C of the length, the data, u32 masked CRC-32C of the data. Each record is
# an ``Event`` protobuf; the scalars are ``Event.summary.value[]`` with ``simple_value`` (TF1 / torch's
# SummaryWriter / tensorboardX) or a rank-0 ``tensor`` under the "scalars" plugin (TF2, keras, jax writers).
#
# CRCs: the length CRC of every record is checked (lengths repeat, so each distinct length is computed once); the
# data CRC costs ~1 µs a byte in pure Python, so it is checked on the first and last records read, on every
# record whose protobuf does not parse, and, with ``--verify``, on all of them. A record that fails its check is
# counted as corrupt and the reader resynchronises at the next offset whose framing checks out.

_CRC32C_TABLE = None


def _crc32c_table():
    global _CRC32C_TABLE
    if _CRC32C_TABLE is None:
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        _CRC32C_TABLE = table
    return _CRC32C_TABLE


def crc32c(data):
    t = _crc32c_table()
    c = 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(buf, i):
    """(value, next index) of the protobuf varint at ``i``; raises IndexError past the end."""
    b = buf[i]
    if b < 0x80:
        return b, i + 1
    value = b & 0x7F
    shift = 7
    i += 1
    while True:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf, start, end):
    """(field number, wire type, value or (start, end) for length-delimited) of one protobuf message."""
    i = start
    while i < end:
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
            yield num, wt, v
        elif wt == 1:
            yield num, wt, i
            i += 8
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > end:
                raise ValueError("field runs past its message")
            yield num, wt, (i, i + n)
            i += n
        elif wt == 5:
            yield num, wt, i
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
    if i != end:
        raise ValueError("message runs past its end")


_UNPACK_D = struct.Struct("<d").unpack_from
_UNPACK_F = struct.Struct("<f").unpack_from
_UNPACK_Q = struct.Struct("<Q").unpack_from
_UNPACK_I = struct.Struct("<I").unpack_from
# DataType enum values of a TensorProto that hold one number: float, double, int32, int64, half, bfloat16.
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64, _DT_BF16, _DT_HALF = 1, 2, 3, 9, 14, 19


def _half(bits):
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def _tensor_scalar(buf, start, end):
    """The one number of a rank-0 (or one-element) TensorProto, or None."""
    dtype = None
    vals = []
    content = None
    for num, wt, v in _fields(buf, start, end):
        if num == 1 and wt == 0:
            dtype = v
        elif num == 4 and wt == 2:
            content = bytes(buf[v[0]:v[1]])
        elif num == 5:  # float_val, packed or not
            if wt == 2:
                vals.extend(struct.unpack_from("<%df" % ((v[1] - v[0]) // 4), buf, v[0]))
            elif wt == 5:
                vals.append(_UNPACK_F(buf, v)[0])
        elif num == 6:  # double_val
            if wt == 2:
                vals.extend(struct.unpack_from("<%dd" % ((v[1] - v[0]) // 8), buf, v[0]))
            elif wt == 1:
                vals.append(_UNPACK_D(buf, v)[0])
        elif num in (7, 10, 13):  # int_val, int64_val, half_val (bits in an int32)
            if wt == 2:
                j = v[0]
                while j < v[1]:
                    x, j = _varint(buf, j)
                    vals.append(x)
            elif wt == 0:
                vals.append(v)
            if num == 13:
                vals = [_half(x) for x in vals]
            elif vals:
                vals = [x - (1 << 64) if x >= 1 << 63 else x for x in vals]
    if not vals and content is not None:
        fmt = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q", _DT_HALF: "<e"}.get(dtype)
        if dtype == _DT_BF16 and len(content) == 2:
            return struct.unpack("<f", b"\0\0" + content)[0]
        if fmt and len(content) == struct.calcsize(fmt):
            return struct.unpack(fmt, content)[0]
        return None
    if len(vals) != 1:
        return None
    return float(vals[0])


def _plugin_name(buf, start, end):
    for num, wt, v in _fields(buf, start, end):
        if num == 1 and wt == 2:  # plugin_data
            for n2, w2, v2 in _fields(buf, v[0], v[1]):
                if n2 == 1 and w2 == 2:
                    return bytes(buf[v2[0]:v2[1]]).decode("utf-8", "replace")
    return None


def decode_event(buf, start, end, tensor_tags):
    """(wall_time, step, [(tag, value)]) of one Event record; values are scalars only.

    ``tensor_tags`` remembers which tags are scalar tensors: TF2 writers put the plugin name in the metadata of a
    tag's first value only, as tensorboard's own reader expects.
    """
    wall = 0.0
    step = 0
    out = []
    for num, wt, v in _fields(buf, start, end):
        if num == 1 and wt == 1:
            wall = _UNPACK_D(buf, v)[0]
        elif num == 2 and wt == 0:
            step = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 5 and wt == 2:  # summary
            for n2, w2, val in _fields(buf, v[0], v[1]):
                if n2 != 1 or w2 != 2:
                    continue
                tag = None
                simple = None
                tensor = None
                meta = None
                for n3, w3, x in _fields(buf, val[0], val[1]):
                    if n3 == 1 and w3 == 2:
                        tag = bytes(buf[x[0]:x[1]]).decode("utf-8", "replace")
                    elif n3 == 2 and w3 == 5:
                        simple = _UNPACK_F(buf, x)[0]
                    elif n3 == 8 and w3 == 2:
                        tensor = x
                    elif n3 == 9 and w3 == 2:
                        meta = x
                if tag is None:
                    continue
                if simple is not None:
                    out.append((tag, simple))
                    continue
                if tensor is None:
                    continue
                if meta is not None:
                    plugin = _plugin_name(buf, meta[0], meta[1])
                    if plugin is not None:
                        tensor_tags[tag] = plugin == "scalars"
                if tensor_tags.get(tag):
                    value = _tensor_scalar(buf, tensor[0], tensor[1])
                    if value is not None:
                        out.append((tag, value))
    return wall, step, out


class TfEventsReader(object):
    """Walks the TFRecords of an event file from ``start`` and decodes the scalars."""

    def __init__(self, verify=False):
        self.verify = verify
        self.tensor_tags = {}
        self.len_crc = {}
        self.records = 0
        self.corrupt = 0
        self.crc_checked = 0
        self.crc_failed = 0
        self.resyncs = 0
        self.skipped_large = 0

    def _len_ok(self, header):
        length_bytes = header[:8]
        want = _UNPACK_I(header, 8)[0]
        got = self.len_crc.get(length_bytes)
        if got is None:
            got = masked_crc32c(length_bytes)
            if len(self.len_crc) < 4096:
                self.len_crc[length_bytes] = got
        return got == want

    def _data_ok(self, buf, start, end):
        self.crc_checked += 1
        ok = masked_crc32c(buf[start:end]) == _UNPACK_I(buf, end)[0]
        if not ok:
            self.crc_failed += 1
        return ok

    def scan(self, f, start, stop, emit, max_record=None):
        """Decode the records whose start lies in [start, stop); ``emit(wall, step, pairs)`` per event.

        Returns the offset after the last whole record (where a follow read continues): a record cut short at the
        end of the file is being written and is left for the next read.
        """
        max_record = kg_common.LIMITS["line"] if max_record is None else max_record
        f.seek(start)
        buf = b""
        base = start
        pos = 0
        first = True
        resync = False
        while True:
            if len(buf) - pos < 12:
                more = f.read(1 << 20)
                buf = buf[pos:] + more
                base += pos
                pos = 0
                if len(buf) < 12:
                    return base + pos
            if base + pos >= stop and not resync:
                return base + pos
            length = _UNPACK_Q(buf, pos)[0]
            if not self._len_ok(buf[pos:pos + 12]):
                # Not a record start: a corrupt header, or a worker part that began mid-record. Resynchronise.
                if not resync:
                    self.resyncs += 1
                    resync = True
                pos += 1
                continue
            if length > max_record:
                # A record bigger than the line limit (an image, a graph): skipped without being read whole.
                self.skipped_large += 1
                end = base + pos + 12 + length + 4
                f.seek(end)
                buf, base, pos = b"", end, 0
                f.seek(end)
                resync = False
                continue
            need = 12 + length + 4
            if len(buf) - pos < need:
                more = f.read(max(1 << 20, need))
                if not more:
                    return base + pos  # the last record is still being written
                buf = buf[pos:] + more
                base += pos
                pos = 0
                continue
            rstart, rend = pos + 12, pos + 12 + length
            check = self.verify or first
            ok = True
            if check:
                ok = self._data_ok(buf, rstart, rend)
            event = None
            if ok:
                try:
                    event = decode_event(buf, rstart, rend, self.tensor_tags)
                except (ValueError, IndexError, struct.error):
                    event = None
                    if not check:
                        self._data_ok(buf, rstart, rend)
            if event is None:
                self.corrupt += 1
            else:
                self.records += 1
                if event[2]:
                    emit(event[0], event[1], event[2])
            first = False
            resync = False
            pos += need

    def stats(self):
        return {"records": self.records, "corrupt": self.corrupt, "crcChecked": self.crc_checked,
                "crcFailed": self.crc_failed, "resyncs": self.resyncs, "skippedLarge": self.skipped_large,
                "crcMode": "all" if self.verify else "lengths; data of the first record and of any that fails"}


# The shape of nearly every record a scalar writer makes (torch's SummaryWriter, tensorboardX, Lightning, HF):
# Event{wall_time, step, summary{value{tag, simple_value}}}, framed. One regex split per block finds them all and
# leaves anything else (histograms, images, TF2 tensors, odd field orders) in the gaps for the general decoder.
# Groups: length, length CRC, wall time, step varint, summary length, value length, tag length, tag, value.
_TB_SCALAR = re.compile(
    rb"(.{8})(.{4})\x09(.{8})\x10([\x80-\xff]{0,9}[\x00-\x7f])\x2a([\x00-\x7f])\x0a([\x00-\x7f])\x0a([\x00-\x7f])"
    rb"([\x20-\x7e]{1,127})\x15(.{4})(?:.{4})",
    re.S,
)
_G = 10  # groups per match in a split list, +1 for the gap before each


def _vdec(v):
    n = len(v)
    if n == 1:
        return v[0]
    if n == 2:
        return (v[0] & 0x7F) | (v[1] << 7)
    if n == 3:
        return (v[0] & 0x7F) | ((v[1] & 0x7F) << 7) | (v[2] << 14)
    return _varint(v, 0)[0]


def fast_run(reader, parts, i, j, out):
    """Bulk-decode matches i..j-1 of a split list: the bytes they cover, or None if a check fails."""
    if i >= j:
        return 0
    run = parts[i * _G + 1:j * _G + 1]
    g_len, g_crc, g_wall, g_step, g_sum, g_val, g_tl, g_tag, g_v = (run[k::_G] for k in range(9))
    n = j - i
    # Few distinct (length, step size, tag, inner lengths) combinations in a block: each is checked once.
    # Record length = 21 + varint + tag; summary = 9 + tag; value = 7 + tag; tag-length byte = tag.
    for ln, crc, step_len, s_len, v_len, t_len, tag in set(zip(g_len, g_crc, map(len, g_step), g_sum, g_val, g_tl,
                                                               g_tag)):
        t = len(tag)
        if (_UNPACK_Q(ln)[0] != 21 + step_len + t or ord(t_len) != t or ord(v_len) != 7 + t or ord(s_len) != 9 + t
                or not reader._len_ok(ln + crc)):
            return None
    lengths = struct.unpack("<%dQ" % n, b"".join(g_len))
    walls = struct.unpack("<%dd" % n, b"".join(g_wall))
    vals = struct.unpack("<%df" % n, b"".join(g_v))
    uniq = list(dict.fromkeys(g_step))
    if max(map(len, uniq)) <= 4:
        nums = [(v & 0x7F) | ((v >> 1) & 0x3F80) | ((v >> 2) & 0x1FC000) | ((v >> 3) & 0xFE00000)
                for v in map(int.from_bytes, uniq, itertools.repeat("little"))]
    else:
        nums = [_varint(v, 0)[0] for v in uniq]
    steps = list(map(dict(zip(uniq, map(float, nums))).__getitem__, g_step))
    tags = set(g_tag)
    period = len(tags)
    if period == 1:
        out.add(g_tag[0].decode("ascii"), steps, walls, vals)
    elif n % period == 0 and all(len(set(g_tag[k::period])) == 1 for k in range(period)):
        for k in range(period):
            out.add(g_tag[k].decode("ascii"), steps[k::period], walls[k::period], vals[k::period])
    else:
        for t in tags:
            sel = list(map(t.__eq__, g_tag))
            out.add(t.decode("ascii"), list(itertools.compress(steps, sel)), list(itertools.compress(walls, sel)),
                    list(itertools.compress(vals, sel)))
    reader.records += n
    return sum(lengths) + 16 * n


def _block_columns(reader, buf, out):
    """Decode the whole records at the start of ``buf``; returns the bytes they cover (the rest is carried)."""
    parts = _TB_SCALAR.split(buf)
    n = (len(parts) - 1) // _G
    gaps = parts[0::_G]
    consumed = 0
    run_start = 0
    for k in range(n + 1):
        gap = gaps[k]
        if k < n and not gap:
            continue
        done = fast_run(reader, parts, run_start, k, out)
        if done is None:
            return None
        consumed += done
        if gap:
            # Records of another kind between (or after) the matches, one by one; only the trailing gap may end in
            # a record cut by the block's end.
            end = reader.scan(io.BytesIO(gap), 0, len(gap), out.emit)
            consumed += end
            if end != len(gap) and k < n:
                return None
        run_start = k
    return consumed


def scan_columns(reader, f, start, stop, out, block=1 << 20):
    """Records starting in [start, stop) into ``out`` (TfEventsColumns): ``stop`` must be a record start or the
    end. Returns the offset after the last whole record (a record still being written is left for the next read)."""
    f.seek(start)
    pos = start
    carry = b""
    first = True
    while pos < stop:
        data = f.read(max(0, min(block, stop - pos - len(carry))))
        buf = carry + data if carry else data
        if not buf:
            break
        if first and len(buf) >= 12:
            # The data CRC of the part's first record: a wrong offset or a corrupt start shows here.
            first = False
            n = _UNPACK_Q(buf, 0)[0]
            if len(buf) >= 16 + n and reader._len_ok(buf[:12]) and not reader._data_ok(buf, 12, 12 + n):
                reader.corrupt += 1
        consumed = _block_columns(reader, buf, out)
        if consumed is None:
            # Matches and framing disagree (a corrupt stretch): the general decoder alone, with its resync.
            consumed = reader.scan(io.BytesIO(buf), 0, len(buf), out.emit)
        pos += consumed
        carry = buf[consumed:]
        if not data:
            break
    return pos


class _TbSink(object):
    """Hands the decoded TensorBoard columns to a Pass."""

    def __init__(self, p):
        self.p = p

    def add(self, tag, steps, walls, vals):
        self.p.columns(tag, steps, walls, vals)

    def emit(self, wall, step, pairs):
        for tag, value in pairs:
            self.p.columns(tag, [float(step)], [wall], [value])


def _tb_resync(reader, f, pos, size, reach=1 << 20):
    """The first record start at or after pos (its length CRC checks out), or None within ``reach`` bytes."""
    step = 4096
    at = pos
    while at < min(size, pos + reach):
        f.seek(at)
        buf = f.read(step + 12)
        for i in range(0, max(0, len(buf) - 12)):
            if _UNPACK_Q(buf, i)[0] <= kg_common.LIMITS["line"] and reader._len_ok(buf[i:i + 12]):
                return at + i
        at += step
    return None


def reduce_tensorboard(a, xmode, f, size, verify=False):
    """(pass, next offset, sample or None, reader stats) of an event file: whole, from --offset, or sampled."""
    p = Pass(a, xmode)
    reader = TfEventsReader(verify=verify)
    sink = _TbSink(p)
    start = a.offset
    if a.preview is not None and a.lo is None and size - start > 2 * a.preview:
        # A first look: windows spread over the file, each starting at a record found by its length CRC.
        windows = min(PREVIEW_WINDOWS, max(8, a.preview // 4096))
        per = a.preview // windows
        read = 0
        for i in range(windows):
            pos = start + (size - start - per) * i // max(1, windows - 1) if windows > 1 else start
            at = pos if i == 0 else _tb_resync(reader, f, pos, size)
            if at is None:
                continue
            end = scan_columns(reader, f, at, min(size, at + per), sink)
            read += end - at
        p.bytes_read = read
        return p, start, {"bytes": read, "windows": windows, "of": size - start}, reader.stats()
    if a.fast:
        # Parts of the file in forked workers, as for JSON lines; each part starts at a record found by its
        # length CRC. A part's corrupt records are counted in its pass (skipped.corrupt).
        def scanner(q, g, lo, hi):
            r = TfEventsReader(verify=a.verify)
            end = scan_columns(r, g, lo, size if hi is None else hi, _TbSink(q))
            q.counts["corrupt"] = q.counts.get("corrupt", 0) + r.corrupt
            if lo == start:  # the parent's own part: its CRC counts are reported
                reader.__dict__.update(r.__dict__)
            return end

        def cutter(g, pos):
            return _tb_resync(reader, g, pos, size)

        q, pos = read_range(a, xmode, f, size, start, False, scanner, cutter)
        q.bytes_read = pos - start
        stats = reader.stats()
        stats["corrupt"] = q.counts.get("corrupt", 0)
        stats["records"] = q.lines + stats["corrupt"]
        return q, pos, None, stats
    else:
        # --no-fast: every record through the general decoder, one by one (what a reader without the block split
        # does; the bench's "usual way" with --verify).
        pos = reader.scan(f, start, size, sink.emit)
    p.bytes_read = pos - start
    return p, pos, None, reader.stats()


def _text_lines(f, start, size, counts):
    """(line number, offset after, text) of the whole lines from start; lines over LIMITS["line"] are skipped
    (never held whole) and counted. Ends with (None, offset after the last whole line, None)."""
    limit = kg_common.LIMITS["line"]
    f.seek(start)
    base = done = start
    carry = b""
    skipping = False
    lineno = 0
    while True:
        data = f.read(1 << 20)
        if not data:
            break
        buf = carry + data
        i = 0
        while True:
            nl = buf.find(b"\n", i)
            if nl < 0:
                break
            line = buf[i:nl]
            i = nl + 1
            if skipping or len(line) > limit:
                skipping = False
                counts["tooLong"] = counts.get("tooLong", 0) + 1
            else:
                lineno += 1
                yield lineno, base + i, line.decode("utf-8", "replace").rstrip("\r")
            done = base + i
        rest = buf[i:]
        if skipping or len(rest) > limit:
            skipping, carry, base = True, b"", base + len(buf)
        else:
            carry, base = rest, base + i
    yield None, done, None


def _number(cell):
    try:
        v = float(cell)
    except ValueError:
        return None
    return v


def reduce_csv(a, xmode, f, size):
    """A CSV with a header row (Lightning's CSVLogger: sparse columns, `step`, `epoch`): one record per row."""
    p = Pass(a, xmode)
    header = None
    pos = 0
    keys_limit = kg_common.LIMITS["keys"]

    def records():
        nonlocal header, pos
        for lineno, after, text in _text_lines(f, 0, size, p.counts):
            if lineno is None:
                pos = after
                return
            if header is None:
                header = next(csv.reader([text]), [])
                if len(header) > keys_limit:
                    raise kg_common.LimitError("keys", "the CSV header")
                continue
            if after <= a.offset:
                continue
            if not text.strip():
                p.blank += 1
                continue
            try:
                cells = next(csv.reader([text]), [])
            except csv.Error:
                p.counts["malformed"] += 1
                continue
            vals = {}
            for k, cell in zip(header, cells):
                if cell == "":
                    continue
                v = _number(cell)
                if v is None:
                    continue
                if v - v != 0.0:
                    p.counts["nonFinite"] += 1
                    continue
                vals[k] = v
            yield lineno - 1, vals

    p.records(records())
    if header is None and size:
        raise kg_common.ProbeError("%s: a CSV file without a header line" % a.path, "unreadable-format")
    p.bytes_read = pos - a.offset
    return p, pos


def reduce_trainer_state(a, xmode, f, size):
    """The Hugging Face Trainer's trainer_state.json: its log_history, one record per entry (x: `step`)."""
    p = Pass(a, xmode)
    doc = kg_common.loads_bounded(kg_common.read_bounded(f, what=a.path).decode("utf-8", "replace"), a.path)
    history = doc.get("log_history") if isinstance(doc, dict) else None
    if not isinstance(history, list):
        raise kg_common.ProbeError("%s is a JSON document without a log_history list: not a Trainer state"
                                   % a.path, "unreadable-format")
    items = []
    for i, entry in enumerate(history):
        vals = {}
        if isinstance(entry, dict):
            for k, v in entry.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v - v == 0.0:
                    vals[str(k)] = float(v)
        items.append((i + 1, vals))
    p.records(items)
    p.bytes_read = size
    return p, size


_MAGIC = (
    (b"PK\x03\x04", "a zip archive (a torch checkpoint?)"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\x80", "a Python pickle"),
    (b"\x89HDF", "an HDF5 file"),
    (b"SQLite format 3", "an SQLite database"),
)


def _looks_tfrecord(head):
    if len(head) < 12:
        return False
    return TfEventsReader()._len_ok(head[:12])


def detect_format(path, f):
    """jsonl, csv, hf-trainer-state or tensorboard, by name and then by the file's first bytes."""
    name = os.path.basename(path).lower()
    if name.startswith("events.out.tfevents."):
        return "tensorboard"
    if name == "trainer_state.json":
        return "hf-trainer-state"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".jsonl"):
        return "jsonl"
    head = f.read(4096)
    f.seek(0)
    if _looks_tfrecord(head):
        return "tensorboard"
    first = head.split(b"\n", 1)[0].strip()
    if first == b"{" or first == b"[":
        return "hf-trainer-state" if b'"log_history"' in head or first == b"{" else "jsonl"
    if first and not first.startswith(b"{") and b"," in first and b"\x00" not in first:
        return "csv"
    return "jsonl"


def what_it_looks_like(f):
    """Words for a file that gave no metrics at all: what its first bytes say it is."""
    f.seek(0)
    head = f.read(512)
    for magic, words in _MAGIC:
        if head.startswith(magic):
            return words
    if _looks_tfrecord(head):
        return "TensorBoard event records"
    if b"\x00" in head:
        return "binary data"
    first = head.split(b"\n", 1)[0].strip()
    if first.startswith(b"{"):
        return "JSON, but no line parsed as a record with numbers"
    return "text that is not JSON lines (it starts %r)" % first[:40].decode("utf-8", "replace")


FORMATS = ("jsonl", "csv", "hf-trainer-state", "tensorboard")


def reduce_other(a, xmode, fmt):
    """(pass, next offset, size, sample or None, source, extra) for the formats other than jsonl. Documents that are
    rewritten whole (trainer_state.json) are read whole; CSV and event files follow from --offset like jsonl."""
    f = kg_common.open_regular(a.path, buffering=0)
    with f:
        size = os.fstat(f.fileno()).st_size
        extra = {}
        if fmt == "tensorboard":
            p, pos, sampled, stats = reduce_tensorboard(a, xmode, f, size, a.verify)
            extra["tensorboard"] = stats
            return p, pos, size, sampled, "read", extra
        if fmt == "csv":
            p, pos = reduce_csv(a, xmode, f, size)
            return p, pos, size, None, "read", extra
        if a.offset and a.offset == size:
            return Pass(a, xmode), size, size, None, "read", extra
        p, pos = reduce_trainer_state(a, xmode, f, size)
        if a.offset:
            # Rewritten whole at each save: the answer is the whole log again, flagged as a reset.
            extra["reset"] = True
        return p, pos, size, None, "read", extra


def reduce_file(a, xmode):
    """(pass, next offset, size, sample or None, "read" or "cache")."""
    # A FIFO or a device named as the log is refused before anything is read (it would block, or never end).
    f = kg_common.open_regular(a.path, buffering=0)
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
        exact = k is not None and k["state"] is not None and k["stateKey"] == state_key
        if a.offset:
            # Following: the appended lines are the answer.  Where they continue what was kept, the kept
            # reduction and zone map grow with them, so that reopening or zooming a live run stays cheap.
            p, pos = read_range(a, xmode, f, size, a.offset, k is not None and a.offset == k["pos"])
            if p.zones is not None and pos != k["pos"] and whole:
                if exact:
                    m = _restore(a, xmode, k)
                    # A copy: merging regrids the buckets it is given, and p's are the answer.
                    _merge(m, marshal.loads(marshal.dumps(_state(p, pos))))
                    _remember(key, f, st, pos, m.zones, state_key, m)
                else:
                    _remember(key, f, st, pos, list(k["zones"]) + p.zones, None, None)
            return p, pos, size, None, "read"
        if exact and whole:
            # The exact reduction up to where it was read, plus the lines appended since.
            p = _restore(a, xmode, k)
            q, pos = read_range(a, xmode, f, size, k["pos"], True)
            _merge(p, _state(q, pos))
            p.jobs = q.jobs
            if pos != k["pos"]:
                _remember(key, f, st, pos, p.zones, state_key, p)
            return p, pos, size, None, "cache"
        if k is not None and not whole:
            # Only the stretches whose x range meets the window, then whatever was appended since.
            p = Pass(a, xmode)
            ranges = []
            for z0, z1, lo, hi in k["zones"]:
                if lo is None or lo > a.hi or hi < a.lo:
                    continue
                if ranges and ranges[-1][1] == z0:
                    ranges[-1][1] = z1
                else:
                    ranges.append([z0, z1])
            buf = bytearray(BLOCK)
            for z0, z1 in ranges:
                scan(p, f, z0, z1, buf)
            pos = scan(p, f, k["pos"], None, buf)
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
    fmt = a.format
    if fmt is None:
        with kg_common.open_regular(a.path) as f:
            fmt = detect_format(a.path, f)
    extra = {}
    reduce = reduce_file if fmt == "jsonl" else lambda a, xmode: reduce_other(a, xmode, fmt)
    out = reduce(a, a.x)
    p, next_offset, size, sampled, source = out[:5]
    extra = out[5] if len(out) > 5 else {}
    xmode = a.x
    if a.x == "step" and not p.xused and p.counts["noX"] > 0:
        # No line has a step: number the lines instead (a second pass, only for such logs).
        out = reduce(a, "line")
        p, next_offset, size, sampled, source = out[:5]
        extra = out[5] if len(out) > 5 else {}
        xmode = "line"
    reset = reset or bool(extra.pop("reset", False))
    if not p.reducer.buckets and not a.offset and sampled is None and a.lo is None and size:
        nonblank = p.lines - p.blank
        if fmt == "jsonl" and nonblank > 0 and p.counts["malformed"] >= nonblank:
            # Every line failed to parse: not a metrics log at all. Say what it is rather than plot nothing.
            with kg_common.open_regular(a.path) as f:
                seen = what_it_looks_like(f)
            raise kg_common.ProbeError("%s is not a metrics log Known Good reads (JSON lines, CSV with a header, "
                                       "trainer_state.json, TensorBoard events): it looks like %s"
                                       % (a.path, seen), "unreadable-format")
    names = sorted(p.reducer.buckets)
    truncated = len(names) > MAX_SERIES or p.reducer.dropped > 0
    series = p.reducer.result(names[:MAX_SERIES])
    r = p.reducer
    skipped = dict(p.counts)
    result = {
        "path": a.path,
        "format": fmt,
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
        # Points of series past the first limits.keys ones, not kept.
        "seriesDropped": r.dropped,
        # What the skipped counts refer to: tooLong is over limits.line bytes, tooManyKeys over limits.keys keys,
        # tooDeep over limits.depth levels.
        "limits": dict((k, kg_common.LIMITS[k]) for k in ("line", "keys", "depth")),
        "fastLines": p.fast_lines,
        "shapes": max(len(p.shapes), p.merged_shapes),
        "jobs": p.jobs,
        "sample": sampled,
        "source": source,
        "bytesRead": p.bytes_read,
        "elapsedMs": round((time.time() - started) * 1000.0, 1),
    }
    result.update(extra)
    return result


if __name__ == "__main__":
    kg_common.run(main)
