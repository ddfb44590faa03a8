"""ckpt_args: decoded objects to JSON-able values (bounded, shared values shown once); which of them are the args."""
import datetime
import json

import kg_common
from kg_pickle_objects import (
    _BIG_BITS, _BigInt, _Key, _Name, _Namespace, _NpArray, _NpDtype, _ODict, _StandIn, _Storage, _Tensor, _short_repr,
)

# Tried in order when --key is not given.
ARG_KEYS = ("args", "config", "hyper_parameters", "hparams", "cfg", "training_args", "opt")
STEP_KEYS = ("global_step", "step", "iteration", "iter", "num_updates", "train_step", "steps")
MAX_NODES = 200000
MAX_DEPTH = 80
MAX_TOP_KEYS = 2000


# --------------------------------------------------------------------------------------------------------------------
# Decoded objects -> JSON-able values.


# How much of the args is shown: strings past TEXT_SHOWN characters are cut (their length said), and the whole
# rendering stops at MAX_NODES values or RENDER_BUDGET characters, well inside the answer's output limit.
TEXT_SHOWN = 16384
RENDER_BUDGET = kg_common.LIMITS["output"] // 8
# An object the pickle shares (memo) is shown in full where it first appears and as {"$ref": "<JSONPath of that
# place>"} everywhere after ($ is the shown value, .key or ["key"], [index]): a 4 KB file that references one
# string 2^18 times, or a graph that doubles at every level, stays small. Values this small are shown again instead.
REF_MIN_NODES = 8
REF_MIN_TEXT = 256


def _path_text(at):
    parts = []
    while at is not None:
        at, seg = at
        parts.append(seg)
    out = "$"
    for seg in reversed(parts):
        if isinstance(seg, int):
            out += "[%d]" % seg
        elif seg.replace("_", "a").isalnum() and not seg[:1].isdigit():
            out += "." + seg
        else:
            out += "[%s]" % json.dumps(seg)
    return out


# What a pickle that could not be decoded is, in place of its value (a hostile file is still reported).
_FAILED = object()


