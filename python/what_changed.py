"""Facts for "What changed?" that no other probe gathers: data paths fingerprinted, git state, file times.

Usage: python3 what_changed.py [--path P]... [--git DIR]... [--stat P]... [--since EPOCH]

stdlib only, never imports torch.  Every fact that cannot be gathered says why (``error``), it is never left out:

- ``--path P``: a file or folder the training args name (dataset, data_dir, tokenizer, ...).  Fingerprint: exists,
  kind, size, mtime, and for a file a hash of its first and last MiB (a changed dataset of the same size shows), for
  a folder the file count, total size, newest mtime and a hash of the sorted (relative path, size, mtime) list,
  walked up to MAX_WALK entries (``truncated`` beyond).
- ``--git DIR``: the git checkout DIR lies in (if any): top level, HEAD, branch, dirty flag and files, each uncommitted
  file compared token by token with HEAD (with its mtime), and the files changed by commits since ``--since`` (epoch
  seconds), compared with the commit before them.  At most MAX_COMPARED files each, of MAX_COMPARED_BYTES, within
  COMPARE_SECONDS; the others say why not.  git missing or no checkout: ``error`` says which.
- ``--launches RUN``: the launches ``kg_record.py`` recorded for the run (command line, environment as recorded,
  interpreter, torch, driver, packages, git HEAD), oldest first, bounded; and ``live``: the run's training process if
  it runs now (python/live_process.py: /proc, same user, at most 500 processes looked at; command line, environment
  redacted, executable, the CUDA libraries it loaded).
- ``--live RUN [--live-log LOG] [--live-seen STATE]``...: a poll of running runs (the tree's auto-refresh, the
  dashboard's follow): each run's training process now, one /proc pass for all, none for a run whose log's state
  (size and mtime) is still the STATE the caller saw at its last poll.
- ``--stat P``: size and mtime only (e.g. torch/version.py, whose mtime is when that torch was installed).
"""
import hashlib
import os
import stat
import subprocess
import time

import code_diff
import data_shape
import kg_common
import kg_git
import launch_sources
import live_process

MiB = 1024 * 1024
MAX_WALK = 200000
MAX_LISTED = 200
MAX_LINE = 200
# How deep a data folder is walked: below it, the fingerprint says so (truncated) rather than spend the probe on it.
MAX_DEPTH = 256
# Files of the commits since the reference compared token by token (code_diff), each read up to this size.
MAX_COMPARED = 20
MAX_COMPARED_BYTES = MiB
# The files each commit changed, as listed with it (the report's suspects are one a file: which commits touched it).
MAX_COMMIT_FILES = 50
# How long comparing may take in all, per checkout (committed and uncommitted files): past it, a file says so.
COMPARE_SECONDS = 5


def _parse_args(argv):
    p = kg_common.arg_parser("what_changed.py", add_help=True)
    p.add_argument("--path", action="append", default=[], metavar="P")
    p.add_argument("--git", action="append", default=[], metavar="DIR")
    p.add_argument("--stat", action="append", default=[], metavar="P")
    p.add_argument("--since", type=float, default=None, metavar="EPOCH")
    p.add_argument("--launches", action="append", default=[], metavar="RUN")
    # a poll of running runs (the tree's auto-refresh, the dashboard's follow): each --live with its log and the
    # log's state at the caller's last poll ("" for none), in the same order
    p.add_argument("--live", action="append", default=[], metavar="RUN")
    p.add_argument("--live-log", action="append", default=[], metavar="LOG")
    p.add_argument("--live-seen", action="append", default=[], metavar="STATE")
    a = p.parse_args(argv)
    if len(a.live_log) not in (0, len(a.live)) or len(a.live_seen) not in (0, len(a.live)):
        raise kg_common.ProbeError("--live-log and --live-seen go with each --live, in its order", "bad-args")
    return a


def _msg(e):
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return "%s: %s" % (type(e).__name__, e)


def _ends_hash(path, size):
    """sha256 of the first and the last MiB (the whole file when it is at most 2 MiB)."""
    h = hashlib.sha256()
    with kg_common.open_regular(path) as f:
        h.update(f.read(MiB))
        if size > 2 * MiB:
            f.seek(size - MiB)
            h.update(f.read(MiB))
        elif size > MiB:
            h.update(f.read())
    return h.hexdigest()[:16]


