"""Shared helpers for Known Good probes (stdlib only, Python 3.8+).

Every probe is a script with ``main(argv) -> dict`` and ends with
``if __name__ == "__main__": kg_common.run(main)``.  Run by hand it prints one
JSON document on stdout.  The extension pipes the probe's source to the remote
interpreter behind a small bootstrap that registers this module first and sets
``FRAME`` so the document is printed between marker lines (login banners and
conda messages printed before it then do no harm), or it runs ``main`` inside
the resident helper (python/kg_helper.py) without any process start.
"""
import json
import math
import os
import re
import sys
import tempfile

# Set by the extension's bootstrap: a nonce that frames the JSON document.
FRAME = None


class ProbeError(Exception):
    """A failure the user can act on: reported as one line, no traceback."""

    def __init__(self, message, code="probe-error"):
        Exception.__init__(self, message)
        self.code = code


def interpreter():
    """Which Python produced a result: every result names it."""
    return {
        "executable": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
    }


def _default(value):
    if isinstance(value, bytes):
        return {"$bytes": value.decode("latin-1")}
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def dumps(value, indent=None):
    """JSON text; NaN and Infinity are written as Python does (the TypeScript side parses them on purpose)."""
    return json.dumps(value, default=_default, indent=indent, ensure_ascii=True, allow_nan=True)


def finite_or_none(x):
    return x if isinstance(x, (int, float)) and not (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) else None


def envelope_ok(result):
    return {"ok": True, "result": result, "python": interpreter()}


def envelope_error(message, code="probe-error"):
    return {"ok": False, "error": {"message": message, "code": code}, "python": interpreter()}


def _write(doc):
    text = dumps(doc)
    out = sys.stdout
    if FRAME:
        out.write("\n@@KNOWN-GOOD-BEGIN %s@@\n%s\n@@KNOWN-GOOD-END %s@@\n" % (FRAME, text, FRAME))
    else:
        out.write(dumps(doc, indent=1) + "\n")
    out.flush()


def run(main, argv=None):
    """Entry point for a probe run as a script (by hand, or piped by the extension)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        result = main(argv)
    except ProbeError as e:
        if FRAME:
            _write(envelope_error(str(e), e.code))
        else:
            sys.stderr.write("error: %s\n" % e)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except SystemExit:
        raise
    except BaseException as e:  # an unexpected bug: still one line, still JSON for the extension
        msg = "%s: %s" % (type(e).__name__, e)
        if FRAME:
            _write(envelope_error(msg, "internal"))
        else:
            sys.stderr.write("error: %s\n" % msg)
        sys.exit(3)
    _write(envelope_ok(result) if FRAME else result)


def _user():
    try:
        import getpass

        return getpass.getuser()
    except Exception:
        return str(os.getuid())


def compile_cache_dirs(extra=()):
    """The compile caches torch and triton use here, by their own rules: [(name, path)], then each extra folder."""
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not inductor:
        user = re.sub(r"[\\/:*?\"<>|]", "_", _user())
        inductor = os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
    triton = os.environ.get("TRITON_CACHE_DIR")
    if not triton:
        home = os.environ.get("TRITON_HOME") or os.path.expanduser("~")
        triton = os.path.join(home, ".triton", "cache")
    dirs = [("inductor", inductor), ("triton", triton)]
    for i, d in enumerate(extra):
        dirs.append(("custom%d" % (i + 1), os.path.expanduser(d)))
    return dirs
