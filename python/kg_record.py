"""Record the facts of one launch of a training command, then run the command itself.

Usage: python3 kg_record.py [--run DIR] [--home] [--timeout SECONDS] [--gpu-interval SECONDS] [--gpu-cap SIZE]
                            -- CMD [ARGS...]

Appends one JSON line to DIR/.known-good/launches.jsonl (DIR: the current folder unless --run names one; with --home
to ~/.known-good/runs/<hash of DIR's real path>/launches.jsonl instead, nothing written in the run folder): the time,
the command line, the cwd, the environment (secrets redacted by kg_redact), this interpreter and its sys.version, the
torch build (read from torch/version.py, never imported), the installed packages as env_snapshot reads them, the git
HEAD and a hash of the uncommitted diff of the script's checkout, the GPUs and driver when nvidia-smi is there, and for
``accelerate launch`` the launch config it reads (``--config_file`` or accelerate's default_config.yaml, flat).
Then it replaces itself with CMD (os.execvp): same PID, so exit code, signals, stdin and the terminal are the command's
own. Every fact is collected side by side in threads under ONE deadline, --timeout (default 1 s), the environment's
reading included: a fact that fails or is late is named in the record's ``errors`` and costs that fact only. The
whole record is at most MAX_RECORD_BYTES: what the cap leaves out (packages, long values, variables) is named in its
``truncated``. The record is appended only to a regular file of the user's own, opened without following a link and
without blocking (a run folder may be shared: a link, a FIFO or another user's file planted as launches.jsonl is
refused); a record that cannot be written costs one line on stderr, never the launch.

When nvidia-smi is on PATH it also starts the launch's GPU timeline (kg_gpu_sampler.py): a sampler of its own, every
--gpu-interval seconds (default 5; 0: none), into gpu-timeline.jsonl beside the records, at most --gpu-cap bytes
(default 64M; K and M suffixes), for as long as the command runs. Whether it started, and why not, is the record's
``gpuTimeline``; without nvidia-smi nothing starts and the record says so once. stdlib only, Python 3.8+.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import env_python  # noqa: E402
import env_tools  # noqa: E402
import kg_common  # noqa: E402
import kg_gpu_sampler  # noqa: E402
from kg_append import NotRecorded, open_record  # noqa: E402
import kg_redact  # noqa: E402
import launch_sources  # noqa: E402

SCHEMA = 1
DEFAULT_TIMEOUT_S = 1.0
MAX_VALUE_CHARS = 4096
MAX_CHANGED_FILES = 200
MAX_RECORD_BYTES = 512 * 1024
# The environment's share of the record: reading stops there (a few variables of 1 MiB each must not crowd out the
# packages and the git state), the variables that move speed read first.
MAX_ENV_BYTES = MAX_RECORD_BYTES // 2
MAX_ARGV_WORDS = 4096
# What git and nvidia-smi inherit of the environment: a variable over this is dropped for them (exec refuses a string
# over 128 KiB anyway, and copying 2,000 variables of 1 MiB to every tool took seconds).
MAX_TOOL_VALUE = 32 * 1024
MAX_TOOL_ENV = 1024 * 1024
# Left-out names shown in a record's ``truncated``.
SHOWN_NAMES = 20
GPU_FIELDS = ("index", "name", "driver_version", "uuid", "memory.total")

# Git is run on a checkout the user may not own: only read-only subcommands, with every program the repository's
# config could name switched off (kg_common.GIT_SAFE_CONFIG; an empty filter/textconv command is "no filter" to git,
# and submodules, whose own config is not read here, are not looked into), no pager, no prompts and no network.
GIT_SAFE = tuple(w for kv in kg_common.GIT_SAFE_CONFIG for w in ("-c", kv))
_GIT_PROGRAM_KEYS = (".clean", ".smudge", ".process", ".textconv", ".command")
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_EXTERNAL_DIFF": "",
           "GIT_ASKPASS": "", "SSH_ASKPASS": "", "LC_ALL": "C"}


def usage(message):
    sys.stderr.write("kg_record.py: %s\nusage: python3 kg_record.py [--run DIR] [--home] [--timeout SECONDS] "
                     "[--gpu-interval SECONDS] [--gpu-cap SIZE] -- CMD [ARGS...]\n" % message)
    sys.exit(2)


def _seconds(name, text):
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v >= 0 or v == float("inf"):
        usage("%s takes seconds, got %r" % (name, text))
    return v


def _size(text):
    m = re.match(r"^(\d+)([KMkm]?)$", text.strip())
    if m is None:
        return usage("--gpu-cap takes a size in bytes (K and M suffixes), got %r" % text)
    n = int(m.group(1)) << {"": 0, "k": 10, "m": 20}[m.group(2).lower()]
    if n < kg_gpu_sampler.MIN_CAP:
        usage("--gpu-cap takes at least %dK" % (kg_gpu_sampler.MIN_CAP >> 10))
    return n


def parse_argv(argv):
    """(run folder, timeout, command, home, gpu: {"interval", "cap"})."""
    run_dir = None
    timeout = DEFAULT_TIMEOUT_S
    home = False
    gpu = {"interval": kg_gpu_sampler.DEFAULT_INTERVAL_S, "cap": kg_gpu_sampler.DEFAULT_CAP}
    valued = ("--run", "--timeout", "--gpu-interval", "--gpu-cap")
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        name, eq, value = a.partition("=")
        if name in valued and (eq or i + 1 < len(argv)):
            if not eq:
                value = argv[i + 1]
                i += 1
            if name == "--run":
                run_dir = value
            elif name == "--timeout":
                try:
                    timeout = float(value)
                except ValueError:
                    usage("--timeout takes seconds, got %r" % value)
            elif name == "--gpu-interval":
                gpu["interval"] = _seconds(name, value)
            else:
                gpu["cap"] = _size(value)
            i += 1
            continue
        if a == "--home":
            home = True
        elif a in ("-h", "--help"):
            sys.stdout.write(__doc__ or "")
            sys.exit(0)
        else:
            break  # no `--`: the command starts at the first word that is not ours
        i += 1
    command = argv[i:]
    if not command:
        usage("no command given")
    return run_dir or os.getcwd(), timeout, command, home, gpu


class Deadline(object):
    def __init__(self, seconds):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def spent(self):
        return time.monotonic() >= self.end


def environ_bytes():
    """The environment as bytes, name → value: a value is never decoded whole (one of 1 MiB costs what is kept)."""
    if getattr(os, "supports_bytes_environ", False):
        return os.environb
    return {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}


def tool_environment(environ):
    """What the short tools (git, nvidia-smi) inherit: the launch's environment less its oversized variables."""
    env = {}
    size = 0
    for k, v in environ.items():
        if len(v) > MAX_TOOL_VALUE or size + len(k) + len(v) > MAX_TOOL_ENV:
            continue
        size += len(k) + len(v) + 2
        env[os.fsdecode(k)] = os.fsdecode(v)
    return env


