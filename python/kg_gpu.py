"""nvidia-smi read and parsed: the GPU facts of one moment, for gpu_health.py (now) and kg_gpu_sampler.py (a timeline).

Runs ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` and ``--query-compute-apps=gpu_uuid,pid,
used_memory,process_name`` (the same format) and reads per GPU: utilisation, SM and memory clocks with their maxima,
power and its limit, temperature, memory, the clock-event (throttle) reasons, the PCIe link's generation and width
against their maxima, uncorrected ECC errors, retired pages and remapped rows; per process: its GPU, PID, user (from
/proc/PID/status's Uid), name, memory and parent PIDs. Field names follow ``nvidia-smi --help-query-gpu``; where a
driver renamed one (``clocks_throttle_reasons.*`` → ``clocks_event_reasons.*``, ``power.draw`` beside
``power.draw.instant``, ``power.limit`` beside ``enforced.power.limit``) both are known, and which this nvidia-smi
takes is read once from its own ``--help-query-gpu`` (or, when that says nothing, from its "is not a valid field to
query" answers). ``[N/A]``, ``[Not Supported]``, ``N/A`` and every other bracketed answer are null.

Bounded: every call of nvidia-smi is killed at its timeout or past MAX_OUTPUT bytes, at most MAX_GPUS GPUs and
MAX_PROCESSES processes are read. stdlib only, Python 3.8+.
"""
import os
import pwd
import re
import selectors
import shutil
import signal
import subprocess
import time

MAX_OUTPUT = 1 << 20
MAX_HELP = 512 * 1024
MAX_GPUS = 64
MAX_PROCESSES = 256
CALL_TIMEOUT_S = 10.0
MAX_ANCESTORS = 8

# The timeline kg_gpu_sampler.py writes beside a launch's records (RUN/.known-good/, or kg_record --home's folder):
# the file written now, the one it replaced at the size cap, and the lock one sampler per run and host holds.
TIMELINE_NAME = "gpu-timeline.jsonl"
ROTATED_NAME = "gpu-timeline.1.jsonl"
LOCK_NAME = "gpu-timeline.lock"

# The clock-event reasons nvidia-smi reports one field each ("Active" / "Not Active"), by their documented names.
REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
           "hw_power_brake_slowdown", "sw_thermal_slowdown", "sync_boost")
REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")

# (key, candidate field names, kind, all): the first candidate this nvidia-smi knows is queried; with `all`, every
# one it knows is, and the first that answers wins (power.draw.instant answers [N/A] on GPUs before Ampere, where
# power.draw is the instant reading). `name` comes last: a comma in it cannot shift the other columns.
GPU_KEYS = (
    ("index", ("index",), "int", False),
    ("uuid", ("uuid",), "str", False),
    ("util", ("utilization.gpu",), "num", False),
    ("smClock", ("clocks.sm", "clocks.current.sm"), "num", False),
    ("smClockMax", ("clocks.max.sm",), "num", False),
    ("memClock", ("clocks.mem", "clocks.current.memory"), "num", False),
    ("memClockMax", ("clocks.max.mem", "clocks.max.memory"), "num", False),
    ("power", ("power.draw.instant", "power.draw"), "num", True),
    ("powerLimit", ("enforced.power.limit", "power.limit"), "num", True),
    ("temp", ("temperature.gpu",), "num", False),
    ("memUsed", ("memory.used",), "num", False),
    ("memTotal", ("memory.total",), "num", False),
    ("pcieGen", ("pcie.link.gen.current", "pcie.link.gen.gpucurrent"), "int", False),
    ("pcieGenMax", ("pcie.link.gen.max", "pcie.link.gen.gpumax"), "int", False),
    ("pcieWidth", ("pcie.link.width.current",), "int", False),
    ("pcieWidthMax", ("pcie.link.width.max",), "int", False),
    ("eccUncorrected", ("ecc.errors.uncorrected.volatile.total",), "int", False),
    ("retiredSbe", ("retired_pages.single_bit_ecc.count", "retired_pages.sbe"), "int", False),
    ("retiredDbe", ("retired_pages.double_bit.count", "retired_pages.dbe"), "int", False),
    ("retiredPending", ("retired_pages.pending",), "yes", False),
    ("remappedCorrectable", ("remapped_rows.correctable",), "int", False),
    ("remappedUncorrectable", ("remapped_rows.uncorrectable",), "int", False),
    ("remappedPending", ("remapped_rows.pending",), "yes", False),
    ("remappedFailure", ("remapped_rows.failure",), "yes", False),
) + tuple(("reason:" + r, tuple(p + r for p in REASON_PREFIXES), "active", False) for r in REASONS) + (
    ("name", ("name",), "str", False),
)
APP_KEYS = (
    ("gpuUuid", ("gpu_uuid",), "str", False),
    ("pid", ("pid",), "int", False),
    ("memMiB", ("used_memory", "used_gpu_memory"), "num", False),
    ("name", ("process_name",), "str", False),
)
# What a sample keeps of a GPU: the rest (uuid, name) is the timeline header's, said once.
STATIC_KEYS = ("index", "uuid", "name", "memTotal")

