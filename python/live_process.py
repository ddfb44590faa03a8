"""The launch facts of a run's training process while it runs, read from /proc (Linux; stdlib only, 3.8+).

A module of what_changed.py. A run that is running now has a process whose working folder is in the run, or that
holds a file of the run open (its log, a checkpoint being written). Its facts are what ran, not what is installed:
the command line and environment it started with (/proc/PID/cmdline, environ; secrets redacted by kg_redact before
they leave the host), the executable, the working folder, and the CUDA libraries it actually loaded
(/proc/PID/maps: libtorch_cuda, libcudnn, libnccl, libcublas, ... with their paths and the version their file name
says).

Bounded and cheap: only processes of the same user are looked at (the owner of /proc/PID), at most MAX_PROCS of them
and MAX_FDS open files each; cmdline, environ and maps are read only for the processes that matched, each at most
MAX_READ bytes; the whole scan stops at TIME_S. /proc files are not regular files (size 0) but never block: they are
read with plain open, never a path from the run itself.
"""
import os
import re
import time

import kg_redact

MAX_PROCS = 500
MAX_FDS = 512
MAX_MATCHED = 8
MAX_READ = 4 * 1024 * 1024
MAX_ENV = 512
MAX_VALUE = 4096
MAX_LIBS = 64
TIME_S = 2.0
# What moves speed among the shared objects a training process maps: torch's own CUDA parts and NVIDIA's libraries.
LIB_NAMES = re.compile(r"^lib(torch_cuda|torch_cpu|torch_python|c10_cuda|cudnn\w*|nccl|cublas|cublasLt|cudart|"
                       r"cufft|cusparse|cusolver|curand|nvrtc|nvJitLink|cupti|cuda|nvidia-ml|triton)[.\-_]")
_SO_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")


def _read_proc(path, limit=MAX_READ):
    with open(path, "rb") as f:  # /proc entries: generated, never a FIFO, size 0 for stat
        return f.read(limit)


def _under(path, run):
    return path == run or path.startswith(run.rstrip("/") + "/")


def _clock():
    try:
        ticks = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        ticks = 100
    boot = None
    try:
        for line in _read_proc("/proc/stat", 1 << 20).decode("ascii", "replace").splitlines():
            if line.startswith("btime "):
                boot = int(line.split()[1])
                break
    except (OSError, ValueError):
        pass
    return ticks, boot


def _stat_fields(pid):
    """(ppid, start time in clock ticks since boot) from /proc/PID/stat (the name in parentheses may hold spaces)."""
    text = _read_proc("/proc/%d/stat" % pid, 65536).decode("utf-8", "replace")
    rest = text[text.rfind(")") + 2:].split()
    return int(rest[1]), int(rest[19])


def _open_files(pid):
    """The absolute paths of the process's open files, at most MAX_FDS looked at (read once, matched to every run)."""
    fd_dir = "/proc/%d/fd" % pid
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return []
    out = []
    for name in names[:MAX_FDS]:
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("/"):
            out.append(target)
    return out


def _libs(pid):
    """The CUDA/torch shared objects the process mapped: file name, path and the version its name carries."""
    out = {}
    try:
        data = _read_proc("/proc/%d/maps" % pid)
    except OSError:
        return None
    for line in data.decode("utf-8", "replace").splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        name = os.path.basename(path)
        if name in out or not LIB_NAMES.match(name):
            continue
        m = _SO_VERSION.search(name)
        out[name] = {"path": path, "version": m.group(1) if m else None}
        if len(out) >= MAX_LIBS:
            break
    return out


def _facts(pid, matched_by, match_path, ticks, boot):
    ppid, start = _stat_fields(pid)
    argv = [a.decode("utf-8", "replace") for a in _read_proc("/proc/%d/cmdline" % pid).split(b"\0")]
    if argv and argv[-1] == "":
        argv.pop()
    env = {}
    errors = []
    try:
        raw = _read_proc("/proc/%d/environ" % pid)
        for item in raw.split(b"\0")[:MAX_ENV]:
            name, sep, value = item.decode("utf-8", "replace").partition("=")
            if sep and name:
                env[name] = kg_redact.redact_value(name, value[:MAX_VALUE])
    except OSError as e:
        errors.append("environ: %s" % (e.strerror or e))
    out = {"pid": pid, "ppid": ppid, "matchedBy": matched_by, "matchPath": match_path,
           "startTime": round(boot + start / float(ticks), 2) if boot is not None else None,
           "argv": kg_redact.redact_argv(argv[:256]), "env": env, "errors": errors}
    for key, link in (("exe", "exe"), ("cwd", "cwd")):
        try:
            out[key] = os.readlink("/proc/%d/%s" % (pid, link))
        except OSError as e:
            out[key] = None
            errors.append("%s: %s" % (link, e.strerror or e))
    out["libs"] = _libs(pid)
    return out


