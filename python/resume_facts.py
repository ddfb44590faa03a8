"""The resume-path facts of a training checkpoint, read from its pickle without torch and without loading a tensor.

Usage: python3 resume_facts.py PATH

stdlib only.  PATH is a torch checkpoint (torch zip or the legacy format, Lightning's ``.ckpt``), a Hugging Face
Trainer checkpoint folder (``optimizer.pt``, ``scheduler.pt``, ``rng_state*.pth``, ``model.safetensors`` or
``pytorch_model.bin``) or an accelerate ``save_state`` folder (``optimizer.bin``, ``scheduler.bin``,
``random_states_N.pkl``, ``model.safetensors``).  The pickle is decoded by ckpt_args' restricted unpickler (kg_pickle:
nothing named by the file is imported or called); a tensor is its storage's metadata only.  torch.save writes the
storage's device into the pickle (the persistent id ``('storage', type, key, location, numel)``, in the zip format and
the legacy one alike), so where a tensor lived when it was saved is read without its bytes.

What a restart can change without any setting changing is where the resumed process put its state: ``torch.load(...,
map_location="cuda")`` puts AdamW's ``step`` counters on the GPU, and ``Optimizer.load_state_dict`` leaves ``step``
where it is found unless the param group is ``capturable`` or ``fused`` (every other state tensor is moved to its
parameter's device and dtype), so the checkpoints the resumed run writes say ``cuda:0`` where those before said
``cpu``.  This probe reports, for each optimizer state found:

- ``source``: where it is (``optimizer``, ``optimizer_states[0]`` of Lightning, ``optim``, HF's ``optimizer.pt``,
  accelerate's ``optimizer.bin``; any dict holding ``state`` and ``param_groups`` is one);
- ``state``: per state key (``step``, ``exp_avg``, ``exp_avg_sq``, ``momentum_buffer``...) the tensors by storage
  location and dtype with counts, how many values are plain numbers (``step`` before torch 1.12 and in some
  optimizers), and how many are something else;
- ``paramsWithState``; ``paramGroups``: each group's parameter count and its other values as data (``lr``,
  ``betas``, ``foreach``, ``fused``, ``capturable``, ``differentiable``...; a tensor value is ``{"$tensor": ...}``).

And the model weights (``weights``: the dicts made mostly of tensors outside the optimizer states, largest first, with
their tensors by location and dtype; a safetensors file has no location: ``null``), the scheduler, loader and RNG
state found (``scheduler``, ``loader``, ``rng``: the keys, or the folder's file names), and the checkpoint's step.

Bounded like ckpt_args (kg_common.LIMITS: the read, the pickle's opcodes and items, nesting); the walk of the decoded
objects visits each container once (a pickle that shares one dict a million times is walked once) and stops at
LIMITS["items"] steps with a warning.  A file that is not a checkpoint is a ``not-a-checkpoint`` error.

Result: ``{path, format, bytes, mtime, step, optimizers, weights, scheduler, loader, rng, topLevelKeys,
unsafeGlobals, warnings, bytesRead}``.
"""
import os
import re
import stat

import kg_common
from ckpt_convert import _FAILED, _first_int, STEP_KEYS
from ckpt_formats import (
    _ACCELERATE_CUSTOM, _is_dcp, _looks_like_safetensors, _open, _read_legacy, _read_safetensors_header,
    _read_torch_zip,
)
from kg_pickle_objects import _BigInt, _ODict, _Tensor, _short_repr
from kg_pickle_reader import _Reader

MAX_OPTIMIZERS = 16
MAX_STATE_KEYS = 64
MAX_GROUPS = 32
MAX_GROUP_KEYS = 64
MAX_WEIGHTS = 4
MAX_FOUND = 32
MAX_TOP_KEYS = 200
MAX_FILES = 8
TEXT_SHOWN = 200

# safetensors' dtype names, as torch names them (what the pickles say)
_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "C64": "complex64",
}
_SCHEDULER = re.compile(r"sched", re.I)
_LOADER = re.compile(r"loader|sampler|data_?state|dataset_state|dl_state", re.I)
_RNG = re.compile(r"rng|random_state", re.I)
_OPTIMIZER_FILE = re.compile(r"optimizer(_[0-9]{1,4})?\.(pt|bin|pth)$")
_WEIGHTS_FILE = re.compile(r"(pytorch_model|model|adapter_model)(-[0-9]{5}-of-[0-9]{5}|_[0-9]{1,4})?"
                           r"\.(safetensors|bin|pt|pth)$")


