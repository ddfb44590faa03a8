"""Shared helpers for Known Good probes (stdlib only, Python 3.8+).

Every probe is a script with ``main(argv) -> dict`` and ends with
``if __name__ == "__main__": kg_common.run(main)``.  Run by hand it prints one
JSON document on stdout.  The extension pipes the probe's source to the remote
interpreter behind a small bootstrap that registers this module first and sets
``FRAME`` so the document is printed between marker lines (login banners and
conda messages printed before it then do no harm), or it runs ``main`` inside
the resident helper (python/kg_helper.py) without any process start.
"""
import errno
import json
import math
import os
import re
import stat
import sys
import tempfile

# Set by the extension's bootstrap: a nonce that frames the JSON document.
FRAME = None


# The way forward when torch is missing: the interpreter is usually the wrong one (a venv not chosen), not torch.
NO_TORCH_HINT = (
    'Choose the interpreter that has torch with "Known Good: Select Remote Python" (it sets the host\'s "python" '
    'in the knownGood.hosts setting; knownGood.localPython for This machine), or install torch for this one.'
)


def no_torch_message(error=None):
    """`torch is not installed for /usr/bin/python3 (No module named 'torch'). Choose …`"""
    detail = " (%s)" % error if error else ""
    return "torch is not installed for %s%s. %s" % (sys.executable, detail, NO_TORCH_HINT)


# Every error code a probe or the resident helper answers with (``{"ok": false, "error": {"code": ...}}``): one
# list, mirrored by src/core/probes/codes.ts (a unit test keeps the two equal and checks every code in python/ is
# here). A new code goes in both.
ERROR_CODES = (
    # any failure without a more precise code
    "probe-error",
    # how the probe was called
    "bad-args",
    "usage",
    # the file or folder asked about
    "not-found",
    "permission-denied",
    "not-regular",
    "unreadable",
    "unreadable-format",
    # checkpoints
    "corrupt",
    "not-a-checkpoint",
    "no-key",
    "needs-unsafe",
    # what the host's Python has
    "no-torch",
    "no-cuda",
    # resource limits (LimitError: "limit-" + the LIMITS key; file-size from SIGXFSZ)
    "limit-memory",
    "limit-cpu",
    "limit-output",
    "limit-read",
    "limit-line",
    "limit-depth",
    "limit-items",
    "limit-keys",
    "limit-file-size",
    # the resident helper (kg_helper.py)
    "bad-request",
    "need-source",
    "cancelled",
    "timeout",
    "killed",
    "crashed",
    "exit",
    "internal",
)


class ProbeError(Exception):
    """A failure the user can act on: reported as one line, no traceback. ``code`` is one of ERROR_CODES."""

    def __init__(self, message, code="probe-error"):
        Exception.__init__(self, message)
        self.code = code


MiB = 1024 * 1024

# ---------------------------------------------------------------- Limits
# Probes run on production GPU boxes beside training jobs: what one probe may take of the host it inspects is
# decided here, once, and applied to every probe run (by hand, piped one-shot, or as a resident-helper request).
# A limit hit ends the probe with a LimitError that names the limit; never a traceback, never the host's memory.
LIMITS = {
    # Data segment of the probe's process (soft RLIMIT_DATA: heap and private writable mappings, so what hostile
    # input can make it allocate before MemoryError). Not RLIMIT_AS: glibc reserves 64 MiB of address space per
    # thread arena, so an address-space cap breaks threads long before memory is really used.
    "memory": 256 * MiB,
    # CPU seconds of one probe run (soft RLIMIT_CPU, a backstop: the client's command timeout comes first).
    "cpu": 600,
    # Bytes of the JSON document one probe answers.
    "output": 64 * MiB,
    # Bytes read from one file when a probe reads it whole (a pickle, a JSON file, a zip member inflated).
    "read": 64 * MiB,
    # Bytes of one line of a log (longer lines are skipped and counted, never held whole).
    "line": 1 * MiB,
    # Nesting depth of a decoded structure (JSON values, pickled containers).
    "depth": 200,
    # Items of one decoded container, and memo entries of one pickle.
    "items": 1000000,
    # Keys of one log line's record, nested ones included (more: the line is skipped and counted), and distinct
    # keys kept per log read.
    "keys": 10000,
}