_INVALID = re.compile(r'Field "([^"]+)" is not a valid field to query')
_QUOTED = re.compile(r'"([A-Za-z0-9_.]+)"')


class SmiError(Exception):
    """nvidia-smi failed or answered what cannot be read: one line, said as it is."""


def find_smi():
    return shutil.which("nvidia-smi")


def null_token(text):
    t = text.strip()
    return t == "" or t in ("N/A", "Not Supported", "Unknown Error") or (t.startswith("[") and t.endswith("]"))


def value_of(kind, text):
    """One CSV cell as its kind; None for every "no value" nvidia-smi prints."""
    if text is None or null_token(text):
        return None
    t = text.strip()
    if kind == "str":
        return t
    if kind == "active":
        low = t.lower()
        return True if low == "active" else False if low in ("not active", "notactive") else None
    if kind == "yes":
        low = t.lower()
        return True if low == "yes" else False if low == "no" else None
    # nounits should leave no unit; a unit left there ("250.00 W") is dropped rather than the value
    m = re.match(r"^[-+]?\d+(\.\d+)?", t)
    if not m:
        return None
    if kind == "int":
        try:
            return int(float(m.group(0)))
        except ValueError:
            return None
    f = float(m.group(0))
    return int(f) if f.is_integer() and m.group(1) is None else f


