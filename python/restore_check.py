"""What a restore's package sources hold, and whether its indexes answer, seen from the host.

    restore_check.py [--find-links DIR]... [--index URL]... [--name NAME]... [--timeout SECONDS]

A wheel folder (--find-links) is listed whole: every wheel and sdist file name gives a name and a version.  A
file:// index is read the same way, one folder per --name.  An http(s) index is asked once, with a HEAD request of
its root, whether it answers at all (a 404 is an answer): a restore names the index that does not, rather than
failing on the hundredth package.  stdlib only; bounded by --timeout per index and by MAX_FILES per folder.
"""
import os
import re

import kg_common

MAX_FILES = 200000


def _normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_of(filename):
    """(name, version) of a wheel (`name-ver(-build)?-py-abi-plat.whl`) or sdist (`name-ver.tar.gz`), else None."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        if len(parts) in (5, 6):
            return _normalize(parts[0]), parts[1]
        return None
    for ext in (".tar.gz", ".zip", ".tar.bz2"):
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            if "-" in stem:
                name, version = stem.rsplit("-", 1)
                return _normalize(name), version
    return None


def list_folder(path, available, limit):
    count = 0
    with os.scandir(path) as it:
        for ent in it:
            count += 1
            if count > limit:
                return True
            d = dist_of(ent.name)
            if d is not None:
                versions = available.setdefault(d[0], [])
                if d[1] not in versions:
                    versions.append(d[1])
    return False


def _file_path(url):
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path)


def check_http(url, timeout):
    from urllib.request import Request, urlopen
    from urllib.error import HTTPError

    try:
        with urlopen(Request(url.rstrip("/") + "/", method="HEAD"), timeout=timeout) as r:  # noqa: S310 (the user's index)
            return None if r.status < 500 else "HTTP %d" % r.status
    except HTTPError as e:
        return None if e.code < 500 else "HTTP %d" % e.code
    except Exception as e:  # URLError, timeout, TLS: the index does not answer from here
        reason = getattr(e, "reason", None)
        return "%s: %s" % (type(e).__name__, reason if reason is not None else e)


def main(argv):
    p = kg_common.arg_parser("restore_check.py")
    p.add_argument("--find-links", action="append", default=[], metavar="DIR")
    p.add_argument("--index", action="append", default=[], metavar="URL")
    p.add_argument("--name", action="append", default=[], metavar="NAME")
    p.add_argument("--timeout", type=float, default=5.0)
    args = p.parse_args(argv)
    available = {}
    listed = []
    unreachable = []
    truncated = False
    for src in args.find_links:
        path = _file_path(src) if src.startswith("file://") else os.path.expanduser(src)
        if not os.path.isdir(path):
            unreachable.append({"url": src, "error": "no such folder on the host"})
            continue
        truncated = list_folder(path, available, MAX_FILES) or truncated
        listed.append(src)
    for url in args.index:
        if url.startswith("file://"):
            root = _file_path(url)
            if not os.path.isdir(root):
                unreachable.append({"url": url, "error": "no such folder on the host"})
                continue
            for name in args.name:
                sub = os.path.join(root, _normalize(name))
                if os.path.isdir(sub):
                    truncated = list_folder(sub, available, MAX_FILES) or truncated
            listed.append(url)
        else:
            err = check_http(url, args.timeout)
            if err:
                unreachable.append({"url": url, "error": err})
    for versions in available.values():
        versions.sort()
    return {"available": dict(sorted(available.items())), "listed": listed, "unreachable": unreachable,
            "truncated": truncated}


if __name__ == "__main__":
    kg_common.run(main)
