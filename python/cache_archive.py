"""What backing up or restoring the compile caches needs to know, in one call: the caches, free space, archives.

Usage: python3 cache_archive.py [--dest DIR] [--root DIR] [--cache-dir DIR]...

stdlib only, Python 3.8+. Reads only: the archive itself is written by ``tar`` (run by the extension with argv, so a
cancel kills it), into ``~/.known-good/cache-archives/cache-<time>.tar.gz`` on the host, never into a checkpoint
root; archives an earlier version left in ``<root>/.known-good/`` are still listed. This probe says where the
inductor and triton caches are (the same rules as env_snapshot.py and torch itself), how big they are, how much room
the destination has (statvfs of the nearest existing folder), which archives already exist there with their
manifests, and whether the remote ``tar`` is GNU tar (its ``--checkpoint`` gives progress).
"""
import json
import os
import re
import shutil
import subprocess

import kg_common

MAX_ENTRIES = 500000
MAX_MANIFEST_BYTES = 1024 * 1024
ARCHIVE_RE = re.compile(r"^cache-[0-9A-Za-z_-]+\.tar\.gz$")


def _parse_args(argv):
    p = kg_common.arg_parser("cache_archive.py", add_help=False)
    # where archives go: under the user's home, never in a checkpoint root (a data folder shared with jobs)
    p.add_argument("--dest", default="~/.known-good/cache-archives", metavar="DIR")
    # archives earlier versions wrote into <root>/.known-good/ are still listed (and restorable)
    p.add_argument("--root", metavar="DIR")
    p.add_argument("--cache-dir", action="append", default=[], metavar="DIR")
    return p.parse_args(argv)




def free_bytes(path):
    """Free bytes for an unprivileged writer on the file system that `path` (or its nearest existing parent) is on."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    try:
        st = os.statvfs(p)
        return {"at": p, "freeBytes": st.f_bavail * st.f_frsize, "error": None}
    except OSError as e:
        return {"at": p, "freeBytes": None, "error": "%s: %s" % (type(e).__name__, e.strerror or e)}


def measure(path):
    files = 0
    total = 0
    unreadable = 0
    truncated = False

    def onerror(_e):
        nonlocal unreadable
        unreadable += 1

    for dirpath, _dirs, names in os.walk(path, onerror=onerror):
        for n in names:
            files += 1
            if files > MAX_ENTRIES:
                truncated = True
                break
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                unreadable += 1
        if truncated:
            break
    return files, total, unreadable, truncated


def describe_cache(name, path):
    out = {"name": name, "path": path, "realPath": None, "member": None, "exists": False, "files": None,
           "bytes": None, "unreadable": 0, "truncated": False, "freeBytes": None, "error": None}
    try:
        real = os.path.realpath(path)
        out["realPath"] = real
        # tar runs with `-C /`: members are relative to / so a restore puts the files back where they were.
        out["member"] = os.path.relpath(real, "/")
        out["freeBytes"] = free_bytes(real)["freeBytes"]
        if not os.path.exists(real):
            return out
        if not os.path.isdir(real):
            out["error"] = "not a folder"
            return out
        out["exists"] = True
        files, total, unreadable, truncated = measure(real)
        out.update({"files": files, "bytes": total, "unreadable": unreadable, "truncated": truncated})
    except Exception as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
    return out


def read_manifest(path):
    try:
        if os.path.getsize(path) > MAX_MANIFEST_BYTES:
            return None, "manifest larger than %s" % kg_common.format_bytes(MAX_MANIFEST_BYTES)
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8")), None
    except OSError as e:
        return None, e.strerror or str(e)
    except ValueError as e:
        return None, "not JSON: %s" % e


def list_archives(dest):
    out = []
    try:
        names = sorted(os.listdir(dest))
    except FileNotFoundError:
        return out, None
    except OSError as e:
        return out, "%s: %s" % (type(e).__name__, e.strerror or e)
    for n in names:
        if not ARCHIVE_RE.match(n):
            continue
        p = os.path.join(dest, n)
        try:
            st = os.stat(p)
        except OSError:
            continue
        manifest_path = p[: -len(".tar.gz")] + ".json"
        manifest, err = (None, "no manifest") if not os.path.exists(manifest_path) else read_manifest(manifest_path)
        out.append({"name": n, "path": p, "bytes": st.st_size, "mtime": st.st_mtime, "manifestPath": manifest_path,
                    "manifest": manifest, "manifestError": err})
    return out, None


def tar_info():
    path = shutil.which("tar")
    if not path:
        return {"path": None, "gnu": False, "version": None}
    try:
        r = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10,
                           preexec_fn=kg_common.lift_limits)
        first = r.stdout.decode("utf-8", "replace").splitlines()[:1]
        version = first[0] if first else None
    except Exception:
        version = None
    return {"path": path, "gnu": bool(version and "GNU tar" in version), "version": version}


def main(argv):
    args = _parse_args(argv)
    root = args.root
    dest = os.path.abspath(os.path.expanduser(args.dest))
    free = free_bytes(dest)
    archives, listing_error = list_archives(dest)
    if root:
        legacy = os.path.join(root, ".known-good")
        if legacy != dest:
            archives += list_archives(legacy)[0]
    return {
        "schema": 1,
        "root": root,
        "rootExists": bool(root) and os.path.isdir(root),
        "dest": {"dir": dest, "exists": os.path.isdir(dest), "freeBytes": free["freeBytes"], "freeAt": free["at"],
                 "error": free["error"] or listing_error},
        "caches": [describe_cache(n, p) for n, p in kg_common.compile_cache_dirs(args.cache_dir)],
        "archives": archives,
        "tar": tar_info(),
    }


if __name__ == "__main__":
    kg_common.run(main)
