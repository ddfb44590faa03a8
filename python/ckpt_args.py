"""Read the args of a training checkpoint without torch, without the weights and without running code from the file.

Usage: python3 ckpt_args.py PATH [--key KEY]... [--all]
       python3 ckpt_args.py PATH --stat    (only {path, bytes, mtime, dir}: what a cache of results is keyed by)

stdlib only.  Formats: torch zip checkpoints (only the one ``*/data.pkl`` member is read, never the tensor storages),
the legacy non-zip torch format (stops before the storages), Lightning ``.ckpt``, a Hugging Face checkpoint folder
(``training_args.bin``, ``config.json``, ``trainer_state.json``), a ``.safetensors`` header and a
torch.distributed.checkpoint ``.metadata`` file (or its folder).

Pickles are decoded by a restricted unpickler: the globals it knows become plain values, tensors become
``{dtype, shape, bytes}`` from their storage metadata, and every other global becomes an inert, named stand-in that
records how the pickle tried to build it.  Nothing named by the file is ever imported or called; dangerous globals
(``os.system``, ``subprocess.*``, ``builtins.eval``...) are listed under ``unsafeGlobals``.

Enum members are ``{"$enum": "<module>.<Class>", "value": V}`` or ``{"$enum": "<module>.<Class>", "name": "MEMBER"}``.
Python's Enum pickles a member by value, ``Class(V)`` (``__reduce_ex__`` returns ``(Class, (V,))``: Python 3.11.7 and
3.12, which wrote test/fixtures/real, the form torch.save and Lightning write there): the member's name is not in the
file, and only importing the class and calling it (running the file's code) would find it, so it is not shown.  Early
3.11 releases (Debian 12's 3.11.2) and enums with ``enum.pickle_by_enum_name`` pickle it by name instead,
``getattr(Class, "MEMBER")``: the name is shown, and the value is not in the file.  ``builtins.getattr`` is allowed in
that shape only (a class the pickle named, a string); any other getattr is listed as unsafe.  The value form is any
class called (REDUCE) with one plain value and nothing else: a few other classes pickle that way too
(``ipaddress.IPv4Address(n)``) and show the same.  A class itself (``layer_cls=nn.Linear``) is ``"<module.Class>"``,
in the legacy format too, where torch.save writes an nn.Module class as ``('module', cls, source file, source)``.

Folders: a Hugging Face checkpoint (``training_args.bin``, ``config.json``, ``trainer_state.json``); a peft adapter
(``adapter_config.json``: its JSON is the args, key ``adapter_config``, and ``baseModel`` the
``base_model_name_or_path`` it names; in an HF folder that holds one too, the args stay ``training_args``); an
accelerate ``save_state`` folder (``custom_checkpoint_N.pkl``: the state_dict() of the first object registered for
checkpointing is the args, format ``accelerate``; ``N`` is accelerate's index of the object, never a step); a DCP
folder.

Hostile files are bounded by ``kg_common.LIMITS`` (never limits of its own): the pickle is decoded by a stack machine
of this module (never ``pickle.Unpickler``) whose memo is a dict of at most LIMITS["items"] entries, whose opcodes and
copied items are budgeted (2 x LIMITS["items"] each), and whose MARK nesting stops at LIMITS["depth"]; a zip member is
inflated streaming up to LIMITS["read"] bytes whatever its header says; a FIFO or a device is refused unread. BUILD,
SETITEM and APPEND act only on objects the read itself made, so one file cannot change how the next is read. A limit
hit is a LimitError naming it.

What is shown stays small: a value the pickle shares (its memo) is shown in full where it first appears and as
``{"$ref": "<JSONPath of that place>"}`` after (``$`` the shown args, ``.key`` or ``["key"]``, ``[index]``; a cycle
refers to its ancestor), strings past TEXT_SHOWN characters are cut with their length said, integers of more than
4,300 digits are ``{"$bigint": {bits, digits, negative}}``, and the whole rendering stops at MAX_NODES values or
RENDER_BUDGET characters (with a warning).

Result: ``{format, path, bytes, key, args, argsType, step, epoch, tensors: {count, bytes}, topLevelKeys,
unsafeGlobals, warnings, bytesRead, baseModel}`` (``baseModel`` null unless a peft adapter names one).
"""
import codecs
import datetime
import io
import itertools
import json
import os
import pickle
import posixpath
import re
import stat
import struct
import zipfile

import kg_common

# Tried in order when --key is not given.
ARG_KEYS = ("args", "config", "hyper_parameters", "hparams", "cfg", "training_args", "opt")
STEP_KEYS = ("global_step", "step", "iteration", "iter", "num_updates", "train_step", "steps")
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
MAX_NODES = 200000
MAX_DEPTH = 80
MAX_TOP_KEYS = 2000

# torch dtype name -> (canonical name, itemsize in bytes)
_DTYPES = {}
for _names, _size in (
    (("float32", "float"), 4), (("float64", "double"), 8), (("float16", "half"), 2), (("bfloat16",), 2),
    (("int64", "long"), 8), (("int32", "int"), 4), (("int16", "short"), 2), (("int8",), 1), (("uint8",), 1),
    (("bool",), 1), (("complex64", "cfloat"), 8), (("complex128", "cdouble"), 16), (("complex32", "chalf"), 4),
    (("qint8",), 1), (("quint8",), 1), (("qint32",), 4), (("quint4x2",), 1), (("quint2x4",), 1),
    (("float8_e4m3fn",), 1), (("float8_e5m2",), 1), (("float8_e4m3fnuz",), 1), (("float8_e5m2fnuz",), 1),
    (("float8_e8m0fnu",), 1), (("float4_e2m1fn_x2",), 1), (("uint16",), 2), (("uint32",), 4), (("uint64",), 8),
    (("bits8",), 1), (("bits16",), 2), (("bits1x8",), 1), (("bits2x4",), 1), (("bits4x2",), 1),
):
    for _n in _names:
        _DTYPES[_n] = (_names[0], _size)

_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "ComplexHalfStorage": "complex32", "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8", "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4", "UntypedStorage": "uint8", "TypedStorage": "uint8",
}

# Other torch globals that are plain names (layouts, memory formats, qschemes).
_TORCH_NAMES = frozenset((
    "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged",
    "contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "per_tensor_affine",
    "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric", "per_channel_affine_float_qparams",
))

_SAFETENSORS_SIZES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2,
    "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "C64": 8, "F4": 1, "F6_E2M3": 1, "F6_E3M2": 1,
}

# Modules whose every global is a way to run code, touch files or the network.
_UNSAFE_MODULES = frozenset((
    "os", "posix", "nt", "subprocess", "sys", "shutil", "importlib", "runpy", "pty", "socket", "ctypes", "pickle",
    "_pickle", "cPickle", "marshal", "code", "codeop", "commands", "webbrowser", "multiprocessing", "asyncio",
    "pdb", "bdb", "timeit", "platform", "signal", "_thread", "thread", "threading", "ftplib", "http", "urllib",
    "urllib2", "requests", "tempfile", "io", "_io", "types", "inspect", "zipimport", "pkgutil",
    "builtins.__import__", "dill", "cloudpickle", "joblib", "_posixsubprocess", "sysconfig", "distutils",
    "setuptools", "pip", "telnetlib", "smtplib", "poplib", "imaplib", "xmlrpc", "atexit",
))
_UNSAFE_BUILTINS = frozenset((
    "eval", "exec", "execfile", "compile", "__import__", "getattr", "setattr", "delattr", "open", "file", "input",
    "raw_input", "globals", "locals", "vars", "breakpoint", "exit", "quit", "reload", "apply", "type",
    "__builtins__",
))
_UNSAFE_QUALIFIED = frozenset((
    "operator.attrgetter", "operator.methodcaller", "operator.itemgetter", "functools.partial", "functools.reduce",
    "torch.load", "torch.serialization.load", "torch.jit.load", "torch.hub.load", "torch.ops", "numpy.load",
    "numpy.testing._private.utils.runstring", "numpy.lib.npyio.load", "copyreg.__newobj_ex__",
))
_UNSAFE_NAMES = frozenset(("system", "popen", "spawn", "exec", "eval", "run_path", "run_module", "check_output",
                           "check_call", "getoutput", "getstatusoutput", "Popen", "execv", "execve", "execl"))


def _is_unsafe(module, name):
    root = module.split(".", 1)[0]
    if root in _UNSAFE_MODULES or module in _UNSAFE_MODULES:
        return True
    if root in ("builtins", "__builtin__") and name.split(".", 1)[0] in _UNSAFE_BUILTINS:
        return True
    if module + "." + name in _UNSAFE_QUALIFIED:
        return True
    return name.split(".")[-1] in _UNSAFE_NAMES


# --------------------------------------------------------------------------------------------------------------------
# What decoded objects are made of.  Classes the file can reach are sealed: a hostile BUILD cannot set attributes on
# them, so nothing decoded from one file changes how the next one is read in the resident helper.


class _Sealed(type):
    def __setattr__(cls, name, value):
        raise pickle.UnpicklingError("the pickle tried to set attribute %r on class %s" % (name, cls.__name__))

    def __delattr__(cls, name):
        raise pickle.UnpicklingError("the pickle tried to delete attribute %r on class %s" % (name, cls.__name__))


class _Name(object):
    """A torch/numpy name such as torch.float16 or torch.strided: shown as its text."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


class _StorageClass(_Name):
    __slots__ = ("dtype",)

    def __init__(self, text, dtype):
        _Name.__init__(self, text)
        self.dtype = dtype


class _Storage(object):
    __slots__ = ("dtype", "itemsize", "numel", "key", "location")

    def __init__(self, dtype, numel, key, location):
        self.dtype = dtype
        self.itemsize = _DTYPES.get(dtype, (dtype, 1))[1]
        self.numel = numel if isinstance(numel, int) and 0 <= numel < 1 << 63 else 0
        self.key = key
        self.location = location

    @property
    def nbytes(self):
        return self.numel * self.itemsize


def _shape(shape):
    """A tensor's shape as a list of ints; a hostile one (not ints, huge, too many dims) is shown as []."""
    if not isinstance(shape, (list, tuple)) or len(shape) > 64:
        return []
    out = []
    for d in shape:
        if type(d) is bool or not isinstance(d, int) or not 0 <= d < 1 << 63:
            return []
        out.append(d)
    return out


