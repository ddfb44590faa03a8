"""GPU status right now: name, memory used/total, utilisation, temperature, power, and the processes on each GPU.

    gpu_status.py           the table for a person (Run Probe)
    gpu_status.py --slots   which GPUs a replay may run on: index, uuid, name, use, memory and the processes on each

Reads ``nvidia-smi --query-gpu`` / ``--query-compute-apps`` (CSV, no units); without nvidia-smi it reports what
/proc/driver/nvidia says (driver present or not).  ``--slots`` asks for the six fields and three process fields every
nvidia-smi knows (a field an older driver lacks makes nvidia-smi refuse the whole query) and never fails: no
nvidia-smi, or one that fails, is an answer with no GPUs and why.  Bounded: each call of nvidia-smi is stopped at
SMI_TIMEOUT_S or past SMI_MAX_OUTPUT bytes, at most MAX_GPUS GPUs and MAX_PROCESSES processes are read (the answer
says which limit stopped it).  stdlib only; the table goes to stderr for a person watching, the JSON result to stdout.
"""
import os
import select
import shutil
import subprocess
import sys
import time

import kg_common

SMI_TIMEOUT_S = 20.0
SMI_MAX_OUTPUT = 1 << 20
MAX_GPUS = 256
MAX_PROCESSES = 4096
SLOT_GPU_FIELDS = ("index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total")
SLOT_APP_FIELDS = ("gpu_uuid", "pid", "used_memory")

GPU_FIELDS = (
    "index", "name", "uuid", "memory.used", "memory.total", "utilization.gpu", "temperature.gpu", "power.draw",
    "power.limit", "driver_version", "pci.bus_id",
)
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
INT_FIELDS = ("index", "memory.used", "memory.total", "utilization.gpu", "temperature.gpu", "pid", "used_memory")
FLOAT_FIELDS = ("power.draw", "power.limit")


def _value(field, text):
    text = text.strip()
    if text in ("", "[N/A]", "N/A", "[Not Supported]"):
        return None
    try:
        if field in INT_FIELDS:
            return int(float(text))
        if field in FLOAT_FIELDS:
            return float(text)
    except ValueError:
        return None
    return text


