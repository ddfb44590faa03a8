"""Read part of a file: by default its last N bytes (logs are read from the end).

Usage: python3 read_file.py PATH [--max-bytes N] [--from-start] [--offset N]

stdlib only.  Prints the bytes as base64 (any encoding survives), with the file's size and mtime so the caller can
say how much was left out.  Only regular files are read: a FIFO or a device is refused unread (never blocks), and
--max-bytes is at most kg_common.LIMITS["read"].
"""
import base64
import os

import kg_common


def _path(text):
    # A path that is not valid UTF-8 travels as "b64:<bytes>".
    if text.startswith("b64:"):
        return base64.b64decode(text[4:])
    return text


def _int_arg(argv, i):
    try:
        v = int(argv[i + 1])
    except (IndexError, ValueError):
        raise kg_common.ProbeError("%s needs a whole number" % argv[i], "bad-args")
    if v < 0:
        raise kg_common.ProbeError("%s must not be negative" % argv[i], "bad-args")
    return v


def main(argv):
    max_bytes = 4 * 1024 * 1024
    from_start = False
    offset = None
    path = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--max-bytes":
            max_bytes = _int_arg(argv, i)
            i += 2
        elif a == "--from-start":
            from_start = True
            i += 1
        elif a == "--offset":
            offset = _int_arg(argv, i)
            i += 2
        elif a == "--":
            path = argv[i + 1] if i + 1 < len(argv) else None
            break
        else:
            path = a
            i += 1
    if path is None:
        raise kg_common.ProbeError("usage: read_file.py PATH [--max-bytes N] [--from-start] [--offset N]")
    if max_bytes > kg_common.LIMITS["read"]:
        raise kg_common.LimitError("read", "--max-bytes %d" % max_bytes)
    p = _path(path)
    try:
        f = kg_common.open_regular(p)
    except kg_common.ProbeError as e:
        # Our own codes, and the path as given (a b64: one is shown decoded, not as a bytes repr).
        shown = os.fsdecode(p) if isinstance(p, bytes) else p
        if e.code == "not-found":
            raise kg_common.ProbeError("%s does not exist" % shown, e.code)
        raise kg_common.ProbeError(str(e).replace(str(p), shown), e.code)
    try:
        with f:
            st = os.fstat(f.fileno())
            size = st.st_size
            if offset is not None:
                start = max(0, min(offset, size))
            elif from_start:
                start = 0
            else:
                start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read(max_bytes)
    except OSError as e:
        raise kg_common.ProbeError("cannot read %s: %s" % (path, e.strerror or e), "unreadable")
    return {
        "path": os.fsdecode(p) if isinstance(p, bytes) else p,
        "size": size,
        "mtime": st.st_mtime,
        "start": start,
        "end": start + len(data),
        "data": base64.b64encode(data).decode("ascii"),
    }


if __name__ == "__main__":
    kg_common.run(main)
