"""What other tools already record about a run's launches, read where present (stdlib only, 3.8+, bounded).

A module of what_changed.py. Each launch found becomes a record of the shape ``what_changed._slim_launch`` gives
kg_record.py's, with its ``source`` and a flat ``config`` (dotted keys, values as text) the report compares key by key:

- Lightning: ``lightning_logs/version_N/hparams.yaml`` and LightningCLI's ``config.yaml`` there (one launch a version;
  ``lightningConfig`` the latter's path, ``outputDir`` the folder holding ``lightning_logs/``);
- Hydra: ``.hydra/config.yaml`` + ``overrides.yaml`` of the run folder and of ``outputs/<date>/<time>/`` (one a launch),
  with ``hydra.yaml``'s ``hydra.runtime.cwd`` (``cwd``: where the app ran), ``hydra.job.name`` (``job``: the script's
  name, never its path) and ``hydra.runtime.output_dir`` (``outputDir``);
- wandb: ``wandb/run-*/files/wandb-metadata.json`` (``program``, ``codePathLocal`` (the script relative to the folder
  the run started in), ``codePath`` (relative to ``root``: the git checkout, else ``wandb.init(dir=)``), ``args``,
  ``executable`` (the interpreter), ``python``, ``git.commit``, ``startedAt``) and ``files/config.yaml`` (one a wandb
  run): a relaunchable command line, its folder and its interpreter;
- MLflow: ``mlruns/<exp>/<run>/params/*`` and ``tags/mlflow.source.git.commit`` (one a run);
- accelerate's launch config (``accelerate_config``, read by kg_record.py at each ``accelerate launch``): the file
  ``--config_file`` names, else ``$HF_HOME/accelerate/default_config.yaml`` (``~/.cache/huggingface/…``); YAML from
  ``accelerate config``'s questions, JSON from ``accelerate config default`` (whatever the file's name).

YAML is read by a small reader of block mappings and scalar lists (what these tools write); anything else is left
out, never guessed.
"""
import calendar
import datetime
import hashlib
import json
import os

import kg_common

MAX_FILE = 256 * 1024
MAX_KEYS = 2000
MAX_VALUE = 200
MAX_RUNS = 64
MAX_PATH = 4096


def _read(path):
    try:
        # FIFOs and devices are refused, never opened to block (open_regular)
        with kg_common.open_regular(path) as f:
            data = f.read(MAX_FILE + 1)
    except (OSError, kg_common.ProbeError):
        return None
    if len(data) > MAX_FILE:
        return None
    return data.decode("utf-8", "replace")


def _scalar(text):
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        t = t[1:-1]
    return t[:MAX_VALUE]


def flat_yaml(text):
    """A block-mapping YAML document as {dotted.key: text}; a list of scalars as its items joined by ', '."""
    out = {}
    stack = []  # (indent, key)
    last_key = None
    for raw in text.splitlines():
        if len(out) >= MAX_KEYS:
            break
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#") or line.strip() in ("---", "..."):
            continue
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        if body.startswith("- "):
            if last_key is not None:
                prev = out.get(last_key)
                item = _scalar(body[2:])
                out[last_key] = item if not prev else (prev + ", " + item)[:MAX_VALUE]
            continue
        if ":" not in body:
            continue
        key, _, value = body.partition(":")
        key = _scalar(key)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([k for _, k in stack] + [key])
        if value.strip():
            out[dotted] = _scalar(value)
            last_key = None
        else:
            stack.append((indent, key))
            last_key = dotted
            out.setdefault(dotted, "")
    parents = set()
    for k in out:
        parts = k.split(".")
        parents.update(".".join(parts[:i]) for i in range(1, len(parts)))
    # a key that only holds others is no value of its own
    return dict((k, v) for k, v in out.items() if not (v == "" and k in parents))


def _record(source, time, config, argv=None, python=None, git_head=None, where=None, cwd=None, interpreter=None):
    return {"source": source, "where": where, "time": time, "argv": argv or [], "cwd": cwd, "env": {},
            "interpreter": interpreter, "python": python, "gitHead": git_head, "gitDiff": None, "torch": None,
            "driver": None, "packages": {}, "config": dict(list(config.items())[:MAX_KEYS])}


def abs_path(value):
    """``value`` as a normalised absolute path, or None: a path another tool wrote is data, and a relaunch runs in it
    (cwd) or runs it (interpreter) only when it is plainly one (absolute, bounded, no control characters)."""
    if not isinstance(value, str) or not value.startswith("/") or len(value) > MAX_PATH:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return None
    return os.path.normpath(value)


