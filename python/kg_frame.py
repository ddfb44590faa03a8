"""What a request's child and the resident helper tell each other (stdlib only, Python 3.8+, Linux/macOS).

A module of python/kg_helper.py, travelling with it.  A request is a Job in the helper.  Its child writes its
answer on its pipe as one frame, HEAD (the answer's length, whether the probe's state follows, the child's time
stamps) then the answer's bytes; then, if the probe keeps state, STATE_HEAD and the marshal bytes of its export.
The helper reads them, times them (``timing``), keeps the state as plain data (``merge_state``) and names a death
(``died``).

State a probe wants to keep between requests (metrics_reduce's reductions) is carried explicitly, as plain data
(None, bool, int, float, str, bytes, list, tuple, dict: what marshal writes; no code, no objects), through two
module functions (python/HELPER_STATE.md):

  KG_STATE_EXPORT() -> {"version": 1, "full": bool, "put": [(key, entry), ...], "drop": [key, ...]}
      what this process learnt since the last import ("full": everything it keeps)
  KG_STATE_IMPORT(doc)   applies such a document

The helper applies an export to what it keeps for that probe as dict operations on plain data (it never calls the
module) and the next child of that probe gets it all as one full document, through fork's copy of memory, before
``main`` runs.  Two requests of one probe at once: each delta is applied as it arrives, so the last one for a key
wins.
"""
import fcntl
import json
import marshal
import os
import select
import signal
import stat
import struct
import sys
import types  # noqa: F401 (type comments)
from typing import Optional  # noqa: F401 (type comments)

import kg_common

# The answer's length, whether the probe's state follows it, whether the child wrote the answer on the channel itself
# (then no answer follows: ``send_direct``; kg_spare says that by DIRECT_EXIT instead, with no frame), and the
# child's time stamps (time.perf_counter, one clock for every process): request in hand, module executed, limits
# and state applied, main returned, answer framed.
HEAD = struct.Struct(">Q??5d")
# The exit status of a child that wrote its answer on the channel itself and has nothing more to tell (no state
# follows): it writes no frame, so the helper is not woken while the answer goes out (one process wake-up fewer per
# request, on a host where the client and sshd want the CPUs then); the helper learns it from the exit, through the
# zygote. A probe of its own that leaves with os._exit(DIRECT_EXIT) unanswered is left to the client's timeout.
DIRECT_EXIT = 79
# What a single write to a pipe puts in it whole or not at all (POSIX: at least 512; 4096 on Linux).
PIPE_BUF = getattr(select, "PIPE_BUF", 512)
# b"S" + length: the state's marshal bytes follow; b"D": drop what is kept; b"N": keep what is kept.
STATE_HEAD = struct.Struct(">cQ")
# Bytes (marshalled) and entries of the plain-data state one probe may keep between requests.
STATE_BYTES = 80 << 20
STATE_KEYS = 1024


class Job(object):
    """One request: waiting, then running in child ``pid`` whose answer arrives on ``rfd``."""

    def __init__(self, rid, name, digest, args, deadline):
        self.rid = rid
        self.name = name
        self.digest = digest
        self.args = args
        self.deadline = deadline
        self.pid = None
        self.rfd = None
        self.buf = bytearray()
        self.answered = False
        self.pipe_done = False
        self.status = None  # from waitpid, once reaped
        self.killed = None  # "timeout" / "cancelled" when we killed it
        self.started = None
        self.settled = False
        self.state_follows = False
        self.state_taken = False
        self.timeout_s = None  # type: Optional[float]
        self.code = None  # type: Optional[types.CodeType]
        self.mods = {}  # name -> compiled code of the modules it imports besides kg_common
        # Where its time went, answered in a "timing" field when the request asks (npm run bench reads it).
        self.timing = False
        self.t_arrival = 0.0
        self.t_dispatch = 0.0
        self.compile_s = 0.0
        self.how = None  # "prepared" (its module executed ahead), "spare" (forked ahead) or "fork"
        self.zygote_child = False  # forked by the zygote: its wait status comes from there
        self.key = None  # type: Optional[tuple]  # the probe's and its modules' source hashes: what a prepared spare must match

    def stamped(self):
        """What the child needs to say where the request's time went (``timing``), or None when not asked."""
        return (self.how, self.t_arrival, self.t_dispatch, self.compile_s) if self.timing else None