def fingerprint(path):
    out = _fingerprint(path)
    if out["exists"]:
        try:
            out["samples"] = data_shape.summaries(path)
        except Exception:  # what the data holds is a bonus: the fingerprint stands without it
            out["samples"] = []
    return out


def _fingerprint(path):
    out = {"path": path, "exists": False, "kind": None, "size": None, "mtime": None, "files": None,
           "newestMtime": None, "hash": None, "truncated": False, "error": None, "samples": []}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        out["error"] = "not found"
        return out
    except OSError as e:
        out["error"] = _msg(e)
        return out
    out["exists"] = True
    out["mtime"] = st.st_mtime
    if stat.S_ISREG(st.st_mode):
        out["kind"] = "file"
        out["size"] = st.st_size
        try:
            out["hash"] = _ends_hash(path, st.st_size)
        except OSError as e:
            out["error"] = _msg(e)
        return out
    if not stat.S_ISDIR(st.st_mode):
        out["kind"] = "other"
        return out
    out["kind"] = "dir"
    h = hashlib.sha256()
    files = size = seen = 0
    newest = st.st_mtime
    unreadable = 0
    too_deep = False
    # An explicit stack, not os.walk (recursive before Python 3.12: a folder 1,500 levels deep raised RecursionError
    # and took every other fact of the probe with it).  Same order as os.walk top-down with sorted names, so the
    # hash of a folder is what it was.
    stack = [(path, 0)]
    while stack and not out["truncated"]:
        top, depth = stack.pop()
        try:
            with os.scandir(top) as it:
                entries = list(it)
        except OSError:
            continue
        dirs, names = [], []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else names).append(e.name)
        for name in sorted(names):
            seen += 1
            if seen > MAX_WALK:
                out["truncated"] = True
                break
            p = os.path.join(top, name)
            try:
                s = os.lstat(p)
            except OSError:
                unreadable += 1
                continue
            files += 1
            size += s.st_size
            newest = max(newest, s.st_mtime)
            h.update(("%s\0%d\0%d\n" % (os.path.relpath(p, path), s.st_size, int(s.st_mtime))).encode("utf-8",
                                                                                                     "replace"))
        below = [os.path.join(top, d) for d in sorted(dirs, reverse=True)]
        below = [d for d in below if not os.path.islink(d)]  # os.walk's followlinks=False
        if below and depth >= MAX_DEPTH:
            too_deep = True
            continue
        stack.extend((d, depth + 1) for d in below)
    out.update(files=files, size=size, newestMtime=newest, hash=h.hexdigest()[:16])
    if too_deep:
        out["truncated"] = True
        out["error"] = "folders nested deeper than %d levels were not walked" % MAX_DEPTH
    elif unreadable:
        out["error"] = "%d entries could not be read" % unreadable
    return out


# Reading a checkout never runs a program it names: the policy and the one runner are python/kg_git.py.
_git = kg_git.git
_git_filters = kg_git.filters


