"""GPU status right now: name, memory used/total, utilisation, temperature, power, and the processes on each GPU.

    gpu_status.py

Reads ``nvidia-smi --query-gpu`` / ``--query-compute-apps`` (CSV, no units); without nvidia-smi it reports what
/proc/driver/nvidia says (driver present or not).  stdlib only; the table goes to stderr for a person watching,
the JSON result to stdout.
"""
import shutil
import subprocess
import sys

import kg_common

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


def _query(smi, what, fields):
    out = subprocess.run(
        [smi, "--query-%s=%s" % (what, ",".join(fields)), "--format=csv,noheader,nounits"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=30,
        preexec_fn=kg_common.lift_limits,
    )
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
        raise kg_common.ProbeError("nvidia-smi failed: %s" % why)
    rows = []
    for line in out.stdout.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        rows.append(dict((f, _value(f, parts[i] if i < len(parts) else "")) for i, f in enumerate(fields)))
    return rows


def _proc_driver():
    try:
        with open("/proc/driver/nvidia/version") as f:
            return f.readline().strip()
    except OSError:
        return None


def main(argv):
    smi = shutil.which("nvidia-smi")
    result = {"source": None, "driver": _proc_driver(), "gpus": [], "processes": []}
    if not smi:
        result["source"] = "none"
        sys.stderr.write("nvidia-smi not found on PATH%s\n" % (
            "; driver: " + result["driver"] if result["driver"] else "; no NVIDIA driver loaded"))
        return result
    result["source"] = "nvidia-smi"
    gpus = _query(smi, "gpu", GPU_FIELDS)
    try:
        apps = _query(smi, "compute-apps", APP_FIELDS)
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
