"""What the Python tests need from this machine, checked loudly: a missing tool fails the tests that need it, naming
the package, and is never a skip. `npm test` and `.ci/run` install them (scripts/system-packages.txt)."""
import functools
import os
import shutil
import subprocess

# Debian torch here; KG_TORCH_PYTHON points at another torch (a GPU box with torch 2.x) for the same tests.
TORCH_PY = os.environ.get("KG_TORCH_PYTHON", "/usr/bin/python3")


@functools.lru_cache(maxsize=None)
def torch_problem():
    """None when TORCH_PY imports torch, else why not."""
    if not os.path.exists(TORCH_PY):
        return "%s not found" % TORCH_PY
    r = subprocess.run([TORCH_PY, "-c", "import torch"], capture_output=True, text=True)
    if r.returncode == 0:
        return None
    last = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return "%s cannot import torch (%s)" % (TORCH_PY, last)


def git_problem():
    return None if shutil.which("git") else "git not found"


def _requires(problem, fix):
    """Class decorator: the class's tests error out at setUpClass when `problem()` says what is missing."""
    def decorate(cls):
        original = cls.__dict__.get("setUpClass")

        def setUpClass(klass):
            why = problem()
            if why:
                raise RuntimeError("%s: %s" % (why, fix))
            if original is not None:
                original.__func__(klass)

        cls.setUpClass = classmethod(setUpClass)
        return cls
    return decorate


needs_torch = _requires(torch_problem, "install Debian's python3-torch (npm test and .ci/run do), or set "
                                       "KG_TORCH_PYTHON to an interpreter with torch")
needs_git = _requires(git_problem, "install Debian's git")