def git_state(path, since):
    out = {"path": path, "repo": None, "head": None, "branch": None, "dirty": None, "dirtyFiles": [],
           "dirtyChanges": [], "dirtyNotCompared": 0, "changedSince": [], "commitsSince": None, "headTime": None,
           "error": None}
    d = path if os.path.isdir(path) else os.path.dirname(path) or "."
    if not os.path.isdir(d):
        out["error"] = "%s not found" % d
        return out
    try:
        top = _git(d, "rev-parse", "--show-toplevel").strip()
    except FileNotFoundError:
        out["error"] = "git is not installed"
        return out
    except subprocess.TimeoutExpired:
        out["error"] = "git timed out"
        return out
    except RuntimeError as e:
        out["error"] = "not in a git checkout" if "not a git repository" in str(e) else str(e)
        return out
    out["repo"] = top
    try:
        head = _git(top, "log", "-1", "--no-show-signature", "--no-ext-diff", "--no-textconv",
                    "--format=%H %ct").split()
        if head:
            out["head"], out["headTime"] = head[0], float(head[1])
        branch = _git(top, "rev-parse", "--abbrev-ref", "HEAD").strip()
        out["branch"] = None if branch == "HEAD" else branch
        deadline = time.monotonic() + COMPARE_SECONDS
        filters = _git_filters(top)
        if filters:
            out["error"] = ("uncommitted changes not checked: the repository configures %s, which git status would "
                            "run" % ", ".join(filters[:3]))
        else:
            entries = _status(top)
            out["dirty"] = bool(entries)
            out["dirtyFiles"] = sorted(e[1] for e in entries)[:MAX_LISTED]
            out.update(_dirty_changes(top, entries, deadline))
        if since is not None:
            log = _git(top, "log", "--no-show-signature", "--no-ext-diff", "--no-textconv", "--since=@%d" % int(since),
                       "--format=@%H", "--name-only")
            commits = []
            files_of = {}
            for line in log.splitlines():
                if line.startswith("@"):
                    commits.append(line[1:])
                    files_of[line[1:]] = []
                elif line and commits:
                    files_of[commits[-1]].append(line)
            files = sorted(set(f for names in files_of.values() for f in names))
            out["commitsSince"] = len(commits)
            out["changedSince"] = files[:MAX_LISTED]
            if commits:
                out.update(_code_changes(top, since, sorted(files, key=_compare_order), files_of, deadline))
    except subprocess.TimeoutExpired:
        out["error"] = "git timed out"
    except (RuntimeError, OSError, ValueError) as e:
        out["error"] = str(e)
    return out


def _compare_order(name):
    """Python first, documentation last: what is compared when more files changed than MAX_COMPARED."""
    base = name.rsplit("/", 1)[-1].lower()
    doc = (name.startswith("docs/") or base.endswith((".md", ".rst", ".txt")) or base.startswith(("license",
           "changelog", "readme")) or base in (".gitignore", ".gitattributes"))
    return (0 if base.endswith(".py") else 2 if doc else 1, name)


def _status(top):
    """The checkout's uncommitted changes to tracked files: ``(XY, name, name at HEAD, fs name at HEAD, fs name)``.

    ``-z``: names as they are, never quoted; a rename is followed by its name at HEAD.
    """
    data, over = kg_git.git_bytes(top, "status", "--porcelain", "-z", "--untracked-files=no",
                                  "--ignore-submodules=all")
    parts = data.split(b"\0")
    if over:
        parts = parts[:-1]  # the last one read is cut
    out = []
    i = 0
    while i < len(parts):
        p = parts[i]
        i += 1
        if len(p) < 4:
            continue
        xy = p[:2].decode("ascii", "replace")
        name = p[3:]
        orig = name
        if "R" in xy or "C" in xy:
            orig = parts[i] if i < len(parts) else name
            i += 1
        out.append((xy, name.decode("utf-8", "replace"), orig.decode("utf-8", "replace"), os.fsdecode(orig),
                    os.fsdecode(name)))
    return out


def _binary(text):
    return "\0" in text[:8000]


def _worktree_text(top, fs_name):
    """A tracked file as it is in the working tree, bounded: ``(text, mtime, why not)``."""
    path = os.path.join(top, fs_name)
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return None, st.st_mtime, "%s, not a regular file: not compared" % kg_common.file_kind(st.st_mode)
    if st.st_size > MAX_COMPARED_BYTES:
        return None, st.st_mtime, "larger than %s: not compared" % kg_common.format_bytes(MAX_COMPARED_BYTES)
    # a folder on the way swapped for a link to elsewhere since git listed it: that file is no part of the checkout
    real_top = os.path.realpath(top)
    if os.path.commonpath([real_top, os.path.realpath(os.path.dirname(path))]) != real_top:
        return None, st.st_mtime, "outside the checkout (a linked folder): not compared"
    with kg_common.open_regular(path) as f:
        data = f.read(MAX_COMPARED_BYTES + 1)
    if len(data) > MAX_COMPARED_BYTES:
        return None, st.st_mtime, "larger than %s: not compared" % kg_common.format_bytes(MAX_COMPARED_BYTES)
    return data.decode("utf-8", "replace"), st.st_mtime, None