def run_tool(argv, deadline, cwd=None, env_extra=None, max_bytes=8 << 20, stderr=False):
    """(exit code, stdout bytes, sha256 of all stdout, stdout size) of a short tool (`stderr`: stderr too, in the same
    stream); killed at the deadline, so that no child outlives the exec. stdin is /dev/null: the command's own stdin
    is never read."""
    env = tool_environment(environ_bytes())
    env.update(env_extra or {})
    if deadline.spent():
        raise RuntimeError("%s: not started, the %s s limit (--timeout) was spent" % (os.path.basename(argv[0]),
                                                                                   deadline.seconds))
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT if stderr else subprocess.DEVNULL, cwd=cwd, env=env)
    digest = hashlib.sha256()
    kept = []
    size = 0
    timer = threading.Timer(deadline.left(), p.kill)
    timer.daemon = True
    timer.start()
    try:
        assert p.stdout is not None
        while True:
            chunk = p.stdout.read(65536)
            if not chunk:
                break
            digest.update(chunk)
            if size < max_bytes:
                kept.append(chunk[:max_bytes - size])
            size += len(chunk)
        rc = p.wait()
    finally:
        timer.cancel()
        if p.poll() is None:
            p.kill()
            p.wait()
    if rc < 0 and deadline.left() <= 0:
        raise RuntimeError("%s: timed out" % os.path.basename(argv[0]))
    return rc, b"".join(kept), digest.hexdigest(), size


