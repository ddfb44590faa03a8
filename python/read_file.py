"""Read part of a file: by default its last N bytes (logs are read from the end).

Usage: python3 read_file.py PATH [--max-bytes N] [--from-start] [--offset N]

stdlib only.  Prints the bytes as base64 (any encoding survives), with the file's size and mtime so the caller can
say how much was left out.
"""
import base64
import os
import sys

import kg_common


def _path(text):
    # A path that is not valid UTF-8 travels as "b64:<bytes>".
    if text.startswith("b64:"):
        return base64.b64decode(text[4:])
    return text


def main(argv):
    max_bytes = 4 * 1024 * 1024
    from_start = False
    offset = None
    path = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--max-bytes":
            max_bytes = int(argv[i + 1])
            i += 2
        elif a == "--from-start":
            from_start = True
            i += 1
        elif a == "--offset":
            offset = int(argv[i + 1])
            i += 2
        elif a == "--":
            path = argv[i + 1] if i + 1 < len(argv) else None
            break
        else:
            path = a
            i += 1
    if path is None:
        raise kg_common.ProbeError("usage: read_file.py PATH [--max-bytes N] [--from-start] [--offset N]")
    p = _path(path)
    try:
        st = os.stat(p)
        if not os.path.isfile(p):
            raise kg_common.ProbeError("%s is not a regular file" % path, "not-a-file")
        with open(p, "rb") as f:
            size = st.st_size
            if offset is not None:
                start = max(0, min(offset, size))
            elif from_start:
                start = 0
            else:
                start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read(max_bytes)
    except FileNotFoundError:
        raise kg_common.ProbeError("%s does not exist" % path, "not-found")
    except PermissionError:
        raise kg_common.ProbeError("permission denied reading %s" % path, "denied")
    except IsADirectoryError:
        raise kg_common.ProbeError("%s is a folder" % path, "not-a-file")
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
