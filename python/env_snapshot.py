"""Snapshot of the training environment of one interpreter on one machine, in about a second.

Usage: python3 env_snapshot.py [--script GLOB]... [--cache-dir DIR]... [--root DIR]... [--extra-var NAME]... [--deep]

stdlib only, Python 3.8+.  torch is never imported unless --deep is given: its version, git hash and the CUDA/HIP
it was built with are read from the installed package's files, and every other library comes from the
interpreter's own distribution list (importlib.metadata, never a pip found on PATH).  External tools (nvidia-smi,
nvcc, compilers) and the slow walks (compile caches, script hashes) run in threads side by side.  A part that fails
comes back as ``{"error": "..."}`` and is listed in ``errors``; the rest of the snapshot still comes back.
Secrets never leave the host (kg_common.redact_*): secret-looking variables, URL passwords and tokens inside any
value become a short hash of the value.
"""
import csv
import glob
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import kg_common

SCHEMA = 1

ENV_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "OMP_", "MKL_", "HF_", "WANDB_")
ENV_NAMES = ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH")

# The brief's nvidia-smi fields, then extras used when the driver knows them: the link's current PCIe generation
# drops at idle on many boards, so the maximum is what a baseline compares.
GPU_FIELDS = ("name", "driver_version", "memory.total", "clocks.max.sm", "clocks.max.mem", "power.limit",
              "persistence_mode", "compute_mode", "pcie.link.gen.current", "pcie.link.width.current", "uuid")
GPU_EXTRA_FIELDS = ("pcie.link.gen.max", "pcie.link.width.max", "pci.bus_id", "vbios_version")
GPU_NUMERIC = {"memory.total": int, "clocks.max.sm": int, "clocks.max.mem": int, "power.limit": float,
               "pcie.link.gen.current": int, "pcie.link.width.current": int, "pcie.link.gen.max": int,
               "pcie.link.width.max": int}

# Libraries a reader looks for first; all the others are in `packages` too.
KEY_PACKAGES = ("torch", "triton", "pytorch-triton", "pytorch-triton-rocm", "numpy", "transformers", "flash-attn",
                "flash-attn-3", "deepspeed", "accelerate", "xformers", "apex", "bitsandbytes", "torchvision",
                "torchaudio", "torchao", "vllm", "peft", "datasets", "tokenizers", "safetensors", "megatron-core",
                "liger-kernel", "transformer-engine", "jax", "jaxlib", "onnx", "onnxruntime", "mpi4py", "wandb")

MAX_SCRIPT_FILES = 500
MAX_HASH_BYTES = 64 * 1024 * 1024
MAX_CACHE_ENTRIES = 500000
TOOL_TIMEOUT_S = 20.0
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


def _parse_args(argv):
    p = kg_common.arg_parser("env_snapshot.py", add_help=True)
    p.add_argument("--script", action="append", default=[], metavar="GLOB")
    p.add_argument("--cache-dir", action="append", default=[], metavar="DIR")
    p.add_argument("--root", action="append", default=[], metavar="DIR")
    p.add_argument("--extra-var", action="append", default=[], metavar="NAME")
    p.add_argument("--deep", action="store_true")
    return p.parse_args(argv)


def _msg(e):
    return "%s: %s" % (type(e).__name__, e)


def _read(path, limit=1 << 20):
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def _run_tool(argv, timeout=TOOL_TIMEOUT_S):
    """(exit code, stdout, stderr) of a short external command; LC_ALL=C so its output parses the same everywhere."""
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    r = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env, preexec_fn=kg_common.lift_limits)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


class _Parallel(object):
    """Runs named jobs in threads; `result(name)` is the job's value or ``{"error": ...}``."""

    def __init__(self):
        self._threads = {}
        self._results = {}

    def start(self, name, fn, *args):
        def body():
            t0 = time.time()
            try:
                value = fn(*args)
            except BaseException as e:  # a part that fails is reported, never fatal
                value = {"error": _msg(e)}
            self._results[name] = (value, time.time() - t0)

        t = threading.Thread(target=body, name="env_snapshot:" + name)
        t.daemon = True
        t.start()
        self._threads[name] = t

    def result(self, name, timings):
        self._threads[name].join()
        value, took = self._results[name]
        timings[name] = round(took * 1000, 1)
        return value


