"""Known Good resident helper (stdlib only, Python 3.8+, Linux/macOS).

Started once per host connection as ``python3 -u -c <loader>``; the loader reads
kg_modules, kg_common and this source as the first stdin line (JSON) and executes them.  The
client sends nothing else until the ready line.  Then it answers JSON-line
requests on the same channel:

  -> {"id": 1, "op": "probe", "name": "list_runs", "hash": "...", "src": "...", "args": [...], "timeoutMs": 60000}
  <- {"id": 1, "ok": true, "result": {...}, "python": {...}, "footprint": {"maxRssKb": ..., "cpuS": ...}}
  <- {"id": 1, "ok": false, "error": {"message": "...", "code": "..."}}
  -> {"op": "cancel", "id": 1}          (kills request 1; answered with code "cancelled")
  -> {"id": 2, "op": "ping"}

``src`` is sent only the first time a probe (by hash) is used; afterwards the
client sends the hash alone, and an unknown hash is answered with code
"need-source".  The python/ modules a probe imports besides kg_common travel the
same way: ``"modules": [[name, hash, source], ...]``, the source left out once
sent; the child imports them through kg_modules' finder.

This process (the parent) never runs probe code: it is one thread in a selector
loop that reads requests, keeps each probe's compiled code, and forks one child
per request (at most MAX_CHILDREN at once, the rest wait in order).  The child
puts itself in its own process group, executes the probe module afresh in its
own memory with ``__name__`` ``kg_probe_<name>``, applies the probe's limits and
writes its answer to a pipe.  Nothing a request does (a pickle that mutates a
class, a module global, a thread left spinning) survives it: the child's memory
goes with it.  A request still running at its deadline ("timeoutMs", from the
client) or cancelled is killed with its whole process group (SIGKILL); a child
that dies without answering (SIGXCPU at the CPU limit, the OOM killer) is
answered with the signal named.

Small requests at the cost of two process wake-ups: a request is served by a
child forked before it arrived (SPARES of them wait), which has already
executed the last request's probe module and its modules (compiled once, here)
and applied its limits, and walked the answer's path once with made-up data.
A request of another probe makes the child forget that (sys.modules, finder,
limits) and execute its own.  On Linux the children are forked by a zygote
(_Zygote), so this process never forks after start and never pays the
copy-on-write faults a fork leaves behind.  Asked ("timing": true), an answer
says where its time went (_timing): npm run bench prints it.

State a probe wants to keep between requests (metrics_reduce's reductions) is
carried explicitly, as plain data (None, bool, int, float, str, bytes, list,
tuple, dict: what marshal writes; no code, no objects), through two module
functions (python/HELPER_STATE.md):

  KG_STATE_EXPORT() -> {"version": 1, "full": bool, "put": [(key, entry), ...], "drop": [key, ...]}
      what this process learnt since the last import ("full": everything it keeps)
  KG_STATE_IMPORT(doc)   applies such a document

After answering, the child sends the marshal bytes of its export back on its
pipe (at most STATE_BYTES).  The parent applies it to what it keeps for that
probe as dict operations on plain data (it never calls the module) and the next
child of that probe gets it all as one full document, through fork's copy of
memory, before ``main`` runs.  Two requests of one probe at once: each delta is
applied as it arrives, so the last one for a key wins.
"""
import array
import gc
import json
import marshal
import os
import re
import selectors
import signal
import socket
import struct
import sys
import time
import types
from typing import Optional  # noqa: F401 (type comments)
from collections import deque

_out = sys.stdout
# Probes must not write to the protocol channel by accident.
sys.stdout = sys.stderr

MAX_CHILDREN = 8
# Children forked ahead of need, idle until a request comes: two where the zygote forks them, so that requests back
# to back (a poll, a burst of clicks) do not wait for the next one to be made; one where this process forks them.
SPARES = 2
# Seconds past its deadline an answered child may still take to hand over its state.
STATE_GRACE_S = 30.0
# Without a "timeoutMs" in the request (the client always sends one).
DEFAULT_TIMEOUT_S = 600.0
# Bytes (marshalled) and entries of the plain-data state one probe may keep between requests.
STATE_BYTES = 80 << 20
STATE_KEYS = 1024
# Compiled probe modules kept (by source hash); the oldest goes first.
MAX_MODULES = 64
# Standard modules the probes import, loaded once here so that a child does not import them again per request
# (only the standard library: importing is running that module's code, and the parent runs no probe's).
PRELOAD = ("json", "re", "struct", "subprocess", "threading", "tempfile", "shutil", "math", "argparse", "socket",
           "platform", "glob", "base64", "zipfile", "warnings", "posixpath", "pickle", "itertools", "io",
           "hashlib", "datetime", "bisect", "stat", "getpass", "ctypes", "resource", "pwd")

# The answer's length, whether the probe's state follows it, and the child's time stamps (time.perf_counter, one
# clock for every process): request in hand, module executed, limits and state applied, main returned, answer framed.
_HEAD = struct.Struct(">Q?5d")
_STATE_HEAD = struct.Struct(">cQ")