# A probe module may loosen a limit for itself with ``KG_LIMITS = {"memory": None}`` (None: no limit); the
# probes that import torch in a terminal do, since torch maps gigabytes of address space.
_LIMIT_WORDS = {
    "memory": "memory limit",
    "cpu": "CPU-time limit",
    "output": "output limit",
    "read": "read limit",
    "line": "line-length limit",
    "depth": "nesting-depth limit",
    "items": "item-count limit",
    "keys": "key-count limit",
}


_BYTE_UNITS = ("KB", "MB", "GB", "TB", "PB", "EB")


def _round_half_up(x):
    # JavaScript's Math.round (halves go up), not Python's round (halves to even): the two sides must print alike.
    r = math.floor(x)
    return r + 1 if x - r >= 0.5 else r


def _round_shown(v):
    return _round_half_up(v * 10) / 10.0 if v < 100 else float(_round_half_up(v))


def format_bytes(n):
    """A size as the TypeScript side prints it (src/core/util/format.ts formatBytes; test/fixtures/format/bytes.json
    keeps the two equal): 1024-based, one decimal below 100: ``512 B``, ``2.1 GB``, ``24.3 GB``, ``512 MB``; None is
    ``unknown``, a negative or non-finite number ``?``."""
    if n is None:
        return "unknown"
    try:
        n = float(n)
    except (OverflowError, TypeError, ValueError):
        return "?"
    if not math.isfinite(n) or n < 0:
        return "?"
    if n < 1024:
        return "%d B" % _round_half_up(n)
    v = n / 1024.0
    u = 0
    while u < len(_BYTE_UNITS) - 1 and _round_shown(v) >= 1024:
        v /= 1024.0
        u += 1
    shown = _round_shown(v)
    return ("%.1f %s" if shown < 100 else "%d %s") % (shown, _BYTE_UNITS[u])


def _limit_text(name, value):
    if value is None:
        return "no %s" % _LIMIT_WORDS.get(name, name)
    if name in ("memory", "output", "read", "line"):
        return "%s of %s" % (_LIMIT_WORDS[name], format_bytes(value))
    if name == "cpu":
        return "%s of %d s" % (_LIMIT_WORDS[name], value)
    return "%s of %d" % (_LIMIT_WORDS.get(name, name), value)