def _dirty_changes(top, entries, deadline):
    """Each uncommitted file (the first MAX_COMPARED, Python first) compared token by token with HEAD, with its mtime:
    when it was last written, which the report places on the log's timeline.

    The working tree is read as a file (no git diff: no filter or driver of the repository runs), HEAD's side by
    cat-file; a file over MAX_COMPARED_BYTES, binary, not regular (a link, a FIFO) or past the time limit is listed
    with why, not compared.
    """
    out = {"dirtyChanges": [], "dirtyNotCompared": max(0, len(entries) - MAX_COMPARED)}
    for xy, name, orig, fs_orig, fs_name in sorted(entries, key=lambda e: _compare_order(e[1]))[:MAX_COMPARED]:
        status = ("deleted" if "D" in xy else "added" if xy[0] == "A" else "renamed" if "R" in xy else "modified")
        item = {"file": name, "status": status, "from": orig if orig != name else None, "mtime": None,
                "python": name.endswith(".py"), "cosmetic": False, "hunks": [], "hunkCount": 0, "functions": [],
                "error": None}
        out["dirtyChanges"].append(item)
        try:
            new, why = "", None
            if status != "deleted":
                new, item["mtime"], why = _worktree_text(top, fs_name)
            if why is None and time.monotonic() > deadline:
                why = "not compared: the time for comparing (%d s) ran out" % COMPARE_SECONDS
            old = _blob(top, "HEAD", fs_orig) if why is None and status != "added" else ""
            if why is None and old is None:
                why = "larger than %s at HEAD: not compared" % kg_common.format_bytes(MAX_COMPARED_BYTES)
            if why is None and (_binary(old) or _binary(new)):
                why = "binary: not compared"
            if why is not None:
                item["error"] = why
                continue
            item.update(code_diff.compare(old, new, name))
        except (OSError, kg_common.ProbeError) as e:
            item["error"] = "not compared: %s" % _msg(e)
    return out


def _blob(top, rev, name):
    """A file as committed at rev ('' where it is absent or larger than MAX_COMPARED_BYTES: None)."""
    try:
        size = int(_git(top, "cat-file", "-s", "%s:%s" % (rev, name)).strip() or 0)
    except RuntimeError:
        return ""
    if size > MAX_COMPARED_BYTES:
        return None
    return _git(top, "cat-file", "blob", "%s:%s" % (rev, name))


def _code_changes(top, since, files, files_of, deadline):
    """The commits since ``since`` (hash, time, subject, the files each changed) and each changed file compared with
    the reference's commit (the first MAX_COMPARED, Python first, documentation last).

    Plumbing only (rev-list, cat-file): no diff driver, filter or textconv a repository names can run.
    """
    out = {"commits": [], "base": None, "codeChanges": []}
    log = _git(top, "log", "--no-show-signature", "--no-ext-diff", "--no-textconv", "--since=@%d" % int(since),
               "--format=%H%x00%ct%x00%s")
    for line in log.splitlines()[:MAX_LISTED]:
        parts = line.split("\0")
        if len(parts) == 3:
            out["commits"].append({"hash": parts[0], "time": float(parts[1]), "subject": parts[2][:MAX_LINE],
                                   "files": files_of.get(parts[0], [])[:MAX_COMMIT_FILES]})
    base = None
    if out["commits"]:
        # the parent of the oldest commit listed: --before would take a commit of the same second as the reference
        try:
            base = _git(top, "rev-list", "-1", out["commits"][-1]["hash"] + "^").strip() or None
        except RuntimeError:
            base = None  # a root commit: every file is new
    out["base"] = base
    for name in files[:MAX_COMPARED]:
        old = _blob(top, base, name) if base else ""
        new = _blob(top, "HEAD", name)
        why = None
        if old is None or new is None:
            why = "larger than %s: not compared" % kg_common.format_bytes(MAX_COMPARED_BYTES)
        elif _binary(old) or _binary(new):
            why = "binary: not compared"
        elif time.monotonic() > deadline:
            why = "not compared: the time for comparing (%d s) ran out" % COMPARE_SECONDS
        if why is not None:
            out["codeChanges"].append({"file": name, "python": name.endswith(".py"), "cosmetic": False, "hunks": [],
                                       "hunkCount": 0, "functions": [], "error": why})
            continue
        out["codeChanges"].append(code_diff.compare(old, new, name))
    return out


MAX_LAUNCH_BYTES = 4 * MiB
MAX_LAUNCHES = 64
MAX_ENV = 512


