"""replay_prep: what a replay needs from the host, and the code folders of its states (stdlib only, Python 3.8+).

  replay_prep.py inspect --cwd DIR [--good COMMIT] [--path P]...
      the launch's checkout: its root, where the launch's folder is in it, HEAD, the known-good commit, and the files
      that differ from it (committed since, edited and not committed, or both); whether each path exists.
  replay_prep.py state --replay DIR --name NAME --repo ROOT [--good COMMIT] [--good-file REL]...
      DIR/code-NAME/: the checkout's tracked files as they are now, with each --good-file at its known-good version
      (removed where the known-good commit had none). Made once: a state that exists is reused.
  replay_prep.py rundir --replay DIR --run N
      DIR/runs/N/cwd/, made empty: the folder a run starts in when the launch's folder is no git checkout (a run never
      starts in the run folder). Refused when it exists already.
  replay_prep.py clean --replay DIR
      DIR/runs/: every file but the logs removed (checkpoints, caches); the logs stay for the report.

Nothing is written outside DIR, which must be inside ~/.known-good/replays. git runs through kg_git (no program the
checkout names ever runs). Bounded: at most MAX_FILES tracked files and MAX_BYTES of them are copied, and git's
answers are bounded by kg_git.
"""
import os
import shutil
import subprocess
import sys

import kg_common
import kg_git

MiB = 1024 * 1024
MAX_FILES = 50000
MAX_BYTES = 512 * MiB
# One file's known-good version, read whole from git.
MAX_BLOB = 64 * MiB
MAX_LISTED = 2000
# What a replay keeps of its runs: the logs it reads the speed from, each up to this size.
LOG_SUFFIXES = (".jsonl", ".json", ".csv", ".log", ".txt")
MAX_LOG = 64 * MiB
REPLAYS = os.path.join(".known-good", "replays")


def replay_root():
    return os.path.realpath(os.path.join(os.path.expanduser("~"), REPLAYS))


def check_replay_dir(path):
    """DIR itself, absolute, once it is known to be inside ~/.known-good/replays (else ProbeError)."""
    if not os.path.isabs(path):
        raise kg_common.ProbeError("the replay folder must be absolute: %s" % path, "bad-args")
    real = os.path.realpath(path)
    root = replay_root()
    if not (real + os.sep).startswith(root + os.sep) or real == root:
        raise kg_common.ProbeError("a replay writes only inside %s (not %s)" % (root, path), "bad-args")
    return real


def checkout_of(cwd):
    try:
        top = kg_git.git(cwd, "rev-parse", "--show-toplevel").strip()
    except FileNotFoundError:
        return None, "git is not installed"
    except subprocess.TimeoutExpired:
        return None, "git timed out"
    except RuntimeError as e:
        return None, "not in a git checkout" if "not a git repository" in str(e) else str(e)
    return top, None


def names(text):
    return [n for n in text.splitlines() if n]


