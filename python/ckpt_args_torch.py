"""Read a checkpoint's args with the host's own torch.load: the fallback when ckpt_args.py cannot decode a file.

Usage: python3 ckpt_args_torch.py PATH [--key KEY]... [--unsafe]

Loads with ``torch.load(PATH, map_location="cpu", weights_only=True, mmap=True)`` (``mmap`` where this torch has
it, so the weights are mapped, not read).  ``--unsafe`` loads with ``weights_only=False``: that runs any code inside
the file, and the extension passes it only after a modal warning that names the file.  torch is imported inside
``main`` (module load stays cheap); run it one-shot, never in the resident helper, so torch's memory goes away
with the process.

Result: the same shape as ckpt_args.py (format ``torch-load``), so one renderer shows both.
"""
import os

import kg_common
import kg_redact

# torch maps gigabytes of address space and a benchmark runs for minutes: no memory or CPU cap here.
KG_LIMITS = {"memory": None, "cpu": None}

ARG_KEYS = ("args", "config", "hyper_parameters", "hparams", "cfg", "training_args", "opt")
STEP_KEYS = ("global_step", "step", "iteration", "iter", "num_updates", "train_step", "steps")
MAX_DEPTH = 40


def _plain(value, torch, stats, depth=0):
    """A JSON-able copy: tensors as {dtype, shape, bytes}, objects with a __dict__ as their fields, others as repr."""
    if depth > MAX_DEPTH:
        return "<too deep>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        n = value.numel() * value.element_size()
        stats["count"] += 1
        stats["bytes"] += n
        return {"dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape), "bytes": n}
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, dict):
        return dict((str(k), _plain(v, torch, stats, depth + 1)) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, torch, stats, depth + 1) for v in value]
    if isinstance(value, bytes):
        return "<%d bytes>" % len(value)
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict):
        return dict((str(k), _plain(v, torch, stats, depth + 1)) for k, v in fields.items())
    return repr(value)


def _type_name(value):
    t = type(value)
    return "%s.%s" % (t.__module__, t.__qualname__) if t.__module__ != "builtins" else t.__name__


def _load(torch, path, unsafe):
    kwargs = {"map_location": "cpu", "weights_only": not unsafe}
    try:
        return torch.load(path, mmap=True, **kwargs)
    except TypeError:
        # torch < 2.1 has no mmap
        return torch.load(path, **kwargs)
    except RuntimeError as e:
        # mmap needs a zip checkpoint; the legacy format loads without it
        if "mmap" not in str(e):
            raise
        return torch.load(path, **kwargs)


def main(argv):
    path, keys, unsafe = None, [], False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--key" and i + 1 < len(argv):
            keys.append(argv[i + 1])
            i += 1
        elif a == "--unsafe":
            unsafe = True
        elif a.startswith("--"):
            raise kg_common.ProbeError("usage: ckpt_args_torch.py PATH [--key KEY]... [--unsafe]", "usage")
        else:
            path = a
        i += 1
    if path is None:
        raise kg_common.ProbeError("usage: ckpt_args_torch.py PATH [--key KEY]... [--unsafe]", "usage")
    try:
        st = os.stat(path)
    except OSError as e:
        raise kg_common.ProbeError("cannot read %s: %s" % (path, e.strerror or e), "unreadable")
    try:
        import torch  # pyright: ignore[reportMissingImports] (on the GPU box only)
    except ImportError as e:
        raise kg_common.ProbeError(kg_common.no_torch_message(e), "no-torch")
    try:
        top = _load(torch, path, unsafe)
    except Exception as e:  # torch raises many types; the user needs one line, not a traceback
        text = str(e).strip().splitlines()
        first = text[0] if text else type(e).__name__
        if "WeightsUnpickler error:" in first:
            first = first[first.index("WeightsUnpickler error:"):]
        if not unsafe and ("weights_only" in str(e) or type(e).__name__ == "UnpicklingError"):
            raise kg_common.ProbeError("torch.load(weights_only=True) refused %s: %s" % (path, first), "needs-unsafe")
        raise kg_common.ProbeError("torch.load could not read %s: %s" % (path, first), "corrupt")

    stats = {"count": 0, "bytes": 0}
    key = None
    if isinstance(top, dict):
        for k in keys or [k for k in ARG_KEYS if k in top][:1]:
            if k not in top:
                raise kg_common.ProbeError("no key %s in the checkpoint" % k, "no-key")
            key = k
            break
    chosen = top[key] if key is not None else top
    _plain(top, torch, stats)
    args = _plain(chosen, torch, {"count": 0, "bytes": 0})
    if key is None and isinstance(args, dict):
        # no args key: the top-level values without the weights
        args = dict((k, v) for k, v in args.items() if not (isinstance(v, dict) and "dtype" in v and "shape" in v))
    step = None
    if isinstance(top, dict):
        for k in STEP_KEYS:
            if isinstance(top.get(k), int) and not isinstance(top.get(k), bool):
                step = top[k]
                break
    epoch = top.get("epoch") if isinstance(top, dict) and isinstance(top.get("epoch"), (int, float)) else None
    how = "weights_only=False" if unsafe else "weights_only=True"
    return {
        "format": "torch-load",
        "path": path,
        "bytes": st.st_size,
        "key": key,
        "args": kg_redact.redact_tree(args),  # secrets in the args never leave the host
        "argsType": _type_name(chosen),
        "step": step,
        "epoch": epoch,
        "tensors": stats,
        "topLevelKeys": [str(k) for k in top] if isinstance(top, dict) else [],
        "unsafeGlobals": [],
        "warnings": ["read with this host's torch %s (torch.load(%s)): the safe reader could not decode it"
                     % (torch.__version__, how)],
        "bytesRead": st.st_size,
        "mtime": st.st_mtime,
    }


if __name__ == "__main__":
    kg_common.run(main)
