"""Snapshot of the training environment of one interpreter on one machine, in about a second.

Usage: python3 env_snapshot.py [--script GLOB]... [--cache-dir DIR]... [--root DIR]... [--extra-var NAME]... [--deep]
                               [--run DIR]

stdlib only, Python 3.8+.  torch is never imported unless --deep is given: its version, git hash and the CUDA/HIP
it was built with are read from the installed package's files, and every other library comes from the
interpreter's own distribution list (importlib.metadata, never a pip found on PATH).  External tools (nvidia-smi,
nvcc, compilers) and the slow walks (compile caches, script hashes) run in threads side by side.  A part that fails
comes back as ``{"error": "..."}`` and is listed in ``errors``; the rest of the snapshot still comes back.
Secrets never leave the host (kg_redact.redact_*): secret-looking variables, URL passwords and tokens inside any
value become a short hash of the value.

The modules it travels with: env_host (the machine), env_python (interpreter, distributions, torch's build) and
env_tools (nvidia-smi, nvcc, compilers, ldconfig, --deep).  This file holds the environment variables, scripts and
compile caches, and the snapshot's assembly.

Its environment is the one it was started with: Known Good runs it in a new login (a new exec channel, never the
resident helper, whose environment and sys.path are those of the connection's start), so the variables, the
interpreter and its site folders are what a process started now gets.  With --run, the run's training process, if
one runs now, is read too (live_process: /proc/PID/environ, the same families of variables, redacted here): what
ran, beside what the next launch gets.
"""
import glob
import hashlib
import os
import re
import threading
import time

import kg_common
import kg_redact
import live_process
from env_host import _msg, collect_host
from env_python import collect_packages, collect_python, collect_torch
from env_tools import _which, ldconfig_libs, nvcc_version, query_gpus, query_topology, run_deep, tool_first_line

SCHEMA = 1

ENV_PREFIXES = kg_common.SPEED_ENV_PREFIXES
ENV_NAMES = kg_common.SPEED_ENV_NAMES

MAX_SCRIPT_FILES = 500
MAX_HASH_BYTES = 64 * 1024 * 1024
MAX_CACHE_ENTRIES = 500000


def _parse_args(argv):
    p = kg_common.arg_parser("env_snapshot.py", add_help=True)
    p.add_argument("--script", action="append", default=[], metavar="GLOB")
    p.add_argument("--cache-dir", action="append", default=[], metavar="DIR")
    p.add_argument("--root", action="append", default=[], metavar="DIR")
    p.add_argument("--extra-var", action="append", default=[], metavar="NAME")
    p.add_argument("--deep", action="store_true")
    p.add_argument("--run", default=None, metavar="DIR")
    return p.parse_args(argv)


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

def _recorded(name, wanted):
    """The variables a snapshot keeps: the families that move speed, and the ones asked for by name."""
    return name in wanted or name in ENV_NAMES or name.startswith(ENV_PREFIXES)


def collect_env(extra):
    wanted = set(extra)
    out = {}
    for name, value in os.environ.items():
        if not _recorded(name, wanted):
            continue
        out[name] = kg_redact.redact_value(name, value)
    return {"vars": dict(sorted(out.items())), "extraRequested": sorted(wanted),
            "missingExtra": sorted(n for n in wanted if n not in os.environ)}


# A launcher's own name or a Python interpreter: the process that trains, rather than a `tail -f` of its log.
_TRAINER = re.compile(r"^(python[0-9.]*|torchrun|accelerate|deepspeed)$")


def _is_trainer(p):
    names = [os.path.basename(p.get("exe") or "")] + [os.path.basename(a) for a in (p.get("argv") or [])[:1]]
    return any(_TRAINER.match(n) for n in names) or any(
        n.startswith("libtorch") for n in (p.get("libs") or {}))


def collect_live_run(run, extra):
    """The run's training process, if one runs now: its variables of the recorded families (its environment as it
    started: /proc/PID/environ, values redacted by live_process), beside the new login's.  The oldest process that
    looks like a trainer (a Python interpreter, a launcher, or one that mapped libtorch); else the oldest one."""
    wanted = set(extra)
    scanned = live_process.scan(run)
    out = {"path": run, "supported": scanned["supported"], "error": scanned["error"], "scanned": scanned["scanned"],
           "process": None, "others": 0}
    procs = scanned["processes"]
    if not procs:
        return out
    chosen = next((p for p in procs if _is_trainer(p)), procs[0])
    env = chosen.get("env") or {}
    out["process"] = {
        "pid": chosen["pid"],
        "argv": chosen.get("argv") or [],
        "exe": chosen.get("exe"),
        "startTime": chosen.get("startTime"),
        "vars": dict(sorted((k, v) for k, v in env.items() if _recorded(k, wanted))),
        "missingExtra": sorted(n for n in wanted if n not in env),
        "errors": chosen.get("errors") or [],
    }
    out["others"] = len(procs) - 1
    return out


# --------------------------------------------------------------------------------------- scripts and caches

def _hash_file(path, size):
    if size > MAX_HASH_BYTES:
        return None, None, "larger than %s: not hashed" % kg_common.format_bytes(MAX_HASH_BYTES)
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
    for tool in ("gcc", "clang", "cmake", "uv"):
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
    live_run = note("liveRun", part("liveRun", collect_live_run, args.run, args.extra_var)) if args.run else None

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
        "liveRun": live_run,
        "scripts": scripts,
        "caches": cache_list,
        "deepInfo": deep,
        "timings": timings,
        "errors": errors,
    }
    # Variables were redacted by name above; everything else by its text (a URL with a password, a token), never by
    # key: package names like google-auth are not secrets.
    return kg_redact.redact_tree(doc, by_name=False)


if __name__ == "__main__":
    kg_common.run(main)