def run_smi(smi, args, timeout=CALL_TIMEOUT_S, cap=MAX_OUTPUT, stop_fd=None, preexec_fn=None):
    """(exit code, stdout, stderr) of one nvidia-smi call, as text. Killed at `timeout` seconds, past `cap` bytes of
    output, or as soon as `stop_fd` (a pidfd of the launch) is readable: then SmiError. stdin is /dev/null."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    p = subprocess.Popen([smi] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, close_fds=True, preexec_fn=preexec_fn)
    sel = selectors.DefaultSelector()
    out, err = [], []
    size = 0
    why = None
    try:
        assert p.stdout is not None and p.stderr is not None
        sel.register(p.stdout, selectors.EVENT_READ, out)
        sel.register(p.stderr, selectors.EVENT_READ, err)
        if stop_fd is not None:
            sel.register(stop_fd, selectors.EVENT_READ, None)
        end = time.monotonic() + timeout
        open_pipes = 2
        while open_pipes:
            left = end - time.monotonic()
            if left <= 0:
                why = "nvidia-smi did not answer within %g s" % timeout
                break
            events = sel.select(left)
            for key, _ in events:
                if key.data is None:
                    why = "the launch ended"
                    break
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_pipes -= 1
                    continue
                size += len(chunk)
                if size > cap:
                    why = "nvidia-smi answered more than %d bytes" % cap
                    break
                key.data.append(chunk)
            if why:
                break
    finally:
        sel.close()
        if why:
            try:
                p.send_signal(signal.SIGKILL)
            except OSError:
                pass
        for pipe in (p.stdout, p.stderr):
            if pipe is not None:
                pipe.close()
        rc = p.wait()
    if why:
        raise SmiError(why)
    return rc, b"".join(out).decode("utf-8", "replace"), b"".join(err).decode("utf-8", "replace")


def known_fields(smi, **kw):
    """The field names this nvidia-smi documents (`--help-query-gpu` lists each in quotes); None when it says none."""
    try:
        rc, out, _ = run_smi(smi, ["--help-query-gpu"], cap=MAX_HELP, **kw)
    except SmiError:
        return None
    names = set(_QUOTED.findall(out)) if rc == 0 else set()
    return names or None


def choose(keys, known):
    """[(key, field)] to query: per key its first candidate this nvidia-smi knows (every one with `all`); with nothing
    known, each key's first candidate (the query's own answers then weed out the unknown ones)."""
    out = []
    for key, cands, _, every in keys:
        have = [c for c in cands if known is None or c in known]
        if known is None:
            have = list(cands) if every else cands[:1]
        out.extend((key, c) for c in (have if every else have[:1]))
    return out


def _next_candidate(keys, key, field, chosen):
    for k, cands, _, every in keys:
        if k != key or every:
            continue
        rest = cands[cands.index(field) + 1:] if field in cands else ()
        for c in rest:
            if (k, c) not in chosen:
                return c
    return None


def query(smi, what, keys, chosen, **kw):
    """(rows as text lines, the fields that worked) of `--query-<what>`: a field this nvidia-smi calls "not a valid
    field to query" is swapped for the key's next candidate or left out, and the query asked again (at most once a
    field)."""
    chosen = list(chosen)
    for _ in range(len(chosen) + 2):
        if not chosen:
            raise SmiError("nvidia-smi knows none of the fields asked for")
        rc, out, err = run_smi(smi, ["--query-%s=%s" % (what, ",".join(f for _, f in chosen)),
                                     "--format=csv,noheader,nounits"], **kw)
        bad = _INVALID.search(out) or _INVALID.search(err)
        if bad:
            field = bad.group(1)
            at = [i for i, (_, f) in enumerate(chosen) if f == field]
            if not at:
                raise SmiError("nvidia-smi refused field %s, which was not asked for" % field)
            key = chosen[at[0]][0]
            nxt = _next_candidate(keys, key, field, chosen)
            if nxt is None:
                del chosen[at[0]]
            else:
                chosen[at[0]] = (key, nxt)
            continue
        if rc != 0:
            said = (err.strip() or out.strip()).splitlines()
            raise SmiError("nvidia-smi --query-%s: %s" % (what, said[-1][:300] if said else "exit %d" % rc))
        return [line for line in out.splitlines() if line.strip()], chosen
    raise SmiError("nvidia-smi kept refusing fields")


def parse_rows(lines, keys, chosen, limit):
    """Rows as dicts by key. The last column takes the rest of the line (a name may hold commas); a key queried under
    two fields takes the first that answers."""
    kinds = dict((k, kind) for k, _, kind, _ in keys)
    rows = []
    for line in lines[:limit]:
        parts = line.split(",", len(chosen) - 1)
        row = {}
        for i, (key, _) in enumerate(chosen):
            v = value_of(kinds[key], parts[i] if i < len(parts) else None)
            if row.get(key) is None:
                row[key] = v
        rows.append(row)
    return rows


def gpu_reading(row):
    """A GPU as the timeline keeps it: every key (null when not queried or not answered), the reasons as the list of
    those active (null when none could be read)."""
    g = {}
    for key, _, _, _ in GPU_KEYS:
        if not key.startswith("reason:"):
            g[key] = row.get(key)
    flags = [(r, row.get("reason:" + r)) for r in REASONS]
    g["reasons"] = None if all(v is None for _, v in flags) else [r for r, v in flags if v]
    return g


# ---------------------------------------------------------------------------------------------- processes

def _read_small(path, limit=8192):
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _ppid(pid, proc):
    text = _read_small("%s/%d/stat" % (proc, pid), 2048)
    if not text or ")" not in text:
        return None
    rest = text.rsplit(")", 1)[1].split()
    try:
        return int(rest[1])
    except (IndexError, ValueError):
        return None


_USERS = {}


def user_name(uid):
    if uid not in _USERS:
        try:
            _USERS[uid] = pwd.getpwuid(uid).pw_name
        except (KeyError, OverflowError):
            _USERS[uid] = "uid %d" % uid
        if len(_USERS) > 4096:
            _USERS.clear()
    return _USERS[uid]


def process_facts(pid, proc="/proc"):
    """What this host's /proc says of a PID nvidia-smi listed: its user, command name and parents (`seen` false when
    it is not there: a PID of another PID namespace, or gone since)."""
    status = _read_small("%s/%d/status" % (proc, pid))
    if status is None:
        return {"user": None, "comm": None, "ancestors": [], "seen": False}
    uid = None
    comm = None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            try:
                uid = int(line.split()[1])
            except (IndexError, ValueError):
                uid = None
        elif line.startswith("Name:"):
            comm = line[5:].strip()[:64]
    ancestors = []
    p = pid
    for _ in range(MAX_ANCESTORS):
        p = _ppid(p, proc)
        if not p or p in ancestors:
            break
        ancestors.append(p)
        if p == 1:
            break
    return {"user": user_name(uid) if uid is not None else None, "comm": comm, "ancestors": ancestors, "seen": True}


# ---------------------------------------------------------------------------------------------- one moment

class Reader(object):
    """nvidia-smi's fields resolved once (`--help-query-gpu`), then read as often as asked."""

    def __init__(self, smi, proc="/proc", **kw):
        self.smi = smi
        self.proc = proc
        self.kw = kw
        known = known_fields(smi, **kw)
        self.gpu_fields = choose(GPU_KEYS, known)
        # --help-query-gpu lists no compute-apps field: their first names are asked, the answers weed them out
        self.app_fields = choose(APP_KEYS, None)

    def fields(self):
        """Which nvidia-smi field each key was read from (the first, for a key read under two)."""
        out = {}
        for key, field in self.gpu_fields:
            out.setdefault(key, field)
        return out

    def gpus(self):
        lines, self.gpu_fields = query(self.smi, "gpu", GPU_KEYS, self.gpu_fields, **self.kw)
        rows = parse_rows(lines, GPU_KEYS, self.gpu_fields, MAX_GPUS)
        return [gpu_reading(r) for r in rows], max(0, len(lines) - MAX_GPUS)

    def processes(self, by_uuid):
        lines, self.app_fields = query(self.smi, "compute-apps", APP_KEYS, self.app_fields, **self.kw)
        out = []
        for row in parse_rows(lines, APP_KEYS, self.app_fields, MAX_PROCESSES):
            pid = row.get("pid")
            if not isinstance(pid, int) or pid <= 0:
                continue  # "No running processes found", or a row nvidia-smi could not fill
            p = {"gpu": by_uuid.get(row.get("gpuUuid")), "pid": pid, "name": row.get("name"),
                 "memMiB": row.get("memMiB")}
            p.update(process_facts(pid, self.proc))
            out.append(p)
        return out, max(0, len(lines) - MAX_PROCESSES)

    def sample(self):
        """One moment: {t, gpus (every key), processes, [errors]}; a failure of the process query costs that only."""
        t = time.time()
        gpus, more = self.gpus()
        doc = {"t": round(t, 3), "gpus": gpus, "processes": []}
        errors = []
        if more:
            errors.append("%d GPUs past the first %d left out" % (more, MAX_GPUS))
        by_uuid = dict((g["uuid"], g["index"]) for g in gpus if g.get("uuid"))
        try:
            doc["processes"], more = self.processes(by_uuid)
            if more:
                errors.append("%d processes past the first %d left out" % (more, MAX_PROCESSES))
        except SmiError as e:
            errors.append("processes: %s" % e)
        if errors:
            doc["errors"] = errors
        return doc


def split_static(gpus):
    """(what a header says once of each GPU, the readings without it)."""
    static = [dict((k, g.get(k)) for k in STATIC_KEYS) for g in gpus]
    moving = [dict((k, v) for k, v in g.items() if k not in ("uuid", "name")) for g in gpus]
    return static, moving