# ------------------------------------------------------------------------------------------------------ facts

def _moves_speed(name):
    return name in kg_common.SPEED_ENV_NAMES or name.startswith(kg_common.SPEED_ENV_PREFIXES)


def _names(names):
    """A few left-out names for a message, each clipped."""
    shown = [n if len(n) <= 64 else n[:64] + "…" for n in names[:SHOWN_NAMES]]
    return ", ".join(shown) + (", …" if len(names) > SHOWN_NAMES else "")


def collect_env(deadline, budget=MAX_ENV_BYTES):
    """(env, error, truncated) of the launch's environment, redacted: read under the deadline and within `budget`
    bytes of JSON, the variables that move speed first, then the others by name, each value at most MAX_VALUE_CHARS
    (only that much of it is decoded and redacted). Reading stops at the first variable past the deadline or the
    budget; `error` (the deadline) and `truncated` (the budget, shortened values) say what was left out."""
    environ = environ_bytes()
    names = sorted(((os.fsdecode(k), k) for k in environ), key=lambda n: (not _moves_speed(n[0]), n[0]))
    out = {}
    used = 2
    shortened = []
    stop = None
    done = 0
    for name, key in names:
        if deadline.spent():
            stop = "deadline"
            break
        raw = environ.get(key, b"")
        value = os.fsdecode(raw[:MAX_VALUE_CHARS * 4])
        cut = len(value) > MAX_VALUE_CHARS or len(raw) > MAX_VALUE_CHARS * 4
        if cut:
            value = value[:MAX_VALUE_CHARS] + "…"
        value = kg_redact.redact_value(name, value)
        cost = len(json.dumps(name)) + len(json.dumps(value)) + 2
        if used + cost > budget:
            stop = "budget"
            break
        if cut:
            shortened.append(name)
        out[name] = value
        used += cost
        done += 1
    left = [n for n, _ in names[done:]]
    error = truncated = None
    if stop == "deadline":
        error = ("stopped at the %s s limit (--timeout) after %d of %d variables; left out: %s"
                 % (deadline.seconds, done, len(names), _names(left)))
    notes = []
    if stop == "budget":
        notes.append("%d of %d variables left out at the environment's share of the record (%d bytes): %s"
                     % (len(left), len(names), budget, _names(left)))
    if shortened:
        notes.append("%d values cut to %d characters: %s" % (len(shortened), MAX_VALUE_CHARS, _names(shortened)))
    if notes:
        truncated = "; ".join(notes)
    return out, error, truncated


def bounded_argv(command):
    """(argv redacted, note or None): at most MAX_ARGV_WORDS words of at most MAX_VALUE_CHARS characters each."""
    words = [a if len(a) <= MAX_VALUE_CHARS else a[:MAX_VALUE_CHARS] + "…" for a in command[:MAX_ARGV_WORDS]]
    cut = sum(1 for a in command[:MAX_ARGV_WORDS] if len(a) > MAX_VALUE_CHARS)
    notes = []
    if len(command) > MAX_ARGV_WORDS:
        notes.append("%d of %d words left out" % (len(command) - MAX_ARGV_WORDS, len(command)))
    if cut:
        notes.append("%d words cut to %d characters" % (cut, MAX_VALUE_CHARS))
    return kg_redact.redact_argv(words), "; ".join(notes) or None


def script_of(command):
    """The file the command runs: the first argument naming an existing file (train.py after python3, torchrun's
    script, accelerate launch's), else the command itself when it is a file."""
    for a in command[1:64]:  # a stat per word: a launch's script comes early
        if not a.startswith("-") and os.path.isfile(a):
            return os.path.abspath(a)
    return None


def command_executable(command):
    found = shutil.which(command[0])
    return {"name": command[0], "path": found, "realpath": os.path.realpath(found) if found else None}