def inspect(cwd, good, paths):
    out = {"repo": None, "cwdRel": None, "head": None, "good": None, "files": [], "filters": [], "tracked": None,
           "trackedBytes": None, "paths": [], "error": None}
    for p in paths:
        kind = "dir" if os.path.isdir(p) else "file" if os.path.exists(p) else None
        out["paths"].append({"path": p, "exists": kind is not None, "kind": kind, "tracked": False})
    if not os.path.isdir(cwd):
        out["error"] = "the launch's folder %s is not there" % cwd
        return out
    top, err = checkout_of(cwd)
    if top is None:
        out["error"] = err
        return out
    out["repo"] = top
    rel = os.path.relpath(os.path.realpath(cwd), os.path.realpath(top))
    out["cwdRel"] = "" if rel == "." else rel
    try:
        out["head"] = kg_git.git(top, "rev-parse", "HEAD").strip() or None
        tracked = [n for n in kg_git.git_bytes(top, "ls-files", "-z")[0].decode("utf-8", "surrogateescape").split("\0")
                   if n]
        out["tracked"] = len(tracked)
        # a path the launch names is code (copied with the checkout) when git tracks it, or tracks files below it
        real_top = os.path.realpath(top)
        known = set(tracked)
        folders = set(os.path.dirname(n) for n in tracked)
        for entry in out["paths"]:
            rel = os.path.relpath(os.path.realpath(entry["path"]), real_top)
            if not rel.startswith(".."):
                entry["tracked"] = rel in known or any(f == rel or f.startswith(rel + "/") for f in folders)
        total = 0
        for n in tracked[:MAX_FILES]:
            try:
                total += os.lstat(os.path.join(top, n)).st_size
            except OSError:
                pass
        out["trackedBytes"] = total
        files = {}
        if good:
            out["good"] = kg_git.git(top, "rev-parse", "--verify", "--quiet", good + "^{commit}").strip() or None
            if out["good"] is None:
                out["error"] = "the known-good commit %s is not in the checkout" % good
            else:
                for n in names(kg_git.git(top, "diff", "--no-ext-diff", "--no-textconv", "--name-only", out["good"],
                                          "HEAD", "--")):
                    files[n] = "committed"
        out["filters"] = kg_git.filters(top)
        if out["filters"]:
            out["error"] = ("the checkout configures content filters (%s): its uncommitted edits are not read, as "
                            "reading them would run those filters" % ", ".join(out["filters"]))
        else:
            status = kg_git.git(top, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
            for line in status.splitlines():
                n = line[3:].split(" -> ")[-1].strip('"')
                if n:
                    files[n] = "both" if files.get(n) == "committed" else "uncommitted"
        out["files"] = [{"path": n, "how": how} for n, how in sorted(files.items())][:MAX_LISTED]
    except subprocess.TimeoutExpired:
        out["error"] = "git timed out"
    except RuntimeError as e:
        out["error"] = str(e)
    return out


def safe_rel(rel):
    parts = rel.split("/")
    return rel and not os.path.isabs(rel) and ".." not in parts and "" not in parts


def make_state(replay, name, repo, good, good_files):
    if not name.replace("-", "").replace("_", "").isalnum():
        raise kg_common.ProbeError("a state's name is letters, digits, - and _: %s" % name, "bad-args")
    dest = os.path.join(replay, "code-" + name)
    if os.path.isdir(dest):
        return {"dir": dest, "reused": True, "files": None, "bytes": None}
    tracked = [n for n in kg_git.git_bytes(repo, "ls-files", "-z")[0].decode("utf-8", "surrogateescape").split("\0")
               if n]
    if len(tracked) > MAX_FILES:
        raise kg_common.LimitError("items", "the checkout tracks %d files to copy" % len(tracked), MAX_FILES)
    tmp = dest + ".part"
    if os.path.lexists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp, mode=0o700)
    total = 0
    for rel in tracked:
        if not safe_rel(rel):
            continue
        src = os.path.join(repo, rel)
        dst = os.path.join(tmp, rel)
        try:
            st = os.lstat(src)
        except OSError:
            continue  # deleted in the working tree: not part of now
        total += st.st_size
        if total > MAX_BYTES:
            shutil.rmtree(tmp)
            raise kg_common.LimitError("read", "copying the checkout's tracked files", MAX_BYTES)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isfile(src):
            shutil.copy2(src, dst)
    for rel in good_files:
        if not safe_rel(rel):
            raise kg_common.ProbeError("not a path inside the checkout: %s" % rel, "bad-args")
        dst = os.path.join(tmp, rel)
        try:
            data, over = kg_git.git_bytes(repo, "cat-file", "blob", "%s:%s" % (good, rel), max_output=MAX_BLOB)
        except RuntimeError:
            data, over = None, False  # not in the known-good commit: the state has no such file
        if over:
            raise kg_common.LimitError("read", "%s at %s" % (rel, good), MAX_BLOB)
        if os.path.lexists(dst):
            os.remove(dst)
        if data is not None:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)
    os.rename(tmp, dest)
    return {"dir": dest, "reused": False, "files": len(tracked), "bytes": total}


def make_run_dir(replay, run):
    if not (run.isdigit() and len(run) <= 9):
        raise kg_common.ProbeError("a run's number is digits: %s" % run, "bad-args")
    dest = os.path.join(replay, "runs", str(int(run)), "cwd")
    os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
    try:
        os.mkdir(dest, 0o700)
    except FileExistsError:
        raise kg_common.ProbeError("%s exists already: a run starts in a folder of its own" % dest, "bad-args")
    return {"dir": dest}


def clean(replay):
    runs = os.path.join(replay, "runs")
    removed, kept, freed = 0, 0, 0
    if not os.path.isdir(runs):
        return {"removed": 0, "kept": 0, "freed": 0}
    for top, dirs, files in os.walk(runs, topdown=False):
        for f in files:
            p = os.path.join(top, f)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if f.endswith(LOG_SUFFIXES) and st.st_size <= MAX_LOG and "events.out.tfevents" not in f:
                kept += 1
                continue
            os.remove(p)
            removed += 1
            freed += st.st_size
        for d in dirs:
            p = os.path.join(top, d)
            try:
                os.rmdir(p)
            except OSError:
                pass
    return {"removed": removed, "kept": kept, "freed": freed}


def main(argv):
    p = kg_common.arg_parser("replay_prep.py")
    p.add_argument("mode", choices=["inspect", "state", "rundir", "clean"])
    p.add_argument("--run")
    p.add_argument("--cwd")
    p.add_argument("--good")
    p.add_argument("--path", action="append", default=[])
    p.add_argument("--replay")
    p.add_argument("--name")
    p.add_argument("--repo")
    p.add_argument("--good-file", dest="good_files", action="append", default=[])
    a = p.parse_args(argv)
    if a.mode == "inspect":
        if not a.cwd:
            raise kg_common.ProbeError("inspect needs --cwd", "bad-args")
        return inspect(a.cwd, a.good, a.path)
    if not a.replay:
        raise kg_common.ProbeError("%s needs --replay" % a.mode, "bad-args")
    replay = check_replay_dir(a.replay)
    if a.mode == "clean":
        return clean(replay)
    if a.mode == "rundir":
        if not a.run:
            raise kg_common.ProbeError("rundir needs --run", "bad-args")
        return make_run_dir(replay, a.run)
    if not (a.name and a.repo):
        raise kg_common.ProbeError("state needs --name and --repo", "bad-args")
    if a.good_files and not a.good:
        raise kg_common.ProbeError("--good-file needs --good", "bad-args")
    os.makedirs(replay, mode=0o700, exist_ok=True)
    return make_state(replay, a.name, a.repo, a.good, a.good_files)


if __name__ == "__main__":
    kg_common.run(main)
    sys.exit(0)
