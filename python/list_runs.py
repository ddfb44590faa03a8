"""List checkpoint roots: root -> run folders -> checkpoints -> files, in one call.

Usage: python3 list_runs.py ROOT... [--depth N] [--max-entries N] [--signature-only]

stdlib only, Python 3.8+.  One pass of os.scandir per folder, no subprocess.  Every entry carries its name,
path relative to its root ('/'-joined), kind (dir/file/symlink), size in bytes (a checkpoint folder's recursive
total), mtime (epoch seconds), a recognised role and the step number parsed from its name.

Roles: checkpoint (a folder or a standalone file a user would load), weights (a tensor file inside a checkpoint
folder), train-log (train_log*.jsonl), metrics (other *.jsonl), stdout (*stdout*.log), log (*.log, *.out, *.err),
config (*.json, *.yaml, *.yml, *.toml), link (a symlink to a folder, never followed), dir, other.

Each root reports its status distinctly: ok, missing, denied, not-a-directory, empty, no-checkpoints, error.

Names are read as bytes, so names that are not UTF-8 come through: such an entry has ``escaped: true``, its
``name``/``path`` carry U+FFFD in place of the bad bytes, and ``nameB64``/``pathB64`` hold the exact bytes.  Names
with control characters (a newline, an ESC) stay exact: the JSON answer is ASCII with them escaped, and the
extension shows them printable (src/core/runs/format.ts printableName).

A folder of millions of entries is read in one pass keeping at most a few times --max-entries of them (the highest
steps and the first step-less names), and reading stops after kg_common.LIMITS["items"] entries (``omitted`` counts
what was seen and left out; ``scanStopped`` says there may be more).

``--signature-only`` returns per root only a cheap signature (entry count and newest mtime of the root and its
direct sub-folders), so a client can poll and re-list only the roots that changed.
"""
import base64
import os
import re
import stat
import time

import kg_common

# What a non-regular, non-folder entry is (kind "special")
_SPECIAL = {stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFCHR: "char-device", stat.S_IFBLK: "block-device"}

DEFAULT_DEPTH = 3
DEFAULT_MAX_ENTRIES = 5000
# Safety nets so a root pointed at a dataset or / cannot make one call run for minutes.
MAX_TOTAL_ENTRIES = 200000
MAX_SIZE_WALK = 20000

# The step is what orders checkpoints; the keyword says which number in the name it is.
_STEP_RES = [
    re.compile(r"(?:^|[^a-z0-9])(?:global_)?steps?[_\-=]?(\d+)", re.I),
    re.compile(r"(?:^|[^a-z0-9])(?:checkpoint|ckpt|iter|iteration)s?[_\-=]?(\d+)", re.I),
]
_DIGITS_RE = re.compile(r"^(\d+)$")
_ANY_DIGIT_RE = re.compile(r"\d")
_EPOCH_RE = re.compile(r"(?:^|[^a-z0-9])epochs?[_\-=]?(\d+)", re.I)
_DS_RE = re.compile(r"^(?:mp_rank_\d+_model_states\.pt|.*zero_pp_rank_\d+.*optim_states\.pt)$")
_NATURAL_RE = re.compile(r"(\d+)")

_WEIGHT_EXTS = (".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".distcp")
_CONFIG_EXTS = (".json", ".yaml", ".yml", ".toml")
_LOG_EXTS = (".log", ".out", ".err")
_HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
               "pytorch_model.bin.index.json", "adapter_model.safetensors", "adapter_model.bin")
_SPECIAL_NAMES = ("best", "last", "latest", "final", "best_model", "final_model", "best_checkpoint",
                  "last_checkpoint", "latest_checkpoint")


def parse_step(name):
    """(step, epoch) from a file or folder name; None where absent.  `epoch=3-step=1200.ckpt` -> (1200, 3)."""
    if not _ANY_DIGIT_RE.search(name):
        return None, None
    step = None
    for rx in _STEP_RES:
        m = rx.search(name)
        if m:
            step = int(m.group(1))
            break
    if step is None:
        base = name.split(".", 1)[0] if not name.startswith(".") else name
        m = _DIGITS_RE.match(base)
        if m:
            step = int(m.group(1))
    m = _EPOCH_RE.search(name) if step is not None or "poch" in name.lower() else None
    return step, (int(m.group(1)) if m else None)