def collect_git(where, deadline):
    base = ["git", "-C", where]
    rc, out, _, _ = run_tool(base + ["config", "-z", "--list"], deadline, env_extra=GIT_ENV)
    overrides = list(GIT_SAFE)
    if rc == 0:
        for item in out.decode("utf-8", "replace").split("\0"):
            key = item.split("\n", 1)[0]
            if (key.startswith("filter.") or key.startswith("diff.")) and key.endswith(_GIT_PROGRAM_KEYS):
                overrides += ["-c", key + "="]
    git = ["git"] + overrides + ["-C", where]
    rc, out, _, _ = run_tool(git + ["rev-parse", "--show-toplevel", "HEAD", "--abbrev-ref", "HEAD"], deadline,
                             env_extra=GIT_ENV)
    if rc != 0:
        # git's refusal of a repository another user owns, as a plain fact: never its advice to trust the repository
        _, said, _, _ = run_tool(git + ["rev-parse", "--git-dir"], deadline, env_extra=GIT_ENV, max_bytes=4096,
                                 stderr=True)
        refusal = kg_common.git_refusal(said.decode("utf-8", "replace"))
        if refusal:
            raise RuntimeError(refusal)
        raise RuntimeError("%s is not in a git checkout with a commit (git rev-parse exit %d)" % (where, rc))
    lines = out.decode("utf-8", "replace").splitlines()
    top, head, branch = (lines + [None, None, None])[:3]
    rc, diff, diff_sha, diff_size = run_tool(git + ["diff", "HEAD", "--no-ext-diff", "--no-textconv", "--binary",
                                                    "--no-color"], deadline, env_extra=GIT_ENV, max_bytes=0)
    if rc != 0:
        raise RuntimeError("git diff HEAD: exit %d" % rc)
    rc, names, _, _ = run_tool(git + ["diff", "HEAD", "--no-ext-diff", "--no-textconv", "--name-only", "-z"],
                               deadline, env_extra=GIT_ENV)
    changed = [n for n in names.decode("utf-8", "surrogateescape").split("\0") if n] if rc == 0 else None
    rc, subject, _, _ = run_tool(git + ["log", "-1", "--no-show-signature", "--format=%ct%x00%s", "HEAD"], deadline,
                                 env_extra=GIT_ENV)
    when, _, message = subject.decode("utf-8", "replace").strip().partition("\0")
    return {
        "root": top,
        "head": head,
        "branch": None if branch == "HEAD" else branch,
        "subject": kg_redact.redact_text(message) if rc == 0 else None,
        "committedAt": int(when) if rc == 0 and when.isdigit() else None,
        "dirty": diff_size > 0,
        "diffSha256": diff_sha if diff_size > 0 else None,
        "diffBytes": diff_size,
        "changedFiles": changed[:MAX_CHANGED_FILES] if changed is not None else None,
    }


def collect_gpus(deadline):
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {"tool": None, "gpus": []}
    rc, out, _, _ = run_tool([smi, "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"],
                             deadline, env_extra={"LC_ALL": "C"})
    if rc != 0:
        raise RuntimeError("nvidia-smi: exit %d" % rc)
    gpus = env_tools.parse_gpu_csv(out.decode("utf-8", "replace"), GPU_FIELDS)
    for i, g in enumerate(gpus):
        g["index"] = int(g["index"]) if str(g.get("index") or "").isdigit() else i
        if g.get("memory.total") is not None:
            try:
                g["memory.total"] = int(float(g["memory.total"]))
            except ValueError:
                pass
    drivers = sorted({g.get("driver_version") for g in gpus if g.get("driver_version")})
    return {"tool": smi, "driver": drivers[0] if len(drivers) == 1 else drivers or None, "gpus": gpus}


def collect_packages():
    p = env_python.collect_packages()
    return {"count": p["count"], "packages": p["packages"], "editable": p["editable"]}


def collect_accelerate(path):
    return launch_sources.accelerate_config(path)


def collect_torch(packages):
    return env_python.collect_torch(packages)


# ------------------------------------------------------------------------------------------------ the cap

def _dumps(doc):
    # ensure_ascii (the default): characters are bytes, so len() of the line is its size on disk
    return json.dumps(doc, sort_keys=True, default=str, allow_nan=False)


def _cut_packages(doc):
    pk = doc.get("packages")
    if not isinstance(pk, dict) or not pk.get("packages"):
        return None
    doc["packages"] = {"count": pk.get("count"), "packages": None,
                       "truncated": "record over %d bytes" % MAX_RECORD_BYTES}
    return "the list of %s packages left out (their count is kept)" % pk.get("count")