# --------------------------------------------------------------------------------------------- secrets and env

def collect_env(extra):
    wanted = set(extra)
    out = {}
    for name, value in os.environ.items():
        if not (name in wanted or name in ENV_NAMES or name.startswith(ENV_PREFIXES)):
            continue
        out[name] = kg_common.redact_value(name, value)
    return {"vars": dict(sorted(out.items())), "extraRequested": sorted(wanted),
            "missingExtra": sorted(n for n in wanted if n not in os.environ)}


# ------------------------------------------------------------------------------------------------------ host

def _os_release():
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = _read(path)
        except OSError:
            continue
        info = {}
        for line in text.splitlines():
            if "=" not in line or line.startswith("#"):
                continue
            k, v = line.split("=", 1)
            v = v.strip()
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                v = v[1:-1]
            info[k.strip()] = v
        return {"id": info.get("ID"), "versionId": info.get("VERSION_ID"), "prettyName": info.get("PRETTY_NAME")}
    return None


def _cpuinfo():
    model = None
    hypervisor = False
    try:
        with open("/proc/cpuinfo", "rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace")
                if not line.strip():
                    break  # the first processor block says it all
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "cpu model") and model is None:
                    model = value.strip()
                elif key in ("flags", "Features"):
                    hypervisor = "hypervisor" in value.split()
    except OSError:
        pass
    if model is None:
        import platform

        model = platform.processor() or None
    return model, hypervisor


def _meminfo():
    total = avail = None
    try:
        for line in _read("/proc/meminfo").splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
            elif line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return total, avail


def _statvfs(path):
    st = os.statvfs(path)
    return {"totalBytes": st.f_blocks * st.f_frsize, "freeBytes": st.f_bavail * st.f_frsize}