def stat_or_fail(path):
    """os.stat(path), or the ProbeError a probe answers for a path it cannot stat (not-found, permission-denied,
    unreadable)."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise ProbeError("no such file: %s" % path, "not-found")
    except PermissionError:
        raise ProbeError("permission denied: %s" % path, "permission-denied")
    except OSError as e:
        raise ProbeError("cannot read %s: %s" % (path, e.strerror or e), "unreadable")


class LimitError(ProbeError):
    """A resource limit was reached; ``code`` is ``limit-<name>`` and the message says which limit and where."""

    def __init__(self, name, what="", value=None, limits=None):
        value = (limits or LIMITS).get(name) if value is None else value
        message = "stopped at the %s" % _limit_text(name, value)
        if what:
            message = "%s: %s" % (what, message)
        ProbeError.__init__(self, message, "limit-" + name)
        self.limit = name


_ARG_PARSER = []


def arg_parser(prog, **kwargs):
    """An argparse parser for probe ``prog`` (``name.py``) whose mistakes are a ProbeError ``name: message`` with code
    bad-args (a probe answers with one document), never argparse's usage on stderr and exit 2.  argparse is imported
    on first use: the probes that parse by hand do not pay for it."""
    if not _ARG_PARSER:
        import argparse

        class ArgParser(argparse.ArgumentParser):
            def error(self, message):
                raise ProbeError("%s: %s" % (os.path.splitext(self.prog)[0], message), "bad-args")

        _ARG_PARSER.append(ArgParser)
    return _ARG_PARSER[0](prog=prog, **kwargs)


def effective_limits(overrides=None):
    limits = dict(LIMITS)
    if overrides:
        limits.update(overrides)
    return limits


def apply_process_limits(limits=None):
    """Soft rlimits for this process (memory, CPU). Soft only, so a child we start can lift them again."""
    limits = limits or LIMITS
    try:
        import resource
    except ImportError:  # not on Linux/macOS: nothing to apply
        return
    for name, res in (("memory", "RLIMIT_DATA"), ("cpu", "RLIMIT_CPU")):
        which = getattr(resource, res, None)
        value = limits.get(name)
        if which is None or value is None:
            continue
        try:
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and value > hard:
                value = hard
            if name == "cpu":
                try:
                    used = resource.getrusage(resource.RUSAGE_SELF)
                    value += int(used.ru_utime + used.ru_stime)
                except Exception:
                    pass
            if soft == resource.RLIM_INFINITY or value < soft:
                resource.setrlimit(which, (value, hard))
        except (ValueError, OSError):
            pass


def lift_limits():
    """For ``subprocess.Popen(preexec_fn=kg_common.lift_limits)``: tools we run (nvidia-smi, pip) get the host's own."""
    try:
        import resource
    except ImportError:
        return
    for res in ("RLIMIT_DATA", "RLIMIT_CPU"):
        which = getattr(resource, res, None)
        if which is None:
            continue
        try:
            _soft, hard = resource.getrlimit(which)
            resource.setrlimit(which, (hard, hard))
        except (ValueError, OSError):
            pass


def footprint():
    """What this process took of the host so far: peak RSS and CPU time (part of every result)."""
    try:
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        rss_kb = ru.ru_maxrss // 1024 if sys.platform == "darwin" else ru.ru_maxrss
        return {"maxRssKb": int(rss_kb), "cpuS": round(ru.ru_utime + ru.ru_stime, 3)}
    except Exception:
        return None


# Environment variables that can move a training run's speed: env snapshots keep these, launch records read them first
# (when a record's cap leaves room for only part of the environment, these are the part kept).
SPEED_ENV_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "OMP_", "MKL_", "HF_",
                      "WANDB_")
SPEED_ENV_NAMES = ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH")


# ---------------------------------------------------------------- git on checkouts that may be hostile
# A run folder or a script's checkout can be anyone's, and a repository's config can name programs git would run.
# Every key that names a program is overridden on the command line (-c wins over every config file) and the features
# that would consult one are switched off (signatures, external diff, textconv, submodule recursion). Used by
# what_changed.py and kg_record.py; docs/what-changed.md "Git on untrusted checkouts" states it for users.
GIT_SAFE_CONFIG = (
    "core.fsmonitor=false", "core.untrackedCache=false", "core.hooksPath=/dev/null", "core.pager=cat",
    "core.sshCommand=false", "core.askPass=false", "core.gitProxy=false", "core.editor=false",
    "core.alternateRefsCommand=false",
    "log.showSignature=false", "gpg.program=false", "gpg.openpgp.program=false", "gpg.x509.program=false",
    "gpg.ssh.program=false", "gpg.ssh.defaultKeyCommand=false",
    "diff.external=false", "diff.ignoreSubmodules=all", "status.submoduleSummary=false", "submodule.recurse=false",
    "credential.helper=", "protocol.allow=never", "uploadpack.packObjectsHook=false",
    "pager.log=false", "pager.status=false", "pager.config=false", "pager.diff=false",
    "safe.bareRepository=explicit",
)
_GIT_DUBIOUS = re.compile(r"detected dubious ownership in repository at '(.*)'$", re.M)