def _cut_env_values(doc):
    env = doc.get("env") or {}
    long_ = [k for k, v in env.items() if not _moves_speed(k) and isinstance(v, str) and len(v) > 256]
    for k in long_:
        env[k] = env[k][:256] + "…"
    return "%d values of variables that do not move speed cut to 256 characters" % len(long_) if long_ else None


def _cut_env_others(doc):
    env = doc.get("env") or {}
    others = sorted(k for k in env if not _moves_speed(k))
    for k in others:
        del env[k]
    return ("%d variables that do not move speed left out: %s" % (len(others), _names(others))) if others else None


def _cut_accelerate(doc):
    accel = doc.get("accelerate")
    if isinstance(accel, dict) and accel.get("config"):
        accel["config"] = None
        return "accelerate's config left out (its path is kept)"
    return None


def _cut_changed_files(doc):
    git = doc.get("git")
    if isinstance(git, dict) and git.get("changedFiles"):
        git["changedFiles"] = None
        return "the list of changed files left out (the diff's hash is kept)"
    return None


def _cut_argv(doc):
    argv = doc.get("argv") or []
    if len(argv) <= 256 and all(len(a) <= 256 for a in argv):
        return None
    doc["argv"] = [a if len(a) <= 256 else a[:256] + "…" for a in argv[:256]]
    return "the command line cut to 256 words of 256 characters (it had %d words)" % len(argv)


def _cut_env_all(doc):
    env = doc.get("env") or {}
    doc["env"] = {}
    return "the environment left out (%d variables)" % len(env) if env else None


def _cut_to_core(doc):
    kept = ("schema", "kind", "time", "unixTime", "pid", "run", "host", "cwd", "argv", "errors", "truncated",
            "tookMs")
    gone = sorted(k for k in doc if k not in kept)
    for k in gone:
        del doc[k]
    doc["argv"] = [a[:64] for a in (doc.get("argv") or [])[:32]]
    for e in doc.get("errors") or []:
        e["message"] = e["message"][:512]
    return "left out to keep the record within %d bytes: %s" % (MAX_RECORD_BYTES, ", ".join(gone))


# Least useful first: a record keeps the environment's speed variables, the command line and the git state longest.
_CUTS = (("packages", _cut_packages), ("env", _cut_env_values), ("env", _cut_env_others),
         ("accelerate", _cut_accelerate), ("git", _cut_changed_files), ("argv", _cut_argv), ("env", _cut_env_all),
         ("record", _cut_to_core))


def fit(doc, cap=MAX_RECORD_BYTES):
    """The record as one JSON line of at most `cap` bytes: what does not fit is left out, least useful first, and
    each cut is named in the record's ``truncated`` (fact and what was left out)."""
    line = _dumps(doc)
    for fact, cut in _CUTS:
        if len(line) <= cap:
            return line
        note = cut(doc)
        if note:
            doc["truncated"].append({"fact": fact, "message": note})
            line = _dumps(doc)
    if len(line) > cap:
        raise NotRecorded("the record is over %d bytes even with its facts left out" % cap)
    return line


# ------------------------------------------------------------------------------------------------ the file

# ------------------------------------------------------------------------------------------------ the record

def records_path(run_dir, home):
    """Where the launch records go (the GPU timeline beside them)."""
    return launch_sources.home_records(run_dir) if home else os.path.join(run_dir, ".known-good", "launches.jsonl")


def start_timeline(run_dir, home, gpu):
    """The launch's GPU timeline started (kg_gpu_sampler.start), as the record says it; a why worth saying on stderr
    (not "no nvidia-smi", not a sampler already running for this run) is said there once."""
    if gpu["interval"] <= 0:
        return {"path": None, "why": "not asked for (--gpu-interval 0)"}
    t = kg_gpu_sampler.start(os.path.dirname(records_path(run_dir, home)), os.getpid(), gpu["interval"], gpu["cap"])
    if t.pop("said", False):
        sys.stderr.write("kg_record.py: GPU timeline not recorded: %s (the command runs as usual)\n" % t["why"])
    return t


