"""A request's child in the resident helper (stdlib only, Python 3.8+, Linux/macOS): a module of kg_helper.py.

The child puts itself in its own process group, executes the probe module afresh in its own memory with
``__name__`` ``kg_probe_<name>``, applies the probe's limits and writes its answer to a pipe (kg_frame's HEAD, then
the answer; then the probe's state).  A spare is such a child forked before its request arrived: it has already
executed the last request's probe module and its modules (compiled once, in the helper), applied its limits and
walked the answer's path once with made-up data, and waits for its request on a pipe.  A request of another probe
makes it forget that (sys.modules, finder, limits) and execute its own.  ``child`` and ``spare`` end the process
with ``os._exit``: nothing returns to the helper's loop.
"""
import gc
import json
import marshal
import os
import signal
import sys
import time
import types

import kg_common
from kg_frame import DIRECT_EXIT, HEAD, PIPE_BUF, STATE_BYTES, STATE_HEAD, plain, send_direct, timing, write_all

_PR_SET_PDEATHSIG = 1
# Where the helper's command line lies in its memory, (address, size): what ps shows (/proc/PID/cmdline). Found once
# in the helper (``init_title``); a forked child has it at the same address in memory of its own, and names itself.
_title = None


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


def child_setup(helper, close):
    """A forked child's first steps: its own process group, default signals, none of the parent's descriptors.
    Returns a descriptor of the client's channel where the child may answer on it itself (kg_frame.send_direct:
    not inherited by what the probe runs), else None."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    die_with_parent(helper.prctl, helper.pid)
    # The parent's descriptors are not ours: its selector, the other requests' pipes, the spare's, the channel.
    fds = list(close) + list(helper.wake_fds) + [j.rfd for j in helper.running.values() if j.rfd is not None]
    for sp in helper.spares:
        fds += list(sp[1:3])
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
    chan = os.dup(1) if helper.direct else None
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
    return chan


def child(helper, job, code, state, rfd, wfd):
    """Runs one request in this forked process and leaves with os._exit: never returns to the loop."""
    try:
        chan = child_setup(helper, [rfd])
        # Not "known-good helper" twice in ps (a probe that keeps state, metrics_reduce, runs in such a child).
        set_title("known-good request", b"kg-request")
    except BaseException:  # noqa: BLE001
        os._exit(70)
    _run(job.rid, job.name, job.args, code, job.mods, state, wfd, chan=chan, stamped=job.stamped())


def spare(helper, ctl_r, ctl_w, rfd, wfd, prep, parent=None, chan=None):
    """A child forked ahead of need: set up, and the last request's probe ``prep`` (name, code, modules) executed
    and its limits applied, it waits for its request on ``ctl_r``: ("p", rid, args, stamped) for the probe it
    prepared, ("f", rid, name, args, code, modules, stamped) for another (``stamped``: Job.stamped). ``helper`` is
    None when the zygote forked it: set up already, it dies with its ``parent`` (prctl, the zygote's pid) and
    answers on the zygote's ``chan``."""
    try:
        if helper is not None:
            chan = child_setup(helper, [ctl_w, rfd])
        else:
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
            if parent is not None:
                die_with_parent(*parent)
        helper = None
        set_title("known-good spare", b"kg-spare")
        ready = _prepare(*prep) if prep is not None else None
        _rehearse()
        # What the spare made ready is never collected during the request: a collection would walk (and write to)
        # those objects' pages, each write a copy-on-write fault on the request's time.
        gc.freeze()
        chunks = []
        while True:
            c = os.read(ctl_r, 1 << 16)
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
            _run(msg[1], name, msg[2], code, mods, None, wfd, ready[0], chan, msg[3])
        # Its module failed to execute ahead: executed again, the failure is this request's answer.
        _run(msg[1], name, msg[2], code, mods, None, wfd, None, chan, msg[3])
    if ready is not None:
        _unprepare(ready)
    _run(msg[1], msg[2], msg[3], msg[4], msg[5], None, wfd, None, chan, msg[6])


def _rehearse():
    """Walks the answer's path once (envelope, footprint, JSON) with made-up data, before the request: the pages it
    touches are copied (a fault each, 2-10 us) here rather than on the request's time. Nothing of a request is in it."""
    try:
        kg_common.call_probe(lambda argv: {"a": [1, 2.5, "x", None, True, {"b": "c"}]}, [])
        kg_common.interpreter()
        marshal.loads(marshal.dumps(("p", 1, ["x"], None)))
        HEAD.pack(1, False, False, 0.0, 0.0, 0.0, 0.0, time.perf_counter())
    except Exception:  # noqa: BLE001 - only a head start
        pass


def _load(name, code, mods):
    """Executes probe ``name``'s module (its modules importable) and applies its limits: (module, main, limits)."""
    if mods:
        sys.modules["kg_modules"].install(mods)
    mod = types.ModuleType("kg_probe_" + name)
    mod.__file__ = name + ".py"
    sys.modules[mod.__name__] = mod
    exec(code, mod.__dict__)
    main = mod.main
    limits = dict(kg_common.probe_limits(main))
    if limits.get("memory") is not None:
        # The probe's own allowance, on top of what this process is at fork.
        limits["memory"] += _data_bytes()
    kg_common.apply_process_limits(limits)
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


def _run(rid, name, args, code, mods, state, wfd, loaded=None, chan=None, stamped=None):
    """Runs one request in this child (its module executed already when ``loaded``) and leaves with os._exit:
    never returns to the loop. The answer goes on the client's channel ``chan`` itself where it can
    (kg_frame.send_direct), else through ``wfd`` to the helper, which sends it."""
    status = 70
    t_got = time.perf_counter()
    t_exec = t_ready = t_ran = t_got
    try:
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
            text = kg_common.call_probe(main, args, limits)[1]
            t_ran = time.perf_counter()
            # The answer is all this process holds now: the bytes to send, made once.
            body = text.encode("ascii")
            text = None
        except SystemExit as e:
            body = kg_common.dumps(kg_common.envelope_error("%s exited (%s)" % (name, e.code), "exit")).encode("ascii")
        except MemoryError:
            text = body = None
            doc = kg_common.envelope_error(str(kg_common.LimitError("memory", name)), "limit-memory")
            # How close to the memory limit the answer came is what the footprint tells: kept here too (issue 24)
            doc["footprint"] = kg_common.footprint()
            body = kg_common.dumps(doc).encode("ascii")
            doc = None
        except BaseException as e:  # noqa: BLE001 - every request is answered
            doc = kg_common.envelope_error("%s: %s" % (type(e).__name__, e), "internal")
            body = kg_common.dumps(doc).encode("ascii")
            doc = None
        # {"id": N, + the envelope without its opening brace, written from the one copy.
        prefix = ('{"id": %s, ' % json.dumps(rid)).encode("ascii")
        get = getattr(mod, "KG_STATE_EXPORT", None)
        stamps = (t_got, max(t_exec, t_got), max(t_ready, t_exec), max(t_ran, t_ready), time.perf_counter())
        sent = False
        # A probe that keeps state answers through the helper: the helper must know of the state coming before the
        # client can ask again (the next request of that probe waits for it).
        if chan is not None and not callable(get) and len(prefix) + len(body) <= PIPE_BUF:
            line = prefix + body[1:]
            if stamped is not None and line.endswith(b"}"):
                line = line[:-1] + b', "timing": ' + timing(stamped, stamps, stamps[4], True).encode("ascii") + b"}"
            sent = send_direct(chan, line + b"\n")
        if not sent:
            write_all(wfd, HEAD.pack(len(prefix) + len(body) - 1, callable(get), False, *stamps) + prefix)
            write_all(wfd, memoryview(body)[1:])
        body = None
        # Sent on the channel (only a probe that keeps no state is): no frame, the exit status tells the helper.
        status = DIRECT_EXIT if sent else 0
        if sent and not callable(get):
            # Answered (and no state to hand over): what is left, its exit and its memory freed (0.2-0.5 ms of CPU
            # for an interpreter of 15 MB), yields to the next request's process and the helper, which it would
            # otherwise race on a small host. Lowering one's own priority needs no privilege.
            try:
                os.nice(19)
            except OSError:
                pass
        if callable(get):
            try:
                kept = get()
                if kept is None:
                    write_all(wfd, STATE_HEAD.pack(b"D", 0))
                elif plain(kept):
                    blob = marshal.dumps(kept)  # pyright: ignore[reportArgumentType] (checked plain above)
                    if len(blob) <= STATE_BYTES:
                        write_all(wfd, STATE_HEAD.pack(b"S", len(blob)) + blob)
                    else:
                        sys.stderr.write("kg_helper: %s state of %d bytes not kept\n" % (name, len(blob)))
                        write_all(wfd, STATE_HEAD.pack(b"D", 0))
                else:
                    sys.stderr.write("kg_helper: %s state is not plain data: not kept\n" % (name,))
                    write_all(wfd, STATE_HEAD.pack(b"D", 0))
            except Exception as e:  # noqa: BLE001 - what was kept before stays
                sys.stderr.write("kg_helper: %s state not kept: %s\n" % (name, e))
                write_all(wfd, STATE_HEAD.pack(b"N", 0))
    except BaseException:  # noqa: BLE001 - the parent answers a child that did not
        pass
    finally:
        try:
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(status)


def init_title():
    """Linux: finds this process's command line in its memory (arg_start, arg_end of /proc/self/stat) and checks it
    holds what /proc/self/cmdline says before anything is ever written there; ``set_title`` then names the helper and
    the processes it makes, so that a host's owner reading ps sees "known-good helper", "known-good spare" rather
    than a python3 -c of the loader's text. Elsewhere (or if anything does not match) names stay as they are."""
    global _title
    _title = None
    if not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # Fields 48 and 49 (Linux 3.5+); those after the name are counted from field 3.
        start, end = int(fields[45]), int(fields[46])
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read()
        if not 0 < start < end or end - start > 1 << 16:
            return
        # Through /proc/self/mem, not a pointer: an address that is not what it should be is an error, not a crash.
        fd = os.open("/proc/self/mem", os.O_RDONLY)
        try:
            if os.pread(fd, end - start, start) == cmdline:
                _title = (start, end - start)
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        _title = None


def set_title(title, comm):
    """Names this process in ps: ``title`` (str) as its command line, ``comm`` (bytes, at most 15) as its name (top,
    ps -e). Four system calls; nothing where init_title found no place to write."""
    if _title is None:
        return
    start, size = _title
    data = title.encode("ascii", "replace")[:size - 1]
    try:
        # The whole area rewritten, its last byte a NUL: the kernel then shows it as one argument, the rest empty.
        fd = os.open("/proc/self/mem", os.O_WRONLY)
        try:
            os.pwrite(fd, data + b"\0" * (size - len(data)), start)
        finally:
            os.close(fd)
        fd = os.open("/proc/self/comm", os.O_WRONLY)
        try:
            os.write(fd, comm)
        finally:
            os.close(fd)
    except OSError:
        pass


def prctl_fn():
    """libc's prctl on Linux (looked up once, in the parent), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:  # noqa: BLE001
        return None


def die_with_parent(prctl, parent):
    """Linux: this child gets SIGKILL when the helper dies (even by SIGKILL), so no request outlives it."""
    if prctl is None:
        return
    try:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001
        return
    if os.getppid() != parent:
        os._exit(71)