class _Facts(object):
    def __init__(self, path, size):
        self.doc = {
            "path": path, "format": None, "bytes": size, "mtime": None, "step": None, "optimizers": [],
            "weights": [], "scheduler": [], "loader": [], "rng": [], "topLevelKeys": [], "unsafeGlobals": [],
            "warnings": [], "bytesRead": 0,
        }
        self.steps_left = kg_common.LIMITS["items"]
        self.walk_cut = False

    def warn(self, text):
        if len(self.doc["warnings"]) < 50 and text not in self.doc["warnings"]:
            self.doc["warnings"].append(text)

    def absorb(self, reader):
        for g in reader.unsafe:
            if g not in self.doc["unsafeGlobals"]:
                self.doc["unsafeGlobals"].append(g)
        for w in reader.warnings:
            self.warn(w)


# --- reading one file -----------------------------------------------------------------------------------------------


def _load(path, facts):
    """(format, the decoded top object) of one torch file; a safetensors file is (format, {name: _Tensor})."""
    f = _open(path)
    try:
        head = f.read(16)
        f.seek(0)
        reader = _Reader()
        if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
            fmt, top = "torch-zip", _read_torch_zip(f, path, reader)
        elif head[:1] == b"\x80" or head[:1] in (b"(", b"}", b"]", b"c", b"K", b"I", b"N"):
            fmt, top = _read_legacy(f, path, reader)
        elif _looks_like_safetensors(head):
            _meta, tensors = _read_safetensors_header(f, path, os.fstat(f.f.fileno()).st_size)
            return "safetensors", dict((k, _Tensor(_SAFETENSORS_DTYPES.get(t["dtype"], t["dtype"]), t["shape"]))
                                       for k, t in tensors.items())
        else:
            raise kg_common.ProbeError("not a checkpoint (not a torch zip, legacy torch, pickle or safetensors "
                                       "file): %s" % path, "not-a-checkpoint")
        facts.absorb(reader)
        if top is _FAILED:
            return fmt, None
        if _is_dcp(top):
            raise kg_common.ProbeError("a torch.distributed.checkpoint .metadata file: its tensors' devices are not "
                                       "in it: %s" % path, "unreadable-format")
        if isinstance(top, dict) and ("pytorch-lightning_version" in top or "hyper_parameters" in top):
            fmt = "lightning"
        return fmt, top
    finally:
        facts.doc["bytesRead"] += f.count
        f.close()


# --- what the decoded objects hold ----------------------------------------------------------------------------------


def _is_dict(v):
    return type(v) is dict or type(v) is _ODict


def _is_optimizer_state(v):
    return _is_dict(v) and _is_dict(v.get("state")) and isinstance(v.get("param_groups"), (list, tuple))


def _text(k):
    if isinstance(k, str):
        return k[:TEXT_SHOWN]
    if isinstance(k, int) and not isinstance(k, bool) and k.bit_length() <= 64:
        return str(k)
    return _short_repr(k)


def _child_path(base, key):
    if isinstance(key, int) and not isinstance(key, bool):
        return "%s[%d]" % (base, key)
    key = _text(key)
    return "%s.%s" % (base, key) if base else key


def _walk(facts, top, base):
    """Pre-order walk of the containers under ``top``: (path, container, depth) for each, each container once."""
    seen = set()
    stack = [(base, top, 0)]
    while stack:
        path, obj, depth = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield path, obj, depth
        if _is_optimizer_state(obj) or depth >= kg_common.LIMITS["depth"]:
            continue
        if _is_dict(obj):
            children = [(k, v) for k, v in obj.items() if _is_dict(v) or type(v) in (list, tuple)]
        elif type(obj) in (list, tuple):
            children = [(i, v) for i, v in enumerate(obj) if _is_dict(v) or type(v) in (list, tuple)]
        else:
            continue
        facts.steps_left -= len(obj) + 1
        if facts.steps_left < 0:
            if not facts.walk_cut:
                facts.walk_cut = True
                facts.warn("the checkpoint's objects were walked only up to the item-count limit (%d): what lies "
                           "past it is not reported" % kg_common.LIMITS["items"])
            return
        for k, v in reversed(children):
            stack.append((_child_path(path, k), v, depth + 1))


def _where(counts):
    """[{location, dtype, count}] from {(location, dtype): count}, most first."""
    return [{"location": loc, "dtype": dt, "count": n}
            for (loc, dt), n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0][0]), str(kv[0][1])))]


def _value(v):
    """A param group's value as data: plain values as they are, a short list of them, a tensor by its metadata."""
    if v is None or isinstance(v, (bool, int, float)):
        return str(v) if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64 else v
    if isinstance(v, str):
        return v[:TEXT_SHOWN]
    if isinstance(v, _Tensor):
        return {"$tensor": {"location": v.location, "dtype": v.dtype, "shape": list(v.shape)}}
    if isinstance(v, _BigInt):
        return repr(v)
    if type(v) in (list, tuple) and len(v) <= 16 and all(x is None or isinstance(x, (bool, int, float, str))
                                                         for x in v):
        return [_value(x) for x in v]
    return _short_repr(v)