def _cgroup_limits():
    out = {}
    for key, path in (("cpuMax", "/sys/fs/cgroup/cpu.max"), ("memoryMax", "/sys/fs/cgroup/memory.max"),
                      ("memoryLimitV1", "/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            out[key] = _read(path, 4096).strip()
        except OSError:
            pass
    return out


def detect_container():
    """What systemd-detect-virt --container looks at, read directly (no tool needed, works as non-root)."""
    evidence = []
    kind = None

    def found(k, why):
        evidence.append(why)
        return kind or k

    try:
        text = _read("/run/systemd/container", 4096).strip()
        if text:
            kind = found(text, "/run/systemd/container: " + text)
    except OSError:
        pass
    if os.path.exists("/.dockerenv"):
        kind = found("docker", "/.dockerenv exists")
    if os.path.exists("/run/.containerenv"):
        kind = found("podman", "/run/.containerenv exists")
    try:
        raw = open("/proc/1/environ", "rb").read(1 << 16)
        for item in raw.split(b"\0"):
            if item.startswith(b"container="):
                v = item[len(b"container="):].decode("utf-8", "replace")
                kind = found(v, "/proc/1/environ container=" + v)
    except OSError:
        pass  # needs root on most systems
    if os.environ.get("container"):
        kind = found(os.environ["container"], "$container=" + os.environ["container"])
    try:
        cg = _read("/proc/1/cgroup", 1 << 16)
        for word, k in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"), ("lxc", "lxc"),
                        ("containerd", "containerd")):
            if word in cg:
                kind = found(k, "/proc/1/cgroup mentions " + word)
                break
    except OSError:
        pass
    try:
        mi = _read("/proc/self/mountinfo", 1 << 20)
        if "/docker/containers/" in mi:
            kind = found("docker", "/proc/self/mountinfo has /docker/containers/")
        elif "/containers/storage/" in mi:
            kind = found("podman", "/proc/self/mountinfo has /containers/storage/")
    except OSError:
        pass
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        kind = found("kubernetes", "$KUBERNETES_SERVICE_HOST is set")
    if os.path.isdir("/proc/vz") and not os.path.isdir("/proc/bc"):
        kind = found("openvz", "/proc/vz without /proc/bc")
    try:
        if "microsoft" in _read("/proc/sys/kernel/osrelease", 4096).lower():
            kind = found("wsl", "kernel osrelease mentions Microsoft")
    except OSError:
        pass
    return {"detected": kind is not None, "kind": kind, "evidence": evidence}


_DMI_VM = (("kvm", "kvm"), ("qemu", "qemu"), ("vmware", "vmware"), ("virtualbox", "oracle"), ("innotek", "oracle"),
           ("xen", "xen"), ("amazon ec2", "amazon"), ("google", "google"), ("microsoft corporation", "microsoft"),
           ("openstack", "openstack"), ("bochs", "bochs"), ("parallels", "parallels"), ("firecracker", "firecracker"))


def detect_vm(hypervisor_flag):
    evidence = []
    kind = None
    for f in ("sys_vendor", "product_name", "board_vendor", "bios_vendor"):
        try:
            v = _read("/sys/class/dmi/id/" + f, 4096).strip()
        except OSError:
            continue
        low = v.lower()
        for word, k in _DMI_VM:
            if word in low:
                evidence.append("dmi %s: %s" % (f, v))
                kind = kind or k
                break
    if hypervisor_flag:
        evidence.append("cpu flag hypervisor")
        kind = kind or "vm"
    return {"detected": kind is not None, "kind": kind, "evidence": evidence}


def collect_host(roots):
    model, hyper = _cpuinfo()
    total, avail = _meminfo()
    uname = os.uname()
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        shm = _statvfs("/dev/shm")
        shm["path"] = "/dev/shm"
    except OSError as e:
        shm = {"path": "/dev/shm", "error": _msg(e)}
    disks = []
    for root in roots:
        d = {"path": root, "exists": os.path.isdir(root)}
        try:
            d.update(_statvfs(root))
        except OSError as e:
            d["error"] = _msg(e)
        disks.append(d)
    try:
        load = list(os.getloadavg())
    except (AttributeError, OSError):
        load = None
    try:
        uptime = float(_read("/proc/uptime", 256).split()[0])
    except (OSError, ValueError, IndexError):
        uptime = None
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        libc = None
    return {
        "hostname": socket.gethostname(),
        "os": _os_release(),
        "kernel": uname.release,
        "kernelVersion": uname.version,
        "machine": uname.machine,
        "libc": libc,
        "cpu": {"model": model, "count": os.cpu_count(), "affinity": affinity},
        "memory": {"totalBytes": total, "availableBytes": avail},
        "shm": shm,
        "disks": disks,
        "cgroup": _cgroup_limits(),
        "container": detect_container(),
        "virtualization": detect_vm(hyper),
        "load": load,
        "uptimeS": uptime,
    }


# ---------------------------------------------------------------------------------------------------- python

def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _headers(text):
    """Name and Version from a METADATA/PKG-INFO header, without the email parser (10x cheaper per package)."""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line.startswith("Name:") and name is None:
            name = line[5:].strip()
        elif line.startswith("Version:") and version is None:
            version = line[8:].strip()
        if name is not None and version is not None:
            break
    return name, version


def _file_url_path(url):
    if url.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return unquote(urlsplit(url).path)
    return url


def _search_path():
    # The probe's own directory and the helper's cwd are not the training interpreter's site-packages.
    here = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else None
    cwd = os.getcwd()
    return [p for p in sys.path if p not in ("", ".", cwd, here)]


def collect_packages():
    from importlib import metadata

    import json

    packages = {}
    editable = {}
    shadowed = {}
    broken = []
    for dist in metadata.distributions(path=_search_path()):
        text = None
        try:
            text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
        except Exception:
            text = None
        name, version = _headers(text or "")
        where = str(getattr(dist, "_path", "") or "")
        if not name:
            if where:
                broken.append(where)
            continue
        key = normalize(name)
        if key in packages:
            # sys.path order: the first one wins at import time, later ones are only listed.
            shadowed.setdefault(key, []).append({"version": version, "path": where})
            continue
        packages[key] = version
        try:
            du = dist.read_text("direct_url.json")
            if du:
                info = json.loads(du)
                if (info.get("dir_info") or {}).get("editable"):
                    editable[key] = _file_url_path(info.get("url", ""))
        except Exception:
            pass
        if key not in editable and where.endswith(".egg-info") and "site-packages" not in where \
                and "dist-packages" not in where:
            editable[key] = os.path.dirname(where)  # a `setup.py develop` install: the metadata sits in the source
    conda = None
    meta = os.path.join(sys.prefix, "conda-meta")
    if os.path.isdir(meta):
        conda = {}
        for fn in os.listdir(meta):
            if fn.endswith(".json") and fn.count("-") >= 2:
                n, v, b = fn[:-5].rsplit("-", 2)
                conda[n] = v + " " + b
        conda = dict(sorted(conda.items()))
    key_found = {}
    for k in KEY_PACKAGES:
        if k in packages:
            key_found[k] = packages[k]
    for k in sorted(packages):
        if k.startswith("nvidia-"):
            key_found[k] = packages[k]
    return {
        "count": len(packages),
        "packages": dict(sorted(packages.items())),
        "editable": dict(sorted(editable.items())),
        "shadowed": dict(sorted(shadowed.items())),
        "broken": broken,
        "key": key_found,
        "conda": conda,
    }


def collect_python():
    import platform

    base = getattr(sys, "base_prefix", sys.prefix)
    conda_prefix = os.environ.get("CONDA_PREFIX")
    in_conda = os.path.isdir(os.path.join(sys.prefix, "conda-meta"))
    return {
        "version": "%d.%d.%d" % sys.version_info[:3],
        "fullVersion": sys.version.replace("\n", " "),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "basePrefix": base,
        "venv": sys.prefix != base,
        "conda": {"env": os.environ.get("CONDA_DEFAULT_ENV"), "prefix": sys.prefix} if in_conda else None,
        "condaActivePrefix": conda_prefix,
        "platform": sys.platform,
        "bits": 64 if sys.maxsize > 2 ** 32 else 32,
    }


def read_torch_version_py(path):
    """The assignments of torch/version.py (`__version__ = '2.11.0+cu130'`, `cuda: Optional[str] = '13.0'`)."""
    import ast

    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    values = {}
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        if target is None:
            continue
        try:
            values[target] = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError):
            continue
    return values


