"""metrics_reduce's pass over a log: the buckets every series is reduced to (Reducer) and the pass that feeds them
(Pass: lines of a known shape a block at a time, the others one by one), and a pass as plain data (state_of /
merge_state) for forked workers and the kept state.
"""
import bisect
import itertools
import math
import re

import kg_common
from metrics_lines import MAX_SHAPE_KEYS, new_counts, numbers_of, verified_shape

STEP_KEYS = ("step", "global_step", "_step", "iter", "iteration", "train/global_step", "trainer/global_step")
TIME_KEYS = ("time", "timestamp", "_timestamp", "wall_time")
MAX_SHAPES = 12
# A zone of the zone map covers at least this many bytes (whole blocks).
ZONE_MIN = 256 << 10


# ---------------------------------------------------------------------------------------------------------------
# Buckets


class Reducer(object):
    """Equal-width buckets over x shared by all series; without a window the width doubles as the range grows."""

    def __init__(self, nb, lo=None, hi=None):
        self.nb = nb
        self.window = lo is not None
        self.origin = lo
        self.width = None
        if lo is not None and hi is not None:  # a window (--from and --to go together)
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
        # Only once points are in: the width and the index range are set.
        assert self.width is not None and self.lo_idx is not None and self.hi_idx is not None
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
            if self.lo_idx is None or self.hi_idx is None:
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
                "x": [compact(r[2]) for r in rows],
                "min": [compact(r[0]) for r in rows],
                "max": [compact(r[1]) for r in rows],
                "last": [compact(r[3]) for r in rows],
                "count": sum(r[5] for r in rows),
                "lastX": compact(rows[-1][2]),
                "lastValue": compact(rows[-1][3]),
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


def compact(v):
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
        self.counts = new_counts()
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



def state_of(p, pos):
    r = p.reducer
    return {
        "pos": pos, "counts": p.counts, "keys": sorted(p.keys), "xused": sorted(p.xused), "lines": p.lines,
        "blank": p.blank, "fast": p.fast_lines, "shapes": len(p.shapes), "width": r.width, "lo": r.lo_idx,
        "hi": r.hi_idx, "buckets": r.buckets, "xmin": r.xmin, "xmax": r.xmax, "zones": p.zones,
        "read": p.bytes_read, "dropped": r.dropped,
    }


def merge_state(p, st):
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