def _smi(smi, what, fields, timeout=SMI_TIMEOUT_S):
    """nvidia-smi's CSV answer as text (whole lines), and whether it was cut at SMI_MAX_OUTPUT; ProbeError when it
    fails or runs past SMI_TIMEOUT_S (then it is killed: a hung driver must not hang the probe). Its stderr is read
    apart (a warning there must not become a row), its last 4 KiB kept for the reason of a failure."""
    cmd = [smi, "--query-%s=%s" % (what, ",".join(fields)), "--format=csv,noheader,nounits"]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=kg_common.lift_limits)
    out_fd = p.stdout.fileno()  # type: ignore[union-attr]
    err_fd = p.stderr.fileno()  # type: ignore[union-attr]
    deadline = time.monotonic() + timeout
    chunks, size, err, over, late = [], 0, b"", False, False
    open_fds = [out_fd, err_fd]
    try:
        while open_fds and not over:
            left = deadline - time.monotonic()
            ready = select.select(open_fds, [], [], left)[0] if left > 0 else []
            if not ready:
                late = True
                break
            for fd in ready:
                b = os.read(fd, 1 << 16)
                if not b:
                    open_fds.remove(fd)
                elif fd == err_fd:
                    err = (err + b)[-4096:]
                else:
                    size += len(b)
                    if size > SMI_MAX_OUTPUT:
                        b = b[:len(b) - (size - SMI_MAX_OUTPUT)]
                        over = True
                    chunks.append(b)
        if not over and not late:
            # both streams ended: it is exiting, give it the time left to say how
            try:
                p.wait(max(deadline - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                late = True
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()  # type: ignore[union-attr]
        p.stderr.close()  # type: ignore[union-attr]
    text = b"".join(chunks).decode("utf-8", "replace")
    if late:
        raise kg_common.ProbeError("nvidia-smi gave no answer within %g s (stopped)" % timeout, "timeout")
    if over:
        return text[:text.rfind("\n") + 1], True
    if p.returncode != 0:
        # nvidia-smi says why on stdout ("NVIDIA-SMI has failed because …"); stderr, when it has anything, comes first
        said = err.decode("utf-8", "replace").strip().splitlines() or text.strip().splitlines()
        raise kg_common.ProbeError("nvidia-smi failed: %s" % (said or ["exit %d" % p.returncode])[-1][:300])
    return text, False


def _rows(text, fields, loose=None, limit=None):
    """Rows of nvidia-smi's CSV; `loose` is the one field that may hold commas (a GPU's name): the fields before it
    are read from the left, those after it from the right."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if limit is not None and len(rows) >= limit:
            break
        parts = [p.strip() for p in line.split(",")]
        if loose is not None and len(parts) > len(fields):
            at = fields.index(loose)
            tail = len(fields) - at - 1
            parts = parts[:at] + [", ".join(parts[at:len(parts) - tail])] + parts[len(parts) - tail:]
        rows.append(dict((f, _value(f, parts[i] if i < len(parts) else "")) for i, f in enumerate(fields)))
    return rows


def _query(smi, what, fields, timeout):
    return _rows(_smi(smi, what, fields, timeout)[0], fields)


def slots(smi, timeout=SMI_TIMEOUT_S):
    """The GPUs a replay may run on, and the processes on each: never an error (no GPUs, and why)."""
    result = {"source": "none", "driver": _proc_driver(), "gpus": [], "processes": [], "error": None,
              "processesError": None, "limited": None}
    if not smi:
        sys.stderr.write("nvidia-smi not found on PATH: no GPU to run on\n")
        return result
    try:
        text, cut = _smi(smi, "gpu", SLOT_GPU_FIELDS, timeout)
    except kg_common.ProbeError as e:
        result["source"] = "failed"
        result["error"] = str(e)
        sys.stderr.write("%s\n" % e)
        return result
    result["source"] = "nvidia-smi"
    gpus = _rows(text, SLOT_GPU_FIELDS, loose="name", limit=MAX_GPUS)
    if cut or sum(1 for x in text.splitlines() if x.strip()) > MAX_GPUS:
        result["limited"] = "read the first %d GPUs only" % len(gpus)
    for g in gpus:
        if g["index"] is None:
            continue
        result["gpus"].append({
            "index": g["index"], "uuid": g["uuid"], "name": g["name"], "utilizationPct": g["utilization.gpu"],
            "memoryUsedMiB": g["memory.used"], "memoryTotalMiB": g["memory.total"],
        })
    try:
        text, cut = _smi(smi, "compute-apps", SLOT_APP_FIELDS, timeout)
    except kg_common.ProbeError as e:
        # which processes hold a GPU is not known: the TS side counts no GPU free on this answer
        result["processesError"] = str(e)
        return result
    apps = _rows(text, SLOT_APP_FIELDS, limit=MAX_PROCESSES)
    if cut or sum(1 for x in text.splitlines() if x.strip()) > MAX_PROCESSES:
        result["limited"] = (result["limited"] + "; " if result["limited"] else "") + (
            "read the first %d processes only" % len(apps))
    by_uuid = dict((g["uuid"], g["index"]) for g in result["gpus"])
    for a in apps:
        result["processes"].append({"gpu": by_uuid.get(a["gpu_uuid"]), "uuid": a["gpu_uuid"], "pid": a["pid"],
                                    "memoryMiB": a["used_memory"]})
    return result


def _proc_driver():
    try:
        with open("/proc/driver/nvidia/version") as f:
            return f.readline().strip()
    except OSError:
        return None


def main(argv):
    parser = kg_common.arg_parser("gpu_status.py")
    parser.add_argument("--slots", action="store_true")
    parser.add_argument("--timeout", type=float, default=SMI_TIMEOUT_S, help="seconds each nvidia-smi call may take")
    args = parser.parse_args(argv)
    if not 0 < args.timeout <= 300:
        raise kg_common.ProbeError("gpu_status: --timeout must be between 0 and 300 seconds", "bad-args")
    smi = shutil.which("nvidia-smi")
    if args.slots:
        return slots(smi, args.timeout)
    result = {"source": None, "driver": _proc_driver(), "gpus": [], "processes": []}
    if not smi:
        result["source"] = "none"
        sys.stderr.write("nvidia-smi not found on PATH%s\n" % (
            "; driver: " + result["driver"] if result["driver"] else "; no NVIDIA driver loaded"))
        return result
    result["source"] = "nvidia-smi"
    gpus = _query(smi, "gpu", GPU_FIELDS, args.timeout)
    try:
        apps = _query(smi, "compute-apps", APP_FIELDS, args.timeout)
    except kg_common.ProbeError:
        apps = []
    by_uuid = dict((g["uuid"], g["index"]) for g in gpus)
    for g in gpus:
        result["gpus"].append({
            "index": g["index"], "name": g["name"], "uuid": g["uuid"], "busId": g["pci.bus_id"],
            "memoryUsedMiB": g["memory.used"], "memoryTotalMiB": g["memory.total"],
            "utilizationPct": g["utilization.gpu"], "temperatureC": g["temperature.gpu"],
            "powerW": g["power.draw"], "powerLimitW": g["power.limit"], "driver": g["driver_version"],
        })
    for a in apps:
        result["processes"].append({
            "gpu": by_uuid.get(a["gpu_uuid"]), "pid": a["pid"], "name": a["process_name"],
            "memoryMiB": a["used_memory"],
        })
    for g in result["gpus"]:
        sys.stderr.write("GPU %s  %-28s %6s / %6s MiB  %4s%%  %4s C  %s W\n" % (
            g["index"], g["name"], g["memoryUsedMiB"], g["memoryTotalMiB"], g["utilizationPct"], g["temperatureC"],
            g["powerW"]))
    for p in result["processes"]:
        sys.stderr.write("  pid %s on GPU %s: %s (%s MiB)\n" % (p["pid"], p["gpu"], p["name"], p["memoryMiB"]))
    if not result["gpus"]:
        sys.stderr.write("nvidia-smi lists no GPU\n")
    return result


if __name__ == "__main__":
    kg_common.run(main)