def _slim_launch(d):
    """What a launch record says that can move speed, bounded: the rest of kg_record.py's record stays on the host."""
    git = d.get("git") if isinstance(d.get("git"), dict) else {}
    torch = d.get("torch") if isinstance(d.get("torch"), dict) else {}
    gpus = d.get("gpus") if isinstance(d.get("gpus"), dict) else {}
    exe = d.get("executable") if isinstance(d.get("executable"), dict) else {}
    py = d.get("python") if isinstance(d.get("python"), dict) else {}
    listed = d.get("packages")
    pk = listed.get("packages") if isinstance(listed, dict) else None
    if not isinstance(pk, dict):
        pk = {}
    env = d.get("env") if isinstance(d.get("env"), dict) else {}
    argv = d.get("argv") if isinstance(d.get("argv"), list) else []
    accel = d.get("accelerate")
    accel_config = accel.get("config") if isinstance(accel, dict) else None
    if not isinstance(accel_config, dict):
        accel_config = {}
    return {
        "source": "kg_record",
        "where": None,
        # accelerate launch's config, its keys prefixed so that the report says where the value came from
        "config": dict(("accelerate." + str(k)[:MAX_LINE], str(v)[:MAX_LINE])
                       for k, v in sorted(accel_config.items())[:MAX_ENV]),
        "time": d.get("unixTime") if isinstance(d.get("unixTime"), (int, float)) else None,
        "argv": [str(a)[:MAX_LINE] for a in argv[:256]],
        "cwd": d.get("cwd") if isinstance(d.get("cwd"), str) else None,
        "env": dict((str(k)[:MAX_LINE], str(v)[:MAX_LINE]) for k, v in sorted(env.items())[:MAX_ENV]),
        "interpreter": exe.get("realpath") or exe.get("path"),
        "python": py.get("version") if isinstance(py.get("version"), str) else None,
        "gitHead": git.get("head"),
        "gitDiff": git.get("diffSha256"),
        "torch": torch.get("version"),
        "driver": gpus.get("driver"),
        "packages": dict((str(k)[:MAX_LINE], str(v)[:MAX_LINE]) for k, v in sorted(pk.items())[:2000]),
    }


def _slim_live(p):
    """A live process (live_process.scan) as a launch record of source ``live``."""
    env = p.get("env") if isinstance(p.get("env"), dict) else {}
    libs = p.get("libs") if isinstance(p.get("libs"), dict) else {}
    return {
        "source": "live", "where": "/proc/%s" % p.get("pid"), "config": {}, "time": p.get("startTime"),
        "argv": [str(a)[:MAX_LINE] for a in (p.get("argv") or [])[:256]], "cwd": p.get("cwd"),
        "env": dict((str(k)[:MAX_LINE], str(v)[:MAX_LINE]) for k, v in sorted(env.items())[:MAX_ENV]),
        "interpreter": p.get("exe"), "python": None, "gitHead": None, "gitDiff": None, "torch": None,
        "driver": None, "packages": {}, "pid": p.get("pid"), "children": p.get("children", 0),
        "matchedBy": p.get("matchedBy"),
        # a library's version as its file name says it, else its path (a pip wheel's libcudnn.so.9 says 9 only)
        "libs": dict((str(n)[:MAX_LINE], str(v.get("version") or v.get("path"))[:MAX_LINE])
                     for n, v in sorted(libs.items()) if isinstance(v, dict)),
    }


def live_records(run):
    scan = live_process.scan(run)
    return {"scanned": scan["scanned"], "truncated": scan["truncated"], "error": scan["error"],
            "tookMs": scan.get("tookMs"), "records": [_slim_live(p) for p in scan["processes"]]}


def _log_state(log):
    """A log's size and mtime as one word: equal at two polls, the log was not written between them."""
    if not log:
        return None
    try:
        st = os.stat(log)  # stat only: a FIFO named like a log is never opened
    except OSError as e:
        return "error:%s" % (e.strerror or e)
    return "%d:%d" % (st.st_size, getattr(st, "st_mtime_ns", int(st.st_mtime * 1e9)))