class _Converter(object):
    def __init__(self, prune_tensors=False):
        self.nodes = 0
        self.chars = 0
        self.truncated = False
        self.prune = prune_tensors
        self.refs = 0
        self._seen = {}  # id -> [place, nodes its rendering took (None while in progress)]
        self._tensor_only = {}

    def __call__(self, obj, depth=0, at=None):
        self.nodes += 1
        if self.nodes > MAX_NODES or self.chars > RENDER_BUDGET:
            self.truncated = True
            return "<truncated>"
        if depth > MAX_DEPTH:
            self.truncated = True
            return "<too deep>"
        if obj is None or isinstance(obj, bool):
            return obj if obj is None or type(obj) is bool else bool(obj)
        if isinstance(obj, float):
            return float(obj)
        if isinstance(obj, int):
            bits = obj.bit_length()
            if bits > _BIG_BITS:
                return {"$bigint": {"bits": bits, "digits": int(bits * 0.30103) + 1, "negative": obj < 0}}
            return int(obj)
        if isinstance(obj, str):
            n = len(obj)
            if n > REF_MIN_TEXT:
                ref = self._ref(obj, at)
                if ref is not None:
                    return ref
                self._seen[id(obj)][1] = REF_MIN_NODES + 1
            if n > TEXT_SHOWN:
                self.truncated = True
                self.chars += TEXT_SHOWN
                return "%s... [truncated: %d characters in all]" % (obj[:TEXT_SHOWN], n)
            self.chars += n
            return str(obj)
        if isinstance(obj, (bytes, bytearray)):
            return repr(bytes(obj)) if len(obj) <= 64 else "<%d bytes>" % len(obj)
        if isinstance(obj, complex):
            return repr(obj)
        if isinstance(obj, _Tensor):
            return obj.json()
        if isinstance(obj, _Storage):
            return {"storage": obj.dtype, "numel": obj.numel, "bytes": obj.nbytes}
        if isinstance(obj, _Name):
            return obj.text
        if isinstance(obj, _BigInt):
            return obj.json()
        if isinstance(obj, _Key):
            return repr(obj)
        if isinstance(obj, _NpDtype):
            return obj.name
        if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
            return obj.isoformat()
        if isinstance(obj, datetime.timedelta):
            return str(obj)
        if isinstance(obj, datetime.timezone):
            return _short_repr(obj.tzname(None))
        if isinstance(obj, type):
            return "<%s>" % (obj._kg_name if issubclass(obj, _StandIn) else obj.__name__)
        ref = self._ref(obj, at)
        if ref is not None:
            return ref
        entry = self._seen[id(obj)]
        before = self.nodes
        if isinstance(obj, dict):
            out = self._dict(obj.items(), depth, at)
        elif isinstance(obj, (list, tuple)):
            out = self._list(obj, depth, at)
        elif isinstance(obj, (set, frozenset)):
            out = self._list(sorted(obj, key=_short_repr) if len(obj) <= MAX_NODES else list(obj), depth, at)
        elif isinstance(obj, _Namespace):
            out = self._dict(obj.__dict__.items(), depth, at)
        elif isinstance(obj, _StandIn):
            out = self._standin(obj, depth, at)
        elif isinstance(obj, _NpArray):
            out = {"dtype": obj.dtype.name if isinstance(obj.dtype, _NpDtype) else "?", "shape": list(obj.shape)}
            if obj.values is not None:
                out["values"] = [self(v, depth + 1, (at, "values")) for v in obj.values]
        else:
            out = _short_repr(obj)
        entry[1] = self.nodes - before
        return out

    def _ref(self, obj, at):
        """{"$ref": place} when obj was shown before (or is being shown: a cycle); else None, and obj is noted."""
        entry = self._seen.get(id(obj))
        if entry is None:
            self._seen[id(obj)] = [at, None]
            return None
        if entry[1] is not None and entry[1] <= REF_MIN_NODES and not (isinstance(obj, str)):
            return None  # small: shown again
        self.refs += 1
        return {"$ref": _path_text(entry[0])}

    def _value(self, v, depth, at):
        if self.prune and self._has_tensor_only(v, 0):
            return _tensor_summary(v)
        return self(v, depth + 1, at)

    def _has_tensor_only(self, v, depth):
        """True for a tensor, or a container whose leaves are all tensors (a state_dict, optimizer moments)."""
        if isinstance(v, (_Tensor, _Storage)):
            return True
        if not isinstance(v, (dict, list, tuple)) or not v or depth > MAX_DEPTH:
            return False
        known = self._tensor_only.get(id(v))
        if known is None:
            self._tensor_only[id(v)] = False  # a cycle is not tensor-only
            vals = v.values() if isinstance(v, dict) else v
            known = all(self._has_tensor_only(x, depth + 1) for x in vals)
            self._tensor_only[id(v)] = known
        return known

    def _list(self, items, depth, at):
        return [self._value(v, depth, (at, i)) for i, v in enumerate(items)]

    def _dict(self, items, depth, at):
        out = {}
        for k, v in items:
            k = _key(k)
            out[k] = self._value(v, depth, (at, k))
        return out

    def _standin(self, obj, depth, at):
        kg = obj._kg
        state, args, items, lst, attrs = kg["state"], kg["args"], kg["items"], kg["list"], kg["attrs"]
        bare = state is None and not items and not lst and not attrs and not kg["kwargs"] and not args
        if obj._kg_ref and bare and not obj._kg_unsafe:
            return {"$enum": obj._kg_ref[0], "name": obj._kg_ref[1]}
        if (not obj._kg_unsafe and state is None and not items and not lst and not attrs and not kg["kwargs"]
                and len(args) == 1 and (args[0] is None or isinstance(args[0], (bool, int, float, str)))):
            if kg.reduced:  # Enum's own pickling: the class called with the member's value
                return {"$enum": obj._kg_name, "value": self(args[0], depth + 1, (at, "value"))}
            return self(args[0], depth, at)  # a str/int subclass (NEWOBJ)
        out = {"$class": obj._kg_name}
        if obj._kg_unsafe:
            out["$unsafe"] = True
        if args:
            out["$args"] = self._list(args, depth + 1, (at, "$args"))
        if kg["kwargs"]:
            out["$kwargs"] = self._dict(kg["kwargs"].items(), depth + 1, (at, "$kwargs"))
        if isinstance(state, dict):
            for k, v in self._dict(state.items(), depth, at).items():
                out.setdefault(k, v)
        elif state is not None:
            out["$state"] = self(state, depth + 1, (at, "$state"))
        if attrs:
            for k, v in self._dict(attrs.items(), depth, at).items():
                out.setdefault(k, v)
        if items:
            out["$items"] = self._dict(items, depth + 1, (at, "$items"))
        if lst:
            out["$list"] = self._list(lst, depth + 1, (at, "$list"))
        return out


