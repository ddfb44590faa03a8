"""The resident helper's zygote (stdlib only, Python 3.8+, Linux): a module of kg_helper.py.

A process forked once at start that forks the requests' children (kg_spare), so that the helper never forks again.
A fork costs its parent twice: the fork itself (0.3-0.7 ms for a 15 MB interpreter, more on a VM), then a
copy-on-write fault on every page it writes afterwards (~300 a request, 1 ms of system time measured). Forked from
the zygote, which does nothing else, a spare costs the helper neither.
"""
import array
import gc
import marshal
import os
import selectors
import signal
import socket
import struct
from collections import deque
from typing import Optional  # noqa: F401 (type comments)

import kg_spare
from kg_frame import exited, kill_group, write_all

# Probes (by key) the zygote keeps for its spares to prepare; the oldest goes first.
ZYGOTE_PREPS = 16
# How long a request waits for a spare already asked for before the helper forks its child itself.
ZYGOTE_WAIT_S = 0.1
_PR_SET_NAME = 15
_LEN = struct.Struct(">I")
# From the zygote: b"P" + the pid of the spare it forked (-1: it could not), b"X" + pid + wait status of one that
# ended.
_ZREC = struct.Struct(">cqi")


class Zygote(object):
    """The helper's side of its zygote. The spare's two pipes are made in the helper and their far ends handed to
    the zygote with SCM_RIGHTS; the zygote answers with the spare's pid, reaps its spares and reports each one's
    wait status, so a request is killed (its process group), settled and its death named in the helper as before.
    The zygote dies with the helper and its spares with it (PR_SET_PDEATHSIG).
    """

    def __init__(self, pid, sock):
        self.pid = pid  # type: Optional[int]
        self.sock = sock
        self.asked = deque()  # (control fd, answer fd, key) of each spare asked for, not yet forked: in order
        # What the zygote keeps, by key (the probes its spares may prepare): the same keys in the same order as its
        # own dict, both dropping the oldest past ZYGOTE_PREPS, so "k" is sent only for what it has.
        self.known = {}
        self.buf = b""

    @staticmethod
    def start(helper):
        if helper.prctl is None or not hasattr(socket.socket, "sendmsg") or not hasattr(socket, "SCM_RIGHTS"):
            return None
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except (OSError, AttributeError):
            return None
        gc.freeze()
        # Named before the fork, so it has its name from its first instant (ps, tests), and this process back after.
        try:
            with open("/proc/self/comm", "rb") as f:
                name = f.read().strip()
        except OSError:
            name = None
        if name is not None:
            helper.prctl(_PR_SET_NAME, b"kg-zygote", 0, 0, 0)
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return None
        finally:
            if name is not None and os.getpid() == helper.pid:
                helper.prctl(_PR_SET_NAME, name, 0, 0, 0)
        if pid == 0:
            _zygote(helper, theirs, ours)
        theirs.close()
        ours.setblocking(False)
        return Zygote(pid, ours)

    def fds(self):
        return [self.sock.fileno()] + [fd for a in self.asked for fd in a[:2]]

    def ask(self, prep):
        """Asks for a spare that prepares ``prep`` (key, name, code, modules); False if the zygote cannot be told."""
        ctl_r, ctl_w = os.pipe()
        rfd, wfd = os.pipe()
        key = prep[0] if prep is not None else None
        if prep is None:
            msg = ("n",)
        elif key in self.known:
            msg = ("k", key)
        else:
            msg = ("c", key, prep[1], prep[2], prep[3])
        ok = False
        try:
            data = marshal.dumps(msg)
            data = _LEN.pack(len(data)) + data
            self.sock.setblocking(True)
            sent = self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [ctl_r, wfd]))])
            self.sock.sendall(data[sent:])
            ok = True
        except (OSError, ValueError):
            pass
        finally:
            try:
                self.sock.setblocking(False)
            except OSError:
                ok = False
        os.close(ctl_r)
        os.close(wfd)
        if not ok:
            os.close(ctl_w)
            os.close(rfd)
            return False
        if msg[0] == "c":
            _remember(self.known, key, True)
        self.asked.append((ctl_w, rfd, key))
        return True

    def records(self, wait_s=0.0):
        """The records the zygote has sent, [(kind, pid, status)]; None once it is gone."""
        if wait_s and not _readable(self.sock, wait_s):
            return []
        try:
            data = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:
            return None
        self.buf += data
        n = len(self.buf) - len(self.buf) % _ZREC.size
        out = [_ZREC.unpack_from(self.buf, i) for i in range(0, n, _ZREC.size)]
        self.buf = self.buf[n:]
        return out

    def close(self):
        while self.asked:
            ctl_w, rfd, _ = self.asked.popleft()
            os.close(ctl_w)
            os.close(rfd)
        self.sock.close()
        if self.pid is not None:
            kill_group(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None


def _remember(kept, key, value):
    """Adds to ``kept`` (oldest first), dropping the oldest past ZYGOTE_PREPS: the helper and the zygote alike."""
    kept.pop(key, None)
    while len(kept) >= ZYGOTE_PREPS:
        del kept[next(iter(kept))]
    kept[key] = value


def _readable(sock, timeout):
    sel = selectors.DefaultSelector()
    try:
        sel.register(sock, selectors.EVENT_READ)
        return bool(sel.select(timeout))
    finally:
        sel.close()


def _zygote(helper, sock, theirs):
    """The zygote's loop: forks a spare per request of the helper and reports how each ended; never returns."""
    try:
        chan = kg_spare.child_setup(helper, [theirs.fileno()])
        kg_spare.set_title("known-good zygote", b"kg-zygote")
        prctl, zpid = helper.prctl, os.getpid()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        preps = {}
        fd = sock.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        sel.register(wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                if key.fd == wake_r:
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except (BlockingIOError, InterruptedError, OSError):
                        pass
                    continue
                msg, fds = _zygote_message(sock)
                if msg[0] == "c":
                    _remember(preps, msg[1], msg[2:])
                prep = preps.get(msg[1]) if msg[0] in ("c", "k") else None
                pid = -1
                if len(fds) == 2:
                    try:
                        pid = os.fork()
                    except OSError:
                        pid = -1
                    if pid == 0:
                        for f in (fd, wake_r, wake_w):
                            os.close(f)
                        signal.set_wakeup_fd(-1)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        kg_spare.spare(None, fds[0], None, None, fds[1], prep, (prctl, zpid), chan)
                for f in fds:
                    os.close(f)
                write_all(fd, _ZREC.pack(b"P", pid, 0))
            for pid, status in exited():
                write_all(fd, _ZREC.pack(b"X", pid, status))
    except BaseException:  # noqa: BLE001 - the helper forks its spares itself once the zygote is gone
        pass
    os._exit(0)


def _zygote_message(sock):
    """One length-framed message from the helper and the descriptors that came with it; exits when it is gone."""
    fds = []
    head, anc, _, _ = sock.recvmsg(_LEN.size, socket.CMSG_LEN(2 * 4))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += array.array("i", data[:len(data) - len(data) % 4]).tolist()
    body = b""
    while len(head) < _LEN.size:
        more = sock.recv(_LEN.size - len(head))
        if not more:
            os._exit(0)
        head += more
    n = _LEN.unpack(head)[0]
    while len(body) < n:
        more = sock.recv(n - len(body))
        if not more:
            os._exit(0)
        body += more
    return marshal.loads(body), fds