def git_refusal(output):
    """The plain fact behind git's refusal to read a repository another user owns, or None when `output` (git's
    stderr) holds none. git's own advice, to trust the repository with ``git config --global --add safe.directory``,
    is never passed on: the repository may be hostile (its config can name programs git runs), and Known Good does
    not override the refusal."""
    m = _GIT_DUBIOUS.search(output)
    if not m:
        return None
    where = m.group(1)
    owner = "another user"
    try:
        uid = os.stat(where).st_uid
        owner = "another user (uid %d)" % uid
        import pwd

        owner = "another user (%s, uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (OSError, KeyError, ImportError):
        pass
    return ("the repository at %s is owned by %s: git refuses to read it, and Known Good does not override that"
            % (where, owner))


def file_kind(mode):
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a file"
    return "not a regular file"


def open_regular(path, buffering=-1):
    """Open ``path`` for reading in binary only if it is a regular file.

    FIFOs, devices (``/dev/zero``), sockets and folders are refused with code ``not-regular`` before anything is
    read: the open itself never blocks (O_NONBLOCK), and the type is checked on the opened descriptor, so a file
    swapped for a FIFO between a stat and the open is caught too. Other failures raise ProbeError with the usual
    codes (not-found, permission-denied, unreadable).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ProbeError("no such file: %s" % path, "not-found")
    except PermissionError:
        raise ProbeError("permission denied: %s" % path, "permission-denied")
    except IsADirectoryError:
        raise ProbeError("%s is a folder, not a file" % path, "not-regular")
    except OSError as e:
        # A UNIX socket cannot be opened at all (ENXIO, "No such device or address"): say what it is
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            raise ProbeError("%s is %s, not a regular file: not read" % (path, file_kind(mode)), "not-regular")
        raise ProbeError("cannot read %s: %s" % (path, e.strerror or e), "unreadable")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ProbeError("%s is %s, not a regular file: not read" % (path, file_kind(st.st_mode)), "not-regular")
        try:
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        except (ImportError, OSError):
            pass
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def next_data(f, pos):
    """The offset of the first byte at or after pos that is not in a hole of a sparse file (pos where holes cannot be
    told); leaves ``f`` at pos.  A hole reads as zeros, so it holds no newline: a line being skipped passes over it
    unread, and a 10 GB sparse file neither costs 10 GB of reading nor fills the host's page cache with zeros."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return pos
    try:
        return max(pos, os.lseek(f.fileno(), pos, seek_data))
    except OSError as e:
        if e.errno == getattr(errno, "ENXIO", None):  # only a hole up to the end
            try:
                return max(pos, os.fstat(f.fileno()).st_size)
            except OSError:
                return pos
        return pos
    finally:
        f.seek(pos)


def read_bounded(f, limit=None, what="file"):
    """All of ``f`` up to ``limit`` bytes (LIMITS["read"]); more raises LimitError naming ``what``."""
    limit = LIMITS["read"] if limit is None else limit
    data = f.read(limit + 1)
    if len(data) > limit:
        raise LimitError("read", what, limit)
    return data


def loads_bounded(text, what="JSON"):
    """json.loads that turns hostile nesting and huge numbers into LimitError/ValueError, never a traceback."""
    try:
        return json.loads(text)
    except RecursionError:
        raise LimitError("depth", what)


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


_BIG_INT = 10 ** 300