def _tensor_summary(v):
    """'<tensor float32[3, 2]>' or '<12 tensors, 1.5 MB>' in place of tensors in a summary (a shared one once)."""
    if isinstance(v, _Tensor):
        return "<tensor %s%s>" % (v.dtype, v.shape)
    leaves = {}
    seen = set()
    stack = [v]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        else:
            leaves[id(x)] = x
    nbytes = sum(x.nbytes for x in leaves.values())
    return "<%d tensor%s, %s>" % (len(leaves), "" if len(leaves) == 1 else "s", kg_common.format_bytes(nbytes))


def _key(k):
    if isinstance(k, str):
        return k
    if isinstance(k, int) and not isinstance(k, bool) and k.bit_length() > _BIG_BITS:
        return "<integer of %d bits>" % k.bit_length()
    if isinstance(k, (int, float, bool)) or k is None:
        return json.dumps(k)
    if isinstance(k, _Name):
        return k.text
    if isinstance(k, _StandIn):
        state = k._kg["state"]
        if isinstance(state, dict) and isinstance(state.get("fqn"), str):
            return state["fqn"]
        if k._kg_ref and not k._kg_unsafe:
            return "%s.%s" % k._kg_ref
        args = k._kg["args"]
        if k._kg.reduced and not k._kg_unsafe and len(args) == 1:  # an enum member as a key: Class(value)
            return "%s(%s)" % (k._kg_name, _short_repr(args[0], 1))
    return _short_repr(k)


def _args_type(obj):
    if isinstance(obj, _Namespace):
        return "argparse.Namespace"
    if isinstance(obj, _StandIn):
        return obj._kg_name
    if isinstance(obj, _ODict):
        return "collections.OrderedDict"
    if obj is None:
        return None
    return type(obj).__name__


def _standin_state(obj):
    """The attributes of a stand-in (a TrainingArguments, a Metadata) as a dict, or None."""
    if not isinstance(obj, _StandIn):
        return None
    state = obj._kg["state"]
    out = dict(state) if isinstance(state, dict) else {}
    out.update(obj._kg["attrs"])
    return out


# --------------------------------------------------------------------------------------------------------------------


class _Result(object):
    def __init__(self, path, size):
        self.doc = {"format": None, "path": path, "bytes": size, "key": None, "args": None, "argsType": None,
                    "step": None, "epoch": None, "tensors": {"count": 0, "bytes": 0}, "topLevelKeys": [],
                    "unsafeGlobals": [], "warnings": [], "bytesRead": 0, "baseModel": None}


