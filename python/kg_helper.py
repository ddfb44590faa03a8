"""Known Good resident helper (stdlib only, Python 3.8+, Linux/macOS).

Started once per host connection as ``python3 -u -c <loader> --spares N --shrink-after-ms M`` (kg_pool
pool_options; it then names itself "known-good helper" in ps, kg_spare.set_title); the loader reads
kg_modules, kg_common and this source as the first stdin line (JSON) and executes them.  The
client may write its first requests right behind that line, without waiting (what the loader read past
the line is handed to serve()); they are answered after the ready line.  It answers JSON-line
requests on the same channel:

  -> {"id": 1, "op": "probe", "name": "list_runs", "hash": "...", "src": "...", "args": [...], "timeoutMs": 60000}
  <- {"id": 1, "ok": true, "result": {...}, "python": {...}, "footprint": {"maxRssKb": ..., "cpuS": ...}}
  <- {"id": 1, "ok": false, "error": {"message": "...", "code": "..."}}
  -> {"op": "cancel", "id": 1}          (kills request 1; answered with code "cancelled")
  -> {"id": 2, "op": "ping"}
  -> {"id": 3, "op": "status"}          (the pool of spares: kg_pool.SparePool.pool_status)

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
child forked before it arrived (the client's ``--spares`` of them once the helper
has been idle a moment, one once it has been idle SHRINK_S; while requests run a
spare taken is replaced when none is left: kg_pool), which has already executed
the last request's probe module and its modules (compiled once, here) and
applied its limits (python/kg_spare.py).  On Linux the children are forked
by a zygote (python/kg_zygote.py), so this process never forks after start and
never pays the copy-on-write faults a fork leaves behind.  Asked ("timing":
true), an answer says where its time went (kg_frame.timing): npm run bench
prints it.  State a probe keeps between requests travels as plain data
(python/kg_frame.py, python/HELPER_STATE.md).

The loader executes this file's modules before it, in order: kg_modules,
kg_common, kg_frame, kg_spare, kg_zygote, kg_pool (src/core/probes/sources.ts
HELPER_MODULES).
"""
import fcntl
import gc
import json
import marshal
import os
import re
import selectors
import signal
import sys
import time
from typing import Optional  # noqa: F401 (type comments)
from collections import deque

import kg_common
import kg_spare
import kg_zygote
from kg_pool import IDLE_S, SparePool, UsageError, pool_options  # noqa: F401 (IDLE_S: the docs read it here)
from kg_frame import (GROUP_AT_REAP, HEAD, PIPE_BUF, STATE_HEAD, STATE_BYTES, Job, answered_directly, died,
                      direct_channel, exited,
                      kill_group, merge_state, same_file, secs, timing, write_all)

_out = sys.stdout
# Probes must not write to the protocol channel by accident.
sys.stdout = sys.stderr

MAX_CHILDREN = 8
# Seconds past its deadline an answered child may still take to hand over its state.
STATE_GRACE_S = 30.0
# Without a "timeoutMs" in the request (the client always sends one).
DEFAULT_TIMEOUT_S = 600.0
# How soon a line waiting for the channel's lock (a child writing its answer: one write) is tried again.
LOCK_RETRY_S = 0.0005
# Compiled probe modules kept (by source hash); the oldest goes first.
MAX_MODULES = 64
# Standard modules the probes import, loaded once here so that a child does not import them again per request
# (only the standard library: importing is running that module's code, and the parent runs no probe's).
PRELOAD = ("json", "re", "struct", "subprocess", "threading", "tempfile", "shutil", "math", "argparse", "socket",
           "platform", "glob", "base64", "zipfile", "warnings", "posixpath", "pickle", "itertools", "io",
           "hashlib", "datetime", "bisect", "stat", "getpass", "ctypes", "resource", "pwd")


def _error(rid, message, code):
    doc = kg_common.envelope_error(message, code)
    doc["id"] = rid
    return doc


class _BadModule(ValueError):
    pass