def live_poll(runs, logs, seen):
    """The training process of each run now, for a poll: a run whose log did not change since the caller's last
    poll (its state as given) is not looked for again (``unchanged``); the others share ONE pass over /proc."""
    logs = logs or [""] * len(runs)
    seen = seen or [""] * len(runs)
    out = []
    todo = []
    for run, log, was in zip(runs, logs, seen):
        state = _log_state(log)
        item = {"run": run, "logState": state, "unchanged": bool(was) and state == was, "scanned": 0,
                "truncated": False, "error": None, "tookMs": None, "records": []}
        out.append(item)
        if not item["unchanged"]:
            todo.append(item)
    if todo:
        for item, scan in zip(todo, live_process.scan_runs([t["run"] for t in todo])):
            item.update(scanned=scan["scanned"], truncated=scan["truncated"], error=scan["error"],
                        tookMs=scan.get("tookMs"), records=[_slim_live(p) for p in scan["processes"]])
    return out


def launch_records(run):
    """The launches kg_record.py recorded for a run (``RUN/.known-good/launches.jsonl``), oldest first, the last
    MAX_LAUNCHES of at most MAX_LAUNCH_BYTES read from the end; none recorded: ``exists`` false."""
    path = os.path.join(run, ".known-good", "launches.jsonl")
    if not os.path.lexists(path) and os.path.isfile(launch_sources.home_records(run)):
        path = launch_sources.home_records(run)  # kg_record.py --home: kept out of the run folder
    out = {"path": path, "exists": False, "records": [], "error": None, "others": [], "live": None}
    try:
        out["others"] = launch_sources.launches_of(run)
    except Exception as e:  # another tool's files are a bonus: failing to read them costs them only
        out["error"] = "other tools' records: %s" % _msg(e)
    try:
        out["live"] = live_records(run)
    except Exception as e:  # the live process is a bonus too
        out["live"] = {"scanned": 0, "truncated": False, "error": _msg(e), "records": []}
    try:
        # A FIFO or device named launches.jsonl is refused, never opened to block (open_regular)
        with kg_common.open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - MAX_LAUNCH_BYTES))
            data = f.read(MAX_LAUNCH_BYTES)
    except kg_common.ProbeError as e:
        if e.code != "not-found":
            out["exists"] = True
            out["error"] = str(e)
        return out
    except OSError as e:
        out["error"] = _msg(e)
        return out
    out["exists"] = True
    lines = data.split(b"\n")
    if size > MAX_LAUNCH_BYTES:
        lines = lines[1:]  # the first line read is cut
    for line in lines[-MAX_LAUNCHES - 1:]:
        if not line.strip():
            continue
        try:
            d = kg_common.loads_bounded(line.decode("utf-8", "replace"), "launch record")
        except (ValueError, kg_common.ProbeError):
            continue
        if isinstance(d, dict):
            out["records"].append(_slim_launch(d))
    out["records"] = out["records"][-MAX_LAUNCHES:]
    return out


def plain_stat(path):
    try:
        # "~/..." is the user's home on the host (a restored env's interpreter): the caller does not know it
        st = os.stat(os.path.expanduser(path) if path.startswith("~/") else path)
        return {"path": path, "exists": True, "size": st.st_size, "mtime": st.st_mtime, "error": None}
    except FileNotFoundError:
        return {"path": path, "exists": False, "size": None, "mtime": None, "error": "not found"}
    except OSError as e:
        return {"path": path, "exists": False, "size": None, "mtime": None, "error": _msg(e)}


def _alone(gather, path, *args):
    """One fact, whatever fails inside it: a failure costs this fact (its ``error``), never the others."""
    try:
        return gather(path, *args)
    except Exception as e:  # RecursionError, a bug, ...: any failure of one fact is its own reason
        # exists false: the report lists it under "Not known" with this reason, like a path it cannot find
        return {"path": path, "exists": False, "error": "not gathered: %s" % _msg(e)}


def main(argv):
    a = _parse_args(argv)
    started = time.time()
    return {
        "now": started,
        "paths": [_alone(fingerprint, p) for p in a.path],
        "git": [_alone(git_state, p, a.since) for p in a.git],
        "stats": [_alone(plain_stat, p) for p in a.stat],
        "launches": [_alone(launch_records, p) for p in a.launches],
        **({"live": live_poll(a.live, a.live_log, a.live_seen)} if a.live else {}),
        "elapsedMs": round((time.time() - started) * 1000, 1),
    }


if __name__ == "__main__":
    kg_common.run(main)