def rel_path(value):
    """``value`` as a relative path inside its base (no ``..``, bounded, no control characters), or None."""
    if not isinstance(value, str) or not value or value.startswith("/") or len(value) > MAX_PATH:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return None
    norm = os.path.normpath(value)
    if norm == ".." or norm.startswith("../") or norm.startswith("-"):
        return None
    return norm


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _dirs(path):
    try:
        return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def lightning(run):
    out = []
    for top in ("lightning_logs", os.path.join("logs", "lightning_logs")):
        base = os.path.join(run, top)
        versions = [v for v in _dirs(base) if v.startswith("version_") and v[8:].isdigit()]
        for v in sorted(versions, key=lambda v: int(v[8:]))[-MAX_RUNS:]:
            d = os.path.join(base, v)
            config = {}
            for name, prefix in (("hparams.yaml", "hparams."), ("config.yaml", "")):
                text = _read(os.path.join(d, name))
                if text is not None:
                    config.update((prefix + k, val) for k, val in flat_yaml(text).items())
            if config:
                rec = _record("lightning", _mtime(d), config, where=d)
                # what a relaunch needs: LightningCLI's own config of this version (`fit --config` it) and the folder
                # the logs went under (trainer.default_root_dir: where `lightning_logs/` is)
                cli = os.path.join(d, "config.yaml")
                rec["lightningConfig"] = cli if os.path.isfile(cli) else None
                rec["outputDir"] = os.path.dirname(base)
                out.append(rec)
    return out


def hydra(run):
    out = []
    places = [run]
    outputs = os.path.join(run, "outputs")
    for day in _dirs(outputs)[-MAX_RUNS:]:
        places += [os.path.join(outputs, day, t) for t in _dirs(os.path.join(outputs, day))]
    for p in places[-MAX_RUNS:]:
        h = os.path.join(p, ".hydra")
        cfg = _read(os.path.join(h, "config.yaml"))
        if cfg is None:
            continue
        config = flat_yaml(cfg)
        over = _read(os.path.join(h, "overrides.yaml"))
        argv = [_scalar(line.strip()[2:]) for line in (over or "").splitlines() if line.strip().startswith("- ")]
        # hydra.yaml: where the app ran and its name (the script's stem); the script's path is recorded nowhere
        meta = flat_yaml(_read(os.path.join(h, "hydra.yaml")) or "")
        rec = _record("hydra", _mtime(os.path.join(h, "config.yaml")), config, argv=argv, where=h,
                      cwd=abs_path(meta.get("hydra.runtime.cwd")))
        job = meta.get("hydra.job.name")
        rec["job"] = job if job and rel_path(job) == job and "/" not in job else None
        rec["outputDir"] = abs_path(meta.get("hydra.runtime.output_dir")) or p
        out.append(rec)
    return out


def wandb(run):
    out = []
    base = os.path.join(run, "wandb")
    for r in [d for d in _dirs(base) if d.startswith("run-") or d.startswith("offline-run-")][-MAX_RUNS:]:
        files = os.path.join(base, r, "files")
        meta_text = _read(os.path.join(files, "wandb-metadata.json"))
        try:
            meta = json.loads(meta_text) if meta_text else {}
        except ValueError:
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        cfg = _read(os.path.join(files, "config.yaml"))
        config = dict((k, v) for k, v in flat_yaml(cfg).items() if not k.startswith("_wandb")) if cfg else {}
        # wandb's config.yaml nests each value under `value:`
        config = dict((k[:-6] if k.endswith(".value") else k, v) for k, v in config.items()
                      if not k.endswith(".desc"))
        args = meta.get("args")
        args = args if isinstance(args, list) else []
        program = meta.get("program")
        program = program if isinstance(program, str) else None
        git = meta.get("git")
        git = git if isinstance(git, dict) else {}
        commit = git.get("commit")
        python = meta.get("python")
        if not meta and not config:
            continue
        words = [str(a)[:MAX_VALUE] for a in args[:256]]
        interpreter = abs_path(meta.get("executable"))
        cwd, script = wandb_launch(meta)
        if script is None and abs_path(program):
            script = [abs_path(program)]  # the folder is not known (the person gives it), the script is
        # the interpreter, the script as the run's folder names it (a copy of the code runs it there), its args
        argv = ([interpreter] + script if interpreter and script else [program] if program else []) + words
        out.append(_record("wandb", _started(meta.get("startedAt"))
                           or _mtime(os.path.join(files, "wandb-metadata.json")), config, argv=argv,
                           python=python if isinstance(python, str) else None,
                           git_head=commit if isinstance(commit, str) else None,
                           where=os.path.join(base, r), cwd=cwd if interpreter else None, interpreter=interpreter))
    return out


