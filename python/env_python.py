"""env_snapshot: the interpreter, its installed distributions (importlib.metadata's files, never pip) and torch's
build, read from the installed package's files without importing it."""
import os
import re
import sys

from env_host import _msg

# Libraries a reader looks for first; all the others are in `packages` too.
KEY_PACKAGES = ("torch", "triton", "pytorch-triton", "pytorch-triton-rocm", "numpy", "transformers", "flash-attn",
                "flash-attn-3", "deepspeed", "accelerate", "xformers", "apex", "bitsandbytes", "torchvision",
                "torchaudio", "torchao", "vllm", "peft", "datasets", "tokenizers", "safetensors", "megatron-core",
                "liger-kernel", "transformer-engine", "jax", "jaxlib", "onnx", "onnxruntime", "mpi4py", "wandb")


# ---------------------------------------------------------------------------------------------------- python

def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _headers(text, requires=None):
    """Name and Version from a METADATA/PKG-INFO header, without the email parser (10x cheaper per package); with
    `requires` (a list), the Requires-Dist lines are appended to it."""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line.startswith("Name:") and name is None:
            name = line[5:].strip()
        elif line.startswith("Version:") and version is None:
            version = line[8:].strip()
        elif requires is not None and line.startswith("Requires-Dist:"):
            requires.append(line[14:].strip())
        if name is not None and version is not None and requires is None:
            break
    return name, version


_PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?\s*===?\s*([^,;()\s]+)\s*\)?\s*(;.*)?$")


def exact_pins(requires):
    """The `name==version` requirements that always apply (no `extra ==` marker): the sets a restore or a bisect
    must move together (torch 2.11's `triton==3.6.0`, a plugin pinned to its framework)."""
    out = []
    for req in requires:
        m = _PIN_RE.match(req)
        if not m:
            continue
        marker = m.group(3) or ""
        if "extra" in marker:
            continue
        out.append(normalize(m.group(1)))
    return sorted(set(out))


def _direct_url(info):
    """direct_url.json (PEP 610), as a restore must name it: where the install came from, and how."""
    url = info.get("url", "")
    out = {"url": url}
    if (info.get("dir_info") or {}).get("editable"):
        out["kind"] = "editable"
    elif "vcs_info" in info:
        out["kind"] = "vcs"
        vcs = info.get("vcs_info") or {}
        out["vcs"] = vcs.get("vcs")
        out["commit"] = vcs.get("commit_id")
    elif "archive_info" in info:
        out["kind"] = "archive"
    elif "dir_info" in info:
        out["kind"] = "directory"
    else:
        out["kind"] = "unknown"
    return out


# pip reads these in this order, later ones winning (pip's configuration.py: global, user, site, then the file
# PIP_CONFIG_FILE names, then PIP_* variables).
def _pip_config_files():
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    files = [os.path.join(d, "pip", "pip.conf") for d in xdg_dirs if d] + ["/etc/pip.conf"]
    home = os.path.expanduser("~")
    xdg_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files += [os.path.join(home, ".pip", "pip.conf"), os.path.join(xdg_home, "pip", "pip.conf"),
              os.path.join(sys.prefix, "pip.conf")]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(os.environ["PIP_CONFIG_FILE"])
    return files


def _pip_value(key, value):
    """A pip index setting as pip reads it, from a config file or a PIP_* variable alike."""
    if key == "index-url":
        return value.strip()
    if key == "no-index":
        return value.strip().lower() in ("1", "true", "yes", "on")
    return value.split()


def collect_indexes():
    """Where this interpreter's pip (and uv) would install from: the index, extra indexes and find-links from pip's
    configuration files and variables, and uv's variables. A `pip freeze` does not keep them, and a torch line like
    `2.11.0+cu130` cannot be installed without them."""
    import configparser

    cfg = {"index-url": None, "extra-index-url": [], "find-links": [], "no-index": False}
    sources = []
    for path in _pip_config_files():
        if not os.path.isfile(path):
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read(path)
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        used = False
        for section in ("global", "install", "download"):
            if not parser.has_section(section):
                continue
            for key in ("index-url", "extra-index-url", "find-links", "no-index"):
                if parser.has_option(section, key):
                    cfg[key] = _pip_value(key, parser.get(section, key))
                    used = True
        if used:
            sources.append(path)
    for key in ("index-url", "extra-index-url", "find-links", "no-index"):
        var = "PIP_" + key.upper().replace("-", "_")
        if var in os.environ:
            sources.append("$" + var)
            cfg[key] = _pip_value(key, os.environ[var])
    uv = {}
    for var in ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_FIND_LINKS",
                "UV_NO_INDEX"):
        if var in os.environ:
            uv[var] = os.environ[var]
    return {"indexUrl": cfg["index-url"], "extraIndexUrls": cfg["extra-index-url"], "findLinks": cfg["find-links"],
            "noIndex": cfg["no-index"], "sources": sources, "uv": uv}


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
    installers = {}
    direct = {}
    pins = {}
    for dist in metadata.distributions(path=_search_path()):
        text = None
        try:
            text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
        except Exception:
            text = None
        requires = []
        name, version = _headers(text or "", requires)
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
        pinned = exact_pins(requires)
        if pinned:
            pins[key] = pinned
        try:
            installer = (dist.read_text("INSTALLER") or "").strip()
            if installer:
                installers[key] = installer
        except Exception:
            pass
        try:
            du = dist.read_text("direct_url.json")
            if du:
                info = json.loads(du)
                direct[key] = _direct_url(info)
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
        "installers": dict(sorted(installers.items())),
        "directUrls": dict(sorted(direct.items())),
        "pins": dict(sorted(pins.items())),
        "indexes": _safe(collect_indexes),
    }


def _safe(fn):
    try:
        return fn()
    except Exception as e:  # pip's configuration must not sink the package list
        return {"error": _msg(e)}


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
        if target is None or value is None:
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