def _optimizer_facts(facts, source, sd):
    keys = {}
    params = 0
    for _pid, pstate in sd["state"].items():
        facts.steps_left -= 1
        if not _is_dict(pstate):
            continue
        params += 1
        for k, v in pstate.items():
            facts.steps_left -= 1
            name = _text(k)
            entry = keys.get(name)
            if entry is None:
                if len(keys) >= MAX_STATE_KEYS:
                    facts.warn("%s: more than %d state keys: the first %d are shown" % (source, MAX_STATE_KEYS,
                                                                                         MAX_STATE_KEYS))
                    continue
                entry = keys[name] = {"tensors": {}, "numbers": 0, "other": 0}
            if isinstance(v, _Tensor):
                where = (v.location, v.dtype)
                entry["tensors"][where] = entry["tensors"].get(where, 0) + 1
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                entry["numbers"] += 1
            else:
                entry["other"] += 1
        if facts.steps_left < 0:
            facts.warn("%s: the optimizer state was read only up to the item-count limit (%d)"
                       % (source, kg_common.LIMITS["items"]))
            break
    state = {}
    for name, e in keys.items():
        n_tensors = sum(e["tensors"].values())
        kind = "tensor" if n_tensors and not e["numbers"] and not e["other"] else \
            "number" if e["numbers"] and not n_tensors and not e["other"] else \
            "other" if e["other"] and not n_tensors and not e["numbers"] else "mixed"
        state[name] = {"kind": kind, "tensors": _where(e["tensors"]), "numbers": e["numbers"], "other": e["other"]}
    groups = []
    all_groups = sd["param_groups"]
    for g in all_groups[:MAX_GROUPS]:
        if not _is_dict(g):
            groups.append({"params": None, "values": {}})
            continue
        ps = g.get("params")
        values = {}
        for k, v in g.items():
            if k == "params":
                continue
            if len(values) >= MAX_GROUP_KEYS:
                break
            values[_text(k)] = _value(v)
        groups.append({"params": len(ps) if type(ps) in (list, tuple) else None, "values": values})
    if len(all_groups) > MAX_GROUPS:
        facts.warn("%s: %d param groups: the first %d are shown" % (source, len(all_groups), MAX_GROUPS))
    return {"source": source, "paramsWithState": params, "state": state, "paramGroups": groups,
            "paramGroupCount": len(all_groups)}


def _tensor_dict(v):
    """(tensors, dict) when most of a dict's values are tensors (a state_dict), else None."""
    if not _is_dict(v) or not v:
        return None
    tensors = [x for x in v.values() if isinstance(x, _Tensor)]
    return tensors if 2 * len(tensors) >= len(v) else None


def _weights_facts(source, tensors):
    counts = {}
    nbytes = 0
    for t in tensors:
        counts[(t.location, t.dtype)] = counts.get((t.location, t.dtype), 0) + 1
        nbytes += t.nbytes
    return {"source": source, "tensors": len(tensors), "bytes": nbytes, "where": _where(counts)}


def _note_key(facts, path, key):
    text = _text(key)
    for name, pattern in (("scheduler", _SCHEDULER), ("loader", _LOADER), ("rng", _RNG)):
        if pattern.search(text) and len(facts.doc[name]) < MAX_FOUND:
            facts.doc[name].append(path)


def _scan(facts, top, base, name_of_top=None):
    """Optimizer states, weights and the scheduler/loader/RNG keys under one decoded object."""
    doc = facts.doc
    weights = []
    for path, obj, depth in _walk(facts, top, base):
        shown = path or name_of_top or "(top level)"
        if _is_optimizer_state(obj):
            if len(doc["optimizers"]) < MAX_OPTIMIZERS:
                doc["optimizers"].append(_optimizer_facts(facts, shown, obj))
            else:
                facts.warn("more than %d optimizer states: the first %d are shown" % (MAX_OPTIMIZERS,
                                                                                      MAX_OPTIMIZERS))
            continue
        tensors = _tensor_dict(obj)
        if tensors is not None:
            weights.append(_weights_facts(shown, tensors))
            continue
        if _is_dict(obj) and depth == 0:
            # top-level keys only, and only those holding state (a dict, a list, a tensor, an object), so that
            # hyper_parameters.sched = "cosine" is not a scheduler's state
            for k, v in list(obj.items())[:MAX_TOP_KEYS]:
                if not (v is None or isinstance(v, (bool, int, float, str, bytes))):
                    _note_key(facts, name_of_top + ":" + _text(k) if name_of_top else _text(k), k)
    weights.sort(key=lambda w: -w["tensors"])
    doc["weights"].extend(weights[:MAX_WEIGHTS])
    if len(weights) > MAX_WEIGHTS:
        facts.warn("%d dicts of tensors: the %d largest are shown" % (len(weights), MAX_WEIGHTS))


