"""The real runs under test/fixtures/real/runs/ and regressions/ (scripts/fixtures/real_runs.py, written on the GPU
box), made ready for a test: git keeps neither mtimes nor a nested .git, so `materialize` copies a set to a folder,
turns each run's dot-git back into .git and sets every mtime from the set's mtimes.json."""
import json
import os
import shutil
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.normpath(os.path.join(HERE, "..", "fixtures", "real"))
SETS = ("runs", "regressions")


def set_dir(name):
    return os.path.join(REAL, name)


def run_names(name):
    d = set_dir(name)
    return sorted(n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n, "truth.json")))


def truth(name, run):
    with open(os.path.join(set_dir(name), run, "truth.json")) as f:
        return json.load(f)


# A run's .git and .gitignore would act on the project's own repository: committed under these names.
COMMITTED_AS = {"dot-git": ".git", "dot-gitignore": ".gitignore"}


def real_path(committed):
    """The path as the run wrote it, of a path as committed ('run/dot-git/HEAD' → 'run/.git/HEAD')."""
    parts = committed.split("/")
    if len(parts) >= 2 and parts[1] in COMMITTED_AS:
        parts[1] = COMMITTED_AS[parts[1]]
    return "/".join(parts)


def restore_mtimes(root, manifest):
    for rel in sorted(manifest, key=lambda r: -r.count("/")):  # deepest first: a folder's own time comes last
        p = os.path.join(root, *rel.split("/"))
        if os.path.lexists(p):
            os.utime(p, ns=(manifest[rel], manifest[rel]), follow_symlinks=False)


def materialize(name, dest=None):
    """A copy of set `name` as it was written: .git folders and mtimes back. Returns the copy's path; the data
    paths in the runs' args name /tmp/kg-real-runs/<set>/data/…, so pass that as dest to make them resolve."""
    dest = dest or os.path.join(tempfile.mkdtemp(prefix="kg-real-"), name)
    shutil.copytree(set_dir(name), dest, symlinks=True)
    with open(os.path.join(dest, "mtimes.json")) as f:
        manifest = json.load(f)
    for run in os.listdir(dest):
        for committed, name in COMMITTED_AS.items():
            if os.path.lexists(os.path.join(dest, run, committed)):
                os.rename(os.path.join(dest, run, committed), os.path.join(dest, run, name))
    restore_mtimes(dest, {real_path(k): v for k, v in manifest.items()})
    return dest