def wandb_launch(meta):
    """(cwd, script words) of a wandb run from its wandb-metadata.json, or (None, None) where it does not say.

    ``program`` is ``__main__.__file__`` as the process had it (absolute from Python 3.9, else as typed) or
    ``-m module``; ``codePathLocal`` is it relative to the folder the run started in; ``codePath`` relative to
    ``root`` (the git checkout, else the folder ``wandb.init`` wrote under). The folder is the program's path less
    its ``codePathLocal``: both name the same file."""
    program = meta.get("program")
    root = abs_path(meta.get("root"))
    if not isinstance(program, str) or len(program) > MAX_PATH:
        return None, None
    if program.startswith("-m "):
        module = program[3:].strip()
        if not module or not all(part.isidentifier() for part in module.split(".")):
            return None, None
        return root, ["-m", module]  # wandb records no folder for a module: its root is the nearest it says
    local = rel_path(meta.get("codePathLocal"))
    full = abs_path(program)
    if full is None:
        given = rel_path(program)
        code = rel_path(meta.get("codePath"))
        if given is None or root is None:
            return None, None
        full = os.path.join(root, code) if code else os.path.join(root, given)
        # without codePath the root may be the checkout above the folder: only a file that is there is believed
        if not code and not os.path.isfile(full):
            return None, None
        local = local or given
    if local is None or not full.endswith("/" + local):
        return None, None
    return full[:-len(local) - 1] or "/", [local]


def _started(text):
    """wandb's ``startedAt`` (UTC, ISO 8601 with no zone or ``Z``) as epoch seconds, or None."""
    if not isinstance(text, str):
        return None
    whole, _, frac = text.rstrip("Z").partition(".")
    try:
        t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    return calendar.timegm(t.timetuple()) + (float("0." + frac) if frac.isdigit() else 0.0)


def mlflow(run):
    out = []
    base = os.path.join(run, "mlruns")
    for exp in _dirs(base)[:MAX_RUNS]:
        for r in _dirs(os.path.join(base, exp))[-MAX_RUNS:]:
            d = os.path.join(base, exp, r)
            params = os.path.join(d, "params")
            config = {}
            try:
                names = sorted(os.listdir(params))[:MAX_KEYS]
            except OSError:
                continue
            for n in names:
                v = _read(os.path.join(params, n))
                if v is not None:
                    config[n] = v.strip()[:MAX_VALUE]
            commit = _read(os.path.join(d, "tags", "mlflow.source.git.commit"))
            out.append(_record("mlflow", _mtime(params), config, git_head=commit.strip() if commit else None,
                               where=d))
    return out


def launches_of(run):
    """Every launch other tools recorded for the run, by source, oldest first within a source."""
    out = []
    for read in (lightning, hydra, wandb, mlflow):
        try:
            recs = read(run)
        except (OSError, ValueError, RecursionError):
            continue
        recs.sort(key=lambda r: (r["time"] is None, r["time"] or 0))
        out += recs
    return out


def _flat_json(value, prefix, out):
    if len(out) >= MAX_KEYS:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _flat_json(v, "%s.%s" % (prefix, k) if prefix else str(k), out)
    elif isinstance(value, list):
        out[prefix] = ", ".join(str(v) for v in value)[:MAX_VALUE]
    else:
        out[prefix] = ("null" if value is None else str(value).lower() if isinstance(value, bool)
                       else str(value))[:MAX_VALUE]


def _accelerate_default(env):
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                              "huggingface")
    yaml_path = os.path.join(home, "accelerate", "default_config.yaml")
    json_path = os.path.join(home, "accelerate", "default_config.json")
    # accelerate's own choice: the YAML one unless only the JSON one exists
    return yaml_path if os.path.isfile(yaml_path) or not os.path.isfile(json_path) else json_path


def accelerate_config_path(argv, env):
    """The launch config an ``accelerate launch`` command line reads, or None when argv is no accelerate launch."""
    words = [os.path.basename(a) for a in argv[:4]]
    launch = any(w == "accelerate" and i + 1 < len(words) and words[i + 1] == "launch" for i, w in enumerate(words))
    launch = launch or "accelerate.commands.launch" in argv[:4]
    if not launch:
        return None
    for i, a in enumerate(argv):
        if a in ("--config_file", "--config-file") and i + 1 < len(argv):
            return argv[i + 1]
        for flag in ("--config_file=", "--config-file="):
            if a.startswith(flag):
                return a[len(flag):]
        if a.endswith(".py") and not a.startswith("-"):
            break  # the script's own flags follow
    return _accelerate_default(env)


def accelerate_config(path):
    """{path, config: {dotted key: text}} of an accelerate launch config (bounded: MAX_FILE, MAX_KEYS)."""
    text = _read(path)
    if text is None:
        return {"path": path, "config": None, "error": "not read (missing, not a regular file or over %d bytes)"
                % MAX_FILE}
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return {"path": path, "config": None, "error": "not JSON"}
        config = {}
        _flat_json(data if isinstance(data, dict) else {}, "", config)
    else:
        config = flat_yaml(text)
    return {"path": path, "config": dict(sorted(config.items())[:MAX_KEYS]), "error": None}


def home_records(run):
    """Where kg_record.py --home keeps a run's launch records when they may not go inside the run folder:
    ``~/.known-good/runs/<sha256 of the run's real path, 16 hex>/launches.jsonl`` (kg_record writes, what_changed
    reads)."""
    key = hashlib.sha256(os.path.realpath(run).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(os.path.expanduser("~"), ".known-good", "runs", key, "launches.jsonl")
