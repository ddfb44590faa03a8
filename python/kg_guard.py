"""kg_guard: runs ONE command for Known Good, bounded and owned (stdlib only, Python 3.8+, Linux first).

Every action Known Good starts on a host (a benchmark run of a bisect, a restore's script, `known-good exec`, a
replay) runs under this guard:

  python3 kg_guard.py [--timeout S] [--grace S] [--cap BYTES] [--tail BYTES] [--env JSON] [--cwd DIR]
                      [--report NONCE] -- COMMAND [ARG...]

- The command runs in a process group of its own, with the environment of the guard changed by `--env` (a JSON
  object {"set": {NAME: VALUE}, "unset": [NAME]}: names must be [A-Za-z_][A-Za-z0-9_]*, values strings without NUL).
  Its argv is passed to execve as it is: no shell, no option of ours after `--`.
- `--timeout`: at the deadline the group gets SIGTERM, then SIGKILL after `--grace` seconds (default 5) if anything
  of it is left. SIGTERM, SIGHUP or SIGINT to the guard stop it the same way (a second SIGINT is taken as TERM).
- Caller gone: the guard watches its own stdout and stderr. When the reader of either has gone (the SSH channel
  closed because the CLI was killed, the connection dropped, VS Code went away; on This machine the pipe to the
  dead Node process) poll reports POLLERR/POLLHUP and the command is stopped as at a deadline. The command's direct
  child also gets SIGKILL if the guard itself is killed (PR_SET_PDEATHSIG), and the guard is a child subreaper, so
  what the command left behind in the background is stopped when the command ends.
- Output: with `--cap N` (N > 0) the command's stdout and stderr are pipes read by the guard and passed on byte for
  byte up to N bytes each; past that only the last `--tail` bytes (default 64 KiB) of each are kept and written at
  the end after a line that says how much was left out. With `--cap 0` (the default) the command writes to the
  guard's own stdout and stderr (byte-exact, nothing held here).
- `--report NONCE`: at the end a JSON document framed by the nonce's marker lines is written on stderr: how the
  command ended ("exited", "timeout", "stopped", "caller-gone", "not-started"), its exit code or signal, the stop
  signals sent and when, bytes seen and left out, processes stopped after it ended.

The guard exits with the command's exit code; a command ended by a signal is ended again here by the same signal.
A bad request (an option, a variable name, a missing command) runs nothing: a report with ok false, exit 2.
"""
import errno
import json
import os
import re
import resource
import select
import signal
import sys
import time

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_TIMEOUT = 7 * 24 * 3600.0
MAX_GRACE = 600.0
MAX_CAP = 1 << 34
MAX_TAIL = 16 << 20
DEFAULT_TAIL = 64 << 10
# What waits to be written to a slow caller before the command's pipe is read no more (the command then blocks on
# its own writes): the guard's memory stays under 2 x (PENDING_MAX + the tail).
PENDING_MAX = 1 << 20
READ_CHUNK = 64 << 10
# Linux prctl options (linux/prctl.h).
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class BadRequest(Exception):
    pass


