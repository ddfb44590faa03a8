"""The GPU timeline of one launch: nvidia-smi sampled every few seconds for as long as the launch runs.

kg_record.py calls start() just before it replaces itself with the training command. start() runs this file in a new
interpreter (isolated, no site) and waits for it; that process opens what it needs while the launch is certain to be
alive (kg_record waits for it): a pidfd of the launch, the run's lock and timeline file (kg_append's rules: a regular
file of the user's own, no link followed, nothing that blocks), answers one line ("ok PATH" or "no WHY") and forks the
sampler, then exits. The sampler is nobody's child (double fork, its own session), holds none of the launch's files
(stdin, stdout and stderr are /dev/null) and runs at nice 10. It writes one JSON line per sample to
``gpu-timeline.jsonl`` beside the launch records (``RUN/.known-good/``, or kg_record --home's folder):

    {"kind": "header", "t", "pid", "samplerPid", "host", "intervalS", "capBytes", "fields", "gpus": [static]}
    {"kind": "sample", "t", "gpus": [readings (kg_gpu)], "processes": [...], "errors"?: [...], "error"?: "..."}
    {"kind": "end", "t", "pid", "why", "samples", "cpuS", "childCpuS"}

It stops when the launch's process exits (the same PID: kg_record execs the command): the pidfd wakes it at once,
an nvidia-smi call running then is killed; without pidfds (Python < 3.9, Linux < 5.3) the PID and its start time are
checked every half second. It also stops after MAX_FAILURES nvidia-smi failures in a row, or when its file cannot be
written, and says why in the end line. One sampler per run folder and host (a lock): a second launch beside the
first samples nothing. Size: each line at most MAX_LINE bytes; past half the cap the file is renamed to
``gpu-timeline.1.jsonl`` (replacing the older one) and a new one begun, so the two hold at most the cap, the newest
samples. stdlib only, Python 3.8+.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

DEFAULT_INTERVAL_S = 5.0
MIN_INTERVAL_S = 0.1
DEFAULT_CAP = 64 << 20
MIN_CAP = 64 << 10
MAX_LINE = 256 << 10
MAX_FAILURES = 5
START_TIMEOUT_S = 10.0
FALLBACK_POLL_S = 0.5
NO_SMI = "no nvidia-smi on this host"


# ------------------------------------------------------------------------------------ kg_record's side

def start(folder, pid, interval=DEFAULT_INTERVAL_S, cap=DEFAULT_CAP, environ=None):
    """Start the sampler of launch `pid` writing into `folder`; {"path", "intervalS", "capBytes"} when it runs, else
    {"path": None, "why": ..., "said": bool (whether the why is worth a line on stderr)}. Never raises."""
    import shutil
    import subprocess

    environ = os.environ if environ is None else environ
    try:
        smi = shutil.which("nvidia-smi", path=environ.get("PATH"))
        if not smi:
            return {"path": None, "why": NO_SMI, "said": False}
        if not sys.executable:
            return {"path": None, "why": "no interpreter path to start the sampler with", "said": True}
        env = {"PATH": environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
        if environ.get("HOME"):
            env["HOME"] = environ["HOME"]
        argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--pid", str(pid), "--dir",
                os.path.abspath(folder), "--interval", repr(float(interval)), "--cap", str(int(cap)), "--smi", smi]
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             close_fds=True, start_new_session=True, env=env, cwd="/")
        try:
            out, _ = p.communicate(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return {"path": None, "why": "the sampler did not start within %g s" % START_TIMEOUT_S, "said": True}
        word, _, rest = out.decode("utf-8", "replace").strip().partition(" ")
        if word == "ok":
            return {"path": rest, "intervalS": float(interval), "capBytes": int(cap)}
        if word == "busy":
            return {"path": None, "why": rest, "said": False}
        return {"path": None, "why": rest or "the sampler exited with %s" % p.returncode, "said": True}
    except Exception as e:  # the launch matters more than its timeline
        return {"path": None, "why": "%s: %s" % (type(e).__name__, e), "said": True}


# ------------------------------------------------------------------------------------ the sampler's side

def start_time(pid):
    """Field 22 of /proc/PID/stat (clock ticks after boot): with the PID, which process it is."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
        return int(text.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class Launch(object):
    """The launched process, watched: its pidfd when the kernel has them, else its PID and start time."""

    def __init__(self, pid):
        self.pid = pid
        self.started = start_time(pid)
        self.fd = None
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                self.fd = pidfd_open(pid)
            except OSError:
                self.fd = None

    def gone(self):
        if self.fd is not None:
            import select

            return bool(select.select([self.fd], [], [], 0)[0])
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        now = start_time(self.pid)
        return self.started is not None and now != self.started

    def wait(self, seconds):
        """Sleep up to `seconds`; True as soon as the launch is gone."""
        import select
        import time

        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return self.gone()
            if self.fd is not None:
                if select.select([self.fd], [], [], left)[0]:
                    return True
                continue
            time.sleep(min(left, FALLBACK_POLL_S))
            if self.gone():
                return True


class Timeline(object):
    """The timeline file, appended one line per write, rotated at half the cap."""

    def __init__(self, folder, cap, fd):
        import kg_gpu

        self.folder = folder
        self.cap = cap
        self.fd = fd
        self.path = os.path.join(folder, kg_gpu.TIMELINE_NAME)
        self.name = kg_gpu.TIMELINE_NAME
        self.rotated = kg_gpu.ROTATED_NAME
        self.header_line = None

    def write(self, doc):
        import json

        # compact, ASCII: characters are bytes, so the cap counts what is on disk
        line = (json.dumps(doc, separators=(",", ":"), default=str) + "\n").encode("ascii")
        if len(line) > MAX_LINE:
            raise OSError("a line of %d bytes, over %d" % (len(line), MAX_LINE))
        if os.fstat(self.fd).st_size + len(line) > self.cap // 2:
            self.rotate()
            if self.header_line is not None:
                self._append(self.header_line)
        self._append(line)
        if doc.get("kind") == "header":
            self.header_line = line
        return len(line)

    def _append(self, line):
        wrote = os.write(self.fd, line)
        if wrote != len(line):
            raise OSError("%d of %d bytes written (disk full?)" % (wrote, len(line)))

    def rotate(self):
        import kg_append

        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        dfd = os.open(self.folder, flags)
        try:
            mine = os.fstat(self.fd)
            there = os.stat(self.name, dir_fd=dfd, follow_symlinks=False)
            if (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
                raise OSError("%s was replaced by another file" % self.path)
            os.rename(self.name, self.rotated, src_dir_fd=dfd, dst_dir_fd=dfd)
        finally:
            os.close(dfd)
        old = self.fd
        self.fd = kg_append.open_record(self.path)
        os.close(old)


def sample_line(s):
    """A sample as the timeline keeps it: the GPUs' static facts left to the header; past MAX_LINE, processes cut."""
    import kg_gpu

    _, gpus = kg_gpu.split_static(s.get("gpus") or [])
    doc = {"kind": "sample", "t": s["t"], "gpus": gpus, "processes": s.get("processes") or []}
    for k in ("errors", "error"):
        if s.get(k):
            doc[k] = s[k]
    return doc


def cpu_times():
    try:
        import resource

        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return round(me.ru_utime + me.ru_stime, 4), round(kids.ru_utime + kids.ru_stime, 4)
    except Exception:
        return None, None


def sample_loop(launch, timeline, smi, interval, cap, host):
    """Samples until the launch ends (or nvidia-smi keeps failing, or the file cannot be written); returns why."""
    import time

    import kg_gpu

    samples = 0
    why = None
    try:
        reader = kg_gpu.Reader(smi, stop_fd=launch.fd)
        header_written = False
        fails = 0
        next_at = time.monotonic()
        while why is None:
            if launch.gone():
                why = "the launch (PID %d) ended" % launch.pid
                break
            try:
                s = reader.sample()
                fails = 0
            except kg_gpu.SmiError as e:
                if launch.gone():
                    why = "the launch (PID %d) ended" % launch.pid
                    break
                fails += 1
                s = {"t": round(time.time(), 3), "gpus": [], "processes": [], "error": str(e)}
                if fails >= MAX_FAILURES:
                    why = "nvidia-smi failed %d times in a row: %s" % (fails, e)
            except OSError as e:
                why = "cannot run %s: %s" % (smi, e.strerror or e)
                break
            if not header_written and s["gpus"]:
                static, _ = kg_gpu.split_static(s["gpus"])
                timeline.write({"kind": "header", "t": s["t"], "pid": launch.pid, "samplerPid": os.getpid(),
                                "host": host, "intervalS": interval, "capBytes": cap, "fields": reader.fields(),
                                "gpus": static})
                header_written = True
            line = sample_line(s)
            while True:
                try:
                    timeline.write(line)
                    break
                except OSError:
                    if not line["processes"]:
                        raise
                    line["processes"] = line["processes"][: len(line["processes"]) // 2]
                    line.setdefault("errors", []).append("processes cut to fit a line of %d bytes" % MAX_LINE)
            samples += 1
            next_at += interval
            now = time.monotonic()
            if next_at < now:  # a slow nvidia-smi: the next sample is due now, not a burst to catch up
                next_at = now
            if launch.wait(next_at - now):
                why = "the launch (PID %d) ended" % launch.pid
    except kg_gpu.SmiError as e:
        why = "the launch (PID %d) ended" % launch.pid if launch.gone() else "nvidia-smi: %s" % e
    except SystemExit:
        why = "the sampler was stopped (SIGTERM)"
    except OSError as e:
        why = "the timeline could not be written: %s" % (e.strerror or e)
    cpu, kids = cpu_times()
    try:
        timeline.write({"kind": "end", "t": round(time.time(), 3), "pid": launch.pid, "why": why or "stopped",
                        "samples": samples, "cpuS": cpu, "childCpuS": kids})
    except OSError:
        pass
    return why


def _arg(argv, name, default=None):
    if name in argv and argv.index(name) + 1 < len(argv):
        return argv[argv.index(name) + 1]
    return default


def _say(text):
    os.write(1, (text.replace("\n", " ") + "\n").encode("utf-8", "replace"))


def main(argv):
    """The process start() runs: opens what it needs while the launch is alive, answers one line, forks."""
    pid = int(_arg(argv, "--pid", "0"))
    folder = _arg(argv, "--dir")
    interval = max(MIN_INTERVAL_S, float(_arg(argv, "--interval", str(DEFAULT_INTERVAL_S))))
    cap = max(MIN_CAP, int(_arg(argv, "--cap", str(DEFAULT_CAP))))
    smi = _arg(argv, "--smi")
    if pid <= 0 or not folder or not smi:
        _say("no the sampler was started without its arguments")
        return 2
    import fcntl

    import kg_append
    import kg_gpu

    launch = Launch(pid)
    if launch.started is None and launch.fd is None:
        _say("no the launch (PID %d) is not there" % pid)
        return 1
    try:
        lock = kg_append.open_record(os.path.join(folder, kg_gpu.LOCK_NAME))
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            _say("busy another launch's sampler is recording this run's GPU timeline on this host")
            return 3
        fd = kg_append.open_record(os.path.join(folder, kg_gpu.TIMELINE_NAME))
    except kg_append.NotRecorded as e:
        _say("no %s" % e)
        return 1
    timeline = Timeline(folder, cap, fd)
    _say("ok %s" % timeline.path)
    if os.fork() > 0:
        os._exit(0)
    # the sampler: nobody's child once its parent exits, holding nothing of the launch's
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        os.close(null)
        os.nice(10)
    except OSError:
        pass
    import signal

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    host = os.uname()[1] if hasattr(os, "uname") else None
    try:
        sample_loop(launch, timeline, smi, interval, cap, host)
    except BaseException:
        pass
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
