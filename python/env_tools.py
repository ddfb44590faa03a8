"""env_snapshot: the external tools (nvidia-smi's GPUs and topology, nvcc, compilers, ldconfig) and --deep (torch
imported in a separate interpreter)."""
import csv
import os
import re
import shutil
import sys

from env_host import _run_tool

# The brief's nvidia-smi fields, then extras used when the driver knows them: the link's current PCIe generation
# drops at idle on many boards, so the maximum is what a baseline compares.
GPU_FIELDS = ("name", "driver_version", "memory.total", "clocks.max.sm", "clocks.max.mem", "power.limit",
              "persistence_mode", "compute_mode", "pcie.link.gen.current", "pcie.link.width.current", "uuid")
GPU_EXTRA_FIELDS = ("pcie.link.gen.max", "pcie.link.width.max", "pci.bus_id", "vbios_version")
GPU_NUMERIC = {"memory.total": int, "clocks.max.sm": int, "clocks.max.mem": int, "power.limit": float,
               "pcie.link.gen.current": int, "pcie.link.width.current": int, "pcie.link.gen.max": int,
               "pcie.link.width.max": int}
DEEP_TIMEOUT_S = 300.0


# Run by --deep in a separate interpreter, so the resident helper never loads torch or initialises CUDA.
_DEEP_SCRIPT = r"""
import json, sys, time
t0 = time.time()
out = {}
try:
    import torch
    out["importMs"] = round((time.time() - t0) * 1000)
    out["torchVersion"] = str(torch.__version__)
    out["cudaBuild"] = getattr(torch.version, "cuda", None)
    out["hipBuild"] = getattr(torch.version, "hip", None)
    out["cxx11abi"] = bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False))
    try:
        out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception as e:
        out["cudnnError"] = "%s: %s" % (type(e).__name__, e)
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception as e:
        out["ncclError"] = "%s: %s" % (type(e).__name__, e)
    out["cudaAvailable"] = bool(torch.cuda.is_available())
    devices = []
    if out["cudaAvailable"]:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devices.append({"index": i, "name": p.name, "capability": "%d.%d" % (p.major, p.minor),
                            "totalMemoryBytes": int(p.total_memory), "multiProcessors": int(p.multi_processor_count)})
    out["devices"] = devices
    try:
        out["allocatorConfig"] = __import__("os").environ.get("PYTORCH_CUDA_ALLOC_CONF")
    except Exception:
        pass
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
sys.stdout.write("\n@@DEEP@@" + json.dumps(out) + "\n")
"""


# ----------------------------------------------------------------------------------------------------- tools

def _which(name, extra=()):
    p = shutil.which(name)
    if p:
        return p
    for d in extra:
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _na(v):
    v = v.strip()
    if not v or v.startswith("[") or v in ("N/A", "Not Supported"):
        return None
    return v


def parse_gpu_csv(text, fields):
    gpus = []
    for i, row in enumerate(csv.reader(text.splitlines(), skipinitialspace=True)):
        if not row or not "".join(row).strip():
            continue
        g = {"index": len(gpus)}  # type: dict
        for j, f in enumerate(fields):
            raw = _na(row[j]) if j < len(row) else None
            conv = GPU_NUMERIC.get(f)
            if raw is not None and conv is not None:
                try:
                    raw = conv(float(raw)) if conv is int else conv(raw)
                except ValueError:
                    pass
            g[f] = raw
        gpus.append(g)
    return gpus


def parse_topology(text):
    """`nvidia-smi topo -m`: tab-separated matrix, then a legend after a blank line."""
    lines = []
    for line in text.splitlines():
        if not line.strip():
            if lines:
                break
            continue
        lines.append(re.sub(r"\x1b\[[0-9;]*m", "", line))
    if not lines:
        return {"columns": [], "rows": []}
    columns = [c.strip() for c in lines[0].split("\t") if c.strip()]
    rows = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        while cells and cells[-1] == "" and len(cells) > len(columns) + 1:
            cells.pop()
        rows.append({"name": cells[0], "cells": cells[1:]})
    return {"columns": columns, "rows": rows}


def query_gpus(smi):
    fields = GPU_FIELDS + GPU_EXTRA_FIELDS
    rc, out, err = _run_tool([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    if rc != 0 and "valid field" in (out + err):
        fields = GPU_FIELDS  # an older driver that does not know the extras
        rc, out, err = _run_tool([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    if rc != 0:
        raise RuntimeError(((err or out).strip().splitlines() or ["exit code %d" % rc])[0])
    return parse_gpu_csv(out, fields)


def query_topology(smi):
    rc, out, err = _run_tool([smi, "topo", "-m"])
    if rc != 0:
        raise RuntimeError(((err or out).strip().splitlines() or ["exit code %d" % rc])[0])
    t = parse_topology(out)  # type: dict
    t["raw"] = out if len(out) < 20000 else out[:20000]
    return t


def nvcc_version(path):
    rc, out, err = _run_tool([path, "--version"])
    m = re.search(r"release ([0-9.]+), V([0-9.]+)", out)
    return {"found": True, "path": path, "release": m.group(1) if m else None, "version": m.group(2) if m else None,
            "error": None if rc == 0 else (err.strip() or "exit code %d" % rc)}


def tool_first_line(path):
    rc, out, err = _run_tool([path, "--version"])
    text = (out or err).strip().splitlines()
    return text[0].strip() if text else None


def ldconfig_libs():
    ld = _which("ldconfig", ("/sbin", "/usr/sbin"))
    if not ld:
        return None
    rc, out, _ = _run_tool([ld, "-p"])
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(lib(cudnn|nccl|cuda|cudart|nvidia-ml)\.so[.0-9]*)\s", line)
        if m:
            libs.setdefault(m.group(2), set()).add(m.group(1))
    return dict((k, sorted(v)) for k, v in sorted(libs.items()))


def run_deep():
    rc, out, err = _run_tool([sys.executable, "-c", _DEEP_SCRIPT], timeout=DEEP_TIMEOUT_S)
    import json

    idx = out.rfind("\n@@DEEP@@")
    if idx < 0:
        tail = (err.strip().splitlines() or ["exit code %d" % rc])[-1]
        return {"error": "import torch failed: " + tail}
    return json.loads(out[idx + len("\n@@DEEP@@"):].strip())