def _tame_ints(value, depth=0):
    """The value with integers too long to print (Python 3.11+ refuses over 4,300 digits) described instead."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if -_BIG_INT < value < _BIG_INT:
            return value
        bits = value.bit_length()
        return {"$bigint": {"bits": bits, "digits": int(bits * 0.30103) + 1, "negative": value < 0}}
    if depth > 10000:
        return None
    if isinstance(value, dict):
        return {(str(k) if isinstance(k, int) and not -_BIG_INT < k < _BIG_INT else k): _tame_ints(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tame_ints(v, depth + 1) for v in value]
    return value


def dumps(value, indent=None):
    """JSON text; NaN and Infinity are written as Python does (the TypeScript side parses them on purpose)."""
    try:
        return json.dumps(value, default=_default, indent=indent, ensure_ascii=True, allow_nan=True)
    except ValueError:
        # An integer of more than 4,300 digits (Python 3.11+): say what it is rather than fail the whole answer.
        return json.dumps(_tame_ints(value), default=_default, indent=indent, ensure_ascii=True, allow_nan=True)
    except RecursionError:
        raise LimitError("depth", "the answer")


def finite_or_none(x):
    finite = isinstance(x, (int, float)) and not (isinstance(x, float) and (math.isnan(x) or math.isinf(x)))
    return x if finite else None


def envelope_ok(result):
    return {"ok": True, "result": result, "python": interpreter()}


def envelope_error(message, code="probe-error"):
    return {"ok": False, "error": {"message": message, "code": code}, "python": interpreter()}


def probe_limits(main):
    """The limits a probe runs under: LIMITS with the probe module's own ``KG_LIMITS`` applied."""
    return effective_limits(getattr(main, "__globals__", {}).get("KG_LIMITS"))


def call_probe(main, argv, limits=None):
    """Run ``main(argv)`` and return ``(envelope, text, exit_status)``: the one place a probe's failures are named.

    The envelope carries the probe's footprint on this host (peak RSS, CPU time). A limit reached anywhere
    (memory, nesting, output size) is an error naming the limit, never a traceback.
    """
    limits = limits or LIMITS
    status = 0
    try:
        doc = envelope_ok(main(argv))
    except ProbeError as e:
        doc, status = envelope_error(str(e), e.code), 2
    except MemoryError:
        doc, status = envelope_error(str(LimitError("memory", "the probe", limits=limits)), "limit-memory"), 2
    except RecursionError:
        doc, status = envelope_error(str(LimitError("depth", "the probe", limits=limits)), "limit-depth"), 2
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # an unexpected bug: still one line, still JSON for the extension
        doc, status = envelope_error("%s: %s" % (type(e).__name__, e), "internal"), 3
    doc["footprint"] = footprint()
    try:
        text = dumps(doc)
    except (MemoryError, ProbeError) as e:
        code = e.code if isinstance(e, ProbeError) else "limit-memory"
        msg = str(e) if isinstance(e, ProbeError) else str(LimitError("memory", "the answer", limits=limits))
        doc, status = envelope_error(msg, code), 2
        # The footprint is what tells how close to the memory limit the answer came: kept on this path too
        doc["footprint"] = footprint()
        text = dumps(doc)
    out_limit = limits.get("output")
    if out_limit is not None and len(text) > out_limit:
        doc = envelope_error(
            "the answer is %s: %s" % (format_bytes(len(text)), LimitError("output", "", limits=limits)), "limit-output")
        doc["footprint"] = footprint()
        text, status = dumps(doc), 2
    return doc, text, status


def run(main, argv=None):
    """Entry point for a probe run as a script (by hand, or piped by the extension)."""
    argv = sys.argv[1:] if argv is None else argv
    limits = probe_limits(main)
    apply_process_limits(limits)
    try:
        doc, text, status = call_probe(main, argv, limits)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    out = sys.stdout
    if FRAME:
        out.write("\n@@KNOWN-GOOD-BEGIN %s@@\n%s\n@@KNOWN-GOOD-END %s@@\n" % (FRAME, text, FRAME))
    elif doc["ok"]:
        out.write(dumps(doc["result"], indent=1) + "\n")
    else:
        sys.stderr.write("error: %s\n" % doc["error"]["message"])
    out.flush()
    if status:
        sys.exit(status)


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