def natural_key(name):
    parts = _NATURAL_RE.split(name)
    return [(0, int(p), "") if i % 2 else (1, 0, p) for i, p in enumerate(parts)]


# Folders a training stack puts between a run and its checkpoints or logs: Lightning's `<name>/version_N/checkpoints/`,
# accelerate's `checkpoints/checkpoint_N`, the Hugging Face Trainer's TensorBoard `runs/<date>_<host>/`. They do not
# use up --depth (at most EXTRA_LEVELS of them on one path), so the default depth finds checkpoints one folder deeper
# than a plain `step_N/` layout without a deeper walk overall.
_PASS_THROUGH_RE = re.compile(r"^(?:version_\d+|checkpoints|lightning_logs|runs)$")
EXTRA_LEVELS = 3
# Metrics logs by what wrote them: the format tells the reader (python/metrics_reduce.py) how to read it.
_TB_EVENTS_RE = re.compile(r"^events\.out\.tfevents\.")
_ACCELERATE_RE = re.compile(r"^(?:random_states_\d+\.pkl|custom_checkpoint_\d+\.pkl)$")


def metrics_format(lname):
    """The format of a metrics log by its name, or None: jsonl, csv (Lightning's CSVLogger), hf-trainer-state,
    tensorboard."""
    if lname.endswith(".jsonl"):
        return "jsonl"
    if lname == "metrics.csv":
        return "csv"
    if lname == "trainer_state.json":
        return "hf-trainer-state"
    if _TB_EVENTS_RE.match(lname):
        return "tensorboard"
    return None


def file_role(lname):
    if lname.endswith(_WEIGHT_EXTS):
        return "checkpoint"
    if lname.endswith(".jsonl"):
        return "train-log" if lname.startswith("train_log") else "metrics"
    if metrics_format(lname):
        return "metrics"
    if lname.endswith(_LOG_EXTS) or (lname.endswith(".txt") and "stdout" in lname):
        return "stdout" if "stdout" in lname else "log"
    if lname.endswith(_CONFIG_EXTS):
        return "config"
    return "other"


def file_format(lname):
    if lname.endswith(".ckpt"):
        return "lightning"
    if lname.endswith(".safetensors"):
        return "safetensors"
    if lname.endswith(".distcp"):
        return "dcp"
    if lname.endswith(".bin"):
        return "bin"
    return "torch"


def content_format(names, lname):
    """Which checkpoint layout a folder's own file names say it is, or None."""
    if ".metadata" in names and any(n.endswith(".distcp") for n in names):
        return "dcp"
    if "adapter_config.json" in names:
        return "peft"
    if any(_ACCELERATE_RE.match(n) for n in names):
        return "accelerate"
    if "trainer_state.json" in names or ("config.json" in names and any(w in names for w in _HF_WEIGHTS)):
        return "hf"
    if any(_DS_RE.match(n) for n in names):
        return "deepspeed"
    if lname in _SPECIAL_NAMES and any(n.endswith(_WEIGHT_EXTS) for n in names):
        return "weights"
    return None


def name_format(lname):
    if lname.startswith("checkpoint-") or lname.startswith("checkpoint_"):
        return "hf"
    if lname.startswith("global_step"):
        return "deepspeed"
    if lname.startswith("iter_"):
        return "megatron"
    return "step"