def collect_torch(packages):
    import importlib.util

    dist_version = (packages or {}).get("torch")
    spec = None
    err = None
    try:
        spec = importlib.util.find_spec("torch")
    except Exception as e:  # a broken torch on sys.path must not sink the snapshot
        err = _msg(e)
    if spec is None or not spec.submodule_search_locations:
        return {"found": dist_version is not None, "version": dist_version, "location": None, "gitVersion": None,
                "cuda": None, "hip": None, "debug": None, "versionPy": None, "error": err}
    location = list(spec.submodule_search_locations)[0]
    out = {"found": True, "version": dist_version, "location": location, "gitVersion": None, "cuda": None,
           "hip": None, "debug": None, "versionPy": None, "error": None}
    try:
        v = read_torch_version_py(os.path.join(location, "version.py"))
        out["versionPy"] = v.get("__version__")
        out["gitVersion"] = v.get("git_version")
        out["cuda"] = v.get("cuda")
        out["hip"] = v.get("hip")
        out["debug"] = v.get("debug")
        if v.get("xpu") is not None:
            out["xpu"] = v.get("xpu")
        # torch's own string, with its local build (+cu130, +cpu): the wheel's metadata says only 2.11.0, and a
        # cu128 → cu130 swap is exactly the change a user must see.
        if out["versionPy"]:
            out["version"] = out["versionPy"]
        out["distVersion"] = dist_version
    except Exception as e:
        out["error"] = "torch/version.py: " + _msg(e)
    libs = os.path.join(location, "lib")
    try:
        out["bundledLibs"] = sorted(n for n in os.listdir(libs) if re.match(r"lib(cudnn|nccl|cudart|cublas)", n))
    except OSError:
        out["bundledLibs"] = None
    return out


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
        g = {"index": len(gpus)}
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
    t = parse_topology(out)
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