class _Tensor(object):
    """What a tensor or parameter is shown as: dtype, shape and bytes (numel * itemsize), never its values."""
    __slots__ = ("dtype", "shape", "nbytes")

    def __init__(self, dtype, shape):
        self.dtype = dtype
        self.shape = _shape(shape)
        numel = 1
        for d in self.shape:
            numel *= d
        self.nbytes = numel * _DTYPES.get(dtype, (dtype, 1))[1]

    def json(self):
        return {"dtype": self.dtype, "shape": list(self.shape), "bytes": self.nbytes}


class _Record(object):
    """How the pickle built a stand-in (kept small: a hostile pickle may make half a million of them).  ``reduced``:
    the class itself was called (REDUCE), as Enum pickles a member, rather than made by NEWOBJ or copyreg."""
    __slots__ = ("args", "kwargs", "state", "items", "list", "attrs", "reduced")

    def __init__(self, args, kwargs):
        self.args = args
        self.kwargs = kwargs or None
        self.state = None
        self.items = ()  # made a list, a list and a dict when first used
        self.list = ()
        self.attrs = None
        self.reduced = False

    def __getitem__(self, name):
        return getattr(self, name) or ({} if name in ("attrs", "kwargs") else [] if name in ("items", "list") else
                                       getattr(self, name))

    def __setitem__(self, name, value):
        setattr(self, name, value)


class _StandIn(object, metaclass=_Sealed):
    """An object of a class the reader does not import: records how the pickle built it, runs nothing."""
    _kg_name = "?"
    _kg_unsafe = False
    _kg_ref = None  # getattr(<class>, "NAME"): (the class's name, "NAME"), a member named, never looked up
    __slots__ = ("_kg",)

    def __new__(cls, *args, **kwargs):
        self = object.__new__(cls)
        object.__setattr__(self, "_kg", _Record(args, kwargs))
        return self

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        kg = self._kg
        if isinstance(state, tuple) and len(state) == 2 and all(s is None or isinstance(s, dict) for s in state):
            merged = {}
            for s in state:
                merged.update(s or {})
            state = merged
        if isinstance(kg["state"], dict) and isinstance(state, dict):
            kg["state"].update(state)
        else:
            kg["state"] = state

    def __setattr__(self, name, value):
        kg = self._kg
        if not kg.attrs:
            kg.attrs = {}
        kg.attrs[name] = value

    def __setitem__(self, key, value):
        kg = self._kg
        if not kg.items:
            kg.items = []
        kg.items.append((key, value))

    def append(self, value):
        self.extend((value,))

    def extend(self, values):
        kg = self._kg
        if not kg.list:
            kg.list = []
        kg.list.extend(values)

    def __repr__(self):
        return "<%s object>" % self._kg_name


def _describe(obj):
    if isinstance(obj, _StandIn):
        return obj._kg_name
    if isinstance(obj, type) and issubclass(obj, _StandIn):
        return obj._kg_name
    if isinstance(obj, type):
        return getattr(obj, "_kg_name", obj.__name__)
    if callable(obj):
        return getattr(obj, "__name__", type(obj).__name__)
    return type(obj).__name__


class _Namespace(object, metaclass=_Sealed):
    """argparse.Namespace: its attributes, as a dict."""
    _kg_name = "argparse.Namespace"

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)  # pyright: ignore[reportAttributeAccessIssue] (a plain dict at run time)

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.__dict__.update(state)  # pyright: ignore[reportAttributeAccessIssue]
        elif isinstance(state, tuple):
            for s in state:
                if isinstance(s, dict):
                    self.__dict__.update(s)  # pyright: ignore[reportAttributeAccessIssue]


class _ODict(dict, metaclass=_Sealed):
    """collections.OrderedDict (a state_dict carries `_metadata` through BUILD: kept aside, not shown)."""
    _kg_name = "collections.OrderedDict"

    def __setstate__(self, state):
        self.__dict__["_kg_state"] = state  # pyright: ignore[reportIndexIssue] (a plain dict at run time)


class _NpDtype(object, metaclass=_Sealed):
    """numpy.dtype('f8', False, True) followed by BUILD (3, '<', ...)."""
    _kg_name = "numpy.dtype"
    __slots__ = ("code", "order")

    def __init__(self, code="", *_rest):
        self.code = code if isinstance(code, str) else _short_repr(code)
        self.order = "<"

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) > 1 and state[1] in ("<", ">", "|", "="):
            self.order = state[1]

    @property
    def name(self):
        kind, size = self.code[:1], self.code[1:]
        if kind == "b":
            return "bool"
        if kind in _NP_KINDS and size.isdigit():
            return _NP_KINDS[kind] + str(int(size) * 8)
        return self.code

    def decode(self, data):
        fmt = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q", "u1": "B", "u2": "H",
               "u4": "I", "u8": "Q", "b1": "?"}.get(self.code)
        if fmt is None or not isinstance(data, (bytes, bytearray)) or len(data) != struct.calcsize(fmt):
            return None
        return struct.unpack((">" if self.order == ">" else "<") + fmt, bytes(data))[0]


_NP_KINDS = {"f": "float", "i": "int", "u": "uint", "c": "complex"}


class _NpArray(object, metaclass=_Sealed):
    """numpy.core.multiarray._reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype, fortran, raw)."""
    _kg_name = "numpy.ndarray"
    __slots__ = ("dtype", "shape", "values")

    def __init__(self, *_args):
        self.dtype = None
        self.shape = []
        self.values = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) >= 5):
            return
        shape, dtype, raw = state[1], state[2], state[4]
        self.shape = _shape(shape)
        self.dtype = dtype
        if isinstance(dtype, _NpDtype) and isinstance(raw, (bytes, bytearray)):
            size = 1
            for d in self.shape:
                size *= d
            width = len(raw) // size if size else 0
            if 0 < size <= 16 and width:
                vals = [dtype.decode(raw[i * width:(i + 1) * width]) for i in range(size)]
                if all(v is not None for v in vals):
                    self.values = vals
        elif isinstance(raw, list) and len(raw) <= 16:
            self.values = raw


# --------------------------------------------------------------------------------------------------------------------