def _kg():
    return sys.modules["kg_common"]


def _error(rid, message, code):
    doc = _kg().envelope_error(message, code)
    doc["id"] = rid
    return doc


class _BadModule(ValueError):
    pass


class _Job(object):
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


class Helper(object):
    def __init__(self, nonce):
        self.nonce = nonce
        self.sel = selectors.DefaultSelector()
        self.inbuf = bytearray()
        self.scan_from = 0
        self.out = deque()
        self.out_blocking = True
        self.modules = {}  # digest -> (name, code)
        self.states = {}  # probe name -> {key: (plain-data entry, its marshal size)}, oldest first
        self.queue = deque()
        self.running = {}  # pid -> job
        self.by_id = {}  # rid -> job (waiting or running)
        self.spares = []  # (pid, control fd, answer fd, what it prepared) of the children forked ahead of need
        # The last request's probe (key, name, code, modules): the next spare executes its modules ahead of need.
        self.prep = None  # type: Optional[tuple]
        self.zygote = None  # type: Optional[_Zygote]
        self.zygote_later = []  # what the zygote said while a request was being started: (pid, status), None: gone
        self.stdin_open = True
        self.stop = False
        self.max_out = 1 << 30  # kg_common's output limit, from serve()
        self.t_input = 0.0  # when the bytes being parsed were read
        self.compile_s = 0.0

    # ------------------------------------------------------------------------------------------------ output
    def send(self, doc):
        self.send_line(_kg().dumps(doc).encode("ascii"))

    def send_line(self, data):
        # One write per answer where the copy is cheap: each write wakes the reader (sshd) on its own.
        if len(data) < (1 << 20):
            self.out.append(memoryview(data + b"\n"))
        else:
            self.out.append(memoryview(data))
            self.out.append(memoryview(b"\n"))
        if self.out_blocking:
            self._drain()
        else:
            self._flush()

    def _drain(self):
        try:
            while self.out:
                _write_all(1, self.out.popleft())
        except OSError:
            self.out.clear()
            self.stop = True

    def _flush(self):
        while self.out:
            view = self.out[0]
            try:
                n = os.write(1, view)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # The client is gone: nothing can be answered any more.
                self.out.clear()
                self.stop = True
                break
            if n == len(view):
                self.out.popleft()
            else:
                self.out[0] = view[n:]
                break
        self._want_write(bool(self.out))

    def _want_write(self, want):
        if self.out_blocking:
            return
        key = self._key(1)
        if want and key is None:
            self.sel.register(1, selectors.EVENT_WRITE, "out")
        elif not want and key is not None:
            self.sel.unregister(1)

    def _key(self, fd):
        try:
            return self.sel.get_key(fd)
        except KeyError:
            return None

    # ------------------------------------------------------------------------------------------------ requests
    def on_input(self):
        try:
            data = os.read(0, 1 << 20)
            self.t_input = time.perf_counter()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.stdin_open = False
            self.sel.unregister(0)
            return
        self.inbuf += data
        while True:
            nl = self.inbuf.find(b"\n", self.scan_from)
            if nl < 0:
                self.scan_from = len(self.inbuf)
                return
            line = bytes(self.inbuf[:nl])
            del self.inbuf[:nl + 1]
            self.scan_from = 0
            if line.strip():
                self.on_request(line)

    def on_request(self, line):
        try:
            req = json.loads(line.decode("utf-8"))
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            # Answer whatever id can be found, so the client does not wait for its timeout.
            m = re.search(rb'"id"\s*:\s*(-?[0-9]{1,15})[,}\s]', line)
            if m:
                self.send(_error(int(m.group(1)), "the request is not valid JSON: %s" % (e,), "bad-request"))
            else:
                sys.stderr.write("kg_helper: request without an id ignored: %s\n" % (e,))
            return
        rid = req.get("id")
        op = req.get("op")
        try:
            if op == "ping":
                self.send({"id": rid, "ok": True, "result": "pong", "python": _kg().interpreter()})
            elif op == "cancel":
                self.cancel(rid)
            elif op == "probe":
                self.on_probe(rid, req)
            else:
                self.send(_error(rid, "unknown op %r" % (op,), "bad-request"))
        except Exception as e:  # noqa: BLE001 - a bad request is answered, the helper lives on
            self.send(_error(rid, "bad request: %s: %s" % (type(e).__name__, e), "bad-request"))

    def on_probe(self, rid, req):
        if not isinstance(rid, int) or isinstance(rid, bool) or rid in self.by_id:
            self.send(_error(rid, "a probe request needs a new integer id", "bad-request"))
            return
        name, digest, args = req.get("name"), req.get("hash"), req.get("args") or []
        if not isinstance(name, str) or not isinstance(digest, str) or not isinstance(args, list):
            self.send(_error(rid, "a probe request needs name, hash and args", "bad-request"))
            return
        self.compile_s = 0.0
        try:
            code = self.code(name, digest, req.get("src"))
            mods = {}
            for entry in req.get("modules") or ():
                if (not isinstance(entry, list) or len(entry) < 2 or not all(isinstance(e, str) for e in entry[:3])
                        or not re.match(r"[A-Za-z_][A-Za-z0-9_]*\Z", entry[0])):
                    raise _BadModule("a module is [name, hash] or [name, hash, source]")
                mods[entry[0]] = self.code(entry[0], entry[1], entry[2] if len(entry) > 2 else None)
        except _BadModule as e:
            self.send(_error(rid, str(e), "bad-request"))
            return
        if code is None or any(c is None for c in mods.values()):
            self.send(_error(rid, "source needed", "need-source"))
            return
        timeout = req.get("timeoutMs")
        timeout_s = float(timeout) / 1000.0 if isinstance(timeout, (int, float)) and timeout > 0 else DEFAULT_TIMEOUT_S
        job = _Job(rid, name, digest, [a if isinstance(a, str) else json.dumps(a) for a in args],
                   time.monotonic() + timeout_s)
        job.timeout_s = timeout_s
        # Kept with the request: the module cache may drop them meanwhile.
        job.code = code
        job.mods = mods
        job.key = (digest, tuple(sorted((e[0], e[1]) for e in req.get("modules") or ())))
        job.timing = req.get("timing") is True
        job.t_arrival = self.t_input
        job.compile_s = self.compile_s
        self.by_id[rid] = job
        self.queue.append(job)
        self.start_waiting()

    def code(self, name, digest, src):
        """The compiled module of source hash ``digest`` (compiled from ``src`` the first time), or None unknown."""
        if digest in self.modules:
            return self.modules[digest][1]
        if src is None:
            return None
        t0 = time.perf_counter()
        try:
            # Compiling is not running: the module's code runs in the child.
            code = compile(src, name + ".py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:
            raise _BadModule("%s.py does not compile: %s" % (name, e))
        self.compile_s += time.perf_counter() - t0
        while len(self.modules) >= MAX_MODULES:
            del self.modules[next(iter(self.modules))]
        self.modules[digest] = (name, code)
        return code

    def cancel(self, rid):
        job = self.by_id.get(rid)
        if job is None:
            return
        self.end(job, "cancelled", "%s was cancelled: stopped" % (job.name,))

    def end(self, job, why, message):
        """Answers ``job`` with an error and makes sure nothing of it keeps running."""
        if not job.answered:
            job.answered = True
            self.send(_error(job.rid, message, why))
        self.by_id.pop(job.rid, None)
        if job.pid is None:
            try:
                self.queue.remove(job)
            except ValueError:
                pass
            return
        job.killed = why
        _kill_group(job.pid)
        self._close_pipe(job)

    # ------------------------------------------------------------------------------------------------ children
    def start_waiting(self):
        # A child that has answered may still be handing over its probe's state: the next request of that probe
        # waits for it (a reopen right after a first read finds what the read kept).
        handing_over = set(j.name for j in self.running.values()
                           if j.answered and j.state_follows and not j.state_taken and j.killed is None)
        for job in list(self.queue):
            if len(self.running) >= MAX_CHILDREN:
                return
            if job.name in handing_over:
                continue
            self.queue.remove(job)
            try:
                self.fork(job)
            except OSError as e:
                self.by_id.pop(job.rid, None)
                job.answered = True
                self.send(_error(job.rid, "could not start the request: %s" % (e.strerror or e,), "internal"))

    def fork(self, job):
        code = job.code
        state = self.states.get(job.name)
        job.t_dispatch = time.perf_counter()
        job.how = "fork"
        self.prep = (job.key, job.name, code, job.mods)
        if not self.spares and state is None and self.zygote is not None and self.zygote.asked:
            # Asked for and on its way: waiting for it is shorter than a fork here. Not long, though: this loop
            # keeps the other requests' deadlines (past ZYGOTE_WAIT_S, this one is forked here).
            self.on_zygote(wait_s=ZYGOTE_WAIT_S)
        if self.spares and state is None:
            # A child forked ahead of need takes it: the request does not wait for a fork, nor (when it is the
            # probe the spare prepared) for its modules to execute.
            spare = next((sp for sp in self.spares if sp[3] == job.key), self.spares[0])
            self.spares.remove(spare)
            pid, ctl, rfd, key = spare
            if key == job.key:
                job.how, msg = "prepared", ("p", job.rid, job.args)
            else:
                job.how, msg = "spare", ("f", job.rid, job.name, job.args, code, job.mods)
            try:
                _write_all(ctl, marshal.dumps(msg))
                ok = True
            except OSError:
                ok = False
            os.close(ctl)
            if ok:
                self._started(job, pid, rfd)
                job.zygote_child = self.zygote is not None
                if self.zygote is not None:
                    # The next spare is forked while this request runs, not after it answered.
                    self.make_spares()
                return
            os.close(rfd)
            _kill_group(pid)
        rfd, wfd = os.pipe()
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            os.close(rfd)
            os.close(wfd)
            raise
        if pid == 0:  # the child: never returns
            _child(self, job, code, state, rfd, wfd)
        os.close(wfd)
        self._started(job, pid, rfd)

    def _started(self, job, pid, rfd):
        try:
            os.setpgid(pid, pid)  # also done in the child: whichever runs first
        except OSError:
            pass
        os.set_blocking(rfd, False)
        job.pid, job.rfd, job.started = pid, rfd, time.monotonic()
        self.running[pid] = job
        self.sel.register(rfd, selectors.EVENT_READ, job)

    def make_spares(self):
        """Forks the next requests' children ahead of need: a fork costs 1-3 ms, off the request's path. Asked of
        the zygote where there is one (then this process never forks, see _Zygote), else forked here."""
        zygote = self.zygote
        if zygote is not None:
            while len(self.spares) + len(zygote.asked) < SPARES:
                if not zygote.ask(self.prep):
                    self.zygote_later.append(None)  # stopped from the loop (this may run inside a start)
                    return
            return
        if self.spares:
            return
        ctl_r, ctl_w = os.pipe()
        rfd, wfd = os.pipe()
        # What exists now is never collected in the child: its collector does not touch (and copy) those pages.
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            for fd in (ctl_r, ctl_w, rfd, wfd):
                os.close(fd)
            return
        if pid == 0:
            _spare(self, ctl_r, ctl_w, rfd, wfd, self.prep[1:] if self.prep is not None else None)
        os.close(ctl_r)
        os.close(wfd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        self.spares.append((pid, ctl_w, rfd, self.prep[0] if self.prep is not None else None))

    def on_zygote(self, wait_s=0.0):
        """Takes what the zygote said: a spare it forked, a child of it that ended. Waiting (from fork, while a
        request is being started) only the spares are taken at once; the rest waits for the loop (settling a
        child starts waiting requests, which must not happen inside a start)."""
        zygote = self.zygote
        if zygote is None:
            return
        records = zygote.records(wait_s)
        if records is None:
            self.zygote_later.append(None)
        else:
            for kind, pid, status in records:
                if kind == b"P" and zygote.asked:
                    ctl_w, rfd, key = zygote.asked.popleft()
                    if pid > 0:
                        self.spares.append((pid, ctl_w, rfd, key))
                    else:
                        os.close(ctl_w)
                        os.close(rfd)
                elif kind == b"X":
                    self.zygote_later.append((pid, status))
        if not wait_s:
            self.after_zygote()

    def after_zygote(self):
        later, self.zygote_later = self.zygote_later, []
        for event in later:
            if event is None:
                self.stop_zygote()
            else:
                self.ended(*event)

    def stop_zygote(self):
        """The zygote is gone or failed: spares are forked here from now on."""
        zygote, self.zygote = self.zygote, None
        if zygote is None:
            return
        try:
            self.sel.unregister(zygote.sock)
        except (KeyError, ValueError):
            pass
        zygote.close()
        # Its children die with it (PR_SET_PDEATHSIG), and no one will report how: killed, as far as we know.
        self.drop_spares()
        for job in [j for j in self.running.values() if j.zygote_child and j.status is None]:
            _kill_group(job.pid)
            job.status = signal.SIGKILL  # a wait status: killed by SIGKILL
            if job.rfd is not None:
                self.on_child_output(job)
            self._settle(job)

    def drop_spares(self):
        while self.spares:
            pid, ctl, rfd, _ = self.spares.pop()
            os.close(ctl)
            os.close(rfd)
            _kill_group(pid)

    def on_child_output(self, job):
        while job.rfd is not None:
            try:
                data = os.read(job.rfd, 1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._close_pipe(job)
                job.pipe_done = True
                break
            job.buf += data
            if len(job.buf) > self.max_out + STATE_BYTES + 64:
                self.end(job, "limit-output", "%s answered more than its limits allow: stopped" % (job.name,))
                return
            self._take_answer(job)
            self._take_state(job)
        self._settle(job)

    def _take_answer(self, job):
        """Sends the answer as soon as it is whole (the child goes on to export its state)."""
        if job.answered or len(job.buf) < _HEAD.size:
            return
        head = _HEAD.unpack_from(job.buf)
        n, job.state_follows = head[0], head[1]
        end = _HEAD.size + n
        if len(job.buf) < end:
            return
        t_read = time.perf_counter()
        job.answered = True
        self.by_id.pop(job.rid, None)
        with memoryview(job.buf) as view:
            answer = bytes(view[_HEAD.size:end])
        job.buf = job.buf[end:]
        if job.timing and answer.endswith(b"}"):
            answer = answer[:-1] + b', "timing": ' + _timing(job, head[2:], t_read).encode("ascii") + b"}"
        self.send_line(answer)
        if not job.state_follows:
            self.start_waiting()

    def _take_state(self, job):
        """Keeps the probe's state as soon as its frame is whole (not when the child has exited: that takes time)."""
        if not job.answered or not job.state_follows or job.state_taken or len(job.buf) < _STATE_HEAD.size:
            return
        kind, n = _STATE_HEAD.unpack_from(job.buf)
        end = _STATE_HEAD.size + n
        if len(job.buf) < end:
            return
        job.state_taken = True
        if job.killed is None:
            if kind == b"S" and n <= STATE_BYTES:
                with memoryview(job.buf) as view:
                    self.keep_state(job.name, view[_STATE_HEAD.size:end])
            elif kind == b"D":
                self.states.pop(job.name, None)
        job.buf = bytearray()
        self.start_waiting()

    def keep_state(self, name, blob):
        """Applies a child's KG_STATE_EXPORT document ({"version": 1, "full", "put": [(key, entry)], "drop": [key]})
        to what is kept for probe ``name``: plain data only, looked at as dict operations, never run."""
        try:
            doc = marshal.loads(blob)
            if not isinstance(doc, dict) or doc.get("version") != 1 or not _plain(doc):
                raise ValueError("not a version-1 state document")
            kept = {} if doc.get("full") or name not in self.states else self.states[name]
            for key in doc.get("drop") or ():
                kept.pop(_hashable(key), None)
            for key, entry in doc.get("put") or ():
                key = _hashable(key)
                kept.pop(key, None)
                kept[key] = (entry, len(marshal.dumps(entry)))
            # The probe bounds what it keeps; this bounds what a misbehaving one could make the helper hold.
            total = sum(size for _, size in kept.values())
            while kept and (total > STATE_BYTES or len(kept) > STATE_KEYS):
                total -= kept.pop(next(iter(kept)))[1]
            self.states[name] = kept
        except (ValueError, TypeError, EOFError) as e:
            sys.stderr.write("kg_helper: %s state not kept: %s\n" % (name, e))

    def _close_pipe(self, job):
        if job.rfd is not None:
            try:
                self.sel.unregister(job.rfd)
            except (KeyError, ValueError):
                pass
            os.close(job.rfd)
            job.rfd = None

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            if self.zygote is not None and pid == self.zygote.pid:
                self.zygote.pid = None  # reaped: not to be killed again
                self.stop_zygote()
            else:
                self.ended(pid, status)

    def ended(self, pid, status):
        """A child (forked here, or by the zygote) ended with wait status ``status``."""
        job = self.running.get(pid)
        if job is None:
            for spare in [sp for sp in self.spares if sp[0] == pid]:
                self.spares.remove(spare)
                os.close(spare[1])
                os.close(spare[2])
            return
        job.status = status
        if job.rfd is not None:
            # Everything it wrote is in the pipe by now (its writes finished before it exited).
            self.on_child_output(job)
        self._settle(job)

    def _settle(self, job):
        """A job whose child has exited: answered if it was not, its group killed, its slot freed."""
        # Once it has exited, all it wrote is read (reap drained the pipe), even if a tool it left holds the pipe.
        if job.settled or job.status is None:
            return
        job.settled = True
        self._close_pipe(job)
        self.running.pop(job.pid, None)
        # Tools it started and left behind go with it (the group's id stays taken while any member lives, so
        # this reaches no one else).
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except OSError:
            pass
        if not job.answered:
            job.answered = True
            self.by_id.pop(job.rid, None)
            self.send(_error(job.rid, *_died(job)))
        job.state_taken = True
        job.buf = bytearray()
        self.start_waiting()

    def on_deadlines(self):
        now = time.monotonic()
        for job in list(self.by_id.values()):
            if not job.answered and job.deadline <= now:
                self.end(job, "timeout", "%s timed out after %s s: stopped" % (job.name, _secs(job.timeout_s)))
        for job in list(self.running.values()):
            # Answered, but still writing its state long after its deadline: it goes too.
            if job.killed is None and job.deadline + STATE_GRACE_S <= now:
                job.killed = "late"
                _kill_group(job.pid)

    def next_timeout(self):
        pending = [j.deadline for j in self.by_id.values() if not j.answered]
        pending += [j.deadline + STATE_GRACE_S for j in self.running.values() if j.killed is None]
        if not pending:
            return None
        return max(0.0, min(pending) - time.monotonic())

    # ------------------------------------------------------------------------------------------------ the loop
    def serve(self):
        self.max_out = _kg().LIMITS.get("output") or (1 << 30)
        for name in PRELOAD:
            try:
                __import__(name)
            except Exception:  # noqa: BLE001 - a missing module is imported (and reported) by the probe itself
                pass
        try:
            # The standard library caches what it learns of the host (platform.platform() reads the interpreter's
            # binary to find its libc: 10 ms); learnt once here, every child starts with it.
            sys.modules["platform"].platform()
            # Likewise the C library's user database: its first look-up loads the NSS modules (0.3 ms a child).
            sys.modules["pwd"].getpwuid(os.getuid())
        except Exception:  # noqa: BLE001
            pass
        self.prctl = _prctl()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.wake_fds = (wake_r, wake_w)
        self.pid = os.getpid()
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._on_stop_signal)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # Before the ready line: a client (or a test) that sees it finds the zygote there.
        self.zygote = _Zygote.start(self)
        self.send({"ready": self.nonce, "python": _kg().interpreter()})
        # Non-blocking output, so a slow reader never stops deadlines from being kept; unless stdout and stderr
        # are one file (a terminal), where children's stderr would then fail with EAGAIN.
        try:
            if not _same_file(1, 2):
                os.set_blocking(1, False)
                self.out_blocking = False
        except OSError:
            pass
        self.sel.register(0, selectors.EVENT_READ, "in")
        self.sel.register(wake_r, selectors.EVENT_READ, "wake")
        if self.zygote is not None:
            self.sel.register(self.zygote.sock, selectors.EVENT_READ, "zygote")
        try:
            # The client closing stdin (or the connection) ends the helper and every request still running.
            while not self.stop and self.stdin_open:
                if not self.queue and (
                        self.zygote is not None or all(j.answered for j in self.running.values())):
                    self.make_spares()
                for key, _ in self.sel.select(self.next_timeout()):
                    if key.data == "in":
                        self.on_input()
                    elif key.data == "out":
                        self._flush()
                    elif key.data == "zygote":
                        self.on_zygote()
                    elif key.data == "wake":
                        try:
                            while os.read(wake_r, 512):
                                pass
                        except (BlockingIOError, InterruptedError, OSError):
                            pass
                    else:
                        self.on_child_output(key.data)
                self.after_zygote()
                self.reap()
                self.on_deadlines()
        finally:
            self.drop_spares()
            self.stop_zygote()
            for job in list(self.running.values()):
                _kill_group(job.pid)
            for job in list(self.running.values()):
                try:
                    os.waitpid(job.pid, 0)
                except OSError:
                    pass
            if self.out and not self.stop:
                try:
                    os.set_blocking(1, True)
                except OSError:
                    pass
                self._drain()

    def _on_stop_signal(self, *_):
        self.stop = True


_PR_SET_NAME = 15
_LEN = struct.Struct(">I")
# From the zygote: b"P" + the pid of the spare it forked (-1: it could not), b"X" + pid + wait status of one that
# ended.
_ZREC = struct.Struct(">cqi")


class _Zygote(object):
    """A process forked once at start (Linux) that forks the spares, so that this process never forks again.

    A fork costs its parent twice: the fork itself (0.3-0.7 ms for a 15 MB interpreter, more on a VM), then a
    copy-on-write fault on every page it writes afterwards (~300 a request, 1 ms of system time measured). Forked
    from the zygote, which does nothing else, a spare costs this process neither. The spare's two pipes are made
    here and their far ends handed to the zygote with SCM_RIGHTS; the zygote answers with the spare's pid, reaps its
    spares and reports each one's wait status, so a request is killed (its process group), settled and its death
    named here as before. The zygote dies with this process and its spares with it (PR_SET_PDEATHSIG).
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
        return _Zygote(pid, ours)

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
            _kill_group(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None


ZYGOTE_PREPS = 16
ZYGOTE_WAIT_S = 0.1


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
        _child_setup(helper, [theirs.fileno()])
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
                        _spare(None, fds[0], None, None, fds[1], prep, (prctl, zpid))
                for f in fds:
                    os.close(f)
                _write_all(fd, _ZREC.pack(b"P", pid, 0))
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                except InterruptedError:
                    continue
                if pid == 0:
                    break
                _write_all(fd, _ZREC.pack(b"X", pid, status))
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


def _same_file(a, b):
    sa, sb = os.fstat(a), os.fstat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _kill_group(pid):
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except OSError:
            pass


def _secs(s):
    return ("%.1f" % s).rstrip("0").rstrip(".")


_SIGNALS = {
    "SIGXCPU": ("limit-cpu", "the CPU-time limit"),
    "SIGKILL": ("killed", "SIGKILL (the host's out-of-memory killer, or someone else, stopped it)"),
    "SIGSEGV": ("crashed", "SIGSEGV (a crash in the interpreter or an extension module)"),
    "SIGXFSZ": ("limit-file-size", "the file-size limit"),
}


def _died(job):
    """(message, code) for a child that ended without answering."""
    status = job.status
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            sname = signal.Signals(sig).name
        except ValueError:
            sname = "signal %d" % sig
        code, what = _SIGNALS.get(sname, ("crashed", sname))
        if code == "limit-cpu":
            return str(_kg().LimitError("cpu", job.name + " was killed by SIGXCPU")), code
        return "%s was killed by %s, before it answered" % (job.name, what), code
    return "%s ended (exit status %d) before it answered" % (job.name, os.WEXITSTATUS(status)), "crashed"


def _timing(job, stamps, t_read):
    """Where a request's time went in the helper (milliseconds), from the parent's and the child's stamps."""
    got, executed, ready, ran, framed = stamps
    ms = lambda a, b: round(max(0.0, b - a) * 1000.0, 3)  # noqa: E731
    return json.dumps({
        "how": job.how,
        "parse": ms(job.t_arrival, job.t_dispatch - job.compile_s),
        "compile": round(job.compile_s * 1000.0, 3),
        "handoff": ms(job.t_dispatch, got),
        "exec": ms(got, executed),
        "setup": ms(executed, ready),
        "run": ms(ready, ran),
        "frame": ms(ran, framed),
        "pipe": ms(framed, t_read),
        "total": ms(job.t_arrival, t_read),
    })


def _data_bytes():
    """Data segment this process already has (what fork copied from the parent), on Linux."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _hashable(key):
    if isinstance(key, list):
        key = tuple(_hashable(k) for k in key)
    hash(key)
    return key


def _plain(value, depth=0):
    """True for data made of None, bool, int, float, str, bytes, list, tuple, dict only."""
    if depth > 100:
        return False
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _child_setup(helper, close):
    """A forked child's first steps: its own process group, default signals, none of the parent's descriptors."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    _die_with_parent(helper.prctl, helper.pid)
    # The parent's descriptors are not ours: its selector, the other requests' pipes, the spare's, the channel.
    fds = list(close) + list(helper.wake_fds) + [j.rfd for j in helper.running.values() if j.rfd is not None]
    for spare in helper.spares:
        fds += list(spare[1:3])
    if helper.zygote is not None:
        fds += helper.zygote.fds()
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        helper.sel.close()
    except Exception:  # noqa: BLE001
        pass
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    # What fork copied and this request does not need: other probes' states, answers queued for the client.
    helper.states = None
    helper.out.clear()
    helper.inbuf = None
    for j in helper.running.values():
        j.buf = None


def _child(helper, job, code, state, rfd, wfd):
    """Runs one request in this forked process and leaves with os._exit: never returns to the loop."""
    try:
        _child_setup(helper, [rfd])
    except BaseException:  # noqa: BLE001
        os._exit(70)
    _run(job.rid, job.name, job.args, code, job.mods, state, wfd)


def _spare(helper, ctl_r, ctl_w, rfd, wfd, prep, parent=None):
    """A child forked ahead of need: set up, and the last request's probe ``prep`` (name, code, modules) executed
    and its limits applied, it waits for its request on ``ctl_r``: ("p", rid, args) for the probe it prepared,
    ("f", rid, name, args, code, modules) for another. ``helper`` is None when the zygote forked it: set up
    already, it dies with its ``parent`` (prctl, the zygote's pid)."""
    try:
        if helper is not None:
            _child_setup(helper, [ctl_w, rfd])
        else:
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
            if parent is not None:
                _die_with_parent(*parent)
        helper = None
        ready = _prepare(*prep) if prep is not None else None
        _rehearse()
        chunks = []
        while True:
            c = os.read(ctl_r, 1 << 20)
            if not c:
                break
            chunks.append(c)
        os.close(ctl_r)
        if not chunks:
            os._exit(0)  # not needed after all
        msg = marshal.loads(b"".join(chunks))
        chunks = None
    except BaseException:  # noqa: BLE001
        os._exit(70)
    if msg[0] == "p":
        if prep is None:
            # Cannot happen (the helper mirrors what the zygote keeps); answered, not crashed, if it ever does.
            prep = ("unknown", compile("raise RuntimeError('the spare had no probe')", "kg_helper", "exec"), None)
        name, code, mods = prep
        if ready is not None:
            _run(msg[1], name, msg[2], code, mods, None, wfd, ready[0])
        # Its module failed to execute ahead: executed again, the failure is this request's answer.
        _run(msg[1], name, msg[2], code, mods, None, wfd)
    if ready is not None:
        _unprepare(ready)
    _run(msg[1], msg[2], msg[3], msg[4], msg[5], None, wfd)


def _rehearse():
    """Walks the answer's path once (envelope, footprint, JSON) with made-up data, before the request: the pages it
    touches are copied (a fault each, 2-10 us) here rather than on the request's time. Nothing of a request is in it."""
    try:
        kg = _kg()
        kg.call_probe(lambda argv: {"a": [1, 2.5, "x", None, True, {"b": "c"}]}, [])
        kg.interpreter()
        marshal.loads(marshal.dumps(("p", 1, ["x"])))
        _HEAD.pack(1, False, 0.0, 0.0, 0.0, 0.0, time.perf_counter())
    except Exception:  # noqa: BLE001 - only a head start
        pass


def _load(name, code, mods):
    """Executes probe ``name``'s module (its modules importable) and applies its limits: (module, main, limits)."""
    kg = _kg()
    if mods:
        sys.modules["kg_modules"].install(mods)
    mod = types.ModuleType("kg_probe_" + name)
    mod.__file__ = name + ".py"
    sys.modules[mod.__name__] = mod
    exec(code, mod.__dict__)
    main = mod.main
    limits = dict(kg.probe_limits(main))
    if limits.get("memory") is not None:
        # The probe's own allowance, on top of what this process is at fork.
        limits["memory"] += _data_bytes()
    kg.apply_process_limits(limits)
    return mod, main, limits


def _prepare(name, code, mods):
    """A spare's guess that the next request is the last one's probe: ((module, main, limits), undo) or None."""
    undo = (set(sys.modules), list(sys.meta_path), _rlimits())
    try:
        return _load(name, code, mods), undo
    except BaseException:  # noqa: BLE001 - the request, if it comes, runs it again and answers the failure
        _unprepare((None, undo))
        return None


def _unprepare(ready):
    """Forgets what a spare prepared for another probe: modules imported, finder, limits."""
    before, meta, limits = ready[1]
    for name in [n for n in sys.modules if n not in before]:
        del sys.modules[name]
    sys.meta_path[:] = meta
    try:
        import resource

        for which, soft_hard in limits:
            resource.setrlimit(which, soft_hard)
    except (ImportError, ValueError, OSError):
        pass


def _rlimits():
    try:
        import resource

        return [(w, resource.getrlimit(w)) for w in (resource.RLIMIT_DATA, resource.RLIMIT_CPU)]
    except (ImportError, AttributeError, ValueError, OSError):
        return []


def _run(rid, name, args, code, mods, state, wfd, loaded=None):
    """Runs one request in this child (its module executed already when ``loaded``) and leaves with os._exit:
    never returns to the loop."""
    status = 70
    t_got = time.perf_counter()
    t_exec = t_ready = t_ran = t_got
    try:
        kg = _kg()
        text = mod = None
        try:
            mod, main, limits = loaded if loaded is not None else _load(name, code, mods)
            t_exec = time.perf_counter()
            imp = getattr(mod, "KG_STATE_IMPORT", None)
            if state and callable(imp):
                try:
                    # Fork copied the parent's plain data: handed over as one full document.
                    imp({"version": 1, "full": True, "put": [(k, v[0]) for k, v in state.items()], "drop": []})
                except Exception as e:  # noqa: BLE001 - a cache that cannot be restored is started afresh
                    sys.stderr.write("kg_helper: %s state not restored: %s\n" % (name, e))
            state = None
            t_ready = time.perf_counter()
            text = kg.call_probe(main, args, limits)[1]
            t_ran = time.perf_counter()
            # The answer is all this process holds now: the bytes to send, made once.
            body = text.encode("ascii")
            text = None
        except SystemExit as e:
            body = kg.dumps(kg.envelope_error("%s exited (%s)" % (name, e.code), "exit")).encode("ascii")
        except MemoryError:
            text = body = None
            body = kg.dumps(kg.envelope_error(str(kg.LimitError("memory", name)), "limit-memory")).encode("ascii")
        except BaseException as e:  # noqa: BLE001 - every request is answered
            body = kg.dumps(kg.envelope_error("%s: %s" % (type(e).__name__, e), "internal")).encode("ascii")
        # {"id": N, + the envelope without its opening brace, written from the one copy.
        prefix = ('{"id": %s, ' % json.dumps(rid)).encode("ascii")
        get = getattr(mod, "KG_STATE_EXPORT", None)
        stamps = (t_got, max(t_exec, t_got), max(t_ready, t_exec), max(t_ran, t_ready), time.perf_counter())
        _write_all(wfd, _HEAD.pack(len(prefix) + len(body) - 1, callable(get), *stamps) + prefix)
        _write_all(wfd, memoryview(body)[1:])
        body = None
        status = 0
        if callable(get):
            try:
                kept = get()
                if kept is None:
                    _write_all(wfd, _STATE_HEAD.pack(b"D", 0))
                elif _plain(kept):
                    blob = marshal.dumps(kept)  # pyright: ignore[reportArgumentType] (checked plain above)
                    if len(blob) <= STATE_BYTES:
                        _write_all(wfd, _STATE_HEAD.pack(b"S", len(blob)) + blob)
                    else:
                        sys.stderr.write("kg_helper: %s state of %d bytes not kept\n" % (name, len(blob)))
                        _write_all(wfd, _STATE_HEAD.pack(b"D", 0))
                else:
                    sys.stderr.write("kg_helper: %s state is not plain data: not kept\n" % (name,))
                    _write_all(wfd, _STATE_HEAD.pack(b"D", 0))
            except Exception as e:  # noqa: BLE001 - what was kept before stays
                sys.stderr.write("kg_helper: %s state not kept: %s\n" % (name, e))
                _write_all(wfd, _STATE_HEAD.pack(b"N", 0))
    except BaseException:  # noqa: BLE001 - the parent answers a child that did not
        pass
    finally:
        try:
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(status)


_PR_SET_PDEATHSIG = 1


def _prctl():
    """libc's prctl on Linux (looked up once, in the parent), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:  # noqa: BLE001
        return None


def _die_with_parent(prctl, parent):
    """Linux: this child gets SIGKILL when the helper dies (even by SIGKILL), so no request outlives it."""
    if prctl is None:
        return
    try:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001
        return
    if os.getppid() != parent:
        os._exit(71)


def serve(nonce):
    Helper(nonce).serve()
