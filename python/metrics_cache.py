"""What metrics_reduce keeps per file between requests of a long-lived process (the resident helper), and the jsonl
read that uses it (reduce_file): the exact reduction up to the offset read, and a zone map (x range per ~256 KiB).
The state is plain data carried by KG_STATE_EXPORT / KG_STATE_IMPORT (python/HELPER_STATE.md).
"""
import marshal
import os
import threading

import kg_common
from metrics_pass import Pass, merge_state, state_of
from metrics_scan import BLOCK, read_range, sample, scan

CACHE_FILES = 8
# Memory the kept reductions and zone maps may use in all (about: marshal bytes, ~100 bytes per zone).
CACHE_BYTES = 64 << 20
# Bytes compared at the start of the file and before the cached offset to tell that the file is still the same.
SIG = 4096


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
# Run by hand the process ends after one answer: nothing to keep (metrics_reduce's __main__ turns it off).
_KEEP = True


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
        d = state_of(p, pos)
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
    merge_state(p, d)
    p.bytes_read = 0
    return p


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
            if k is not None and p.zones is not None and pos != k["pos"] and whole:
                if exact:
                    m = _restore(a, xmode, k)
                    # A copy: merging regrids the buckets it is given, and p's are the answer.
                    merge_state(m, marshal.loads(marshal.dumps(state_of(p, pos))))
                    _remember(key, f, st, pos, m.zones, state_key, m)
                else:
                    _remember(key, f, st, pos, list(k["zones"]) + p.zones, None, None)
            return p, pos, size, None, "read"
        if exact and whole and k is not None:
            # The exact reduction up to where it was read, plus the lines appended since.
            p = _restore(a, xmode, k)
            q, pos = read_range(a, xmode, f, size, k["pos"], True)
            merge_state(p, state_of(q, pos))
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