# --------------------------------------------------------------------------------------- scripts and caches

def _hash_file(path, size):
    if size > MAX_HASH_BYTES:
        return None, None, "larger than %d MiB: not hashed" % (MAX_HASH_BYTES >> 20)
    sha = hashlib.sha256()
    try:
        md5 = hashlib.md5(usedforsecurity=False)  # type: ignore[call-arg]
    except TypeError:  # Python < 3.9
        md5 = hashlib.md5()
    except ValueError:  # FIPS mode without md5
        md5 = None
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            sha.update(chunk)
            if md5 is not None:
                md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest() if md5 is not None else None, None


def collect_scripts(patterns):
    files = []
    unmatched = []
    seen = set()
    truncated = False
    for pattern in patterns:
        matched = sorted(glob.glob(os.path.expanduser(pattern), recursive=True))
        matched = [p for p in matched if not os.path.isdir(p)]
        if not matched:
            unmatched.append(pattern)
        for path in matched:
            if path in seen:
                continue
            if len(files) >= MAX_SCRIPT_FILES:
                truncated = True
                break
            seen.add(path)
            entry = {"path": path, "size": None, "mtime": None, "sha256": None, "md5": None, "error": None}
            try:
                st = os.stat(path)
                entry["size"] = st.st_size
                entry["mtime"] = st.st_mtime
                entry["sha256"], entry["md5"], entry["error"] = _hash_file(path, st.st_size)
            except OSError as e:
                entry["error"] = _msg(e)
            files.append(entry)
    files.sort(key=lambda e: e["path"])
    return {"patterns": list(patterns), "files": files, "unmatched": unmatched, "truncated": truncated}


def walk_cache(name, path):
    out = {"name": name, "path": path, "exists": False, "files": None, "bytes": None, "newestMtime": None,
           "oldestMtime": None, "unreadableDirs": 0, "truncated": False, "error": None}
    if not os.path.lexists(path):
        return out
    out["exists"] = True
    if not os.path.isdir(path):
        out["error"] = "not a directory"
        return out
    files = 0
    total = 0
    newest = oldest = None
    stack = [path]
    entries = 0
    first = True
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError as e:
            if first:
                out["error"] = _msg(e)
                return out
            out["unreadableDirs"] += 1
            continue
        first = False
        with it:
            for ent in it:
                entries += 1
                if entries > MAX_CACHE_ENTRIES:
                    out["truncated"] = True
                    stack = []
                    break
                try:
                    if ent.is_dir(follow_symlinks=False):
                        stack.append(ent.path)
                        continue
                    st = ent.stat(follow_symlinks=False)
                except OSError:
                    continue
                files += 1
                total += st.st_size
                m = st.st_mtime
                if newest is None or m > newest:
                    newest = m
                if oldest is None or m < oldest:
                    oldest = m
    out.update({"files": files, "bytes": total, "newestMtime": newest, "oldestMtime": oldest})
    return out




# ------------------------------------------------------------------------------------------------------ main