def parse(argv):
    opts = {"timeout": 0.0, "grace": 5.0, "cap": 0, "tail": DEFAULT_TAIL, "env": None, "cwd": None, "report": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            command = argv[i + 1:]
            if not command:
                raise BadRequest("no command after --")
            return opts, command
        if a not in ("--timeout", "--grace", "--cap", "--tail", "--env", "--cwd", "--report"):
            raise BadRequest("unknown option %r (the command goes after --)" % a[:80])
        if i + 1 >= len(argv):
            raise BadRequest("%s needs a value" % a)
        v = argv[i + 1]
        i += 2
        key = a[2:]
        if key in ("timeout", "grace"):
            try:
                f = float(v)
            except ValueError:
                raise BadRequest("%s %r is not a number of seconds" % (a, v[:40]))
            top = MAX_TIMEOUT if key == "timeout" else MAX_GRACE
            if not (0 <= f <= top):
                raise BadRequest("%s %s: from 0 to %d seconds" % (a, v[:40], top))
            opts[key] = f
        elif key in ("cap", "tail"):
            if not re.match(r"\d{1,12}\Z", v):
                raise BadRequest("%s %r is not a whole number of bytes" % (a, v[:40]))
            n = int(v)
            if n > (MAX_CAP if key == "cap" else MAX_TAIL):
                raise BadRequest("%s %s is over its limit" % (a, v))
            opts[key] = n
        elif key == "env":
            opts["env"] = parse_env(v)
        elif key == "cwd":
            if not v.startswith("/") or "\0" in v:
                raise BadRequest("--cwd must be an absolute path")
            opts["cwd"] = v
        else:
            if not re.match(r"[A-Za-z0-9_-]{1,64}\Z", v):
                raise BadRequest("--report takes a nonce of letters and digits")
            opts["report"] = v
    raise BadRequest("no command: give it after --")


def parse_env(text):
    try:
        spec = json.loads(text)
    except ValueError as e:
        raise BadRequest("--env is not JSON: %s" % e)
    if not isinstance(spec, dict) or set(spec) - {"set", "unset"}:
        raise BadRequest('--env takes {"set": {NAME: VALUE}, "unset": [NAME]}')
    sets = spec.get("set") or {}
    unsets = spec.get("unset") or []
    if not isinstance(sets, dict) or not isinstance(unsets, list):
        raise BadRequest('--env takes {"set": {NAME: VALUE}, "unset": [NAME]}')
    for name in list(sets) + list(unsets):
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise BadRequest("not a variable name: %s" % json.dumps(name)[:80])
    for name, value in sets.items():
        if not isinstance(value, str) or "\0" in value:
            raise BadRequest("the value of %s must be a string without NUL" % name)
    return {"set": sets, "unset": unsets}


def child_env(spec):
    env = dict(os.environ)
    if spec:
        for name in spec["unset"]:
            env.pop(name, None)
        env.update(spec["set"])
    return env


def libc_prctl():
    """prctl from libc, loaded before fork (a child must not dlopen); None where there is none (not Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl
    except Exception:
        return None


def signal_name(sig):
    try:
        return signal.Signals(sig).name[3:]
    except ValueError:
        return str(sig)


class Output(object):
    """One stream of the command (pipe mode): passed on up to the cap, then only its tail kept."""

    def __init__(self, src_fd, dst_fd, cap, tail):
        self.src = src_fd
        self.dst = dst_fd
        self.cap = cap
        self.tail_max = tail
        self.seen = 0
        self.passed = 0
        self.pending = bytearray()
        self.tail = bytearray()
        self.left_out = 0
        self.eof = False

    def take(self, data):
        self.seen += len(data)
        room = self.cap - self.passed
        if room > 0:
            head = data[:room]
            self.pending += head
            self.passed += len(head)
            data = data[room:]
        if data:
            self.left_out += len(data)
            self.tail += data
            if len(self.tail) > self.tail_max:
                cut = len(self.tail) - self.tail_max
                del self.tail[:cut]

    def wants_read(self):
        return not self.eof and len(self.pending) < PENDING_MAX

    def flush_some(self):
        """Writes what it can without blocking; False once the caller's end is gone."""
        while self.pending:
            try:
                n = os.write(self.dst, bytes(self.pending[:READ_CHUNK]))
            except BlockingIOError:
                return True
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.EIO, errno.ECONNRESET):
                    return False
                raise
            del self.pending[:n]
        return True


