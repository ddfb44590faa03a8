"""The lines appended to a (jsonl) log since a byte offset (stdlib only, Python 3.8+).

    log_tail.py FILE --offset N [--max-bytes N] [--inode INO] [--latest-only]

Only complete lines are returned: a last line without its newline is being written and is left for the next
read (``nextOffset`` points at its start).  ``--offset -1`` starts near the end (the last ``--max-bytes``, from a
line boundary) for a first look at a long log.  When the file was replaced (another inode than ``--inode``) or
truncated (smaller than the offset), reading restarts from 0 and ``reset`` says so.

Each line is returned parsed when it is JSON, else as ``{"$raw": text}``.  ``latest`` holds the newest step and
tokens/s found in the lines read (keys such as ``step``/``global_step`` and ``tok_per_s``/``tokens_per_sec``/
``tok/s``/``throughput``, nested dicts included), for a status bar that follows a run.
"""
import json
import os

import kg_common

DEFAULT_MAX_BYTES = 1 << 20
MAX_RAW = 2000
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


def main(argv):
    path, offset, max_bytes, inode, latest_only = parse_args(argv)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        # A run that has not written its log yet: not an error for something that polls.
        return {"path": path, "exists": False, "inode": None, "size": 0, "mtime": None, "offset": 0,
                "nextOffset": 0, "reset": offset > 0, "lines": [], "count": 0, "malformed": 0, "hasMore": False,
                "latest": None}
    except OSError as e:
        raise kg_common.ProbeError("cannot read %s: %s" % (path, e.strerror or e), "permission-denied")
    with f:
        st = os.fstat(f.fileno())
        size = st.st_size
        reset = False
        if offset > 0 and ((inode is not None and st.st_ino != inode) or size < offset):
            reset = True
            offset = 0
        start = offset
        skip_partial = False
        if offset == -1:
            start = max(0, size - max_bytes)
            skip_partial = start > 0
        f.seek(start)
        data = f.read(max_bytes)
        if skip_partial:
            # Started mid-line: the first (partial) line belongs to the past.
            nl = data.find(b"\n")
            if nl < 0:
                data = b""  # all of it one line that began earlier: wait for its end
            else:
                data = data[nl + 1:]
                start += nl + 1
        cut = data.rfind(b"\n")
        while cut < 0 and len(data) >= max_bytes and not skip_partial:
            # One line longer than max-bytes: read on to its end rather than never moving.
            more = f.read(max_bytes)
            if not more:
                break
            data += more
            cut = data.rfind(b"\n")
        complete = data[: cut + 1] if cut >= 0 else b""
        next_offset = start + len(complete)
        has_more = start + len(data) < size
    records = []
    malformed = 0
    maybe_secret = kg_common.might_hold_secret(complete)  # one pass: a plain metrics log skips the per-line test
    for line in complete.split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            records.append(kg_common.redact_tree(rec) if maybe_secret and kg_common.might_hold_secret(line) else rec)
        except ValueError:
            malformed += 1
            records.append({"$raw": kg_common.redact_text(line[:MAX_RAW].decode("utf-8", "replace"))})
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
        "hasMore": has_more,
        "latest": latest_of(records),
    }


if __name__ == "__main__":
    kg_common.run(main)