def _pick(top, keys, want_all, preferred=ARG_KEYS):
    """(key, value, found) following --key / the default order; key None with found False means 'summary'."""
    if want_all:
        return None, top, True
    if isinstance(top, dict):
        if keys:
            found = [(k, _lookup(top, k)) for k in keys]
            found = [(k, v) for k, v in found if v is not _MISSING]
            if not found:
                raise kg_common.ProbeError("no key %s in the checkpoint (top-level keys: %s)"
                                           % (", ".join(keys), ", ".join(sorted(_key(k) for k in top)[:20])),
                                           "no-key")
            if len(found) == 1:
                return found[0][0], found[0][1], True
            return ",".join(k for k, _ in found), dict(found), True
        for k in preferred:
            if k in top:
                return k, top[k], True
        return None, top, False
    if keys:
        state = _standin_state(top) if not isinstance(top, _Namespace) else top.__dict__
        if state is not None:
            return _pick(state, keys, False)
        raise kg_common.ProbeError("the checkpoint is a %s, not a dict: --key does not apply" % _args_type(top),
                                   "no-key")
    return None, top, True


_MISSING = object()


def _lookup(top, key):
    if key in top:
        return top[key]
    cur = top
    for part in key.split("."):
        if isinstance(cur, _Namespace):
            cur = cur.__dict__
        elif isinstance(cur, _StandIn):
            cur = _standin_state(cur)
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return _MISSING
    return cur


def _first_int(top, names):
    if not isinstance(top, dict):
        return None
    for n in names:
        v = top.get(n)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _fill(doc, reader, top, keys, want_all, preferred=ARG_KEYS, whole=False):
    """Pick the args from the decoded top-level object and turn everything into JSON-able values.  ``whole``: the
    object is the args itself (an accelerate custom checkpoint, a state_dict() of the run's own object)."""
    if top is _FAILED:
        doc["args"] = None
    else:
        if isinstance(top, _StandIn) and not isinstance(top, _Namespace):
            state = _standin_state(top)
            if state and not keys and not want_all:
                doc["topLevelKeys"] = sorted(_key(k) for k in state)[:MAX_TOP_KEYS]
        key, value, found = _pick(top, keys, want_all, () if whole else preferred)
        found = found or whole
        if isinstance(top, dict):
            doc["topLevelKeys"] = [_key(k) for k in top][:MAX_TOP_KEYS]
            doc["step"] = _first_int(top, STEP_KEYS)
            doc["epoch"] = _first_int(top, ("epoch", "epochs", "current_epoch"))
        conv = _Converter(prune_tensors=not found)
        doc["key"] = key
        doc["argsType"] = _args_type(value)
        if isinstance(value, _StandIn) and not want_all:
            # A stand-in's class is already in argsType; its fields are the args.
            value = _unwrap(conv(value))
        else:
            value = conv(value)
        doc["args"] = value
        if not found:
            doc["warnings"].append("no args key (%s): showing the top-level values that are not tensors"
                                   % ", ".join(preferred))
        if conv.truncated:
            doc["warnings"].append("the args are too large or too deep: shown truncated")
        if conv.refs:
            doc["warnings"].append("%d shared value%s shown once: later uses are {\"$ref\": PATH}, PATH the place "
                                   "where it is shown ($ is the args)" % (conv.refs, "" if conv.refs == 1 else "s"))
    doc["tensors"]["count"] += reader.tensor_count
    doc["tensors"]["bytes"] += reader.tensor_bytes
    _note_unsafe(doc, reader)


def _unwrap(v):
    if isinstance(v, dict) and "$class" in v:
        v = dict(v)
        v.pop("$class", None)
    return v


def _note_unsafe(doc, reader):
    for g in reader.unsafe:
        if g not in doc["unsafeGlobals"]:
            doc["unsafeGlobals"].append(g)
    for w in reader.warnings:
        if w not in doc["warnings"]:
            doc["warnings"].append(w)
    if reader.unsafe:
        msg = ("UNSAFE: this checkpoint's pickle calls %s; loading it with torch.load(weights_only=False) or "
               "pickle would run that code. Nothing was run here." % ", ".join(reader.unsafe))
        if msg not in doc["warnings"]:
            doc["warnings"].insert(0, msg)