class Guard(object):
    def __init__(self, opts, command):
        self.opts = opts
        self.command = command
        self.started = time.monotonic()
        self.proc_pid = None
        self.pgid = None
        self.status = None
        self.ended = None
        self.stops = []
        self.stop_at = None
        self.kill_at = None
        self.ints = 0
        self.leftover = 0
        self.flags = []
        self.outputs = []
        self.timed_out = False
        self.caller_left = False

    # signals arrive through a wakeup pipe, so poll() returns for them
    def on_signal(self, sig, _frame):
        self.flags.append(sig)

    def stop(self, why, sig=signal.SIGTERM):
        if self.ended is None:
            self.ended = why
        self.send(sig)
        if sig != signal.SIGINT and self.kill_at is None:
            self.kill_at = time.monotonic() + self.opts["grace"]

    def send(self, sig):
        if self.pgid is None:
            return
        try:
            os.killpg(self.pgid, sig)
            self.stops.append({"signal": signal_name(sig), "atS": round(time.monotonic() - self.started, 3)})
        except ProcessLookupError:
            pass
        except OSError:
            pass

    def group_alive(self):
        return bool(self.left_running()) if PROC else self.pgid is not None and signal_ok(self.pgid)

    def left_running(self):
        """What of the command still runs: its process group, and what the subreaper adopted (not zombies)."""
        if not PROC:
            return []
        me = os.getpid()
        return [p for p, ppid, pgrp in live_processes() if pgrp == self.pgid or (ppid == me and p != self.proc_pid)]

    def reap(self):
        """Reaps every child that ended (the command, and orphans that the subreaper adopted)."""
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.proc_pid:
                self.status = st

    def run(self):
        opts = self.opts
        prctl = libc_prctl()
        if prctl is not None:
            try:
                prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            except Exception:
                pass
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, self.on_signal)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        pipe_mode = opts["cap"] > 0
        pipes = []
        if pipe_mode:
            for dst in (1, 2):
                r, w = os.pipe()
                pipes.append((r, w))
                self.outputs.append(Output(r, dst, opts["cap"], opts["tail"]))
        stdin_fd = 0
        devnull = None
        try:
            if os.isatty(0):
                # A pty's keys belong to the guard's group (Ctrl+C is forwarded below); a background group that read
                # the terminal would be stopped by SIGTTIN instead.
                devnull = os.open(os.devnull, os.O_RDONLY)
                stdin_fd = devnull
        except OSError:
            pass
        guard_pid = os.getpid()
        env = child_env(opts["env"])
        pid = os.fork()
        if pid == 0:  # the command
            try:
                os.setpgid(0, 0)
                if prctl is not None:
                    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                if os.getppid() != guard_pid:
                    os._exit(137)
                for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
                    signal.signal(sig, signal.SIG_DFL)
                signal.set_wakeup_fd(-1)
                if stdin_fd != 0:
                    os.dup2(stdin_fd, 0)
                if pipe_mode:
                    os.dup2(pipes[0][1], 1)
                    os.dup2(pipes[1][1], 2)
                if opts["cwd"]:
                    os.chdir(opts["cwd"])
                os.closerange(3, 65536)
                os.execvpe(self.command[0], self.command, env)
            except OSError as e:
                try:
                    os.write(2, ("known-good: could not start %s: %s\n" % (self.command[0], e.strerror)).encode())
                except OSError:
                    pass
                os._exit(127 if e.errno == errno.ENOENT else 126)
            os._exit(127)
        self.proc_pid = pid
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first, or already exec'd
        self.pgid = pid
        if devnull is not None:
            os.close(devnull)
        for r, w in pipes:
            os.close(w)
            os.set_blocking(r, False)
        if pipe_mode:
            for dst in (1, 2):
                try:
                    os.set_blocking(dst, False)
                except OSError:
                    pass
        deadline = self.started + opts["timeout"] if opts["timeout"] > 0 else None
        poller = select.poll()
        poller.register(wake_r, select.POLLIN)
        # Events 0: poll still reports POLLERR/POLLHUP, which is all that is asked of the caller's ends.
        for fd in (1, 2):
            try:
                poller.register(fd, 0)
            except (OSError, ValueError):
                pass
        registered = {}
        while True:
            self.reap()
            now = time.monotonic()
            for sig in self.flags:
                if sig == signal.SIGCHLD:
                    continue
                if sig == signal.SIGINT and self.ints == 0 and self.ended is None:
                    self.ints += 1
                    self.stop("stopped", signal.SIGINT)
                else:
                    self.stop("stopped")
            self.flags = []
            if deadline is not None and now >= deadline and self.status is None and not self.timed_out:
                self.timed_out = True
                self.ended = None
                self.stop("timeout")
            if self.kill_at is not None and now >= self.kill_at:
                if self.group_alive():
                    self.send(signal.SIGKILL)
                self.kill_at = None
            for out in self.outputs:
                if not out.flush_some():
                    self.caller_gone()
            done_reading = all(o.eof for o in self.outputs)
            if self.status is not None and done_reading:
                break
            if self.status is not None and not done_reading and self.kill_at is None:
                # The command ended; what still holds its pipes is what it left running.
                self.finish_leftovers()
            # What to wait for.
            want = {}
            for out in self.outputs:
                if out.wants_read():
                    want[out.src] = select.POLLIN
                if out.pending:
                    want[out.dst] = select.POLLOUT
            for fd in list(registered):
                if fd not in want and fd not in (1, 2):
                    poller.unregister(fd)
                    del registered[fd]
            for fd, ev in want.items():
                if fd in (1, 2):
                    if not self.caller_left:
                        poller.modify(fd, ev)
                elif registered.get(fd) != ev:
                    if fd in registered:
                        poller.modify(fd, ev)
                    else:
                        poller.register(fd, ev)
                    registered[fd] = ev
            for fd in (1, 2):
                if fd not in want and not self.caller_left:
                    try:
                        poller.modify(fd, 0)
                    except (OSError, ValueError, KeyError):
                        pass
            waits = [1.0]
            if deadline is not None and not self.timed_out:
                waits.append(deadline - now)
            if self.kill_at is not None:
                waits.append(self.kill_at - now)
            wait_ms = max(0, int(min(waits) * 1000) + 1)
            try:
                events = poller.poll(wait_ms)
            except InterruptedError:
                events = []
            for fd, ev in events:
                if fd == wake_r:
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except OSError:
                        pass
                    continue
                if fd in (1, 2):
                    if ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                        self.caller_gone()
                        for gone in (1, 2):
                            try:
                                poller.unregister(gone)
                            except (KeyError, ValueError):
                                pass
                    continue
                for out in self.outputs:
                    if out.src == fd:
                        try:
                            data = os.read(fd, READ_CHUNK)
                        except BlockingIOError:
                            data = None
                        except OSError:
                            data = b""
                        if data == b"":
                            out.eof = True
                            poller.unregister(fd)
                            registered.pop(fd, None)
                        elif data:
                            out.take(data)
        self.finish_leftovers(wait=True)
        return self.conclude()

    def caller_gone(self):
        if self.caller_left:
            return
        self.caller_left = True
        if self.status is None:
            self.ended = "caller-gone"
            self.stop("caller-gone")
        for out in self.outputs:
            out.pending = bytearray()
            out.cap = out.passed  # nothing more can reach the caller

    def finish_leftovers(self, wait=False):
        """After the command ended: what it left running gets TERM, then KILL after the grace."""
        self.reap()
        left = self.left_running() if PROC else ([self.pgid] if self.group_alive() else [])
        if not left:
            return
        self.leftover = max(self.leftover, len(left))
        self.send(signal.SIGTERM)
        for p in left:
            kill_quietly(p, signal.SIGTERM)
        if not wait:
            self.kill_at = time.monotonic() + self.opts["grace"]
            return
        end = time.monotonic() + self.opts["grace"]
        while time.monotonic() < end:
            self.reap()
            if not self.group_alive():
                return
            time.sleep(0.05)
        self.send(signal.SIGKILL)
        for p in self.left_running():
            kill_quietly(p, signal.SIGKILL)
        self.reap()

    def conclude(self):
        st = self.status
        code = None
        sig = None
        if st is not None:
            if os.WIFEXITED(st):
                code = os.WEXITSTATUS(st)
            elif os.WIFSIGNALED(st):
                sig = os.WTERMSIG(st)
        for out in self.outputs:
            out.flush_some()
            if out.left_out:
                self.write_tail(out)
        ended = self.ended or "exited"
        report = {
            "ok": True,
            "ended": ended,
            "exitCode": code,
            "signal": signal_name(sig) if sig else None,
            "stops": self.stops,
            "graceS": self.opts["grace"],
            "timeoutS": self.opts["timeout"] or None,
            "durationS": round(time.monotonic() - self.started, 3),
            "leftover": self.leftover,
        }
        if self.outputs:
            report["bytes"] = {"stdout": self.outputs[0].seen, "stderr": self.outputs[1].seen}
            report["leftOut"] = {"stdout": self.outputs[0].left_out, "stderr": self.outputs[1].left_out}
        if self.opts["report"]:
            self.write_report(report)
        elif ended != "exited":
            # Nobody reads a report (a terminal, `known-good exec`): the stop in words, where the person looks.
            blocking_write(2, ("\nknown-good: %s\n" % end_text(report)).encode())
        return code, sig

    def write_tail(self, out):
        name = "stdout" if out.dst == 1 else "stderr"
        note = "\n[known-good] %d bytes of %s left out (past its %d-byte cap); its last %d bytes follow:\n" % (
            out.left_out,
            name,
            out.cap,
            len(out.tail),
        )
        blocking_write(2, note.encode())
        blocking_write(out.dst, bytes(out.tail))

    def write_report(self, report):
        text = json.dumps(report, sort_keys=True)
        n = self.opts["report"]
        blocking_write(2, ("\n@@KNOWN-GOOD-BEGIN %s@@\n%s\n@@KNOWN-GOOD-END %s@@\n" % (n, text, n)).encode())


