"""The real runs under test/fixtures/real/runs/ and regressions/ (scripts/fixtures/real_runs.py, written on the GPU
box), made ready for a test: git keeps neither mtimes nor a nested .git, so `materialize` copies a set to a folder,
turns each run's dot-git back into .git and sets every mtime from the set's mtimes.json. `read_checkpoint` reads a
stripped torch checkpoint's pickle without torch: each tensor as its storage record says it (location, dtype)."""
import io
import json
import os
import pickle
import shutil
import struct
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.normpath(os.path.join(HERE, "..", "fixtures", "real"))
# The sets committed under test/fixtures/real/ (every folder there with an mtimes.json must be one: a test says so).
# regressions2 joins when its runs, written on the GPU box, are committed.
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


def materialize(name, dest=None, source=None):
    """A copy of set `name` (from `source`, a folder laid out as committed, or else the committed set) as it was
    written: .git folders and mtimes back. Returns the copy's path; the data paths in the runs' args name
    /tmp/kg-real-runs/<set>/data/…, so pass that as dest to make them resolve."""
    dest = dest or os.path.join(tempfile.mkdtemp(prefix="kg-real-"), name)
    shutil.copytree(source or set_dir(name), dest, symlinks=True)
    with open(os.path.join(dest, "mtimes.json")) as f:
        manifest = json.load(f)
    for run in os.listdir(dest):
        for committed, name in COMMITTED_AS.items():
            if os.path.lexists(os.path.join(dest, run, committed)):
                os.rename(os.path.join(dest, run, committed), os.path.join(dest, run, name))
    restore_mtimes(dest, {real_path(k): v for k, v in manifest.items()})
    return dest


class StoredTensor(object):
    """A tensor as a checkpoint's pickle records it (torch._utils._rebuild_tensor_v2's arguments): its storage's key
    in the archive, location ('cpu', 'cuda:0'), storage type (FloatStorage …) and element count, and its size."""

    def __init__(self, storage, offset, size, stride, *rest):
        _, storage_type, self.key, self.location, self.numel = storage
        self.storage_type = getattr(storage_type, "name", repr(storage_type))
        self.size = tuple(size)


class _Stub(object):
    """Any other global of the pickle (argparse.Namespace, torch.device, a dtype): kept, never run."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state


class _Dict(dict):
    """collections.OrderedDict, which a state_dict is; BUILD sets its _metadata."""


def read_checkpoint(path):
    """The object tree of a torch zip checkpoint, every tensor a StoredTensor, read without torch and without running
    anything the pickle names; and a function giving a 0-dim float32 tensor's value from its storage record."""
    with zipfile.ZipFile(path) as archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl")][0]
        prefix = pkl[:-len("data.pkl")] + "data/"
        records = {n[len(prefix):]: archive.read(n) for n in archive.namelist() if n.startswith(prefix)}
        data = archive.read(pkl)

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
                return StoredTensor
            if (module, name) == ("collections", "OrderedDict"):
                return _Dict
            return type(name, (_Stub,), {"name": name, "module": module})

        def persistent_load(self, pid):
            return tuple(pid)

    obj = Unpickler(io.BytesIO(data)).load()

    def value(t):
        assert t.storage_type == "FloatStorage" and t.numel == 1 and t.size == (), vars(t)
        return struct.unpack("<f", records[t.key])[0]

    return obj, value