def _text(raw):
    """(text, escaped): bytes as UTF-8 text, U+FFFD where they are not UTF-8."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), True


def _b64(raw):
    return base64.b64encode(raw).decode("ascii")


class _Walk(object):
    def __init__(self, depth, max_entries):
        self.depth = depth
        self.max_entries = max_entries
        self.total = 0
        self.files = 0
        self.dirs = 0
        self.checkpoints = 0
        self.omitted = 0
        # Folder path -> pass-through folders on its path (bounded by EXTRA_LEVELS).
        self.passed = {}

    # -- sizes -------------------------------------------------------------------------------------------------
    def du(self, path):
        """(bytes, complete) of everything below path, links to folders not followed, bounded by MAX_SIZE_WALK."""
        total = 0
        seen = 0
        stack = [path]
        while stack:
            p = stack.pop()
            try:
                it = os.scandir(p)
            except OSError:
                return total, False
            with it:
                for e in it:
                    seen += 1
                    if seen > MAX_SIZE_WALK:
                        return total, False
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        elif e.is_symlink():
                            st = e.stat(follow_symlinks=True)
                            if stat.S_ISREG(st.st_mode):
                                total += st.st_size
                        else:
                            total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
        return total, True

    # -- one folder ----------------------------------------------------------------------------------------------
    def _select(self, raw_entries):
        """Cut a huge folder to max_entries: keep the highest steps and the step-less names (logs, configs)."""
        n = len(raw_entries)
        limit = self.limit()
        if n <= limit:
            return raw_entries, 0
        stepped = []
        plain = []
        for item in raw_entries:
            (stepped if item[2][0] is not None else plain).append(item)
        stepped.sort(key=lambda it: -it[2][0])
        plain.sort(key=lambda it: natural_key(it[1]))
        k_plain = min(len(plain), max(limit // 2, limit - len(stepped)))
        k_step = min(len(stepped), limit - k_plain)
        k_plain = min(len(plain), limit - k_step)
        return plain[:k_plain] + stepped[:k_step], n - k_plain - k_step

    def limit(self):
        return min(self.max_entries, MAX_TOTAL_ENTRIES)

    def _prune(self, raw_entries):
        """At most limit() stepped and limit() step-less entries, the ones _select could keep: (kept, left out)."""
        limit = self.limit()
        stepped = [it for it in raw_entries if it[2][0] is not None]
        plain = [it for it in raw_entries if it[2][0] is None]
        stepped.sort(key=lambda it: -it[2][0])
        plain.sort(key=lambda it: natural_key(it[1]))
        kept = plain[:limit] + stepped[:limit]
        return kept, len(raw_entries) - len(kept)

    def scan(self, path, rel_raw, level, extra):
        """(entries below folder `path`, how many were left out, whether reading stopped early); raises OSError.
        Memory stays within a few times limit() entries however large the folder: it is pruned as it is read."""
        raw_entries = []
        pruned = 0
        seen = 0
        stopped = False
        with os.scandir(path) as it:
            for e in it:
                if e.name in OWN_FOLDERS or _not_a_run_folder(e):
                    continue
                seen += 1
                if seen > kg_common.LIMITS["items"]:
                    stopped = True
                    break
                text, _ = _text(e.name)
                raw_entries.append((e, text, parse_step(text)))
                if len(raw_entries) >= 4 * self.limit() + 1024:
                    raw_entries, dropped = self._prune(raw_entries)
                    pruned += dropped
        kept, omitted = self._select(raw_entries)
        omitted += pruned
        room = max(MAX_TOTAL_ENTRIES - self.total, 0)
        if len(kept) > room:
            kept, omitted = kept[:room], omitted + len(kept) - room
        self.omitted += omitted
        self.total += len(kept)
        out = []
        for e, text, parsed in kept:
            child_rel = rel_raw + b"/" + e.name if rel_raw else e.name
            out.append(self.entry(e, text, parsed, child_rel, level + 1, extra))
        if len(out) > 1:
            out.sort(key=lambda x: natural_key(x["name"]))
        return out, omitted, stopped

    def entry(self, e, text, parsed, rel_raw, level, extra):
        lname = text.lower()
        step, epoch = parsed
        rel_text, rel_escaped = _text(rel_raw)
        out = {"name": text, "path": rel_text, "kind": "file", "size": 0, "mtime": None, "role": "other"}
        if rel_escaped:
            out["escaped"] = True
            out["pathB64"] = _b64(rel_raw)
            if _text(e.name)[1]:
                out["nameB64"] = _b64(e.name)
        if step is not None:
            out["step"] = step
        if epoch is not None:
            out["epoch"] = epoch
        try:
            is_link = e.is_symlink()
            is_dir = (not is_link) and e.is_dir(follow_symlinks=False)
            st = e.stat(follow_symlinks=False)
        except OSError as err:
            out["error"] = _why(err)
            return out
        out["mtime"] = round(st.st_mtime, 3)
        if is_link:
            out["kind"] = "symlink"
            out["role"] = "link"
            try:
                out["target"] = _text(os.readlink(e.path))[0]
            except OSError:
                pass
            try:
                st = e.stat(follow_symlinks=True)
            except OSError:
                out["targetKind"] = "missing"
                return out
            out["mtime"] = round(st.st_mtime, 3)
            if stat.S_ISDIR(st.st_mode):
                # Never followed: a link back up would loop, and `latest -> step_690` would count twice.
                out["targetKind"] = "dir"
                return out
            out["targetKind"] = "file"
            # e.g. a Hugging Face snapshot, whose files are links into a blob store: the target is the file.
            is_dir = False
        if not is_dir and not is_link and not stat.S_ISREG(st.st_mode):
            # A FIFO, socket or device: shown as what it is, never taken for a log or a checkpoint (none is read)
            out["kind"] = "special"
            out["special"] = _SPECIAL.get(stat.S_IFMT(st.st_mode), "other")
            return out
        if not is_dir:
            out["size"] = st.st_size
            out["role"] = file_role(lname)
            if out["role"] == "checkpoint":
                out["format"] = file_format(lname)
            elif out["role"] in ("metrics", "train-log"):
                out["format"] = metrics_format(lname)
            self.files += 1
            return out
        out["kind"] = "dir"
        out["role"] = "dir"
        self.dirs += 1
        self.fill_dir(out, e.path, rel_raw, level, extra, lname, step)
        return out

    def fill_dir(self, out, path, rel_raw, level, extra, lname, step):
        """Lists a folder (to --depth; a folder named like a checkpoint one level past it) and decides its role."""
        named_checkpoint = step is not None and not _DIGITS_RE.match(lname)
        parent_passed = self.passed.get(rel_raw.rsplit(b"/", 1)[0], 0)
        if _PASS_THROUGH_RE.match(lname) and level > 0 and parent_passed < EXTRA_LEVELS:
            # Lightning's version_N, checkpoints/: listed as if one level up (see _PASS_THROUGH_RE).
            self.passed[rel_raw] = self.passed.get(rel_raw.rsplit(b"/", 1)[0], 0) + 1
            level -= 1
            if lname.startswith("version_"):
                out["layout"] = "lightning-version"
        elif level > 0:
            parent = rel_raw.rsplit(b"/", 1)[0] if b"/" in rel_raw else b""
            if self.passed.get(parent):
                self.passed[rel_raw] = self.passed[parent]
        if not (level < self.depth or (named_checkpoint and not extra)):
            out["listed"] = False
            return
        try:
            children, omitted, stopped = self.scan(path, rel_raw, level, extra or level >= self.depth)
        except OSError as err:
            out["error"] = _why(err)
            out["listed"] = False
            return
        out["children"] = children
        if omitted:
            out["omitted"] = omitted
        if stopped:
            out["scanStopped"] = True
            out["sizeComplete"] = False
        fmt = content_format(set(c["name"] for c in children if c["kind"] != "dir"), lname)
        # A folder holding checkpoints of other steps is a run (`lr_steps10000/step_500`); one holding its own step
        # again is one checkpoint in two layouts (Hugging Face `checkpoint-500/global_step500` with DeepSpeed).
        holds_others = any(
            c["role"] == "checkpoint"
            and ((c.get("step") is not None and c.get("step") != step) or (step is None and c["kind"] == "dir"))
            for c in children
        )
        if (named_checkpoint or fmt or (step is not None and _has_weights(children))) and not holds_others:
            out["role"] = "checkpoint"
            out["format"] = fmt or name_format(lname)
            if out["format"] == "accelerate" and lname.startswith("checkpoint_"):
                # accelerate's automatic naming counts saves (checkpoint_0, _1 …): an index that orders, not a step.
                out["stepIsIndex"] = True
            for c in children:
                _demote(c)
        self.size_dir(out, path, children)

    def size_dir(self, out, path, children):
        """A checkpoint folder gets its full size (what was not listed is summed by du); other folders what was seen."""
        total = 0
        complete = "omitted" not in out
        is_checkpoint = out["role"] == "checkpoint"
        for c in children:
            if "error" in c:
                complete = False
            elif c["kind"] == "dir" and (c.get("listed") is False or c.get("sizeComplete") is False):
                if is_checkpoint:
                    raw = base64.b64decode(c["nameB64"]) if "nameB64" in c else c["name"].encode("utf-8")
                    size, ok = self.du(os.path.join(path, raw))
                    c["size"] = size
                    if ok:
                        c.pop("sizeComplete", None)
                    else:
                        c["sizeComplete"] = False
                        complete = False
                else:
                    complete = False
            total += c.get("size") or 0
        out["size"] = total
        if not complete:
            out["sizeComplete"] = False


def _has_weights(children):
    return any(c["role"] in ("checkpoint", "weights") and c["kind"] != "dir" for c in children)


def _demote(entry):
    """Inside a checkpoint folder its parts are parts: weights, not checkpoints of their own."""
    if entry["role"] == "checkpoint":
        if entry["kind"] == "dir":
            entry["role"] = "dir"
            entry.pop("format", None)
        else:
            entry["role"] = "weights"
    for c in entry.get("children") or ():
        _demote(c)


def _why(err):
    if isinstance(err, PermissionError):
        return "permission denied"
    if isinstance(err, FileNotFoundError):
        return "does not exist"
    return err.strerror or str(err)


def _user():
    try:
        import pwd
        return pwd.getpwuid(os.geteuid()).pw_name
    except Exception:  # no pwd module or no passwd entry (containers with arbitrary uids)
        return str(os.geteuid()) if hasattr(os, "geteuid") else None


# Known Good's own folder next to a run (baseline copies, cache archives): not part of the run, never listed.
OWN_FOLDERS = (b".known-good", ".known-good")


def _not_a_run_folder(e):
    """A dot folder (`.git`, `.hydra`, `.cache`) or `__pycache__`: tooling's, never a run or a checkpoint, and often
    thousands of entries (`.git/objects`) that would use up the listing's budget. Not listed, so not in sizes either;
    a dot *file* is listed as usual."""
    name = e.name if isinstance(e.name, bytes) else e.name.encode("utf-8", "surrogateescape")
    if not (name.startswith(b".") or name == b"__pycache__"):
        return False
    try:
        return e.is_dir(follow_symlinks=False)
    except OSError:
        return False


def signature(path_raw):
    """Entry count and newest mtime of a root and its direct sub-folders: changes when a run or checkpoint appears."""
    st = os.stat(path_raw)
    newest = st.st_mtime_ns
    count = 0
    with os.scandir(path_raw) as it:
        for e in it:
            count += 1
            try:
                if e.is_dir(follow_symlinks=False):
                    m = e.stat(follow_symlinks=False).st_mtime_ns
                    if m > newest:
                        newest = m
            except OSError:
                pass
    return "%d:%d" % (count, newest)


def _count_checkpoints(entry):
    n = 0
    stack = [entry]
    while stack:
        e = stack.pop()
        if e["role"] == "checkpoint":
            n += 1
        stack.extend(e.get("children") or ())
    return n


def list_root(root, depth, max_entries, signature_only):
    given = root
    path = os.path.abspath(os.path.expanduser(root))
    path_raw = os.fsencode(path)
    path_text, escaped = _text(path_raw)
    res = {"root": _text(os.fsencode(given))[0], "path": path_text, "status": "ok", "message": "",
           "signature": None, "entry": None}
    if escaped:
        res["escaped"] = True
        res["pathB64"] = _b64(path_raw)
    try:
        st = os.stat(path_raw)
    except FileNotFoundError:
        return _status(res, "missing", "%s does not exist" % path_text)
    except NotADirectoryError:
        return _status(res, "missing", "%s does not exist (a parent is a file)" % path_text)
    except PermissionError:
        return _status(res, "denied", "permission denied: %s cannot reach %s" % (_user(), path_text))
    except OSError as err:
        return _status(res, "error", "%s: %s" % (path_text, _why(err)))
    if not stat.S_ISDIR(st.st_mode):
        return _status(res, "not-a-directory", "%s is %s, not a folder" % (path_text, kg_common.file_kind(st.st_mode)))
    try:
        res["signature"] = signature(path_raw)
    except PermissionError:
        return _status(res, "denied", "permission denied: %s cannot read %s" % (_user(), path_text))
    except OSError as err:
        return _status(res, "error", "%s: %s" % (path_text, _why(err)))
    if signature_only:
        return res

    walk = _Walk(depth, max_entries)
    name_raw = os.path.basename(path_raw.rstrip(b"/")) or b"/"
    name_text, _ = _text(name_raw)
    step, epoch = parse_step(name_text)
    entry = {"name": name_text, "path": "", "kind": "dir", "size": 0, "mtime": round(st.st_mtime, 3),
             "role": "dir"}
    if step is not None:
        entry["step"] = step
    if epoch is not None:
        entry["epoch"] = epoch
    walk.fill_dir(entry, path_raw, b"", 0, False, name_text.lower(), step)
    res["entry"] = entry
    if entry.get("error"):
        if entry["error"] == "permission denied":
            return _status(res, "denied", "permission denied: %s cannot read %s" % (_user(), path_text))
        return _status(res, "error", "%s: %s" % (path_text, entry["error"]))
    checkpoints = _count_checkpoints(entry)
    res["counts"] = {"checkpoints": checkpoints, "files": walk.files, "dirs": walk.dirs, "omitted": walk.omitted}
    if not entry.get("children") and not entry.get("omitted"):
        return _status(res, "empty", "%s is empty" % path_text)
    if checkpoints == 0:
        others = walk.files
        parts = ["%d other file%s" % (others, "" if others == 1 else "s")]
        if walk.dirs:
            parts.append("%d folder%s" % (walk.dirs, "" if walk.dirs == 1 else "s"))
        return _status(res, "no-checkpoints", "no checkpoints found; " + ", ".join(parts))
    res["message"] = "%d checkpoint%s" % (checkpoints, "" if checkpoints == 1 else "s")
    return res


def _status(res, status, message):
    res["status"] = status
    res["message"] = message
    return res


def _int_arg(argv, i, flag):
    try:
        v = int(argv[i + 1])
    except (IndexError, ValueError):
        raise kg_common.ProbeError("%s needs a whole number" % flag, "bad-args")
    if v < 0:
        raise kg_common.ProbeError("%s must not be negative" % flag, "bad-args")
    return v


def main(argv):
    started = time.time()
    roots = []
    depth = DEFAULT_DEPTH
    max_entries = DEFAULT_MAX_ENTRIES
    signature_only = False
    i = 0
    only_roots = False
    while i < len(argv):
        a = argv[i]
        if only_roots:
            roots.append(a)
        elif a == "--":
            only_roots = True
        elif a == "--depth":
            depth = max(1, _int_arg(argv, i, a))
            i += 1
        elif a == "--max-entries":
            max_entries = max(1, _int_arg(argv, i, a))
            i += 1
        elif a == "--signature-only":
            signature_only = True
        elif a.startswith("--"):
            raise kg_common.ProbeError("unknown option %s" % a, "bad-args")
        else:
            roots.append(a)
        i += 1
    if not roots:
        raise kg_common.ProbeError("usage: list_runs.py ROOT... [--depth N] [--max-entries N] [--signature-only]",
                                   "bad-args")
    out = [list_root(r, depth, max_entries, signature_only) for r in roots]
    return {
        "roots": out,
        "depth": depth,
        "maxEntries": max_entries,
        "now": round(time.time(), 3),
        "user": _user(),
        "elapsedMs": round((time.time() - started) * 1000, 1),
    }


if __name__ == "__main__":
    kg_common.run(main)