def scan(run, max_procs=MAX_PROCS, deadline=None):
    """The processes of this user that run in ``run`` or hold a file of it open, with their launch facts.

    ``processes``: the matched ones whose parent did not match too (a launcher's workers are its children), oldest
    first; ``scanned``: how many processes were looked at; ``truncated``: more were there than ``max_procs``.
    """
    return scan_runs([run], max_procs, deadline)[0]


def scan_runs(runs, max_procs=MAX_PROCS, deadline=None):
    """``scan`` of several runs in one pass over /proc (a poll of every running run costs one scan, not one a run):
    one result a run, in the order given; ``scanned``, ``truncated`` and ``tookMs`` are the pass's."""
    started = time.monotonic()
    deadline = deadline if deadline is not None else started + TIME_S
    common = {"supported": os.path.isdir("/proc/self/fd"), "scanned": 0, "truncated": False, "error": None}
    if not common["supported"]:
        common["error"] = "no /proc: live processes are read on Linux only"
        return [dict(common, processes=[]) for _ in runs]
    real = [os.path.realpath(r) for r in runs]
    me = os.getuid()
    skip = {os.getpid(), os.getppid()}
    try:
        pids = sorted(int(n) for n in os.listdir("/proc") if n.isdigit())
    except OSError as e:
        common["error"] = "cannot list /proc: %s" % (e.strerror or e)
        return [dict(common, processes=[]) for _ in runs]
    matched = [[] for _ in runs]
    for pid in pids:
        if pid in skip:
            continue
        if common["scanned"] >= max_procs or time.monotonic() > deadline:
            common["truncated"] = True
            break
        try:
            if os.stat("/proc/%d" % pid).st_uid != me:
                continue
        except OSError:
            continue  # gone meanwhile
        common["scanned"] += 1
        try:
            cwd = os.readlink("/proc/%d/cwd" % pid)
        except OSError:
            cwd = None
        left = []
        for i, run in enumerate(real):
            if cwd is not None and _under(cwd, run):
                matched[i].append((pid, "cwd", cwd))
            else:
                left.append(i)
        files = _open_files(pid) if left else []
        for i in left:
            f = next((t for t in files if _under(t, real[i])), None)
            if f is not None:
                matched[i].append((pid, "open-file", f))
    ticks, boot = _clock()
    out = []
    roots = [_roots(found, ticks, boot) for found in matched]
    took = round((time.monotonic() - started) * 1000, 1)
    for found in roots:
        out.append(dict(common, processes=found, tookMs=took))
    return out


def _roots(matched, ticks, boot):
    """The launch facts of the matched processes whose parent did not match, oldest first, workers folded in."""
    facts = []
    for pid, how, path in matched[:MAX_MATCHED * 4]:
        try:
            facts.append(_facts(pid, how, path, ticks, boot))
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile, or not ours to read
    pids_matched = set(f["pid"] for f in facts)
    roots = [f for f in facts if f["ppid"] not in pids_matched]
    roots.sort(key=lambda f: (f["startTime"] is None, f["startTime"] or 0, f["pid"]))
    for r in roots:
        kids = [f for f in facts if f["ppid"] == r["pid"]]
        r["children"] = len(kids)
        # a launcher (torchrun, accelerate launch) maps no CUDA library itself: its workers' libraries are what ran
        for k in kids:
            if k.get("libs") and not any(n.startswith("libtorch_cuda") for n in (r.get("libs") or {})):
                r["libs"] = dict(r.get("libs") or {}, **k["libs"])
                break
    return roots[:MAX_MATCHED]