class Helper(SparePool):
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
        self.zygote = None  # type: Optional[kg_zygote.Zygote]
        self.zygote_later = []  # what the zygote said while a request was being started: (pid, status), None: gone
        self.stdin_open = True
        self.stop = False
        self.max_out = 1 << 30  # kg_common's output limit, from serve()
        self.t_input = 0.0  # when the bytes being parsed were read
        # Children answer on the channel themselves (kg_frame.send_direct): it is a pipe, made non-blocking here.
        self.direct = False
        self.locked = False  # the channel's lock, held while a line is part-way out
        self.compile_s = 0.0
        self.t_active = 0.0  # when a request was last running or waiting (time.monotonic): kg_pool's clock
        self.retry_at = 0.0  # no spare is asked for before then (time.monotonic): the zygote's last fork failed
        self.max_spares, self.shrink_s = pool_options(())  # the client's, from serve()

    # ------------------------------------------------------------------------------------------------ output
    def send(self, doc):
        self.send_line(kg_common.dumps(doc).encode("ascii"))

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
                write_all(1, self.out.popleft())
        except OSError:
            self.out.clear()
            self.stop = True

    def _flush(self):
        while self.out:
            view = self.out[0]
            if self.lock_waiting():
                try:
                    fcntl.lockf(1, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self.locked = True
                except OSError:
                    break  # a child is writing its line (one write): tried again shortly (next_timeout)
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
        if self.locked and not self.out:
            self.locked = False
            try:
                fcntl.lockf(1, fcntl.LOCK_UN)
            except OSError:
                pass
        self._want_write(bool(self.out) and not self.lock_waiting())

    def lock_waiting(self):
        """Whether the next write may go part-way and so needs the channel's lock, not held yet: a child answers on
        the channel itself only between whole lines of this process (kg_frame.send_direct), and a line a single
        write may split is written under the lock, held until nothing is left to write."""
        return self.direct and not self.locked and bool(self.out) and len(self.out[0]) > PIPE_BUF

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
        self.take_input(data)

    def take_input(self, data):
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
                self.send({"id": rid, "ok": True, "result": "pong", "python": kg_common.interpreter()})
            elif op == "status":
                # Not a request: it does not count as activity (kg_pool's idle clock), so asking does not keep the
                # pool from shrinking.
                self.send({"id": rid, "ok": True, "result": self.pool_status()})
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
        job = Job(rid, name, digest, [a if isinstance(a, str) else json.dumps(a) for a in args],
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
        kill_group(job.pid)
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
            # keeps the other requests' deadlines (past kg_zygote.ZYGOTE_WAIT_S, this one is forked here).
            self.on_zygote(wait_s=kg_zygote.ZYGOTE_WAIT_S)
        if self.spares and state is None:
            # A child forked ahead of need takes it: the request does not wait for a fork, nor (when it is the
            # probe the spare prepared) for its modules to execute.
            spare = next((sp for sp in self.spares if sp[3] == job.key), self.spares[0])
            self.spares.remove(spare)
            pid, ctl, rfd, key = spare
            if key == job.key:
                job.how = "prepared"
                msg = ("p", job.rid, job.args, job.stamped())
            else:
                job.how = "spare"
                msg = ("f", job.rid, job.name, job.args, code, job.mods, job.stamped())
            try:
                write_all(ctl, marshal.dumps(msg))
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
            kill_group(pid)
        rfd, wfd = os.pipe()
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            os.close(rfd)
            os.close(wfd)
            raise
        if pid == 0:  # the child: never returns
            kg_spare.child(self, job, code, state, rfd, wfd)
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
        if job.answered or len(job.buf) < HEAD.size:
            return
        head = HEAD.unpack_from(job.buf)
        n, job.state_follows, sent = head[:3]
        end = HEAD.size + n
        if len(job.buf) < end:
            return
        t_read = time.perf_counter()
        job.answered = True
        self.by_id.pop(job.rid, None)
        with memoryview(job.buf) as view:
            answer = bytes(view[HEAD.size:end])
        job.buf = job.buf[end:]
        if not sent:
            stamped = job.stamped()
            if stamped is not None and answer.endswith(b"}"):
                answer = answer[:-1] + b', "timing": ' + timing(stamped, head[3:], t_read).encode("ascii") + b"}"
            self.send_line(answer)
        if not job.state_follows:
            self.start_waiting()

    def _take_state(self, job):
        """Keeps the probe's state as soon as its frame is whole (not when the child has exited: that takes time)."""
        if not job.answered or not job.state_follows or job.state_taken or len(job.buf) < STATE_HEAD.size:
            return
        kind, n = STATE_HEAD.unpack_from(job.buf)
        end = STATE_HEAD.size + n
        if len(job.buf) < end:
            return
        job.state_taken = True
        if job.killed is None:
            if kind == b"S" and n <= STATE_BYTES:
                with memoryview(job.buf) as view:
                    kept = merge_state(self.states.get(job.name), job.name, view[STATE_HEAD.size:end])
                if kept is not None:
                    self.states[job.name] = kept
            elif kind == b"D":
                self.states.pop(job.name, None)
        job.buf = bytearray()
        self.start_waiting()

    def _close_pipe(self, job):
        if job.rfd is not None:
            try:
                self.sel.unregister(job.rfd)
            except (KeyError, ValueError):
                pass
            os.close(job.rfd)
            job.rfd = None

    def reap(self):
        for pid, status in exited():
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
        # Tools it started and left behind go with it: killed where it was reaped (kg_frame.exited), before its
        # number was free. Without waitid, here (the group's id stays taken while any member lives).
        if not GROUP_AT_REAP:
            try:
                os.killpg(job.pid, signal.SIGKILL)
            except OSError:
                pass
        if not job.answered:
            job.answered = True
            self.by_id.pop(job.rid, None)
            if not (self.direct and answered_directly(job.status)):
                self.send(_error(job.rid, *died(job.name, job.status)))
        job.state_taken = True
        job.buf = bytearray()
        self.start_waiting()

    def on_deadlines(self):
        now = time.monotonic()
        for job in list(self.by_id.values()):
            if not job.answered and job.deadline <= now:
                self.end(job, "timeout", "%s timed out after %s s: stopped" % (job.name, secs(job.timeout_s)))
        for job in list(self.running.values()):
            # Answered, but still writing its state long after its deadline: it goes too.
            if job.killed is None and job.deadline + STATE_GRACE_S <= now:
                job.killed = "late"
                kill_group(job.pid)

    def next_timeout(self):
        if self.lock_waiting():
            return LOCK_RETRY_S
        now = time.monotonic()
        pending = [j.deadline - now for j in self.by_id.values() if not j.answered]
        pending += [j.deadline + STATE_GRACE_S - now for j in self.running.values() if j.killed is None]
        pool = self.pool_timeout()
        if pool is not None:
            pending.append(pool)
        if not pending:
            return None
        return max(0.0, min(pending))

    # ------------------------------------------------------------------------------------------------ the loop
    def serve(self, argv=(), first=b""):
        """Answers requests until stdin closes; `first`: what the loader read past its line (requests already sent)."""
        self.max_out = kg_common.LIMITS.get("output") or (1 << 30)
        try:
            self.max_spares, self.shrink_s = pool_options(argv)
        except UsageError as e:
            sys.stderr.write("kg_helper: %s\n" % (e,))
            sys.exit(2)
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
        self.prctl = kg_spare.prctl_fn()
        kg_spare.init_title()
        kg_spare.set_title("known-good helper", b"kg-helper")
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.wake_fds = (wake_r, wake_w)
        self.pid = os.getpid()
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._on_stop_signal)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.direct = direct_channel()
        # A fresh helper counts as busy: its first requests come now (a host's tree expanding).
        self.t_active = time.monotonic()
        # Before the ready line: a client (or a test) that sees it finds the zygote there.
        self.zygote = kg_zygote.Zygote.start(self)
        self.send({"ready": self.nonce, "python": kg_common.interpreter()})
        # Non-blocking output, so a slow reader never stops deadlines from being kept; unless stdout and stderr
        # are one file (a terminal), where children's stderr would then fail with EAGAIN.
        try:
            if not same_file(1, 2):
                os.set_blocking(1, False)
                self.out_blocking = False
        except OSError:
            pass
        self.sel.register(0, selectors.EVENT_READ, "in")
        self.sel.register(wake_r, selectors.EVENT_READ, "wake")
        if first:
            self.t_input = time.perf_counter()
            self.take_input(first)
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
                if self.lock_waiting():
                    self._flush()
                self.after_zygote()
                self.reap()
                self.on_deadlines()
                if self.by_id or self.queue:
                    self.t_active = time.monotonic()
        finally:
            self.drop_spares()
            self.stop_zygote()
            for job in list(self.running.values()):
                kill_group(job.pid)
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


def serve(nonce, first=b""):
    Helper(nonce).serve(sys.argv[1:], first)
