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
bytes at its start or at the cached offset changed).  What is kept is plain data in ``metrics_cache._known`` (at
most 8 files, 64 MiB); a helper that serves each request in a forked child carries it back with
``KG_STATE_EXPORT`` / ``KG_STATE_IMPORT`` (python/HELPER_STATE.md).

Hostile input costs bounded memory (kg_common.LIMITS): the file is read in blocks; a line longer than
LIMITS["line"] is skipped without being held whole (``skipped.tooLong``), a line of more than LIMITS["keys"] keys or
nested deeper than LIMITS["depth"] is skipped (``tooManyKeys``, ``tooDeep``); the rest of the file still plots.
Series past the first LIMITS["keys"] are not kept (``seriesTruncated``).  FIFOs and devices are refused unread.

Speed: ``json.loads`` per line costs about 2.5 s per million lines here.  Real logs repeat a handful of line
shapes (same keys in the same order, only the numbers change), so each shape seen is turned into a regular
expression that captures its numbers; one ``findall`` per 4 MiB block then yields the numbers of every line of a
known shape, converted column by column at C speed.  A shape is only trusted after it reproduced ``json.loads`` on
the line it came from; lines of no known shape (first of their kind, NaN, odd spacing) take the json.loads path.

The modules it travels with: metrics_lines (a line's numbers, line shapes), metrics_pass (buckets and the pass),
metrics_scan (byte ranges, forked parts, preview), metrics_cache (what is kept between requests, the jsonl read),
metrics_tb (TensorBoard events).  This file holds the command line, the other formats and the answer.
"""
import csv
import math
import os
import time
from typing import List, Optional  # noqa: F401 (type comments)

import kg_common
import metrics_cache
# The resident helper looks for KG_STATE_EXPORT / KG_STATE_IMPORT on the probe's own module.
from metrics_cache import KG_STATE_EXPORT, KG_STATE_IMPORT, forget, reduce_file  # noqa: F401
from metrics_pass import Pass, compact
from metrics_tb import TfEventsReader, reduce_tensorboard

DEFAULT_BUCKETS = 2000
MAX_SERIES = 256
PREVIEW_BYTES = 8 << 20


class _Args(object):
    """The parsed command line (attributes set by parse_args)."""

    path = ""  # type: str
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
    path = None
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
        elif path is None:
            path = tok
        else:
            raise kg_common.ProbeError("only one FILE is read", "bad-args")
    if path is None:
        raise kg_common.ProbeError("usage: metrics_reduce.py FILE [--buckets N] [--x step|time|line] "
                                   "[--from X --to X] [--offset BYTES] [--series k1,k2]", "bad-args")
    a.path = path
    if a.x not in ("step", "time", "line"):
        raise kg_common.ProbeError("--x must be step, time or line", "bad-args")
    if not 1 <= a.buckets <= 1000000:
        raise kg_common.ProbeError("--buckets must be between 1 and 1000000", "bad-args")
    if (a.lo is None) != (a.hi is None):
        raise kg_common.ProbeError("--from and --to go together", "bad-args")
    if a.lo is not None and a.hi is not None and not (math.isfinite(a.lo) and math.isfinite(a.hi) and a.lo <= a.hi):
        raise kg_common.ProbeError("--from must be a number not above --to", "bad-args")
    if a.offset < 0:
        raise kg_common.ProbeError("--offset must not be negative", "bad-args")
    if a.preview is not None and a.preview < 1:
        raise kg_common.ProbeError("--preview-bytes must be positive", "bad-args")
    return a


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
            if lineno is None or text is None:  # the end: both None
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
        "xRange": [compact(r.xmin), compact(r.xmax)] if r.xmin is not None else None,
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
    metrics_cache._KEEP = False
    kg_common.run(main)