def _read_single(path, facts):
    doc = facts.doc
    fmt, top = _load(path, facts)
    doc["format"] = fmt
    if top is None:
        facts.warn("the pickle could not be decoded to its end: nothing is reported from it")
        return
    if fmt == "safetensors" and isinstance(top, dict):
        doc["weights"].append(_weights_facts("(top level)", list(top.values())))
        return
    if isinstance(top, dict):
        doc["topLevelKeys"] = [_text(k) for k in list(top)[:MAX_TOP_KEYS]]
        doc["step"] = _first_int(top, STEP_KEYS)
    _scan(facts, top, "")


# --- folders ----------------------------------------------------------------------------------------------------------


def _read_folder(path, facts):
    doc = facts.doc
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise kg_common.ProbeError("cannot list %s: %s" % (path, e.strerror or e), "unreadable")
    if ".metadata" in names:
        raise kg_common.ProbeError("a torch.distributed.checkpoint folder: its tensors' devices are not in its "
                                   "metadata: %s" % path, "unreadable-format")
    optimizers = [n for n in names if _OPTIMIZER_FILE.match(n)]
    weights = [n for n in names if _WEIGHTS_FILE.match(n)]
    accelerate = any(n.startswith("random_states_") or _ACCELERATE_CUSTOM.match(n) for n in names) or \
        any(n.endswith(".bin") for n in optimizers)
    hf = "trainer_state.json" in names or "training_args.bin" in names
    if not (optimizers or weights or hf or accelerate):
        raise kg_common.ProbeError("not a checkpoint folder (no optimizer.pt, optimizer.bin, model.safetensors, "
                                   "pytorch_model.bin or trainer_state.json): %s" % path, "not-a-checkpoint")
    doc["format"] = "hf-folder" if hf else "accelerate" if accelerate else "folder"
    doc["topLevelKeys"] = names[:MAX_TOP_KEYS]
    for n in names:
        for name, pattern in (("scheduler", _SCHEDULER), ("loader", _LOADER), ("rng", _RNG)):
            if pattern.search(n) and len(doc[name]) < MAX_FOUND:
                doc[name].append(n)
    for n in (optimizers + weights)[:2 * MAX_FILES]:
        if n in weights and weights.index(n) >= MAX_FILES:
            continue
        full = os.path.join(path, n)
        try:
            if not stat.S_ISREG(os.stat(full).st_mode):
                continue
        except OSError:
            continue
        _fmt, top = _load(full, facts)
        if top is None:
            facts.warn("%s could not be decoded to its end: nothing is reported from it" % n)
        elif _fmt == "safetensors" and isinstance(top, dict):
            doc["weights"].append(_weights_facts(n, list(top.values())))
        else:
            _scan(facts, top, "", name_of_top=n)
    if len(weights) > MAX_FILES:
        facts.warn("%d weight files: the first %d are read" % (len(weights), MAX_FILES))
    if "trainer_state.json" in names:
        doc["step"] = _trainer_step(os.path.join(path, "trainer_state.json"), facts)


def _trainer_step(path, facts):
    try:
        with kg_common.open_regular(path) as f:
            data = kg_common.read_bounded(f, None, "trainer_state.json")
        facts.doc["bytesRead"] += len(data)
        ts = kg_common.loads_bounded(data.decode("utf-8"), "trainer_state.json")
    except (kg_common.ProbeError, OSError, ValueError, UnicodeDecodeError) as e:
        facts.warn("could not read trainer_state.json: %s" % e)
        return None
    step = ts.get("global_step") if isinstance(ts, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


# --------------------------------------------------------------------------------------------------------------------


def main(argv):
    parser = kg_common.arg_parser("resume_facts.py", description="The resume-path facts of a checkpoint.")
    parser.add_argument("path")
    args = parser.parse_args(argv)
    path = os.path.expanduser(args.path)
    st = kg_common.stat_or_fail(path)
    facts = _Facts(path, st.st_size)
    if stat.S_ISDIR(st.st_mode):
        facts.doc["bytes"] = 0
        _read_folder(path, facts)
    else:
        if st.st_size == 0:
            raise kg_common.ProbeError("empty file, not a checkpoint: %s" % path, "not-a-checkpoint")
        _read_single(path, facts)
    facts.doc["mtime"] = st.st_mtime
    return facts.doc


if __name__ == "__main__":
    kg_common.run(main)