def send_direct(chan, line):
    """Writes one answer ``line`` on the client's channel (the helper's stdout, a pipe) from a child, skipping the
    hop through the helper (a process wake-up: 0.1-0.2 ms on a quiet host, a scheduling round on a busy one).
    True if it went: only a line a single write puts in the pipe whole, while the helper is not part-way through a
    longer line of its own (it holds the channel's lock then); False and nothing written otherwise."""
    if chan is None or len(line) > PIPE_BUF:
        return False
    try:
        fcntl.lockf(chan, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    try:
        return os.write(chan, line) == len(line)
    except OSError:  # full (the channel is non-blocking), or gone: the helper sends it
        return False
    finally:
        try:
            fcntl.lockf(chan, fcntl.LOCK_UN)
        except OSError:
            pass


def direct_channel():
    """Whether children may answer on the channel themselves: stdout is a pipe (sshd's, a local client's) that is
    not stderr too (then it is made non-blocking), and it can be locked (send_direct)."""
    try:
        if not stat.S_ISFIFO(os.fstat(1).st_mode) or same_file(1, 2):
            return False
        fcntl.lockf(1, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(1, fcntl.LOCK_UN)
        return True
    except OSError:
        return False


def same_file(a, b):
    """Whether descriptors ``a`` and ``b`` are one file (stdout and stderr on a terminal)."""
    sa, sb = os.fstat(a), os.fstat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def kill_group(pid):
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


# Where a child's process group can be killed before the child is reaped (waitid with WNOWAIT: Linux, most Unixes).
GROUP_AT_REAP = hasattr(os, "waitid") and hasattr(os, "WNOWAIT") and hasattr(os, "P_ALL")


def exited():
    """(pid, wait status) of each child of this process that has ended, until none has. Each one's process group
    (its own: it made itself leader) is killed first, with whatever it left running, while the exited child still
    holds the number (GROUP_AT_REAP): once reaped, the number may be a new process's, and its group a new spare's
    (pid_max is 32768 on many hosts, and spares are made all the time)."""
    while True:
        try:
            if GROUP_AT_REAP:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is None or not info.si_pid:
                    return
                try:
                    os.killpg(info.si_pid, signal.SIGKILL)
                except OSError:
                    pass
                pid, status = os.waitpid(info.si_pid, 0)
            else:
                pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        if pid == 0:
            return
        yield pid, status


def secs(s):
    return ("%.1f" % s).rstrip("0").rstrip(".")


_SIGNALS = {
    "SIGXCPU": ("limit-cpu", "the CPU-time limit"),
    "SIGKILL": ("killed", "SIGKILL (the host's out-of-memory killer, or someone else, stopped it)"),
    "SIGSEGV": ("crashed", "SIGSEGV (a crash in the interpreter or an extension module)"),
    "SIGXFSZ": ("limit-file-size", "the file-size limit"),
}


def answered_directly(status):
    """Whether wait ``status`` is a child's that wrote its answer on the channel itself and had nothing more."""
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == DIRECT_EXIT


def died(name, status):
    """(message, code) for probe ``name``'s child that ended with wait ``status`` without answering."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            sname = signal.Signals(sig).name
        except ValueError:
            sname = "signal %d" % sig
        code, what = _SIGNALS.get(sname, ("crashed", sname))
        if code == "limit-cpu":
            return str(kg_common.LimitError("cpu", name + " was killed by SIGXCPU")), code
        return "%s was killed by %s, before it answered" % (name, what), code
    return "%s ended (exit status %d) before it answered" % (name, os.WEXITSTATUS(status)), "crashed"


def timing(stamped, stamps, t_read, direct=False):
    """Where a request's time went in the helper (milliseconds), from the parent's stamps (``Job.stamped``) and the
    child's; ``t_read``: when the answer was read from the child's pipe, or when it was framed where the child
    writes it on the channel itself (``direct``: no pipe)."""
    how, t_arrival, t_dispatch, compile_s = stamped
    got, executed, ready, ran, framed = stamps
    ms = lambda a, b: round(max(0.0, b - a) * 1000.0, 3)  # noqa: E731
    return json.dumps({
        "how": how,
        "direct": direct,
        "parse": ms(t_arrival, t_dispatch - compile_s),
        "compile": round(compile_s * 1000.0, 3),
        "handoff": ms(t_dispatch, got),
        "exec": ms(got, executed),
        "setup": ms(executed, ready),
        "run": ms(ready, ran),
        "frame": ms(ran, framed),
        "pipe": ms(framed, t_read),
        "total": ms(t_arrival, t_read),
        # When the request's bytes were read (time.perf_counter: CLOCK_MONOTONIC on Linux, the clock of Node's
        # process.hrtime too): a client on the same host splits its round trip into the way in and the way out.
        "at": round(t_arrival, 6),
    })


def _hashable(key):
    if isinstance(key, list):
        key = tuple(_hashable(k) for k in key)
    hash(key)
    return key


def plain(value, depth=0):
    """True for data made of None, bool, int, float, str, bytes, list, tuple, dict only."""
    if depth > 100:
        return False
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return True
    if isinstance(value, (list, tuple)):
        return all(plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(plain(k, depth + 1) and plain(v, depth + 1) for k, v in value.items())
    return False


def merge_state(kept, name, blob):
    """``kept`` ({key: (plain-data entry, its marshal size)}, oldest first, or None) with a child's KG_STATE_EXPORT
    document applied: plain data only, looked at as dict operations, never run.  ``kept`` itself if it cannot be."""
    try:
        doc = marshal.loads(blob)
        if not isinstance(doc, dict) or doc.get("version") != 1 or not plain(doc):
            raise ValueError("not a version-1 state document")
        out = {} if doc.get("full") or kept is None else kept
        for key in doc.get("drop") or ():
            out.pop(_hashable(key), None)
        for key, entry in doc.get("put") or ():
            key = _hashable(key)
            out.pop(key, None)
            out[key] = (entry, len(marshal.dumps(entry)))
        # The probe bounds what it keeps; this bounds what a misbehaving one could make the helper hold.
        total = sum(size for _, size in out.values())
        while out and (total > STATE_BYTES or len(out) > STATE_KEYS):
            total -= out.pop(next(iter(out)))[1]
        return out
    except (ValueError, TypeError, EOFError) as e:
        sys.stderr.write("kg_helper: %s state not kept: %s\n" % (name, e))
        return kept
