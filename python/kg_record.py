"""Record the facts of one launch of a training command, then run the command itself.

Usage: python3 kg_record.py [--run DIR] [--home] [--timeout SECONDS] -- CMD [ARGS...]

Appends one JSON line to DIR/.known-good/launches.jsonl (DIR: the current folder unless --run names one; with --home
to ~/.known-good/runs/<hash of DIR's real path>/launches.jsonl instead, nothing written in the run folder): the time,
the command line, the cwd, the environment (secrets redacted by kg_redact), this interpreter and its sys.version, the
torch build (read from torch/version.py, never imported), the installed packages as env_snapshot reads them, the git
HEAD and a hash of the uncommitted diff of the script's checkout, the GPUs and driver when nvidia-smi is there, and for
``accelerate launch`` the launch config it reads (``--config_file`` or accelerate's default_config.yaml, flat).
Then it replaces itself with CMD (os.execvp): same PID, so exit code, signals, stdin and the terminal are the command's
own. Every fact is collected side by side in threads and bounded by --timeout (default 1 s): a fact that fails or is
late is named in the record's ``errors`` and costs that fact only; a record that cannot be written costs one line on
stderr, never the launch. stdlib only, Python 3.8+.
"""
import hashlib
import json
import os
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
import kg_redact  # noqa: E402
import launch_sources  # noqa: E402

SCHEMA = 1
DEFAULT_TIMEOUT_S = 1.0
MAX_VALUE_CHARS = 4096
MAX_CHANGED_FILES = 200
MAX_RECORD_BYTES = 512 * 1024
GPU_FIELDS = ("index", "name", "driver_version", "uuid", "memory.total")

# Git is run on a checkout the user may not own: only read-only subcommands, with every program the repository's
# config could name switched off (an empty filter/textconv command is "no filter" to git), the fsmonitor hook off,
# no pager, no prompts and no network.
GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat",
            "-c", "diff.external=", "-c", "core.sshCommand=false", "-c", "protocol.allow=never",
            "-c", "core.untrackedCache=false", "-c", "credential.helper=", "-c", "core.askPass=")
_GIT_PROGRAM_KEYS = (".clean", ".smudge", ".process", ".textconv", ".command")
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_EXTERNAL_DIFF": "",
           "GIT_ASKPASS": "", "SSH_ASKPASS": "", "LC_ALL": "C"}


def usage(message):
    sys.stderr.write("kg_record.py: %s\nusage: python3 kg_record.py [--run DIR] [--home] [--timeout SECONDS] -- CMD "
                     "[ARGS...]\n" % message)
    sys.exit(2)


def parse_argv(argv):
    run_dir = None
    timeout = DEFAULT_TIMEOUT_S
    home = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a in ("--run", "--timeout") and i + 1 < len(argv):
            if a == "--run":
                run_dir = argv[i + 1]
            else:
                try:
                    timeout = float(argv[i + 1])
                except ValueError:
                    usage("--timeout takes seconds, got %r" % argv[i + 1])
            i += 2
            continue
        if a == "--home":
            home = True
        elif a.startswith("--run="):
            run_dir = a[len("--run="):]
        elif a.startswith("--timeout="):
            try:
                timeout = float(a[len("--timeout="):])
            except ValueError:
                usage("--timeout takes seconds, got %r" % a)
        elif a in ("-h", "--help"):
            sys.stdout.write(__doc__ or "")
            sys.exit(0)
        else:
            break  # no `--`: the command starts at the first word that is not ours
        i += 1
    command = argv[i:]
    if not command:
        usage("no command given")
    return run_dir or os.getcwd(), timeout, command, home


class Deadline(object):
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())


def run_tool(argv, deadline, cwd=None, env_extra=None, max_bytes=8 << 20):
    """(exit code, stdout bytes, sha256 of all stdout, stdout size) of a short tool; killed at the deadline, so that no
    child outlives the exec. stdin is /dev/null: the command's own stdin is never read."""
    env = dict(os.environ)
    env.update(env_extra or {})
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
                         env=env)
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

def collect_env():
    out = {}
    for name, value in sorted(os.environ.items()):
        if len(value) > MAX_VALUE_CHARS:
            value = value[:MAX_VALUE_CHARS] + "…"
        out[name] = kg_redact.redact_value(name, value)
    return out


def script_of(command):
    """The file the command runs: the first argument naming an existing file (train.py after python3, torchrun's
    script, accelerate launch's), else the command itself when it is a file."""
    for a in command[1:]:
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
    rc, subject, _, _ = run_tool(git + ["log", "-1", "--format=%ct%x00%s", "HEAD"], deadline, env_extra=GIT_ENV)
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


def record(run_dir, timeout, command, home=False):
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

    threads = {
        "packages": fact("packages", collect_packages),
        "git": fact("git", collect_git, git_dir, deadline),
        "gpus": fact("gpus", collect_gpus, deadline),
    }
    doc = {
        "schema": SCHEMA,
        "kind": "launch",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "unixTime": round(started, 3),
        "pid": os.getpid(),
        "run": os.path.realpath(run_dir),
        "host": os.uname()[1] if hasattr(os, "uname") else None,
        "argv": kg_redact.redact_argv(command),
        "cwd": os.getcwd(),
        "script": script,
        "executable": command_executable(command),
        "python": {"executable": sys.executable, "version": sys.version.replace("\n", " "),
                   "prefix": sys.prefix},
        "env": collect_env(),
        "errors": [],
    }
    try:
        accel = launch_sources.accelerate_config_path(command, os.environ)
        if accel is not None:
            doc["accelerate"] = launch_sources.accelerate_config(accel)
    except Exception as e:  # the config is one fact: failing to read it costs it only
        doc["errors"].append({"fact": "accelerate", "message": "%s: %s" % (type(e).__name__, e)})
    for name, t in threads.items():
        t.join(deadline.left())
        value, error = facts.get(name, (None, "not done within %.1f s" % timeout))
        if t.is_alive():
            error = "not done within %.1f s" % timeout
        doc[name] = value
        if error:
            doc["errors"].append({"fact": name, "message": kg_redact.redact_text(error)})
    pk = doc.get("packages") or {}
    try:
        doc["torch"] = env_python.collect_torch(pk.get("packages")) if pk else env_python.collect_torch(None)
    except BaseException as e:
        doc["torch"] = None
        doc["errors"].append({"fact": "torch", "message": "%s: %s" % (type(e).__name__, e)})
    doc["tookMs"] = round((time.time() - started) * 1000, 1)
    line = json.dumps(doc, sort_keys=True, default=str, allow_nan=False)
    if len(line) > MAX_RECORD_BYTES and doc.get("packages"):
        doc["packages"] = {"count": pk.get("count"), "packages": None, "truncated": "record over %d bytes"
                           % MAX_RECORD_BYTES}
        line = json.dumps(doc, sort_keys=True, default=str, allow_nan=False)
    target = launch_sources.home_records(run_dir) if home else os.path.join(run_dir, ".known-good", "launches.jsonl")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))  # one write: launches of parallel ranks never interleave
    finally:
        os.close(fd)
    return doc


def main(argv):
    run_dir, timeout, command, home = parse_argv(argv)
    try:
        record(run_dir, timeout, command, home)
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