class _Reader(object):
    """One decoding: the globals seen, the tensors met, the stand-in classes made (fresh for every file)."""

    def __init__(self):
        self.unsafe = []
        self.globals_seen = set()
        self.tensor_count = 0
        self.storages = {}
        self.warnings = []
        self._classes = {}
        self._known = self._known_globals()
        # What the pickle may call: the reader's own functions and classes (by identity), and stand-ins.
        self._callables = set(map(id, self._known.values()))
        self._copiers = set(map(id, (_safe_list, _safe_tuple, _safe_set, _safe_dict, _deque, _defaultdict,
                                     _safe_bytes)))
        self._rebuilders = set(id(v) for k, v in self._known.items() if "._rebuild_" in k)
        # The pickle's work: opcodes, and items copied by the calls and BUILDs it makes (each 2 x LIMITS["items"],
        # so a hostile file's objects stay within the memory limit; a real state_dict takes ~30 opcodes a tensor).
        self.op_budget = 2 * kg_common.LIMITS["items"]
        self.work_left = self.op_budget
        self._ignored = set()
        self._unsafe_seen = set()

    def charge(self, n):
        self.work_left -= n
        if self.work_left < 0:
            raise kg_common.LimitError("items", "the pickle's work (items copied)", self.op_budget)

    def call(self, func, args, kwargs, how):
        """REDUCE/NEWOBJ/OBJ/INST: only the reader's own callables run; a stand-in records the call."""
        if type(args) is not tuple:
            raise pickle.UnpicklingError("%s arguments must be a tuple, not %s" % (how, type(args).__name__))
        n = len(args) + (len(kwargs) if kwargs else 0)
        if kwargs is None and id(func) in self._rebuilders:  # tensors: nothing copied
            self.work_left -= n
            if self.work_left < 0:
                self.charge(0)
            return func(*args)
        if id(func) in self._copiers or func is _ODict:
            for a in args:  # what the call copies (list(a_long_string) makes a string per character)
                if type(a) in _SIZED:
                    n += len(a)
        self.work_left -= n
        if self.work_left < 0:
            self.charge(0)
        if kwargs is None and id(func) in self._callables:
            return func(*args)
        if isinstance(func, _StandIn):
            target = "%s(...)" % func._kg_name[:200]
            cls = self._classes.get(("call", target))
            if cls is None:
                cls = self._new_class(target, "call", False, None)
                self._classes[("call", target)] = cls
            return cls(*args, **(kwargs or {}))
        if func is _ODict:
            return _ODict(_safe_dict(*args, **(kwargs or {})))
        if isinstance(func, _Sealed):
            if how == "NEWOBJ":
                obj = func.__new__(func, *args, **(kwargs or {}))
                return obj
            obj = func(*args, **(kwargs or {}))
            if how == "REDUCE" and isinstance(obj, _StandIn):
                obj._kg.reduced = True
            return obj
        if id(func) not in self._callables:
            raise pickle.UnpicklingError("the pickle calls %s, which is not a class or function" % _describe(func))
        if kwargs and any(not isinstance(k, str) for k in kwargs):
            raise pickle.UnpicklingError("keyword names must be strings")
        return func(*args, **(kwargs or {}))

    def _ignore(self, what):
        if what not in self._ignored and len(self._ignored) < 20:
            self._ignored.add(what)
            self.warnings.append("the pickle tried to %s: ignored" % what)

    def setitem(self, target, k, v):
        t = type(target)
        if t is dict or t is _ODict:
            if len(target) >= kg_common.LIMITS["items"]:
                raise kg_common.LimitError("items", "one dict in the pickle")
            target[_hkey(k)] = v
        elif isinstance(target, _StandIn):
            self.charge(1)
            target.__setitem__(k, v)
        else:
            self._ignore("set an item on a %s" % _describe(target))

    def extend(self, target, values):
        t = type(target)
        if t is list:
            if len(target) + len(values) > kg_common.LIMITS["items"]:
                raise kg_common.LimitError("items", "one list in the pickle")
            target.extend(values)
        elif isinstance(target, _StandIn):
            self.charge(len(values))
            target.extend(values)
        else:
            self._ignore("append to a %s" % _describe(target))

    def additems(self, target, values):
        if type(target) is set:
            if len(target) + len(values) > kg_common.LIMITS["items"]:
                raise kg_common.LimitError("items", "one set in the pickle")
            for x in values:
                target.add(_hkey(x))
        else:
            self._ignore("add set items to a %s" % _describe(target))

    def build(self, inst, state):
        """BUILD sets state only on an object this read made (never a class, a function or a shared object)."""
        if isinstance(inst, type) or not isinstance(inst, (_StandIn, _Namespace, _ODict, _NpDtype, _NpArray)):
            self._ignore("set the state of %s" % (("the class " + _describe(inst)) if isinstance(inst, type)
                                                   else "a " + _describe(inst)))
            return
        if isinstance(state, (dict, tuple, list)):
            n = len(state)
            if isinstance(state, tuple):  # (state, slotstate): both dicts are merged
                n += sum(len(x) for x in state[:4] if isinstance(x, dict))
            self.charge(n)
        inst.__setstate__(state)

    # Stand-in classes are made per file so nothing built from one file is shared with another.
    def standin(self, module, name, unsafe=False):
        full = module[:200] + "." + name[:200]
        cls = self._classes.get(full)
        if cls is None:
            cls = self._new_class(full, str(name.split(".")[-1]), unsafe, None)
            self._classes[full] = cls
        return cls

    def _new_class(self, full, short, unsafe, ref):
        # a class takes ~1 KB: a pickle naming a million globals would take a gigabyte
        if len(self._classes) >= kg_common.LIMITS["items"] // 100:
            raise kg_common.LimitError("items", "the classes the pickle names", kg_common.LIMITS["items"] // 100)
        return _Sealed(short, (_StandIn,), {"_kg_name": full, "_kg_unsafe": unsafe, "_kg_ref": ref, "__slots__": ()})

    def find_class(self, module, name):
        module, name = str(module), str(name)
        if module in ("__builtin__", "exceptions"):  # protocol 2 pickles use the Python 2 names
            module = "builtins"
        elif module == "copy_reg":
            module = "copyreg"
        full = module + "." + name
        self.globals_seen.add(full)
        known = self._known.get(full)
        if known is not None:
            return known
        if module == "torch" and name.endswith("Storage"):
            dtype = _STORAGE_DTYPES.get(name) or _camel_dtype(name[:-len("Storage")])
            return _StorageClass("torch." + name, dtype)
        if module == "torch" and (name in _DTYPES or name in _TORCH_NAMES):
            return _Name("torch." + name)
        if _is_unsafe(module, name):
            self.note_unsafe(full)
            return self.standin(module, name, unsafe=True)
        return self.standin(module, name)

    def note_unsafe(self, full):
        if full not in self._unsafe_seen:
            self._unsafe_seen.add(full)
            if len(self.unsafe) < 100:
                self.unsafe.append(full)
            elif len(self.unsafe) == 100:
                self.warnings.append("more than 100 dangerous globals: the first 100 are listed")

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage":
            cls, key, location, numel = pid[1], pid[2], pid[3], pid[4]
            dtype = cls.dtype if isinstance(cls, _StorageClass) else "uint8"
            st = self.storages.get(str(key))
            if st is None:
                st = _Storage(dtype, numel, key, location)
                self.storages[str(key)] = st
            return st
        if isinstance(pid, tuple) and pid and pid[0] == "module":
            # Legacy torch.save writes a reference to an nn.Module class as ('module', cls, source_file, source):
            # torch.load gives back cls itself, so the reference is the class the pickle named (as in a zip file).
            cls = pid[1] if len(pid) > 1 else None
            if isinstance(cls, type) and issubclass(cls, _StandIn):
                return cls
            return self.standin("torch.nn", "Module")
        return self.standin("persistent", "id")(pid)

    # Known globals: safe callables that build plain values.
    def _known_globals(self):
        k = {}

        def tensor(dtype, size):
            self.tensor_count += 1
            return _Tensor(dtype, size)

        def storage_dtype(st):
            return st.dtype if isinstance(st, _Storage) else "uint8"

        def rebuild_tensor(storage, _offset=0, size=(), *_rest):
            return tensor(storage_dtype(storage), size)

        def rebuild_tensor_v3(storage, _offset, size, _stride, _rg, _hooks, dtype=None, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else storage_dtype(storage), size)

        def rebuild_parameter(data, *_rest):
            return data if isinstance(data, _Tensor) else tensor("?", ())

        def rebuild_qtensor(storage, _offset, size, *_rest):
            return tensor(storage_dtype(storage), size)

        def rebuild_meta(dtype, size, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", size)

        def rebuild_wrapper(_cls, dtype, size, *_rest):
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", size)

        def rebuild_numpy(data, dtype, *_rest):
            arr = data if isinstance(data, _NpArray) else None
            return tensor(dtype.text[6:] if isinstance(dtype, _Name) else "?", arr.shape if arr else ())

        def rebuild_opaque(*_args):
            return tensor("?", ())

        def rebuild_from_type(func, _new_type, args, _state=None):
            if id(func) in self._callables and isinstance(args, tuple):
                self.charge(len(args))
                return func(*args)
            return self.standin("torch._tensor", "_rebuild_from_type_v2")(func, _new_type, args)

        for mod in ("torch._utils", "torch._tensor"):
            k[mod + "._rebuild_tensor"] = rebuild_tensor
            k[mod + "._rebuild_tensor_v2"] = rebuild_tensor
            k[mod + "._rebuild_tensor_v3"] = rebuild_tensor_v3
            k[mod + "._rebuild_parameter"] = rebuild_parameter
            k[mod + "._rebuild_parameter_with_state"] = rebuild_parameter
            k[mod + "._rebuild_qtensor"] = rebuild_qtensor
            k[mod + "._rebuild_meta_tensor_no_storage"] = rebuild_meta
            k[mod + "._rebuild_wrapper_subclass"] = rebuild_wrapper
            k[mod + "._rebuild_device_tensor_from_numpy"] = rebuild_numpy
            for opaque in ("_rebuild_sparse_tensor", "_rebuild_sparse_csr_tensor", "_rebuild_nested_tensor",
                           "_rebuild_xla_tensor", "_rebuild_mlc_tensor", "_rebuild_npu_tensor"):
                k[mod + "." + opaque] = rebuild_opaque
        k["torch._tensor._rebuild_from_type"] = rebuild_from_type
        k["torch._tensor._rebuild_from_type_v2"] = rebuild_from_type
        k["torch.device"] = _torch_device
        k["torch.Size"] = _safe_list
        k["torch.serialization._get_layout"] = lambda name: _Name(str(name))
        k["torch.torch_version.TorchVersion"] = _safe_str

        for b in ("builtins", "__builtin__"):
            k[b + ".set"] = _safe_set
            k[b + ".frozenset"] = _safe_set
            k[b + ".list"] = _safe_list
            k[b + ".tuple"] = _safe_tuple
            k[b + ".dict"] = _safe_dict
            k[b + ".bytearray"] = _safe_bytes
            k[b + ".bytes"] = _safe_bytes
            k[b + ".complex"] = _safe_complex
            k[b + ".slice"] = _safe_slice
            k[b + ".int"] = _safe_int
            k[b + ".float"] = _safe_float
            k[b + ".str"] = _safe_str
            k[b + ".unicode"] = _safe_str
            k[b + ".bool"] = bool
            k[b + ".object"] = _OBJECT
            k[b + ".range"] = _safe_range
            k[b + ".xrange"] = _safe_range
        k["builtins.getattr"] = self._getattr
        k["_codecs.encode"] = _codecs_encode
        k["collections.OrderedDict"] = _ODict
        k["collections.defaultdict"] = _defaultdict
        k["collections.Counter"] = _safe_dict
        k["collections.deque"] = _deque
        k["argparse.Namespace"] = _Namespace
        for name in ("datetime", "date", "time", "timedelta", "timezone"):
            k["datetime." + name] = getattr(datetime, name)
        for name in ("Path", "PosixPath", "PurePath", "PurePosixPath", "WindowsPath", "PureWindowsPath"):
            k["pathlib." + name] = _path
        k["decimal.Decimal"] = _safe_str
        k["fractions.Fraction"] = _fraction
        for np in ("numpy", "numpy.core", "numpy._core"):
            k[np + ".multiarray.scalar"] = _np_scalar
            k[np + ".multiarray._reconstruct"] = _NpArray
            k[np + ".numeric._frombuffer"] = _np_frombuffer
            k[np + ".dtype"] = _NpDtype
        k["numpy.ndarray"] = _NpArray
        k["numpy.dtype"] = _NpDtype
        for reg in ("copyreg", "copy_reg"):
            k[reg + "._reconstructor"] = self._reconstructor
            k[reg + ".__newobj__"] = self._newobj
        return k

    def _reconstructor(self, cls, base=None, state=None):
        if isinstance(cls, type) and isinstance(cls, _Sealed):
            obj = cls.__new__(cls)
            if state is not None:
                self.build(obj, state)
            return obj
        return self.standin("copyreg", "_reconstructor")(cls, base, state)

    def _getattr(self, obj, name, *default):
        """getattr(SomeEnum, 'MEMBER'): how an enum pickles a member by name (``enum.pickle_by_enum_name``): a
        named reference, never looked up.  Allowed only in that shape, a class the pickle named and a plain name (an
        identifier, not a __dunder__); calling what it names is recorded (and unsafe when the class was).  Any other
        getattr is a way to reach code: listed under unsafeGlobals, and an inert stand-in."""
        if not (isinstance(obj, type) and issubclass(obj, _StandIn) and obj is not _OBJECT and type(name) is str
                and not default and name.isidentifier() and not name.startswith("__")):
            self.note_unsafe("builtins.getattr")
            return self.standin("builtins", "getattr", unsafe=True)(obj, name, *default)
        target = obj._kg_name[:200]
        full = "%s.%s" % (target, name[:200])
        cls = self._classes.get(("attr", full))
        if cls is None:
            cls = self._new_class(full, "attr", obj._kg_unsafe, (target, name[:200]))
            self._classes[("attr", full)] = cls
        return cls()

    def _newobj(self, cls, *args):
        if isinstance(cls, type) and isinstance(cls, _Sealed):
            return cls.__new__(cls, *args)
        return self.standin("copyreg", "__newobj__")(cls, *args)

    def save(self):
        return (len(self.unsafe), set(self.globals_seen), self.tensor_count, dict(self.storages), len(self.warnings),
                self.work_left)

    def restore(self, saved):
        n_unsafe, self.globals_seen, self.tensor_count, self.storages, n_warn, self.work_left = saved
        del self.unsafe[n_unsafe:]
        del self.warnings[n_warn:]

    def load(self, data, pos=0, complete=True):
        """(object, position after it) from the pickle at data[pos:]."""
        return _Unpickler(self, data, pos, complete).load()

    @property
    def tensor_bytes(self):
        return sum(s.nbytes for s in self.storages.values())


_OBJECT = _Sealed("object", (_StandIn,), {"_kg_name": "builtins.object", "__slots__": ()})


def _codecs_encode(text, encoding="utf-8", *_rest):
    # protocol 2 writes bytes as _codecs.encode(str, 'latin1')
    if isinstance(text, str) and encoding in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        return text.encode(encoding)
    return b""


def _camel_dtype(stem):
    snake = ""
    for i, c in enumerate(stem):
        if c.isupper() and i and not stem[i - 1].isupper():
            snake += "_"
        snake += c.lower()
    for cand in (stem.lower(), snake, stem[:1].lower() + stem[1:]):
        if cand in _DTYPES:
            return _DTYPES[cand][0]
    return stem[:1].lower() + stem[1:]


def _torch_device(kind="cpu", index=None):
    kind = kind if isinstance(kind, str) else _short_repr(kind)
    return kind if index is None else "%s:%s" % (kind, index if isinstance(index, int) else _short_repr(index))


def _iterable(v):
    return isinstance(v, (list, tuple, set, frozenset, dict, str, bytes, _ODict))


def _safe_list(v=()):
    return list(v) if _iterable(v) else [v]


def _safe_tuple(v=()):
    return tuple(v) if _iterable(v) else (v,)


def _safe_set(v=()):
    return frozenset(_hkey(x) for x in v) if _iterable(v) else frozenset()


def _safe_dict(v=None, **kw):
    d = {}
    if isinstance(v, dict):
        d.update(v)
    elif isinstance(v, (list, tuple)):
        for pair in v:
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                d[_hkey(pair[0])] = pair[1]
    d.update(kw)
    return d


def _defaultdict(_factory=None, *rest):
    return _safe_dict(rest[0]) if rest else {}


def _deque(v=(), *_rest):
    return _safe_list(v)


def _safe_bytes(v=b"", *rest):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode(rest[0] if rest and isinstance(rest[0], str) and rest[0] in ("latin1", "latin-1", "utf-8",
                                                                                   "ascii") else "latin-1")
    if isinstance(v, (list, tuple)) and len(v) <= 1 << 20 and all(
            isinstance(i, int) and 0 <= i < 256 for i in v):  # pyright: ignore[reportGeneralTypeIssues]
        return bytes(v)
    return b""  # bytes(n) of a huge n would only fill memory


def _safe_int(v=0, *rest):
    if isinstance(v, float):
        return int(v) if v == v and v not in (float("inf"), float("-inf")) else v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, (str, bytes)):
        text = v.strip()
        sign = text[:1] in ("-", b"-")
        if len(text) > _INT_DIGITS:  # described, never parsed (Python 3.11+ refuses, 3.8 takes quadratic time)
            return _BigInt(len(text) - sign, sign)
        try:
            return int(v, *[b for b in rest if isinstance(b, int) and (b == 0 or 2 <= b <= 36)][:1])
        except ValueError:
            return _safe_str(v)
    return 0


def _safe_float(v=0.0):
    if isinstance(v, (str, bytes)) and len(v) > 1000:  # float('1' * 10**7) is slow, and its error repeats the text
        return float("nan")
    try:
        return float(v) if isinstance(v, (int, float, str, bytes)) else float("nan")
    except ValueError:
        return float("nan")


def _safe_str(v="", *_rest):
    return v if isinstance(v, str) else v.decode("latin-1") if isinstance(v, bytes) else _short_repr(v)


def _safe_complex(re=0.0, im=0.0):
    if isinstance(re, (int, float)) and isinstance(im, (int, float)):
        return complex(re, im)
    return complex(0)


def _safe_slice(*args):
    return "slice(%s)" % ", ".join(_short_repr(a, 1) for a in args[:3])


def _safe_range(*args):
    return "range(%s)" % ", ".join(str(a) if a.bit_length() <= _BIG_BITS else "<big integer>"
                                   for a in args if isinstance(a, int))


def _path(*parts):
    return posixpath.join(*[p for p in parts if isinstance(p, str)]) if parts else "."


def _fraction(*args):
    return "/".join(a if isinstance(a, str) else str(a) if a.bit_length() <= _BIG_BITS else "<big integer>"
                    for a in args if isinstance(a, (int, str)))


def _np_scalar(dtype, data=None):
    if isinstance(dtype, _NpDtype):
        v = dtype.decode(data)
        if v is not None:
            return v
    return _safe_str(data) if isinstance(data, bytes) else None


def _np_frombuffer(buf, dtype, shape, *_rest):
    arr = _NpArray()
    arr.__setstate__((1, shape, dtype, False, buf))
    return arr


# --------------------------------------------------------------------------------------------------------------------
# The restricted unpickler: a stack machine of our own over the pickle's bytes in memory (never pickle.Unpickler,
# whose C memo is an array a 24-byte file can size to gigabytes). Every opcode is counted, the memo is a dict capped
# at LIMITS["items"], MARK nesting at LIMITS["depth"], containers and the stack at LIMITS["items"]; BUILD, SETITEM and
# APPEND act only on objects this read made; the only callables are the reader's own.


class _NeedMore(Exception):
    """The pickle runs past the bytes read so far (a legacy file is read in growing chunks)."""


class _BigInt(object):
    """An integer written in decimal with more than 4,300 digits: described, never parsed (quadratic in Python)."""
    __slots__ = ("digits", "negative")

    def __init__(self, digits, negative):
        self.digits = digits
        self.negative = negative

    def json(self):
        return {"$bigint": {"bits": int(self.digits * 3.3219) + 1, "digits": self.digits, "negative": self.negative}}

    def __repr__(self):
        return "<integer of %d digits>" % self.digits


class _Key(object):
    """A dict key or set member too big or unhashable to hash safely: kept by identity, shown by a short repr."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __repr__(self):
        return _short_repr(self.obj)

    def __str__(self):
        return _short_repr(self.obj)


_repeat = itertools.repeat
_UINT4 = struct.Struct("<I")
_SIZED = frozenset((list, tuple, dict, set, frozenset, str, bytes, _ODict))
_INT_DIGITS = 4300  # Python 3.11+ refuses str<->int beyond this; 3.8 would take quadratic time
_BIG_BITS = 14284  # about 4,300 decimal digits
_SIMPLE_KEYS = (str, bytes, float, bool, type(None))


def _hkey(k):
    """``k`` if hashing it is cheap (its hash cannot take exponential time or deep recursion), else a _Key."""
    t = type(k)
    if t in _SIMPLE_KEYS or t is int:
        return k
    if t is tuple or t is frozenset:
        n, stack = 0, [k]
        while stack:
            x = stack.pop()
            n += 1
            if n > 256:
                return _Key(k)
            tx = type(x)
            if tx is tuple or tx is frozenset:
                stack.extend(x)
            elif not (tx in _SIMPLE_KEYS or tx is int or tx is _Name or isinstance(x, _StandIn)):
                return _Key(k)
        return k
    if t is _Name or isinstance(k, (_StandIn, _BigInt, _Key, datetime.date, datetime.time, datetime.timedelta)):
        return k
    return _Key(k)


def _short_repr(obj, level=3):
    """A repr of at most ~600 parts of 60 characters, whatever obj is: repr() of a shared or deep structure a pickle
    built would take exponential time or recurse past the stack (reprlib falls back to repr() for dict subclasses)."""
    t = type(obj)
    if obj is None or t is bool or t is float or t is complex:
        return repr(obj)
    if t is int:
        return repr(obj) if obj.bit_length() <= 200 else "<integer of %d bits>" % obj.bit_length()
    if isinstance(obj, str):
        return repr(str(obj[:60])) + ("..." if len(obj) > 60 else "")
    if isinstance(obj, (bytes, bytearray)):
        return repr(bytes(obj[:40])) + ("..." if len(obj) > 40 else "")
    if isinstance(obj, (tuple, list, set, frozenset, dict)):
        kind = tuple if isinstance(obj, tuple) else list if isinstance(obj, list) else dict \
            if isinstance(obj, dict) else set
        opening, closing = {tuple: "()", list: "[]", dict: "{}", set: "{}"}[kind]
        if level <= 0:
            return opening + "..." + closing
        parts = []
        for i, x in enumerate(obj.items() if isinstance(obj, dict) else obj):
            if i == 8:
                parts.append("...")
                break
            parts.append("%s: %s" % (_short_repr(x[0], level - 1), _short_repr(x[1], level - 1)) if kind is dict
                         else _short_repr(x, level - 1))
        return opening + ", ".join(parts) + ("," if kind is tuple and len(parts) == 1 else "") + closing
    if isinstance(obj, (_StandIn, _Name, _BigInt)):
        return repr(obj)
    if isinstance(obj, _Key):
        return _short_repr(obj.obj, level)
    if isinstance(obj, (datetime.date, datetime.time, datetime.timedelta)):
        return repr(obj)
    return "<%s>" % _describe(obj)


def _decode_str(raw, what="utf-8"):
    return raw.decode(what, "surrogatepass") if what == "utf-8" else raw.decode(what)


def _text_int(line):
    """The decimal integer of a text opcode (INT, LONG, PUT, GET)."""
    s = line.strip()
    if s.endswith(b"L"):
        s = s[:-1]
    digits = len(s.lstrip(b"+-"))
    if digits > _INT_DIGITS:
        return _BigInt(digits, s.startswith(b"-"))
    return int(s)


class _Unpickler(object):
    """One pickle, decoded from ``data[pos:]``; ``complete`` False means more bytes may follow (raise _NeedMore)."""

    def __init__(self, reader, data, pos=0, complete=True):
        self.reader = reader
        self.data = data
        self.pos = pos
        self.complete = complete
        limits = kg_common.LIMITS
        self.items = limits["items"]
        self.depth = limits["depth"]

    def short(self):
        if self.complete:
            raise EOFError("the pickle ends early")
        raise _NeedMore()

    def line(self, pos):
        data = self.data
        end = data.find(b"\n", pos, pos + kg_common.LIMITS["line"])
        if end < 0:
            if len(data) - pos >= kg_common.LIMITS["line"]:
                raise kg_common.LimitError("line", "a text opcode of the pickle")
            self.short()
        return data[pos:end], end + 1

    def too_many(self, what):
        raise kg_common.LimitError("items", what, self.items)

    def load(self):
        """(value, position after STOP)."""
        reader = self.reader
        data = self.data
        end = len(data)
        pos = self.pos
        stack = []
        metastack = []
        memo = {}
        items, depth = self.items, self.depth
        # The opcode budget is counted by the loop itself; ops_left is a second one of the same size for the items
        # that opcodes move into containers, and sets (216 bytes each) count 3 more.
        ops_left = reader.op_budget
        unpack_from = struct.unpack_from
        unpack_I = _UINT4.unpack_from
        append = stack.append
        call = reader.call
        try:
            for _ in _repeat(None, reader.op_budget):
                op = data[pos]
                pos += 1
                # most frequent first (in a torch state_dict): LONG_BINPUT, BINGET, BININT1, MARK, REDUCE, TUPLE...
                if op == 0x72 or op == 0x71 or op == 0x94:  # LONG_BINPUT r, BINPUT q, MEMOIZE
                    if op == 0x72:
                        idx = unpack_I(data, pos)[0]
                        pos += 4
                    elif op == 0x71:
                        idx = data[pos]
                        pos += 1
                    else:
                        idx = len(memo)
                    # while every index is below the item limit, so is the memo's size
                    if idx >= items and len(memo) >= items and idx not in memo:
                        self.too_many("the pickle's memo")
                    memo[idx] = stack[-1]
                elif op == 0x68 or op == 0x6A:  # BINGET h, LONG_BINGET j
                    if op == 0x68:
                        idx = data[pos]
                        pos += 1
                    else:
                        idx = unpack_I(data, pos)[0]
                        pos += 4
                    try:
                        append(memo[idx])
                    except KeyError:
                        raise pickle.UnpicklingError("memo key %d missing" % idx)
                elif op == 0x4B:  # BININT1 K
                    append(data[pos])
                    pos += 1
                elif op == 0x28:  # MARK (
                    if len(metastack) >= depth:
                        raise kg_common.LimitError("depth", "the pickle's nesting", depth)
                    metastack.append(stack)
                    stack = []
                    append = stack.append
                elif op == 0x52:  # REDUCE R
                    args = stack.pop()
                    stack[-1] = call(stack[-1], args, None, "REDUCE")
                elif op == 0x74 and metastack:  # TUPLE t
                    got = stack
                    stack = metastack.pop()
                    append = stack.append
                    if len(got) > items:
                        self.too_many("one container in the pickle")
                    ops_left -= len(got)
                    if ops_left < 0:
                        break
                    append(tuple(got))
                elif op == 0x29:  # EMPTY_TUPLE )
                    append(())
                elif op == 0x58 or op == 0x8C or op == 0x8D:  # BINUNICODE X, SHORT_BINUNICODE, BINUNICODE8
                    if op == 0x58:
                        n = unpack_I(data, pos)[0]
                        pos += 4
                    elif op == 0x8C:
                        n = data[pos]
                        pos += 1
                    else:
                        n = unpack_from("<Q", data, pos)[0]
                        pos += 8
                    if pos + n > end:
                        self.short()
                    if n < 65536:
                        append(data[pos:pos + n].decode("utf-8", "surrogatepass"))
                    else:  # decoded in place: a 60 MB string is not copied twice
                        with memoryview(data) as mv:
                            append(codecs.utf_8_decode(mv[pos:pos + n], "surrogatepass", True)[0])
                    pos += n
                elif op == 0x89:  # NEWFALSE
                    append(False)
                elif op == 0x51:  # BINPERSID Q
                    stack[-1] = reader.persistent_load(stack[-1])
                elif op == 0x85 or op == 0x86 or op == 0x87:  # TUPLE1-3
                    n = op - 0x84
                    if len(stack) < n:
                        raise pickle.UnpicklingError("stack underflow")
                    t = tuple(stack[-n:])
                    del stack[-n:]
                    append(t)
                elif op == 0x7D:  # EMPTY_DICT }
                    append({})
                elif op == 0x74 or op == 0x6C or op == 0x65 or op == 0x75 or op == 0x64 or op == 0x91 or op == 0x90 \
                        or op == 0x31 or op == 0x6F or op == 0x69:
                    # ops that pop a MARK: TUPLE t, LIST l, APPENDS e, SETITEMS u, DICT d, FROZENSET, ADDITEMS,
                    # POP_MARK 1, OBJ o, INST i
                    if op == 0x69:
                        mod, pos = self.line(pos)
                        name, pos = self.line(pos)
                    if not metastack:
                        raise pickle.UnpicklingError("no MARK on the stack")
                    got = stack
                    stack = metastack.pop()
                    append = stack.append
                    n = len(got)
                    if n > items:
                        self.too_many("one container in the pickle")
                    ops_left -= n
                    if ops_left < 0:
                        break
                    if op == 0x74:
                        append(tuple(got))
                    elif op == 0x6C:
                        append(got)
                    elif op == 0x65 or op == 0x75 or op == 0x90:
                        if not stack:
                            raise pickle.UnpicklingError("no container under the MARK")
                        target = stack[-1]
                        if op == 0x65:
                            reader.extend(target, got)
                        elif op == 0x75:
                            if n % 2:
                                raise pickle.UnpicklingError("odd number of items for SETITEMS")
                            for i in range(0, n, 2):
                                reader.setitem(target, got[i], got[i + 1])
                        else:
                            reader.additems(target, got)
                    elif op == 0x64:
                        if n % 2:
                            raise pickle.UnpicklingError("odd number of items for DICT")
                        d = {}
                        for i in range(0, n, 2):
                            reader.setitem(d, got[i], got[i + 1])
                        append(d)
                    elif op == 0x91:
                        ops_left -= 3  # a set is 216 bytes or more
                        if ops_left < 0:
                            break
                        if n > items:
                            self.too_many("a frozenset in the pickle")
                        append(frozenset(_hkey(x) for x in got))
                    elif op == 0x6F:
                        if not got:
                            raise pickle.UnpicklingError("OBJ without a class")
                        append(call(got[0], tuple(got[1:]), None, "OBJ"))
                    elif op == 0x69:
                        cls = reader.find_class(mod.decode("ascii"), name.decode("ascii"))  # pyright: ignore
                        append(call(cls, tuple(got), None, "INST"))
                    # POP_MARK: nothing more
                elif op == 0x5D:  # EMPTY_LIST ]
                    append([])
                elif op == 0x8F:  # EMPTY_SET (216 bytes: counted as 4 opcodes)
                    ops_left -= 3
                    if ops_left < 0:
                        break
                    append(set())
                elif op == 0x73:  # SETITEM s
                    if len(stack) < 3:
                        raise pickle.UnpicklingError("stack underflow")
                    v = stack.pop()
                    k = stack.pop()
                    reader.setitem(stack[-1], k, v)
                elif op == 0x61:  # APPEND a
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    v = stack.pop()
                    reader.extend(stack[-1], (v,))
                elif op == 0x50:  # PERSID P
                    pid, pos = self.line(pos)
                    append(reader.persistent_load(pid.decode("ascii")))
                elif op == 0x4D:  # BININT2 M
                    if pos + 2 > end:
                        self.short()
                    append(data[pos] | data[pos + 1] << 8)
                    pos += 2
                elif op == 0x4A:  # BININT J
                    if pos + 4 > end:
                        self.short()
                    append(unpack_from("<i", data, pos)[0])
                    pos += 4
                elif op == 0x4E:  # NONE N
                    append(None)
                elif op == 0x88:  # NEWTRUE
                    append(True)
                elif op == 0x47:  # BINFLOAT G
                    if pos + 8 > end:
                        self.short()
                    append(unpack_from(">d", data, pos)[0])
                    pos += 8
                elif op == 0x62:  # BUILD b
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    state = stack.pop()
                    reader.build(stack[-1], state)
                elif op == 0x63:  # GLOBAL c
                    mod, pos = self.line(pos)
                    name, pos = self.line(pos)
                    append(reader.find_class(mod.decode("utf-8", "replace"), name.decode("utf-8", "replace")))
                elif op == 0x93:  # STACK_GLOBAL
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    name = stack.pop()
                    mod = stack.pop()
                    if not isinstance(mod, str) or not isinstance(name, str):
                        raise pickle.UnpicklingError("STACK_GLOBAL needs two strings")
                    append(reader.find_class(mod, name))
                elif op == 0x81 or op == 0x92:  # NEWOBJ, NEWOBJ_EX
                    kwargs = None
                    if op == 0x92:
                        if len(stack) < 3:
                            raise pickle.UnpicklingError("stack underflow")
                        kwargs = stack.pop()
                        if not isinstance(kwargs, dict):
                            raise pickle.UnpicklingError("NEWOBJ_EX kwargs must be a dict")
                    if len(stack) < 2:
                        raise pickle.UnpicklingError("stack underflow")
                    args = stack.pop()
                    stack[-1] = call(stack[-1], args, kwargs, "NEWOBJ")
                elif op == 0x80:  # PROTO
                    if pos + 1 > end:
                        self.short()
                    if data[pos] > pickle.HIGHEST_PROTOCOL and data[pos] > 5:
                        raise ValueError("unsupported pickle protocol: %d" % data[pos])
                    pos += 1
                elif op == 0x95:  # FRAME: the bytes are all here already
                    if pos + 8 > end:
                        self.short()
                    pos += 8
                elif op == 0x2E:  # STOP .
                    if not stack:
                        raise pickle.UnpicklingError("STOP on an empty stack")
                    return stack[-1], pos
                elif op == 0x30:  # POP 0
                    if stack:
                        stack.pop()
                    elif metastack:
                        stack = metastack.pop()
                        append = stack.append
                    else:
                        raise pickle.UnpicklingError("stack underflow")
                elif op == 0x32:  # DUP 2
                    if not stack:
                        raise pickle.UnpicklingError("stack underflow")
                    append(stack[-1])
                elif op == 0x8A or op == 0x8B:  # LONG1, LONG4
                    width = 1 if op == 0x8A else 4
                    if pos + width > end:
                        self.short()
                    n = data[pos] if width == 1 else unpack_from("<i", data, pos)[0]
                    pos += width
                    if n < 0:
                        raise pickle.UnpicklingError("LONG4 with a negative length")
                    if pos + n > end:
                        self.short()
                    append(int.from_bytes(data[pos:pos + n], "little", signed=True))
                    pos += n
                elif op == 0x54 or op == 0x55 or op == 0x42 or op == 0x43 or op == 0x8E or op == 0x96:
                    # BINSTRING T, SHORT_BINSTRING U, BINBYTES B, SHORT_BINBYTES C, BINBYTES8, BYTEARRAY8
                    width = 1 if op in (0x55, 0x43) else 8 if op in (0x8E, 0x96) else 4
                    if pos + width > end:
                        self.short()
                    n = data[pos] if width == 1 else unpack_from("<i" if op == 0x54 else "<I" if width == 4 else "<Q",
                                                                  data, pos)[0]
                    pos += width
                    if n < 0:
                        raise pickle.UnpicklingError("negative byte count")
                    if pos + n > end:
                        self.short()
                    raw = bytes(data[pos:pos + n])
                    pos += n
                    append(raw.decode("latin-1") if op in (0x54, 0x55) else raw)
                elif op == 0x49 or op == 0x4C:  # INT I, LONG L (text)
                    line, pos = self.line(pos)
                    if op == 0x49 and line == b"00":
                        append(False)
                    elif op == 0x49 and line == b"01":
                        append(True)
                    else:
                        append(_text_int(line))
                elif op == 0x46:  # FLOAT F
                    line, pos = self.line(pos)
                    append(float(line))
                elif op == 0x53:  # STRING S
                    line, pos = self.line(pos)
                    line = line.strip()
                    if len(line) < 2 or line[:1] != line[-1:] or line[:1] not in (b"'", b'"'):
                        raise pickle.UnpicklingError("the STRING opcode argument must be quoted")
                    append(codecs.escape_decode(line[1:-1])[0].decode("latin-1"))
                elif op == 0x56:  # UNICODE V
                    line, pos = self.line(pos)
                    append(line.decode("raw-unicode-escape"))
                elif op == 0x70:  # PUT p
                    line, pos = self.line(pos)
                    idx = _text_int(line)
                    if not isinstance(idx, int) or not stack:
                        raise pickle.UnpicklingError("bad PUT")
                    if idx not in memo and len(memo) >= items:
                        self.too_many("the pickle's memo")
                    memo[idx] = stack[-1]
                elif op == 0x67:  # GET g
                    line, pos = self.line(pos)
                    idx = _text_int(line)
                    try:
                        append(memo[idx])
                    except (KeyError, TypeError):
                        raise pickle.UnpicklingError("memo key missing")
                elif op == 0x82 or op == 0x83 or op == 0x84:  # EXT1, EXT2, EXT4: the copyreg extension registry
                    width = {0x82: 1, 0x83: 2, 0x84: 4}[op]
                    if pos + width > end:
                        self.short()
                    code = int.from_bytes(data[pos:pos + width], "little")
                    pos += width
                    append(reader.standin("copyreg", "extension_%d" % code))
                elif op == 0x98:  # READONLY_BUFFER: nothing to do
                    pass
                elif op == 0x97:  # NEXT_BUFFER
                    raise pickle.UnpicklingError("out-of-band buffers are not in the file")
                else:
                    raise pickle.UnpicklingError("invalid opcode 0x%02x at byte %d" % (op, pos - 1))
        except (IndexError, struct.error):
            if pos >= end - 8:  # a read past the bytes there are
                self.short()
            raise pickle.UnpicklingError("stack underflow at byte %d" % (pos - 1))
        raise kg_common.LimitError("items", "the pickle's opcodes", reader.op_budget)


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
    return "<%d tensor%s, %s>" % (len(leaves), "" if len(leaves) == 1 else "s", _human(nbytes))


def _human(n):
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return ("%d %s" if unit == "bytes" else "%.1f %s") % (n, unit)
        n /= 1024.0
    return str(n)


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
# Reading files.


class _CountingFile(io.RawIOBase):
    """A raw file that counts the bytes read, so the result can say how little of a big file was touched."""

    def __init__(self, f):
        io.RawIOBase.__init__(self)
        self.f = f
        self.count = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b):
        n = self.f.readinto(b)
        self.count += n or 0
        return n

    def seek(self, pos, whence=0):
        return self.f.seek(pos, whence)

    def tell(self):
        return self.f.tell()

    def close(self):
        self.f.close()
        io.RawIOBase.close(self)


def _open(path):
    # open_regular: a FIFO or a device (/dev/zero) is refused by name, never read (a FIFO would block forever)
    return _CountingFile(kg_common.open_regular(path, buffering=0))


def _unpickle(reader, data, pos, what, path, complete=True):
    """(object, position after it); a failure is a ProbeError (a limit's own, or corrupt), never another exception.
    _NeedMore passes through (the caller reads more of a legacy file)."""
    try:
        return reader.load(data, pos, complete)
    except kg_common.LimitError as e:
        if reader.unsafe:  # a hostile file is still reported (what it wanted to call), with the limit it hit
            reader.warnings.append("could not decode %s: %s" % (what, e))
            return _FAILED, len(data)
        raise
    except (kg_common.ProbeError, _NeedMore):
        raise
    except MemoryError:
        raise kg_common.LimitError("memory", "decoding the %s in %s" % (what, path))
    except RecursionError:
        raise kg_common.LimitError("depth", "decoding the %s in %s" % (what, path))
    except Exception as e:  # any other failure of a hostile or damaged pickle is its corruption, not our crash
        if reader.unsafe:
            # A hostile file is still reported (what it wanted to call), not just refused.
            reader.warnings.append("could not decode %s: %s: %s" % (what, type(e).__name__, _short_repr(str(e))))
            return _FAILED, len(data)
        if isinstance(e, EOFError):
            raise kg_common.ProbeError("truncated %s in %s" % (what, path), "corrupt")
        raise kg_common.ProbeError("corrupt %s in %s (%s: %s)" % (what, path, type(e).__name__, _short_repr(str(e))),
                                   "corrupt")


_FAILED = object()


def _inflate(member, what):
    """A zip member's bytes, streamed, up to LIMITS["read"] of them whatever its header says it holds."""
    limit = kg_common.LIMITS["read"]
    data = bytearray()  # grown in place (no second copy), and decoded as it is
    while True:
        chunk = member.read(1 << 20)
        if not chunk:
            break
        if len(data) + len(chunk) > limit:
            raise kg_common.LimitError("read", "%s inflates to more than that" % what)
        data += chunk
    return data


def _read_torch_zip(fileobj, path, reader):
    try:
        zf = zipfile.ZipFile(fileobj)
    except kg_common.ProbeError:
        raise
    except MemoryError:
        raise kg_common.LimitError("memory", "the zip directory of %s" % path)
    except Exception as e:  # zipfile fails on a damaged archive in many ways (BadZipFile, OverflowError, ...)
        raise kg_common.ProbeError("truncated or corrupt zip archive: %s (%s)" % (path, e), "corrupt")
    try:
        infos = zf.infolist()
        pkls = [i for i in infos if i.filename.endswith("/data.pkl") and i.filename.count("/") == 1]
        if not pkls:
            pkls = [i for i in infos if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
        if not pkls:
            raise kg_common.ProbeError("not a torch checkpoint: zip archive without data.pkl: %s" % path,
                                       "not-a-checkpoint")
        pkls.sort(key=lambda i: (i.filename.count("/"), i.filename))
        if len(pkls) > 1:
            reader.warnings.append("several data.pkl entries; read %s" % pkls[0].filename)
        info = pkls[0]
        if info.file_size > kg_common.LIMITS["read"]:
            raise kg_common.LimitError("read", "the pickle in %s is %s" % (path, kg_common.human_bytes(info.file_size)))
        prefix = info.filename[:-len("data.pkl")]
        names = set(i.filename for i in infos)
        try:
            if prefix + "byteorder" in names:
                with zf.open(prefix + "byteorder") as m:
                    order = m.read(16).strip()
                if order not in (b"little", b""):
                    reader.warnings.append("tensors stored %s-endian" % order.decode("latin-1"))
            if any(n.startswith(prefix + "code/") for n in names):
                reader.warnings.append("a TorchScript archive: only its data.pkl is shown")
            with zf.open(info) as member:
                data = _inflate(member, "the pickle in %s" % path)
        except kg_common.ProbeError:
            raise
        except MemoryError:
            raise kg_common.LimitError("memory", "inflating the pickle in %s" % path)
        except Exception as e:  # BadZipFile, zlib.error, OverflowError of a damaged offset, ...
            raise kg_common.ProbeError("truncated or corrupt zip archive: %s (%s)" % (path, e), "corrupt")
        return _unpickle(reader, data, 0, "pickle", path)[0]
    finally:
        zf.close()


def _read_legacy(fileobj, path, reader):
    """Legacy torch format: magic number, protocol version, sys_info, then the object; the storages follow it.

    The file is read in growing chunks (never past LIMITS["read"]): a pickle that runs past the bytes read so far is
    decoded again from its start with more, on a fresh copy of the reader's counts."""
    limit = kg_common.LIMITS["read"]
    data = fileobj.read(min(1 << 20, limit))
    complete = len(data) < min(1 << 20, limit)
    pos = 0
    values = []
    while len(values) < 4:
        saved = reader.save()
        try:
            value, pos = _unpickle(reader, data, pos, "pickle" if not values or len(values) == 3 else "legacy header",
                                   path, complete)
        except _NeedMore:
            reader.restore(saved)
            if len(data) >= limit:
                raise kg_common.LimitError("read", "the pickle in %s" % path)
            want = min(len(data) * 4, limit) - len(data)
            more = fileobj.read(want)
            complete = len(more) < want
            data += more
            continue
        if value is _FAILED:
            return "pickle", _FAILED
        values.append(value)
        if len(values) == 1 and not (type(value) is int and value == LEGACY_MAGIC):
            return "pickle", value  # a plain pickle file
        if len(values) == 2 and value != 1001:
            reader.warnings.append("unexpected legacy protocol version %s" % _short_repr(value))
    return "torch-legacy", values[3]


def _read_safetensors_header(fileobj, path, size):
    head = fileobj.read(8)
    if len(head) < 8:
        raise kg_common.ProbeError("truncated safetensors file: %s" % path, "corrupt")
    n = struct.unpack("<Q", head)[0]
    if n + 8 > size:
        raise kg_common.ProbeError("truncated or corrupt safetensors header: %s" % path, "corrupt")
    if n > min(MAX_SAFETENSORS_HEADER, kg_common.LIMITS["read"]):
        raise kg_common.LimitError("read", "the safetensors header of %s is %s" % (path, kg_common.human_bytes(n)))
    raw = fileobj.read(n)
    try:
        header = kg_common.loads_bounded(raw.decode("utf-8"), "the safetensors header of %s" % path)
    except (ValueError, UnicodeDecodeError):
        raise kg_common.ProbeError("corrupt safetensors header: %s" % path, "corrupt")
    if not isinstance(header, dict):
        raise kg_common.ProbeError("corrupt safetensors header: %s" % path, "corrupt")
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    data_end = 0
    for name, t in header.items():
        if not isinstance(t, dict):
            continue
        dtype, shape, offs = t.get("dtype"), t.get("shape") or [], t.get("data_offsets") or [0, 0]
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int and 0 <= o < 1 << 63 for o in offs)
                and offs[0] <= offs[1]):
            raise kg_common.ProbeError("corrupt safetensors header: %s (%s: bad data_offsets)" % (path, name),
                                       "corrupt")
        data_end = max(data_end, offs[1])
        tensors[name] = {"dtype": dtype if isinstance(dtype, str) else _short_repr(dtype),
                         "shape": _shape(shape), "bytes": offs[1] - offs[0]}
    if 8 + n + data_end > size:
        raise kg_common.ProbeError("truncated safetensors file: %s (%d bytes, header says %d)"
                                   % (path, size, 8 + n + data_end), "corrupt")
    return meta, tensors


def _looks_like_safetensors(head):
    if len(head) < 9:
        return False
    n = struct.unpack("<Q", head[:8])[0]
    return 0 < n <= MAX_SAFETENSORS_HEADER and head[8:9] == b"{"


def _decode_meta_values(meta):
    """safetensors metadata is str -> str; tools often put JSON there: show it decoded."""
    out = {}
    for k, v in meta.items():
        if isinstance(v, str) and v[:1] in ("{", "[") and len(v) < (1 << 20):
            try:
                out[k] = json.loads(v)
                continue
            except (ValueError, RecursionError):
                pass
        out[k] = v
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


def _read_file(path, size, keys, want_all, res):
    doc = res.doc
    f = _open(path)
    try:
        head = f.read(16)
        f.seek(0)
        reader = _Reader()
        if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
            top = _read_torch_zip(f, path, reader)
            doc["format"] = "torch-zip"
            if _is_dcp(top):  # some torch versions torch.save the .metadata
                doc["format"] = "dcp-metadata"
                _fill_dcp(doc, reader, top, path, keys, want_all)
                return
            if isinstance(top, dict) and ("pytorch-lightning_version" in top or "hyper_parameters" in top):
                doc["format"] = "lightning"
            elif _ACCELERATE_CUSTOM.match(os.path.basename(path)):
                doc["format"] = "accelerate"
        elif head[:1] == b"\x80" or head[:1] in (b"(", b"}", b"]", b"c", b"K", b"I", b"N"):
            fmt, top = _read_legacy(f, path, reader)
            doc["format"] = fmt
            if fmt == "pickle" and _is_dcp(top):
                doc["format"] = "dcp-metadata"
                _fill_dcp(doc, reader, top, path, keys, want_all)
                return
        elif _looks_like_safetensors(head):
            meta, tensors = _read_safetensors_header(f, path, size)
            _fill_safetensors(doc, meta, tensors, keys, want_all)
            return
        elif size >= 512 and _is_tar(f):
            raise kg_common.ProbeError("torch tar checkpoint (written by torch < 0.4) is not supported: %s" % path,
                                       "not-a-checkpoint")
        else:
            if size == 0:
                raise kg_common.ProbeError("empty file, not a checkpoint: %s" % path, "not-a-checkpoint")
            raise kg_common.ProbeError("not a checkpoint (not a torch zip, legacy torch, pickle or safetensors "
                                       "file): %s" % path, "not-a-checkpoint")
        _fill(doc, reader, top, keys, want_all, whole=doc["format"] == "accelerate")
    finally:
        doc["bytesRead"] += f.count
        f.close()


# accelerate's save_state: custom_checkpoint_N.pkl is the state_dict() of the N-th object registered for
# checkpointing (N is an index, never a step), written by torch.save.
_ACCELERATE_CUSTOM = re.compile(r"custom_checkpoint_([0-9]{1,9})\.pkl$")


def _is_tar(f):
    """A tar header block (its checksum matches) at the start: checked on 512 bytes, never by tarfile, which tries
    every decompressor on the file (lzma reads a 10 GB file of zeros to its end)."""
    f.seek(0)
    block = f.read(512)
    if len(block) < 512 or not block.strip(b"\0"):
        return False
    try:
        want = int(block[148:156].split(b"\0", 1)[0].strip() or b"x", 8)
    except ValueError:
        return False
    return want == sum(block[:148]) + 8 * 32 + sum(block[156:])


def _fill_safetensors(doc, meta, tensors, keys, want_all):
    doc["format"] = "safetensors"
    meta = _decode_meta_values(meta if isinstance(meta, dict) else {})
    doc["tensors"]["count"] += len(tensors)
    doc["tensors"]["bytes"] += sum(t["bytes"] for t in tensors.values() if isinstance(t["bytes"], int))
    doc["topLevelKeys"] = (["__metadata__"] + sorted(tensors))[:MAX_TOP_KEYS]
    if want_all:
        doc["args"] = {"__metadata__": meta, "tensors": tensors}
        return
    key, value, found = _pick(meta, keys, False)
    if not found:
        key, value = "__metadata__", meta
        if not meta:
            doc["warnings"].append("no __metadata__ in the safetensors header")
    doc["key"] = key
    doc["args"] = value
    doc["argsType"] = _args_type(value)
    if isinstance(meta, dict):
        doc["step"] = _first_int(meta, STEP_KEYS)
        for k in STEP_KEYS:
            if doc["step"] is None and isinstance(meta.get(k), str) and meta[k].isdigit():
                doc["step"] = int(meta[k])


# --- torch.distributed.checkpoint -----------------------------------------------------------------------------------


def _is_dcp(top):
    return isinstance(top, _StandIn) and top._kg_name.startswith("torch.distributed.checkpoint") and \
        top._kg_name.endswith(".Metadata")


def _fill_dcp(doc, reader, top, path, keys, want_all):
    state = _standin_state(top) or {}
    sdm = state.get("state_dict_metadata") or {}
    storage = state.get("storage_data") or {}
    folder = os.path.dirname(path)
    count, nbytes = 0, 0
    entries = {}
    for fqn, md in (sdm.items() if isinstance(sdm, dict) else []):
        fqn = _key(fqn)
        mstate = _standin_state(md) or {}
        if md is not None and isinstance(md, _StandIn) and md._kg_name.endswith("TensorStorageMetadata"):
            dtype = _dcp_dtype(mstate.get("properties"))
            size = mstate.get("size") or []
            t = _Tensor(dtype, size if isinstance(size, (list, tuple)) else [])
            count += 1
            nbytes += t.nbytes
            entries[fqn] = t
        else:
            entries[fqn] = _DCP_BYTES
    # Bytes items (args, step...) are small torch.save blobs inside the .distcp files: read the ones asked for.
    # dcp.save flattens nested dicts: {"args": {"lr": ...}} is saved as the item "args.lr".
    wanted = set(k.split(".")[0] for k in keys) if keys else set(ARG_KEYS) | set(STEP_KEYS) | {"epoch"}
    for idx, info in (storage.items() if isinstance(storage, dict) else []):
        fqn = _key(idx)
        if entries.get(fqn) is not _DCP_BYTES or not (want_all or fqn.split(".")[0] in wanted):
            continue
        ist = _standin_state(info) or {}
        rel, off, length = ist.get("relative_path"), ist.get("offset"), ist.get("length")
        if ist.get("transform_descriptors"):
            doc["warnings"].append(
                "%s is stored transformed (%s): not decoded" % (fqn, _short_repr(ist["transform_descriptors"])))
            continue
        if not (isinstance(rel, str) and isinstance(off, int) and isinstance(length, int)) \
                or length > kg_common.LIMITS["read"] or "/" in rel or rel.startswith("."):
            continue
        entries[fqn] = _read_dcp_item(doc, reader, os.path.join(folder, rel), off, length, fqn)
    doc["tensors"]["count"] += count
    doc["tensors"]["bytes"] += nbytes
    top_dict = {}
    for k, v in entries.items():
        v = "<bytes item>" if v is _DCP_BYTES else v
        parts = k.split(".")
        if isinstance(v, _Tensor) or len(parts) == 1 or (
                parts[0] in top_dict and not isinstance(top_dict[parts[0]], dict)):
            top_dict[k] = v
            continue
        cur = top_dict
        for part in parts[:-1]:
            nxt = cur.setdefault(part, {})
            if not isinstance(nxt, dict):
                break
            cur = nxt
        else:
            cur[parts[-1]] = v
            continue
        top_dict[k] = v
    _fill(doc, reader, top_dict, keys, want_all)


_DCP_BYTES = object()


def _dcp_dtype(props):
    if isinstance(props, _StandIn):
        st = props._kg["state"]
        vals = list(st.values()) if isinstance(st, dict) else list(st) if isinstance(st, (tuple, list)) else []
        vals += list(props._kg["args"])
        for v in vals:
            if isinstance(v, _Name) and v.text[6:] in _DTYPES:
                return _DTYPES[v.text[6:]][0]
    return "?"


def _read_dcp_item(doc, reader, path, offset, length, fqn):
    f = _open(path)
    try:
        f.seek(offset)
        blob = f.read(length)
    finally:
        doc["bytesRead"] += f.count
        f.close()
    if len(blob) != length:
        doc["warnings"].append("%s: truncated in %s" % (fqn, os.path.basename(path)))
        return None
    sub = _Reader()
    try:
        if blob[:4] == b"PK\x03\x04":
            value = _read_torch_zip(io.BytesIO(blob), path, sub)
        else:
            value = _read_legacy(io.BytesIO(blob), path, sub)[1]
    except kg_common.ProbeError as e:
        doc["warnings"].append("%s: %s" % (fqn, e))
        return None
    for g in sub.unsafe:
        if g not in reader.unsafe:
            reader.unsafe.append(g)
    return None if value is _FAILED else value


# --- Hugging Face checkpoint folders ---------------------------------------------------------------------------------


def _read_json(path, doc):
    try:
        with kg_common.open_regular(path) as f:
            data = kg_common.read_bounded(f, None, os.path.basename(path))
            doc["bytesRead"] += len(data)
        return kg_common.loads_bounded(data.decode("utf-8"), os.path.basename(path))
    except kg_common.LimitError as e:
        doc["warnings"].append("could not read %s: %s" % (os.path.basename(path), e))
        return None
    except (kg_common.ProbeError, OSError, ValueError, UnicodeDecodeError) as e:
        doc["warnings"].append("could not read %s: %s" % (os.path.basename(path), e))
        return None


def _read_folder(path, keys, want_all, res):
    doc = res.doc
    try:
        names = set(os.listdir(path))
    except OSError as e:
        raise kg_common.ProbeError("cannot list %s: %s" % (path, e.strerror or e), "unreadable")
    if ".metadata" in names:
        mpath = os.path.join(path, ".metadata")
        st = os.stat(mpath)
        _read_file(mpath, st.st_size, keys, want_all, res)
        doc["path"] = path
        return
    hf = [n for n in ("training_args.bin", "config.json", "trainer_state.json") if n in names]
    custom = sorted((int(m.group(1)), n) for n, m in ((n, _ACCELERATE_CUSTOM.match(n)) for n in names) if m)
    if not hf and custom and "adapter_config.json" not in names:
        size = os.stat(os.path.join(path, custom[0][1])).st_size
        _read_file(os.path.join(path, custom[0][1]), size, keys, want_all, res)
        doc["path"], doc["bytes"] = path, size
        if len(custom) > 1:
            doc["warnings"].append("%d objects registered for checkpointing: the args of %s are shown (%s: read "
                                   "that file for its own)" % (len(custom), custom[0][1],
                                                               ", ".join(n for _, n in custom[1:4])))
        return
    if not hf and "adapter_config.json" not in names:
        raise kg_common.ProbeError("not a checkpoint folder (no training_args.bin, config.json, trainer_state.json, "
                                   "adapter_config.json, custom_checkpoint_0.pkl or .metadata): %s" % path,
                                   "not-a-checkpoint")
    doc["format"] = "hf-folder" if hf else "peft"
    top = {}
    reader = _Reader()
    preferred = ("training_args",) + ARG_KEYS
    if "adapter_config.json" in names:
        # a peft adapter: its config is the args (an HF Trainer folder that also holds one keeps its training_args)
        adapter = _read_json(os.path.join(path, "adapter_config.json"), doc)
        top["adapter_config"] = adapter
        if not hf:
            preferred = ("adapter_config",)
        if isinstance(adapter, dict) and isinstance(adapter.get("base_model_name_or_path"), str):
            doc["baseModel"] = kg_common.redact_text(adapter["base_model_name_or_path"])
    if "training_args.bin" in names:
        f = _open(os.path.join(path, "training_args.bin"))
        try:
            head = f.read(4)
            f.seek(0)
            if head == b"PK\x03\x04":
                top["training_args"] = _read_torch_zip(f, path + "/training_args.bin", reader)
            else:
                top["training_args"] = _read_legacy(f, path + "/training_args.bin", reader)[1]
        finally:
            doc["bytesRead"] += f.count
            f.close()
    if "config.json" in names:
        top["config"] = _read_json(os.path.join(path, "config.json"), doc)
    if "trainer_state.json" in names:
        ts = _read_json(os.path.join(path, "trainer_state.json"), doc)
        if isinstance(ts, dict):
            history = ts.pop("log_history", None)
            if isinstance(history, list):
                ts["log_history"] = "<%d entries>" % len(history)
                if history and isinstance(history[-1], dict):
                    ts["last_log"] = history[-1]
            if isinstance(ts.get("global_step"), int):
                doc["step"] = ts["global_step"]
            if isinstance(ts.get("epoch"), (int, float)):
                doc["epoch"] = ts["epoch"]
        top["trainer_state"] = ts
    for n in sorted(names):
        if n.endswith(".safetensors"):
            f = _open(os.path.join(path, n))
            try:
                st = os.fstat(f.f.fileno())
                _meta, tensors = _read_safetensors_header(f, os.path.join(path, n), st.st_size)
            except kg_common.ProbeError as e:
                doc["warnings"].append(str(e))
                continue
            finally:
                doc["bytesRead"] += f.count
                f.close()
            doc["tensors"]["count"] += len(tensors)
            doc["tensors"]["bytes"] += sum(t["bytes"] for t in tensors.values() if isinstance(t["bytes"], int))
    step, epoch = doc["step"], doc["epoch"]
    _fill(doc, reader, top, keys, want_all, preferred=preferred)
    doc["step"], doc["epoch"] = step, epoch
    if doc["key"] == "training_args":
        doc["argsType"] = _args_type(top.get("training_args"))
    elif doc["key"] == "adapter_config" and isinstance(top["adapter_config"], dict):
        kind = top["adapter_config"].get("peft_type")
        doc["argsType"] = "peft %s adapter" % kind if isinstance(kind, str) and len(kind) < 100 else "peft adapter"


# --------------------------------------------------------------------------------------------------------------------


def _stat_only(path, st):
    """Size and newest mtime, read cheaply: a folder's is the newest of itself and the files the reader reads."""
    mtime, size = st.st_mtime, st.st_size
    if stat.S_ISDIR(st.st_mode):
        size = 0
        for n in ("training_args.bin", "config.json", "trainer_state.json", ".metadata", "adapter_config.json",
                  "custom_checkpoint_0.pkl"):
            try:
                s = os.stat(os.path.join(path, n))
            except OSError:
                continue
            mtime = max(mtime, s.st_mtime)
            size += s.st_size
    return {"path": path, "bytes": size, "mtime": mtime, "dir": stat.S_ISDIR(st.st_mode)}


def _parse_argv(argv):
    path, keys, want_all, want_stat = None, [], False, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--key":
            if i + 1 >= len(argv):
                raise kg_common.ProbeError("--key needs a value", "usage")
            keys.append(argv[i + 1])
            i += 2
            continue
        if a.startswith("--key="):
            keys.append(a[len("--key="):])
        elif a == "--all":
            want_all = True
        elif a == "--stat":
            want_stat = True
        elif a.startswith("--") and a != "--":
            raise kg_common.ProbeError(
                "unknown option %s (usage: ckpt_args.py PATH [--key KEY]... [--all] | PATH --stat)" % a, "usage")
        elif path is None:
            path = a
        else:
            raise kg_common.ProbeError("one PATH only (usage: ckpt_args.py PATH [--key KEY]... [--all])", "usage")
        i += 1
    if path is None:
        raise kg_common.ProbeError("usage: ckpt_args.py PATH [--key KEY]... [--all]", "usage")
    return os.path.expanduser(path), keys, want_all, want_stat


def main(argv):
    path, keys, want_all, want_stat = _parse_argv(argv)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise kg_common.ProbeError("no such file: %s" % path, "not-found")
    except PermissionError:
        raise kg_common.ProbeError("permission denied: %s" % path, "permission-denied")
    except OSError as e:
        raise kg_common.ProbeError("cannot read %s: %s" % (path, e.strerror or e), "unreadable")
    if want_stat:
        return _stat_only(path, st)
    res = _Result(path, st.st_size)
    if stat.S_ISDIR(st.st_mode):
        res.doc["bytes"] = 0
        _read_folder(path, keys, want_all, res)
    else:
        _read_file(path, st.st_size, keys, want_all, res)
    res.doc["mtime"] = st.st_mtime
    # Secrets in the args (HF's hub_token, a wandb_api_key, a URL with a password) never leave the host.
    res.doc["args"] = kg_common.redact_tree(res.doc["args"])
    return res.doc


if __name__ == "__main__":
    kg_common.run(main)
