"""The lines appended to a (jsonl) log since a byte offset (stdlib only, Python 3.8+).

    log_tail.py FILE --offset N [--max-bytes N] [--inode INO] [--latest-only]

Only complete lines are returned: a last line without its newline is being written and is left for the next
read (``nextOffset`` points at its start).  ``--offset -1`` starts near the end (the last ``--max-bytes``, from a
line boundary) for a first look at a long log.  When the file was replaced (another inode than ``--inode``) or
truncated (smaller than the offset), reading restarts from 0 and ``reset`` says so.

Each line is returned parsed when it is JSON, else as ``{"$raw": text}``.  ``latest`` holds the newest step and
tokens/s found in the lines read (keys such as ``step``/``global_step`` and ``tok_per_s``/``tokens_per_sec``/
``tok/s``/``throughput``, nested dicts included), for a status bar that follows a run; ``recent`` the last
RECENT values of that throughput key (oldest first), so the status bar shows the run's level (their median), not
one logged point (a checkpoint save or an eval pause).

Hostile files cost bounded memory (kg_common.LIMITS): the file is read in blocks; a line longer than
LIMITS["line"] is skipped without being held whole and counted in ``tooLong`` (when the bytes end inside such a
line, ``nextOffset`` is where reading stopped, inside it, and a read that starts inside a line skips to the next
one); a line nested deeper than LIMITS["depth"] or of more than LIMITS["keys"] keys is returned as ``$raw`` and
counted in ``tooDeep`` / ``tooManyKeys``.  FIFOs and devices are refused unread.
"""
import os

import kg_common
import kg_redact

DEFAULT_MAX_BYTES = 1 << 20
BLOCK = 1 << 16
MAX_RAW = 2000
RECENT = 21
STEP_KEYS = ("step", "global_step", "_step", "iter", "iteration")
THROUGHPUT_KEYS = (
    "tok_per_s", "tokens_per_sec", "tokens_per_s", "tokens_per_second", "tok/s", "tokens/s", "tok_s", "tps",
    "throughput",
)


def parse_args(argv):
    path = None
    offset = None
    max_bytes = DEFAULT_MAX_BYTES
    inode = None
    latest_only = False
    it = iter(argv)
    for tok in it:
        if tok in ("--offset", "--max-bytes", "--inode"):
            try:
                val = int(next(it))
            except (StopIteration, ValueError):
                raise kg_common.ProbeError("%s needs an integer" % tok, "bad-args")
            if tok == "--offset":
                offset = val
            elif tok == "--max-bytes":
                max_bytes = val
            else:
                inode = val
        elif tok == "--latest-only":
            latest_only = True
        elif tok.startswith("--"):
            raise kg_common.ProbeError("unknown option %s" % tok, "bad-args")
        elif path is None:
            path = tok
        else:
            raise kg_common.ProbeError("only one FILE is read", "bad-args")
    if path is None or offset is None:
        raise kg_common.ProbeError("usage: log_tail.py FILE --offset N [--max-bytes N] [--inode INO]", "bad-args")
    if offset < -1:
        raise kg_common.ProbeError("--offset must be -1 (near the end) or a byte offset", "bad-args")
    if max_bytes < 1:
        raise kg_common.ProbeError("--max-bytes must be positive", "bad-args")
    if max_bytes > kg_common.LIMITS["read"]:
        raise kg_common.LimitError("read", "--max-bytes %d" % max_bytes)
    return path, offset, max_bytes, inode, latest_only


def _key_matches(key, names):
    k = key.lower()
    if k in names:
        return True
    for n in names:
        if k.endswith("/" + n) or k.endswith("." + n):
            return True
    return False


def _numbers(doc, prefix, out):
    for k, v in doc.items():
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            if kg_common.finite_or_none(v) is not None:
                out.append((prefix + k, v))
        elif isinstance(v, dict):
            _numbers(v, prefix + k + ".", out)


def latest_of(records):
    """The newest step and throughput among parsed records (newest last)."""
    step = step_key = tps = tps_key = None
    for rec in reversed(records):
        if not isinstance(rec, dict) or "$raw" in rec:
            continue
        pairs = []
        _numbers(rec, "", pairs)
        if step is None:
            for k, v in pairs:
                if _key_matches(k, STEP_KEYS):
                    step, step_key = v, k
                    break
        if tps is None:
            for k, v in pairs:
                if _key_matches(k, THROUGHPUT_KEYS):
                    tps, tps_key = v, k
                    break
        if step is not None and tps is not None:
            break
    if step is None and tps is None:
        return None
    return {"step": step, "stepKey": step_key, "tokensPerSec": tps, "tokensPerSecKey": tps_key}


def recent_of(records, key):
    """The last RECENT finite values of throughput key `key` in records (oldest first)."""
    if key is None:
        return []
    out = []
    for rec in reversed(records):
        if len(out) >= RECENT:
            break
        if not isinstance(rec, dict) or "$raw" in rec:
            continue
        pairs = []
        _numbers(rec, "", pairs)
        for k, v in pairs:
            if k == key:
                out.append(v)
                break
    out.reverse()
    return out