PROC = os.path.isdir("/proc/self/task")


def end_text(r):
    """How a stopped command ended, in words (src/core/actions/guard.ts guardEndText says the same)."""
    sent = [s["signal"] for s in r["stops"]]
    if "KILL" in sent:
        stop = "SIGTERM, then SIGKILL %g s later (it was still running)" % r["graceS"]
    elif sent:
        stop = "SIG%s; it ended within the %g s grace" % (sent[0], r["graceS"])
    else:
        stop = "signalled"
    if r["ended"] == "timeout":
        return "stopped at its %g s limit: %s" % (r["timeoutS"], stop)
    if r["ended"] == "caller-gone":
        return "stopped because its caller went away: %s" % stop
    return "stopped on request: %s" % stop


def live_processes():
    """(pid, ppid, pgrp) of every process that is not a zombie, from /proc."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read(1024)
            fields = stat[stat.rindex(b")") + 2:].split()
            if fields[0] in (b"Z", b"X"):
                continue
            found.append((int(name), int(fields[1]), int(fields[2])))
        except (OSError, ValueError, IndexError):
            continue
    return found


def signal_ok(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def kill_quietly(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def blocking_write(fd, data, within=10.0):
    """Writes data, waiting at most `within` seconds for a caller that reads slowly (one gone: dropped)."""
    try:
        os.set_blocking(fd, False)
    except OSError:
        pass
    end = time.monotonic() + within
    p = select.poll()
    p.register(fd, select.POLLOUT)
    while data:
        try:
            n = os.write(fd, data)
            data = data[n:]
            continue
        except BlockingIOError:
            pass
        except OSError:
            return
        left = end - time.monotonic()
        if left <= 0:
            return
        try:
            p.poll(int(left * 1000) + 1)
        except InterruptedError:
            pass


def main(argv):
    try:
        opts, command = parse(argv)
    except BadRequest as e:
        nonce = None
        if "--report" in argv:
            i = argv.index("--report")
            if i + 1 < len(argv) and re.match(r"[A-Za-z0-9_-]{1,64}\Z", argv[i + 1]):
                nonce = argv[i + 1]
        msg = "known-good guard: %s" % e
        sys.stderr.write(msg + "\n")
        if nonce:
            doc = json.dumps({"ok": False, "error": {"code": "bad-args", "message": str(e)}})
            sys.stderr.write("\n@@KNOWN-GOOD-BEGIN %s@@\n%s\n@@KNOWN-GOOD-END %s@@\n" % (nonce, doc, nonce))
        sys.stderr.flush()
        return 2
    code, sig = Guard(opts, command).run()
    if sig is not None:
        # Ended by a signal: end the same way, so the caller sees what it would have seen without the guard.
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ValueError, OSError):
            pass
        signal.set_wakeup_fd(-1)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        return 128 + sig
    return code if code is not None else 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
