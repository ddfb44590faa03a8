"""List candidate Python interpreters on this machine, with versions and whether each has torch.

Usage: python3 find_pythons.py [EXTRA_PATH…]

stdlib only.  torch's version is read from its installed metadata (dist-info) without importing torch, so the
probe stays fast on a box where `import torch` takes seconds.
"""
import glob
import json
import os
import subprocess
import sys

import kg_common

# Asked of each candidate interpreter: its version, prefix and torch's version without importing torch.
_QUERY = r"""
import json, sys
try:
    from importlib import metadata as md
except ImportError:
    md = None
torch = None
if md is not None:
    try:
        torch = md.version("torch")
    except Exception:
        torch = None
print(json.dumps({"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3],
                  "prefix": sys.prefix, "venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
                  "torch": torch}))
"""


def _candidates(extra):
    seen = []
    names = ("python3", "python")
    for d in os.environ.get("PATH", "").split(os.pathsep):
        for n in names:
            seen.append(os.path.join(d, n))
    seen.append(sys.executable)
    seen += ["/usr/bin/python3", "/usr/local/bin/python3"]
    home = os.path.expanduser("~")
    patterns = [
        home + "/venv/bin/python3", home + "/.venv/bin/python3", home + "/*/venv/bin/python3",
        home + "/*/.venv/bin/python3", "/root/venv/bin/python3", "/opt/*/.venv/bin/python3",
        "/opt/*/venv/bin/python3", "/opt/conda/bin/python3", "/opt/conda/envs/*/bin/python3",
        home + "/miniconda3/bin/python3", home + "/miniconda3/envs/*/bin/python3",
        home + "/anaconda3/bin/python3", home + "/anaconda3/envs/*/bin/python3",
        home + "/.pyenv/versions/*/bin/python3", "/workspace/*/.venv/bin/python3", "/workspace/.venv/bin/python3",
    ]
    for p in patterns:
        seen += sorted(glob.glob(p))
    seen += list(extra)
    out = []
    real = set()
    for p in seen:
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            continue
        key = os.path.realpath(p)
        # A venv's python links to its base interpreter but has its own packages: keep both unless the same path.
        ident = (key, os.path.dirname(os.path.dirname(os.path.abspath(p))))
        if ident in real:
            continue
        real.add(ident)
        out.append(p)
    return out


def main(argv):
    found = []
    for path in _candidates(argv):
        try:
            r = subprocess.run([path, "-c", _QUERY], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=15,
                               preexec_fn=kg_common.lift_limits)
            info = json.loads(r.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
            info["path"] = path
            info["error"] = None
        except Exception as e:  # a broken interpreter is listed with its error, not dropped
            info = {"path": path, "executable": path, "version": None, "prefix": None, "venv": False,
                    "torch": None, "error": "%s: %s" % (type(e).__name__, e)}
        found.append(info)
    return {"current": kg_common.interpreter(), "candidates": found}


if __name__ == "__main__":
    kg_common.run(main)