def _read_lines(f, start, max_bytes):
    """The complete lines from start, about max_bytes of them (at least one, however long up to LIMITS["line"]):
    (lines, offset after the last byte passed, where the first whole line starts, lines too long, stopped early).

    Starting inside a line (the byte before start is no newline), that line began earlier and is skipped. A line
    longer than LIMITS["line"] is skipped too, never held whole; passing over it reads at most LIMITS["read"]
    bytes per call, and a call that stops inside it answers that offset (the next one starts inside and skips on).
    """
    limit = kg_common.LIMITS["line"]
    budget = kg_common.LIMITS["read"]
    skipping = False
    if start > 0:
        f.seek(start - 1)
        skipping = f.read(1) not in (b"\n", b"")
    f.seek(start)
    first = start
    pos = start  # the offset of pending's first byte
    pending = b""
    lines = []
    taken = 0
    too_long = 0
    scanned = 0
    while True:
        if taken >= max_bytes or scanned >= budget:
            return lines, pos, first, too_long, True
        chunk = f.read(BLOCK)
        if not chunk:
            return lines, pos, first, too_long, False
        scanned += len(chunk)
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                pos += len(chunk)
                # A hole of a sparse file is zeros, no newline: passed over unread (kg_common.next_data).
                hole = kg_common.next_data(f, pos)
                if hole > pos:
                    pos = hole
                    f.seek(pos)
                continue
            pos += nl + 1
            chunk = chunk[nl + 1:]
            skipping = False
            if not lines and not too_long:
                first = pos  # the partial line at the start belongs to the past
        pending += chunk
        at = 0
        while taken < max_bytes:
            nl = pending.find(b"\n", at)
            if nl < 0:
                break
            if nl - at > limit:
                too_long += 1
            else:
                lines.append(pending[at:nl])
            taken += nl + 1 - at
            at = nl + 1
        if at:
            pos += at
            pending = pending[at:]
        if len(pending) > limit and taken < max_bytes:  # pending is then one line without its end
            too_long += 1
            skipping = True
            pos += len(pending)
            pending = b""


def _check(doc):
    """A decoded line nested deeper than LIMITS["depth"] or of more than LIMITS["keys"] keys raises LimitError."""
    depth_limit = kg_common.LIMITS["depth"]
    keys_left = kg_common.LIMITS["keys"]
    stack = [(doc, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth >= depth_limit:
                raise kg_common.LimitError("depth", "a log line")
            keys_left -= len(v)
            if keys_left < 0:
                raise kg_common.LimitError("keys", "a log line")
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))


def main(argv):
    path, offset, max_bytes, inode, latest_only = parse_args(argv)
    try:
        f = kg_common.open_regular(path, buffering=0)  # unbuffered: next_data moves the descriptor
    except kg_common.ProbeError as e:
        if e.code != "not-found":
            raise
        # A run that has not written its log yet: not an error for something that polls.
        return {"path": path, "exists": False, "inode": None, "size": 0, "mtime": None, "offset": 0,
                "nextOffset": 0, "reset": offset > 0, "lines": [], "count": 0, "malformed": 0, "tooLong": 0,
                "tooDeep": 0, "tooManyKeys": 0, "hasMore": False, "latest": None, "recent": []}
    with f:
        st = os.fstat(f.fileno())
        size = st.st_size
        reset = False
        if offset > 0 and ((inode is not None and st.st_ino != inode) or size < offset):
            reset = True
            offset = 0
        # -1: the last max-bytes, from the first line that starts in them (the partial one belongs to the past).
        start = max(0, size - max_bytes) if offset == -1 else offset
        lines, next_offset, start, too_long, stopped = _read_lines(f, start, max_bytes)
        has_more = stopped and next_offset < size
    records = []
    malformed = 0
    skipped = {"depth": 0, "keys": 0}
    # One pass over the block: a plain metrics log skips the per-line secret test.
    maybe_secret = any(map(kg_redact.might_hold_secret, lines))
    for line in lines:
        if not line.strip():
            continue
        try:
            doc = kg_common.loads_bounded(line, "a log line")
            _check(doc)
            records.append(kg_redact.redact_tree(doc) if maybe_secret and kg_redact.might_hold_secret(line) else doc)
        except ValueError:
            malformed += 1
            records.append({"$raw": kg_redact.redact_text(line[:MAX_RAW].decode("utf-8", "replace"))})
        except kg_common.LimitError as e:
            skipped[e.limit] += 1
            records.append({"$raw": kg_redact.redact_text(line[:MAX_RAW].decode("utf-8", "replace"))})
    latest = latest_of(records)
    return {
        "path": path,
        "exists": True,
        "inode": st.st_ino,
        "size": size,
        "mtime": st.st_mtime,
        "offset": start,
        "nextOffset": next_offset,
        "reset": reset,
        "lines": [] if latest_only else records,
        "count": len(records),
        "malformed": malformed,
        "tooLong": too_long,
        "tooDeep": skipped["depth"],
        "tooManyKeys": skipped["keys"],
        "hasMore": has_more,
        "latest": latest,
        "recent": recent_of(records, latest["tokensPerSecKey"] if latest else None),
        "limits": dict((k, kg_common.LIMITS[k]) for k in ("line", "keys", "depth")),
    }


if __name__ == "__main__":
    kg_common.run(main)