def main(argv):
    args = _parse_args(argv)
    t0 = time.time()
    captured = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))
    par = _Parallel()
    smi = _which("nvidia-smi")
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    nvcc = _which("nvcc", (os.path.join(cuda_home, "bin"), "/usr/local/cuda/bin"))
    if smi:
        par.start("gpus", query_gpus, smi)
        par.start("topology", query_topology, smi)
    if nvcc:
        par.start("nvcc", nvcc_version, nvcc)
    tools = {}
    for tool in ("gcc", "clang", "cmake"):
        p = _which(tool)
        tools[tool] = p
        if p:
            par.start("tool:" + tool, tool_first_line, p)
    par.start("ldconfig", ldconfig_libs)
    if args.deep:
        par.start("deep", run_deep)
    caches = kg_common.compile_cache_dirs(args.cache_dir)
    for name, path in caches:
        par.start("cache:" + name, walk_cache, name, path)
    par.start("scripts", collect_scripts, args.script)

    errors = []
    timings = {}

    def part(name, fn, *a):
        t = time.time()
        try:
            value = fn(*a)
        except BaseException as e:
            value = {"error": _msg(e)}
        timings[name] = round((time.time() - t) * 1000, 1)
        return value

    def note(name, value):
        if isinstance(value, dict) and value.get("error") and len(value) == 1:
            errors.append({"part": name, "message": value["error"]})
        return value

    host = note("host", part("host", collect_host, args.root))
    python = note("python", part("python", collect_python))
    packages = note("packages", part("packages", collect_packages))
    torch = note("torch", part("torch", collect_torch, packages.get("packages")))
    env = note("env", part("env", collect_env, args.extra_var))

    if smi:
        gpus = {"tool": smi, "status": "ok", "gpus": [], "topology": None, "error": None}
        g = par.result("gpus", timings)
        if isinstance(g, dict):
            gpus["status"] = "error"
            gpus["error"] = g.get("error")
            errors.append({"part": "gpus", "message": g.get("error")})
        else:
            gpus["gpus"] = g
        topo = par.result("topology", timings)
        if isinstance(topo, dict) and topo.get("error") and len(topo) == 1:
            gpus["topologyError"] = topo["error"]
        else:
            gpus["topology"] = topo
    else:
        gpus = {"tool": None, "status": "not found", "gpus": [], "topology": None, "error": None}

    nvcc_info = note("nvcc", par.result("nvcc", timings)) if nvcc else {"found": False, "path": None,
                                                                          "release": None, "version": None,
                                                                          "error": None}
    toolchain = {}
    for tool, p in tools.items():
        if p:
            v = par.result("tool:" + tool, timings)
            toolchain[tool] = v.get("error") if isinstance(v, dict) else v
        else:
            toolchain[tool] = None
    ld = par.result("ldconfig", timings)
    cuda = {"nvcc": nvcc_info, "cudaHome": cuda_home if os.path.isdir(cuda_home) else None,
            "ldconfig": ld if not (isinstance(ld, dict) and "error" in ld) else None}
    deep = note("deep", par.result("deep", timings)) if args.deep else None
    cache_list = []
    for name, path in caches:
        c = par.result("cache:" + name, timings)
        if c.get("error") and len(c) == 1:
            c = {"name": name, "path": path, "exists": os.path.lexists(path), "error": c["error"]}
        cache_list.append(c)
    scripts = note("scripts", par.result("scripts", timings))

    doc = {
        "schema": SCHEMA,
        "capturedAt": captured,
        "tookMs": round((time.time() - t0) * 1000, 1),
        "deep": args.deep,
        "host": host,
        "python": python,
        "packages": packages,
        "torch": torch,
        "cuda": cuda,
        "gpus": gpus,
        "toolchain": toolchain,
        "env": env,
        "scripts": scripts,
        "caches": cache_list,
        "deepInfo": deep,
        "timings": timings,
        "errors": errors,
    }
    # Variables were redacted by name above; everything else by its text (a URL with a password, a token), never by
    # key: package names like google-auth are not secrets.
    return kg_common.redact_tree(doc, by_name=False)


if __name__ == "__main__":
    kg_common.run(main)