def record(run_dir, timeout, command, home=False, timeline=None):
    started = time.time()
    deadline = Deadline(timeout)
    facts = {}
    script = script_of(command)
    git_dir = os.path.dirname(script) if script else os.getcwd()

    def fact(name, fn, *args):
        def body():
            try:
                facts[name] = (fn(*args), None)
            except BaseException as e:  # one fact that fails costs that fact only
                facts[name] = (None, "%s: %s" % (type(e).__name__, e))

        t = threading.Thread(target=body, name="kg_record:" + name)
        t.daemon = True
        t.start()
        return t

    errors = []
    truncated = []
    threads = {
        "packages": fact("packages", collect_packages),
        "git": fact("git", collect_git, git_dir, deadline),
        "gpus": fact("gpus", collect_gpus, deadline),
    }
    try:
        accel = launch_sources.accelerate_config_path(command, os.environ)
    except Exception as e:  # the config is one fact: failing to find it costs it only
        accel = None
        errors.append({"fact": "accelerate", "message": "%s: %s" % (type(e).__name__, e)})
    if accel is not None:
        threads["accelerate"] = fact("accelerate", collect_accelerate, accel)
    argv, argv_note = bounded_argv(command)
    if argv_note:
        truncated.append({"fact": "argv", "message": argv_note})
    env, env_error, env_note = collect_env(deadline)
    if env_error:
        errors.append({"fact": "env", "message": env_error})
    if env_note:
        truncated.append({"fact": "env", "message": env_note})
    doc = {
        "schema": SCHEMA,
        "kind": "launch",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "unixTime": round(started, 3),
        "pid": os.getpid(),
        "run": os.path.realpath(run_dir),
        "host": os.uname()[1] if hasattr(os, "uname") else None,
        "argv": argv,
        "cwd": os.getcwd(),
        "script": script,
        "executable": command_executable(command),
        "python": {"executable": sys.executable, "version": sys.version.replace("\n", " "),
                   "prefix": sys.prefix},
        "env": env,
        "errors": errors,
        "truncated": truncated,
    }
    if timeline is not None:
        doc["gpuTimeline"] = timeline

    def settle(name, t):
        t.join(deadline.left())
        value, error = facts.get(name, (None, None))
        if t.is_alive():
            value, error = None, "not done within %s s (--timeout)" % timeout
        doc[name] = value
        if error:
            errors.append({"fact": name, "message": kg_redact.redact_text(error)})

    for name, t in threads.items():
        settle(name, t)
    pk = doc.get("packages") or {}
    # torch is looked for after the packages (its version there) and under the same deadline: a sys.path entry on a
    # hung mount costs this fact only
    settle("torch", fact("torch", collect_torch, pk.get("packages") if pk else None))
    doc["tookMs"] = round((time.time() - started) * 1000, 1)
    line = fit(doc)
    target = records_path(run_dir, home)
    fd = open_record(target)
    try:
        data = (line + "\n").encode("utf-8")
        wrote = os.write(fd, data)  # one write: launches of parallel ranks never interleave
        if wrote != len(data):
            raise NotRecorded("%s: %d of %d bytes written (disk full?)" % (target, wrote, len(data)))
    finally:
        os.close(fd)
    return doc


def main(argv):
    run_dir, timeout, command, home, gpu = parse_argv(argv)
    timeline = None
    try:
        timeline = start_timeline(run_dir, home, gpu)
    except BaseException as e:  # the launch matters more than its GPU timeline
        sys.stderr.write("kg_record.py: GPU timeline not recorded (%s: %s)\n" % (type(e).__name__, e))
    try:
        record(run_dir, timeout, command, home, timeline)
    except NotRecorded as e:
        sys.stderr.write("kg_record.py: launch not recorded: %s (the command runs as usual)\n" % e)
    except BaseException as e:  # the launch matters more than its record
        sys.stderr.write("kg_record.py: launch not recorded (%s: %s)\n" % (type(e).__name__, e))
    sys.stderr.flush()
    sys.stdout.flush()
    # Python ignores SIGPIPE and SIGXFSZ for itself; an ignored signal stays ignored across exec, so the command
    # would otherwise start with dispositions a bare launch never has.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.stderr.write("kg_record.py: cannot run %s: %s\n" % (command[0], e.strerror or e))
        sys.exit(126 if os.path.exists(command[0]) or shutil.which(command[0]) else 127)


if __name__ == "__main__":
    main(sys.argv[1:])
